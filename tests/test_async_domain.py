"""Blocks in one global domain (docs/async.md, "A global domain"): layouts over parameters give each client's block
its position in the variable's global extents, from YAML or Damaris-style XML; the clients learn it from the
library, the global index lists every block's position, the reader assembles the whole array of an iteration (or
gives each block), hdf5-shared writes each block at its place in one dataset (h5py reads it), and a gap is an
error unless filled. Real MPI, both implementations; the mistakes are in test_async_errors.py."""
from __future__ import annotations

import json
import re
import sys

import numpy as np
import pytest

from ioloom import async_io, paths
from ioloom.async_io import AsyncOutputError
from ioloom.async_io.client import DIMS_MAX
from ioloom.async_io.kernel import global_value

PROGRAM = paths.REPO_ROOT / "tests" / "programs" / "async_domain.py"
GLOBAL, BLOCK, SKIPPED = (6, 8), (3, 4), 3  # 4 clients in 2 x 2 tiles; client 3 writes nothing at iteration 1

YAML = """name: dom
mode: {mode}
ranks_per_node: {ranks_per_node}
buffer: 1048576
writer: {{directory: {out}, format: {format}}}
parameters: {{NX: 4, NY: 3, PX: 2, E: "2 + 3 * 4 - 6 / 4 % 2 - -1"}}
layouts:
  tile:
    type: float64
    dimensions: [NY, NX]
    global: [NY * (clients / PX), NX * PX]
    position: [rank / PX * NY, rank % PX * NX]
  line: {{type: int8, dimensions: [E]}}
variables:
  t: {{layout: tile}}
  e: {{layout: line}}
"""

# Damaris's XML with language="fortran": each list is in Fortran order, the reverse of the YAML's C order.
XML = """<?xml version="1.0"?>
<simulation name="dom" language="fortran">
  <architecture> <dedicated cores="{cores}"/> <buffer size="1048576"/> </architecture>
  <data>
    <parameter name="NX" type="int" value="4"/>
    <parameter name="NY" type="int" value="3"/>
    <parameter name="PX" type="int" value="2"/>
    <layout name="tile" type="double" dimensions="NX,NY" global="NX*PX,NY*(clients/PX)"
            position="rank%PX*NX,rank/PX*NY"/>
    <variable name="t" layout="tile"/>
  </data>
  <ioloom directory="{out}" format="{format}" ranks_per_node="{ranks_per_node}"/>
</simulation>
"""


def expected_position(block: int) -> tuple[int, int]:
    return (block // 2 * BLOCK[0], block % 2 * BLOCK[1])


def place(block: int) -> tuple[slice, ...]:
    return tuple(slice(o, o + n) for o, n in zip(expected_position(block), BLOCK))


def configuration(tmp_path, kind: str, dedicated: bool, writer_format: str):
    values = {"out": tmp_path / "out", "format": writer_format, "ranks_per_node": 3 if dedicated else 0,
              "mode": "dedicated-cores" if dedicated else "synchronous", "cores": int(dedicated)}
    path = tmp_path / f"dom.{kind}"
    path.write_text((YAML if kind == "yaml" else XML).format(**values))
    return path


def h5py_global(path, iteration: int):
    """The shared file's dataset of t at an iteration, read by h5py independently of the library's index."""
    h5py = pytest.importorskip("h5py")
    with h5py.File(path, "r") as f:
        return f[f"/{iteration}/t"][...]


@pytest.mark.parametrize("kind,dedicated", [("yaml", False), ("yaml", True), ("xml", True)])
def test_blocks_are_assembled_into_the_global_array(mpi, tmp_path, kind, dedicated):
    """4 clients: the synchronous mode on 4 ranks, or 2 emulated nodes of 2 clients and a dedicated core."""
    shared = dedicated and mpi.name == "mpich"  # Debian's parallel HDF5 is MPICH's
    config = configuration(tmp_path, kind, dedicated, "hdf5-shared" if shared else "files")
    run = mpi.run(6 if dedicated else 4, [sys.executable, PROGRAM, config, "3", "6,8", "3,4", str(SKIPPED)],
                  timeout=120)
    told = dict(re.findall(r"client (\d) at \[(\d+, \d+)\]", run.stdout))
    assert {int(b): tuple(map(int, at.split(", "))) for b, at in told.items()} == \
        {b: expected_position(b) for b in range(4)}, run.stdout
    out = async_io.open(tmp_path / "out")
    t = out.variables["t"]
    assert t.shape == BLOCK and t.global_shape == GLOBAL and t.positions == tuple(map(expected_position, range(4)))
    for it in (0, 2):
        assert np.array_equal(out.global_array("t", it), global_value(it, GLOBAL))
        assert np.array_equal(out["t"].global_array(it), global_value(it, GLOBAL))
        for b in range(4):
            assert out.position("t", b) == expected_position(b)
            assert np.array_equal(out["t"][it, b], global_value(it, GLOBAL)[place(b)])
        if shared:
            assert np.array_equal(h5py_global(tmp_path / "out" / "dom.h5", it), global_value(it, GLOBAL))
    if kind == "yaml":
        assert out.variables["e"].shape == (14,) and out.variables["e"].global_shape is None


def test_a_gap_is_an_error_unless_filled(mpi, tmp_path, ioloom_cli):
    config = configuration(tmp_path, "yaml", False, "files")
    mpi.run(4, [sys.executable, PROGRAM, config, "2", "6,8", "3,4", str(SKIPPED)], timeout=120)
    info = ioloom_cli("async", "info", tmp_path / "out").stdout
    assert "  t: float64 [3, 4] in global [6, 8]\n  e: int8 [14]\n" in info
    out = async_io.open(tmp_path / "out")
    assert out.blocks_at("t", 1) == [0, 1, 2]
    with pytest.raises(AsyncOutputError, match=r"at iteration 1: 12 of 48 values have no block \(blocks missing: 3\)"):
        out.global_array("t", 1)
    filled = out.global_array("t", 1, fill=-1)
    expected = global_value(1, GLOBAL)
    expected[place(SKIPPED)] = -1
    assert np.array_equal(filled, expected)
    with pytest.raises(AsyncOutputError, match="has no global extents"):
        out.global_array("e", 0)
    # every block of iteration 0, in global extents one column wider than they cover
    index = json.loads(out.path.read_text())
    index["variables"]["t"]["global"] = [6, 9]
    out.path.write_text(json.dumps(index))
    wider = async_io.open(tmp_path / "out")
    with pytest.raises(AsyncOutputError, match=r"at iteration 0: 6 of 54 values have no block \(blocks missing: none; "
                                               r"the blocks do not cover the domain\)"):
        wider.global_array("t", 0)
    filled = wider.global_array("t", 0, fill=-1)
    assert np.array_equal(filled[:, :8], global_value(0, GLOBAL)) and (filled[:, 8] == -1).all()


def test_python_client_knows_the_header_dimension_limit():
    header = (paths.REPO_ROOT / "native" / "async" / "ioloom_async.h").read_text()
    assert re.search(r"#define IOLOOM_ASYNC_DIMS_MAX (\d+)", header).group(1) == str(DIMS_MAX)


MANY = """name: many
mode: synchronous
buffer: 1048576
writer: {{directory: {out}}}
layouts:
  tile: {{type: float64, dimensions: [2, 3], global: [{extents}], position: [{position}]}}
variables:
  t: {{layout: tile}}
"""
CLIENTS = 20000  # blocks of 2 x 3: in one row they all share their first offset; else 200 rows of 100


@pytest.mark.parametrize("extents,position,overlap", [
    ("2, 3 * clients", "0, rank * 3", None),
    ("2, 3 * clients + 2", "0, rank * 3 + 2", None),  # not on multiples of the block's size
    # the last block one to the left: it overlaps the one before, whose offset is in the previous multiple of 3
    ("2, 3 * clients + 2", "0, rank * 3 + 2 - rank / (clients - 1)", "blocks 19998 and 19999 overlap (at [0, 59996] "
                                                                     "and [0, 59998], each of size [2, 3])"),
    ("2 * (clients / 100) + 1, 300", "rank / 100 * 2 + 1, rank % 100 * 3", None),
    # the last block one row up: it overlaps the one above it (another first offset, the same second)
    ("2 * (clients / 100) + 1, 300", "rank / 100 * 2 + 1 - rank / (clients - 1), rank % 100 * 3",
     "blocks 19899 and 19999 overlap (at [397, 297] and [398, 297], each of size [2, 3])"),
])
def test_many_blocks_are_checked_for_overlaps(tmp_path, ioloom_cli, extents, position, overlap):
    """`ioloom async check` runs initialize's checks for 20,000 clients without ranks: every block's position is
    evaluated and compared with its neighbours, overlapping or not, in a row or in a grid."""
    config = tmp_path / "many.yaml"
    config.write_text(MANY.format(out=tmp_path / "out", extents=extents, position=position))
    out = ioloom_cli("async", "check", config, "--clients", CLIENTS, check=False)
    if overlap is None:
        assert out.returncode == 0 and out.stdout == f"{config}: fine for {CLIENTS} clients\n", out.stderr
    else:
        assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
        assert f"many.yaml:6: layout 'tile': {overlap}: give each rank its own part" in out.stderr
