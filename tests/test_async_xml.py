"""Damaris-style XML configurations (seed 002 Listing 3.2): libioloom-async reads them into the same model as its
YAML, so a Damaris configuration runs unchanged (groups, Fortran dimension order, events with actions as plugins),
and refuses what it cannot do on every rank."""
from __future__ import annotations

import re

import pytest

from ioloom import async_io, paths
from ioloom.async_io.kernel import Setup, expected_value, run_kernel

LISTING = """<?xml version="1.0"?>
<simulation name="example" language="fortran" xmlns="http://damaris.gforge.inria.fr/damaris/model">
  <architecture>
    <domains count="1"/>
    <dedicated cores="1"/>
    <buffer name="the_buffer" size="1048576" />
    <queue name="the_queue" size="100" />
  </architecture>
  <data>
    <layout name="my_layout" type="double" dimensions="2,4,8" />
    <group name="my_group">
      <variable name="u" layout="my_layout" />
      <variable name="v" layout="my_layout" />
    </group>
  </data>
  <actions>
    <event name="my_event" action="show_blocks" using="{plugin}" />
  </actions>
  <ioloom directory="{out}"/>
</simulation>
"""


def plugin(mpi):
    return mpi.compile("async_plugin.c", "-shared", "-fPIC", f"-I{paths.REPO_ROOT / 'native' / 'async'}")


def test_listing_3_2_runs_unchanged(mpi, tmp_path):
    config = tmp_path / "example.xml"
    config.write_text(LISTING.format(plugin=plugin(mpi), out=tmp_path / "out"))
    setup = Setup(tmp_path / "out", variables=("my_group/u", "my_group/v"))
    run = run_kernel(mpi.impl, 3, config, setup, 4, 0.0, event="my_event")
    assert run.returncode == 0, run.stderr
    out = async_io.open(tmp_path / "out")
    assert out.mode == "dedicated-cores" and out.meta["buffer"] == 1048576 and out.meta["queue"] == 100
    assert out.variables["my_group/u"].shape == (8, 4, 2)  # Fortran order, reversed
    assert out.read("my_group/v", 3, 1).reshape(-1)[0] == expected_value(3, 1, 1, 0)
    assert len(re.findall(r"plugin my_event iteration \d+ block \d+: my_group/u=", run.stderr)) == 8


def test_dedicated_nodes_from_xml(mpi, tmp_path):
    """<dedicated nodes="1"/> with ours ranks_per_node="2": 4 ranks as 2 nodes, the last one's ranks write."""
    config = tmp_path / "example.xml"
    text = LISTING.format(plugin=plugin(mpi), out=tmp_path / "out")
    config.write_text(text.replace('<dedicated cores="1"/>', '<dedicated cores="0" nodes="1"/>')
                      .replace("<ioloom directory", '<ioloom ranks_per_node="2" directory'))
    setup = Setup(tmp_path / "out", variables=("my_group/u", "my_group/v"))
    run = run_kernel(mpi.impl, 4, config, setup, 3, 0.0, event="my_event", timeout=60)
    assert run.returncode == 0, run.stderr
    out = async_io.open(tmp_path / "out")
    assert out.mode == "dedicated-nodes" and out.meta["dedicated_nodes"] == 1 and out.meta["nodes"] == 2
    assert out.meta["writers"] == [2, 3] and [r["role"] for r in out.ranks] == [0, 0, 1, 1]
    assert out.read("my_group/u", 2, 1).reshape(-1)[0] == expected_value(2, 1, 0, 0)
    assert len(re.findall(r"plugin my_event iteration \d+ block \d+: my_group/u=", run.stderr)) == 6


@pytest.mark.parametrize("change,message", [
    (('layout="my_layout" />\n      <variable name="v"', 'layout="nope" />\n      <variable name="v"'),
     "variable 'my_group/u': unknown layout 'nope'"),
    (('<dedicated cores="1"/>', '<dedicated cores="1" nodes="1"/>'), "<dedicated>: give cores or nodes, not both"),
    (('dimensions="2,4,8"', 'dimensions="w,4,8"'),
     "layout 'my_layout': dimensions: unknown parameter 'w' (declare it under parameters, before its use) in 'w'"),
    (('dimensions="2,4,8"', 'dimensions="2,4,8" global="2,4,8" position="0,0,0"'),
     "layout 'my_layout': blocks 0 and 1 overlap"),
    (('dimensions="2,4,8"', 'dimensions="2,4,8" global="2,4,8" position="rank*2,0,0"'),
     "layout 'my_layout': block 1 (rank 1 of 2 clients) at [0, 0, 2] of size [8, 4, 2] is outside"),
    (('type="double"', 'type="quad"'), "type must be real, double"),
    (("</simulation>", ""), "not valid XML"),
    (('<ioloom directory', '<ioloom format="netcdf" directory'),
     "<ioloom>: format must be files, hdf5, logfs or hdf5-shared"),
    (('<ioloom directory', '<ioloom ranks_per_node="x" directory'), "<ioloom ranks_per_node=...> must be an integer"),
])
def test_xml_mistakes_are_refused_on_every_rank(mpi, tmp_path, change, message):
    config = tmp_path / "example.xml"
    config.write_text(LISTING.format(plugin=plugin(mpi), out=tmp_path / "out").replace(*change))
    lib = paths.build_dir() / "lib"
    exe = mpi.compile("async_errors.c", f"-I{paths.REPO_ROOT / 'native' / 'async'}", f"-L{lib}",
                      f"-lioloom-async-{mpi.name}", f"-Wl,-rpath,{lib}")
    out = mpi.run(3, [exe, config], timeout=60)
    lines = [line for line in out.stdout.splitlines() if line.startswith("rank")]
    assert len(lines) == 3 and all(message in line and "example.xml:" in line for line in lines), lines
