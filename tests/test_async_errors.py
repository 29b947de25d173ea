"""libioloom-async refuses a wrong configuration at initialize on every rank, with one line naming the mistake
(never a hang), and refuses mistaken calls with a message; the reader and the command refuse what is not an
output in one line."""
from __future__ import annotations

import os

import pytest

from ioloom import async_io, paths
from ioloom.async_io.kernel import Setup

GOOD = Setup(directory=None, mode="dedicated-cores", variables=("u",), dims=(4, 4, 4), buffer=1 << 20)


def program(mpi):
    lib = paths.build_dir() / "lib"
    return mpi.compile("async_errors.c", f"-I{paths.REPO_ROOT / 'native' / 'async'}", f"-L{lib}",
                       f"-lioloom-async-{mpi.name}", f"-Wl,-rpath,{lib}")


def initialize(mpi, tmp_path, text: str, nranks: int = 3, *args: str) -> list[str]:
    config = tmp_path / "c.yaml"
    config.write_text(text)
    out = mpi.run(nranks, [program(mpi), config, *args], timeout=60)
    return sorted(line for line in out.stdout.splitlines() if line.startswith("rank"))


def good(tmp_path, **changes) -> str:
    setup = Setup(**{**GOOD.__dict__, "directory": tmp_path / "out", **changes})
    return setup.yaml()


def positioned(tmp_path, extra: str, parameters: str = "") -> str:
    """GOOD's layout in a global domain (its 2 clients: 3 ranks, one a dedicated core)."""
    return good(tmp_path).replace("grid: {type: float64, dimensions: [4, 4, 4]}",
                                  "grid: {type: float64, dimensions: [4, 4, 4], " + extra + "}") + parameters


MISTAKES = {
    "unknown layout": (lambda t: good(t).replace("u: {layout: grid}", "u: {layout: gird}"),
                       "variable 'u': unknown layout 'gird'"),
    "unknown type": (lambda t: good(t).replace("float64", "real8"), "type must be one of"),
    "misspelt key": (lambda t: good(t).replace("policy:", "polcy:"), "unknown key 'polcy'"),
    "bad mode": (lambda t: good(t).replace("dedicated-cores", "dedicated"), "mode must be one of"),
    "buffer smaller than a block": (lambda t: good(t, dims=(64, 64, 64)), "less than the largest block"),
    "not YAML": (lambda t: "name: [x\n", "not valid YAML"),
    "unknown compression": (lambda t: good(t).replace("  directory:", "  compression: gzip\n  directory:"),
                            "writer: compression must be zstd or none"),
    "fsync not a boolean": (lambda t: good(t).replace("  directory:", "  fsync: maybe\n  directory:"),
                            "writer: fsync must be true or false, got 'maybe'"),
    "unknown writer format": (lambda t: good(t, writer_format="netcdf"),
                              "writer: format must be one of files, hdf5, logfs, hdf5-shared; got 'netcdf'"),
    "hdf5 from a helper thread": (lambda t: good(t, writer_format="hdf5", mode="helper-thread"),
                                  "writer: format hdf5 is written by dedicated cores or synchronously"),
    "compressed hdf5": (lambda t: good(t, writer_format="hdf5", compression="zstd"),
                        "writer: the hdf5 formats store blocks uncompressed"),
    "shared hdf5 without servers": (lambda t: good(t, writer_format="hdf5-shared", mode="synchronous"),
                                    "writer: format hdf5-shared is written together by the servers"),
    "variability out of range": (lambda t: good(t, variability=9),
                                 "writer: variability must be a number from 0 to 4"),
    "blocks overlap": (lambda t: positioned(t, "global: [4, 4, 8], position: [0, 0, rank * 2]"),
                       "layout 'grid': blocks 0 and 1 overlap (at [0, 0, 0] and [0, 0, 2], each of size [4, 4, 4])"),
    "block outside the domain": (lambda t: positioned(t, "global: [4, 4, 4], position: [0, 0, rank * 4]"),
                                 "layout 'grid': block 1 (rank 1 of 2 clients) at [0, 0, 4] of size [4, 4, 4] is "
                                 "outside the global extents [4, 4, 4]"),
    "undefined parameter": (lambda t: positioned(t, "global: [4, 4, 8], position: [0, 0, rank * NX]"),
                            "layout 'grid': position: unknown parameter 'NX' (declare it under parameters, before "
                            "its use) in 'rank * NX'"),
    "parameter used before it is declared": (lambda t: good(t) + "parameters: {A: B, B: 1}\n",
                                             "parameter 'A': unknown parameter 'B'"),
    "rank in dimensions": (lambda t: good(t).replace("dimensions: [4, 4, 4]", "dimensions: [4, 4, rank]"),
                           "layout 'grid': dimensions: rank (a block's own) cannot be used here in 'rank'"),
    "global without position": (lambda t: positioned(t, "global: [4, 4, 8]"),
                                "layout 'grid': give global (the variable's extents) and position"),
    "an expression cut short": (lambda t: positioned(t, "global: [4, 4, 8], position: [0, 0, 4 *]"),
                                "layout 'grid': position: an operand is missing at the end in '4 *'"),
    # a divisor that is zero only for the load-time check's stand-in (clients = 1) still lets the rest be checked
    "undefined parameter after a division": (
        lambda t: positioned(t, "global: [4, 4, 8], position: [0, 0, 4 / (clients - 1) * NX]"),
        "layout 'grid': position: unknown parameter 'NX' (declare it under parameters, before its use)"),
    "division by zero for this run": (lambda t: positioned(t, "global: [4, 4, 8], position: [0, 0, 4 / (clients - 2)]"),
                                      "layout 'grid': position of block 0 (rank 0 of 2 clients): division by zero"),
}


@pytest.mark.parametrize("mistake", MISTAKES)
def test_configuration_error_on_every_rank(mpi, tmp_path, mistake):
    text, message = MISTAKES[mistake]
    lines = initialize(mpi, tmp_path, text(tmp_path))
    assert len(lines) == 3
    for rank, line in enumerate(lines):
        assert line.startswith(f"rank {rank} initialize rc 1: rank 0: ") and message in line, line
        assert "c.yaml:" in line or "buffer" in line


PARAMETERS_XML = """<?xml version="1.0"?>
<simulation name="p">
  <architecture> <buffer size="1048576"/> </architecture>
  <data>
{parameters}
    <layout name="grid" type="double" dimensions="4"/> <variable name="u" layout="grid"/>
  </data>
  <ioloom directory="{out}"/>
</simulation>
"""


@pytest.mark.parametrize("declared,message", [
    # the second NX's value names an undeclared parameter: the duplicate is found before its value is evaluated
    ((("NX", "4"), ("NX", "Y")), "parameter 'NX' is declared twice"),
    ((("NX", "4"), ("clients", "2")), "parameter 'clients': rank and clients are given by the run"),
])
def test_a_parameter_is_refused_the_same_way_in_yaml_and_xml(mpi, tmp_path, declared, message):
    yaml = good(tmp_path, mode="synchronous") + "parameters: {" + ", ".join(f"{n}: {v}" for n, v in declared) + "}\n"
    xml = PARAMETERS_XML.format(out=tmp_path / "out", parameters="\n".join(
        f'    <parameter name="{n}" value="{v}"/>' for n, v in declared))
    said = []
    for name, text in (("c.yaml", yaml), ("c.xml", xml)):
        (tmp_path / name).write_text(text)
        out = mpi.run(1, [program(mpi), tmp_path / name], timeout=60)
        line, = [line for line in out.stdout.splitlines() if line.startswith("rank 0 initialize rc 1: ")]
        said.append(line.split(f"{name}:", 1)[1].split(": ", 1)[1])  # after the file's line
    assert said == [message, message]


def test_dedicated_cores_need_a_spare_core(mpi, tmp_path):
    """One rank on the node (or as many dedicated cores as cores): refused on every rank, not a hang."""
    lines = initialize(mpi, tmp_path, good(tmp_path), 1)
    assert lines == [f"rank 0 initialize rc 1: rank 0: dedicated_cores: 1 per node leaves no core to compute on a "
                     f"node with 1 ranks and {os.cpu_count()} cores: run more ranks per node or use mode helper-thread"]
    lines = initialize(mpi, tmp_path, good(tmp_path, dedicated_cores=os.cpu_count()), os.cpu_count() + 1)
    assert len(lines) == os.cpu_count() + 1 and all("leaves no core to compute" in line for line in lines)


def test_output_directory_that_cannot_be_created(mpi, tmp_path):
    (tmp_path / "file").write_text("")
    lines = initialize(mpi, tmp_path, good(tmp_path).replace(str(tmp_path / "out"), str(tmp_path / "file" / "o")))
    assert len(lines) == 3 and all("cannot create the output directory" in line for line in lines)


def test_mistaken_calls_are_refused(mpi, tmp_path):
    lines = initialize(mpi, tmp_path, good(tmp_path), 3, "calls")
    for rank in (0, 1):
        mine = [line.split(": ", 1) for line in lines if line.startswith(f"rank {rank} ")]
        said = {head.split()[2]: (head.split()[-1], text) for head, text in mine}
        assert said["initialize"] == ("0", "") and said["finalize"][0] == "0"
        assert said["write-unknown"] == ("2", "unknown variable 'nope': declare it under variables in the "
                                              "configuration")
        assert said["write-size"] == ("2", "variable 'u': the buffer has 32 bytes but its layout 'grid' needs 512")
        assert said["signal-unknown"][1].startswith("unknown event 'nope'")
        assert said["commit-without-alloc"] == ("2", "commit of 'u' without ioloom_async_alloc")


def test_reader_refuses_what_is_not_an_output(tmp_path, ioloom_cli):
    (tmp_path / "x.json").write_text('{"format": "other"}')
    with pytest.raises(async_io.AsyncOutputError, match="not a libioloom-async index"):
        async_io.open(tmp_path / "x.json")
    with pytest.raises(async_io.AsyncOutputError, match="expected one libioloom-async index"):
        async_io.open(tmp_path)
    out = ioloom_cli("async", "info", tmp_path / "x.json", check=False)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "not a libioloom-async index" in out.stderr


@pytest.fixture
def small_disk(small_fs):
    """A 256 KiB tmpfs: a real full disk."""
    return small_fs("256k")


@pytest.mark.parametrize("writer_format", ["files", "logfs", "hdf5", "hdf5-shared"])
@pytest.mark.parametrize("mode", ["synchronous", "dedicated-cores"])
def test_full_disk_loses_blocks_reported_and_keeps_earlier_ones(mpi, tmp_path, small_disk, mode, writer_format):
    from ioloom.async_io.kernel import expected_value, run_kernel
    if writer_format.startswith("hdf5") and mpi.name != "mpich":
        pytest.skip("the hdf5 formats are in the MPICH build")
    if writer_format == "hdf5-shared" and mode == "synchronous":
        pytest.skip("hdf5-shared is written by the servers of the dedicated modes")
    setup = Setup(small_disk, mode=mode, variables=("u",), dims=(16, 16, 16), buffer=4 << 20, events=(),
                  writer_format=writer_format)
    run = run_kernel(mpi.impl, 3, setup.write(tmp_path / "c.yaml"), setup, 12, 0.0)
    assert run.returncode == 0, run.stderr
    lost = [line for line in run.stderr.splitlines() if line.startswith("ioloom-async: writer")]
    assert lost and all("variable u, iteration" in line and line.endswith(("lost: No space left on device",
                                                                           "lost: the collective write failed"))
                        for line in lost)
    assert not list(small_disk.glob("*.reserve"))  # an HDF5 output's room for closing is given back
    out = async_io.open(small_disk)
    counters = out.counters()
    assert counters["lost_blocks"] == len(lost) and counters["written_blocks"] + len(lost) == counters["blocks"]
    assert counters["written_blocks"] > 0
    for it in out.iterations():
        for b in out.blocks_at("u", it):
            flat = out.read("u", it, b).reshape(-1)
            assert flat[0] == expected_value(it, b, 0, 0) and flat[-1] == expected_value(it, b, 0, flat.size - 1)
