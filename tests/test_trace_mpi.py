"""The tracer's MPI layer on real MPI programs under every MPI here (and Open MPI's two MPI-IO components).

tests/programs/mpiio_matrix.c runs every access variant on its own file, 3 ranks, BLOCK bytes per rank at
rank * BLOCK. One traced launch per configuration; the assertions below are the oracle: each MPI event on
every rank with its exact bytes and offsets, collective sequence numbers equal across ranks, completions tied
to their initiations, and the POSIX calls issued inside each MPI-IO call carrying it as parent, with bytes that
add up (or, under data sieving, exceed the MPI bytes by a plausible factor).
"""
from __future__ import annotations

import os
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from conftest import MpiRunner
from ioloom import mpi as mpi_impls
from ioloom.trace import open_trace
from ioloom.trace.ops import direction

NRANKS = 3
BLOCK = 4000  # bytes per rank and access in mpiio_matrix.c (1000 ints)
RUN = BLOCK // 4  # strided view: runs of 1000 bytes, every NRANKS-th run is the rank's


@dataclass(frozen=True)
class Access:
    """One MPI-IO data call of a variant: op, where it lands, whether collective, and how it completes."""
    op: str
    position: str  # "explicit", "individual", "shared" (offset decided by the library) or "strided"
    collective: bool
    completion: str | None = None  # op of the event that completes it (MPI_Wait..., or the split _end)


def _pair(name: str, position: str, collective: bool, write_completion=None, read_completion=None):
    return [Access(name.format("write"), position, collective, write_completion),
            Access(name.format("read"), position, collective, read_completion)]


VARIANTS: dict[str, list[Access]] = {
    "at": _pair("MPI_File_{}_at", "explicit", False),
    "at_all": _pair("MPI_File_{}_at_all", "explicit", True),
    "individual": _pair("MPI_File_{}", "individual", False),
    "individual_all": _pair("MPI_File_{}_all", "individual", True),
    "shared": _pair("MPI_File_{}_shared", "shared", False),
    "ordered": _pair("MPI_File_{}_ordered", "shared", True),
    "iat": _pair("MPI_File_i{}_at", "explicit", False, "MPI_Wait", "MPI_Test"),
    "iat_all": _pair("MPI_File_i{}_at_all", "explicit", True, "MPI_Waitall", "MPI_Waitany"),
    "iindividual": _pair("MPI_File_i{}", "individual", False, "MPI_Waitsome", "MPI_Testany"),
    "iindividual_all": _pair("MPI_File_i{}_all", "individual", True, "MPI_Testall", "MPI_Testsome"),
    "ishared": _pair("MPI_File_i{}_shared", "shared", False, "MPI_Wait", "MPI_Wait"),
    "split_at": _pair("MPI_File_{}_at_all_begin", "explicit", True, "MPI_File_write_at_all_end",
                      "MPI_File_read_at_all_end"),
    "split_individual": _pair("MPI_File_{}_all_begin", "individual", True, "MPI_File_write_all_end",
                              "MPI_File_read_all_end"),
    "split_ordered": _pair("MPI_File_{}_ordered_begin", "shared", True, "MPI_File_write_ordered_end",
                           "MPI_File_read_ordered_end"),
    "strided_all": [Access("MPI_File_write_all", "strided", True), Access("MPI_File_read_at_all", "strided", True)],
    "strided": [Access("MPI_File_write", "strided", False), Access("MPI_File_read_at", "strided", False)],
}
LARGE_COUNT = {"large_count": [Access("MPI_File_write_at_all_c", "explicit", True),
                               Access("MPI_File_read_at_c", "explicit", False)]}
CONFIGS = [("openmpi", "ompio"), ("openmpi", "romio321"), ("mpich", "romio")]
# Open MPI 4.1's romio321 component has no MPI-3.1 non-blocking collectives (it crashes on them, untraced too).
SKIPPED = {"romio321": ("iat_all", "iindividual_all")}


def expected_offset(access: Access, rank: int) -> int:
    """Byte offset of the first byte the rank accesses; -1 where the library places it (shared pointers)."""
    return {"explicit": rank * BLOCK, "individual": rank * BLOCK, "strided": rank * RUN, "shared": -1}[access.position]


def expected_etype_offset(access: Access, rank: int) -> int:
    """aux of a data event: the offset in etype units (bytes here); the strided view starts each rank at 0."""
    return {"explicit": rank * BLOCK, "individual": rank * BLOCK, "strided": 0, "shared": -1}[access.position]


@dataclass
class Traced:
    events: pd.DataFrame
    files: dict[str, int]  # variant name -> file id
    trace: object
    config: tuple[str, str]

    def mpi(self, variant: str) -> pd.DataFrame:
        e = self.events
        return e[(e.layer == "mpiio") & (e.file_id == self.files[variant])]

    def children(self, parents: pd.DataFrame, variant: str) -> pd.DataFrame:
        """POSIX events on the variant's file issued inside the given MPI events (same process)."""
        e = self.events
        posix = e[(e.layer == "posix") & (e.file_id == self.files[variant]) & (e.parent >= 0)]
        return posix.merge(parents[["pid", "call_id"]], left_on=["pid", "parent"], right_on=["pid", "call_id"],
                           suffixes=("", "_mpi"))


_RUNS: dict[tuple[str, str], Traced] = {}


def traced_matrix(mpi, io: str, ioloom_cli, tmp_path_factory) -> Traced:
    """Run mpiio_matrix once per configuration under `ioloom run` and load its trace."""
    key = (mpi.name, io)
    if key not in _RUNS:
        exe = mpi.compile("mpiio_matrix.c")
        work = tmp_path_factory.mktemp(f"matrix-{mpi.name}-{io}")
        data = work / "data"
        data.mkdir()
        command = mpi.command(NRANKS, [exe, data, ",".join(SKIPPED.get(io, ())) or "none"])
        if io == "romio321":
            command[1:1] = ["--mca", "io", "romio321"]
        out = ioloom_cli("run", "-o", work / "trace", "--", *command, env=mpi.impl.base_env(), timeout=300)
        assert "mpiio_matrix: 3 ranks ok" in out.stdout, out.stdout + out.stderr
        trace = open_trace(work / "trace")
        events = trace.events().to_pandas().astype({"op": str, "layer": str})
        paths = trace.files.to_pandas()
        # The variants' own files (not ROMIO's hidden shared-pointer files, nor Open MPI's lock tests).
        files = {Path(p).stem: int(i) for p, i in zip(paths.path, paths.file_id)
                 if Path(p).parent == data and Path(p).suffix == ".dat" and not Path(p).name.startswith(".")}
        _RUNS[key] = Traced(events, files, trace, key)
    return _RUNS[key]


INSTALLED = {impl.name for impl in mpi_impls.implementations()}


@pytest.fixture(params=[c for c in CONFIGS if c[0] in INSTALLED], ids=lambda c: f"{c[0]}-{c[1]}")
def matrix(request, ioloom_cli, tmp_path_factory) -> Traced:
    impl, io = request.param
    return traced_matrix(MpiRunner(mpi_impls.by_name(impl)), io, ioloom_cli, tmp_path_factory)


def variants_of(matrix: Traced) -> dict[str, list[Access]]:
    every = {**VARIANTS, **(LARGE_COUNT if matrix.config[0] == "mpich" else {})}
    return {name: accesses for name, accesses in every.items() if name not in SKIPPED.get(matrix.config[1], ())}


def test_every_variant_on_every_rank_with_exact_bytes_and_offsets(matrix):
    variants = variants_of(matrix)
    least = 28 if matrix.config[1] == "romio321" else 32
    assert len([a for accesses in variants.values() for a in accesses]) >= least
    for variant, accesses in variants.items():
        events = matrix.mpi(variant)
        for access in accesses:
            calls = events[events.op == access.op].sort_values("rank")
            where = f"{variant}: {access.op}"
            assert calls["rank"].tolist() == list(range(NRANKS)), f"{where}: one event per rank"
            pending = access.completion is not None
            assert (calls.req_bytes == BLOCK).all(), where
            assert (calls.ret_bytes == (-1 if pending else BLOCK)).all(), f"{where}: {calls.ret_bytes.tolist()}"
            assert (calls.errno == 0).all(), where
            assert calls.offset.tolist() == [expected_offset(access, r) for r in range(NRANKS)], where
            assert calls.aux.tolist() == [expected_etype_offset(access, r) for r in range(NRANKS)], where
            assert (calls.call_id > 0).all() and (calls.parent == -1).all(), where
            seqs = set(calls.coll_seq)
            if access.collective:
                assert len(seqs) == 1 and seqs != {-1}, f"{where}: coll_seq differs across ranks: {seqs}"
            else:
                assert seqs == {-1}, where
            if pending:
                check_completion(events, calls, access, where)


def check_completion(events: pd.DataFrame, initiations: pd.DataFrame, access: Access, where: str) -> None:
    """The completion event: same rank and file, aux = the initiation's call_id, bytes from the status."""
    done = events[events.op == access.completion]
    joined = initiations.merge(done, left_on=["pid", "call_id"], right_on=["pid", "aux"], suffixes=("", "_done"))
    assert len(joined) == NRANKS, f"{where}: completed by {access.completion} on every rank"
    assert (joined.ret_bytes_done == BLOCK).all() and (joined.req_bytes_done == -1).all(), where
    assert (joined.offset_done == joined.offset).all() and (joined.coll_seq_done == joined.coll_seq).all(), where
    assert (joined.t_start_done >= joined.t_end).all(), f"{where}: completes after it started"


def test_collective_sequence_numbers_agree_across_ranks(matrix):
    """Every collective call on a file (open, close, set_view, data...) has one number, equal on all ranks, in
    call order; the open number of the communicator tells two opens apart."""
    e = matrix.events
    collective = e[(e.layer == "mpiio") & (e.coll_seq >= 0)]
    for file_id, calls in collective.groupby("file_id"):
        per_rank = [list(zip(c.sort_values("t_start").op, c.sort_values("t_start").coll_seq))
                    for _, c in calls.groupby("rank")]
        assert len(per_rank) == NRANKS and all(seq == per_rank[0] for seq in per_rank), f"file {file_id}"
        numbers = [seq for _, seq in per_rank[0]]
        assert numbers == sorted(numbers) and len({n >> 32 for n in numbers}) == 1, numbers
    opens = collective[collective.op == "MPI_File_open"].groupby("rank").coll_seq.apply(sorted)
    assert all(len(set(seqs)) == len(seqs) for seqs in opens), "each open on the communicator gets its own number"


def directions(events: pd.DataFrame) -> pd.Series:
    """'read', 'write' or None per event (aio_return and kernel copies tell by their aux)."""
    return pd.Series([direction(op, aux) for op, aux in zip(events.op, events.aux)], index=events.index, dtype=object)


def written_ranges(children: pd.DataFrame) -> list[tuple[int, int]]:
    writes = children[directions(children) == "write"]
    return sorted(zip(writes.offset, writes.offset + writes.ret_bytes))


def covers(ranges: list[tuple[int, int]], start: int, end: int) -> bool:
    reach = start
    for lo, hi in ranges:
        if lo > reach:
            return False
        reach = max(reach, hi)
    return reach >= end


def test_posix_children_carry_the_mpi_call_and_add_up(matrix):
    """Contiguous independent blocking calls: the POSIX calls inside carry the MPI call as parent and move
    exactly its bytes at its offset. Collectives and shared pointers: the children of all ranks' calls cover
    the whole region written (two-phase I/O moves the data to aggregators). OMPIO runs split collectives through
    POSIX aio: their bytes are the aio_return events the _end collects, children of the _begin."""
    for variant in ("at", "individual"):
        events = matrix.mpi(variant)
        for access in VARIANTS[variant]:
            calls = events[events.op == access.op]
            kids = matrix.children(calls, variant)
            moved = kids[directions(kids) == access.op.split("_")[2]]
            per_rank = moved.groupby("rank").ret_bytes.sum()
            assert per_rank.to_dict() == {r: BLOCK for r in range(NRANKS)}, f"{variant} {access.op}: {per_rank}"
            assert sorted(moved.offset) == [r * BLOCK for r in range(NRANKS)], f"{variant} {access.op}"
    covered = ["at_all", "individual_all", "shared", "ordered", "strided_all", "split_at", "split_individual",
               "split_ordered"]
    for variant in covered:
        writes = matrix.mpi(variant)
        writes = writes[writes.op.str.contains("write")]
        ranges = written_ranges(matrix.children(writes, variant))
        assert covers(ranges, 0, NRANKS * BLOCK), f"{variant}: POSIX writes {ranges}"
        assert sum(hi - lo for lo, hi in ranges) >= NRANKS * BLOCK, variant


def test_nonblocking_requests_belong_to_their_i_calls(mpi, ioloom_cli, tmp_path):
    """Both MPIs' MPI-IO (OMPIO and ROMIO here) run MPI_File_iwrite_at / iread_at through POSIX aio. Each i* call
    has two POSIX children: the aio_write / aio_read submitting its block, and the aio_return that MPI_Wait /
    MPI_Test collects after the i* call returned, moving exactly its bytes at its offset in its direction."""
    blocks, block = 3, 1000
    exe = mpi.compile("nonblocking_io.c")
    target = tmp_path / "file.dat"
    ioloom_cli("run", "-o", tmp_path / "trace", "--", *mpi.command(2, [exe, target, blocks, block]),
               env=mpi.impl.base_env(), timeout=300)
    trace = open_trace(tmp_path / "trace")
    events = trace.events().to_pandas().astype({"op": str, "layer": str})
    files = trace.files.to_pandas()
    mine = events[events.file_id == int(files[files.path == str(target)].file_id.iloc[0])]
    calls = mine[mine.op.isin(["MPI_File_iwrite_at", "MPI_File_iread_at"])]
    assert len(calls) == 2 * 2 * blocks
    kids = mine[mine.layer == "posix"].merge(calls[["pid", "call_id", "op", "offset", "t_end", "tid"]],
                                             left_on=["pid", "parent"], right_on=["pid", "call_id"],
                                             suffixes=("", "_mpi"))
    for (pid, call_id), group in kids.sort_values("t_start").groupby(["pid", "call_id_mpi"]):
        way = group.op_mpi.iloc[0].split("_")[2][1:]  # iwrite_at -> write
        offset = group.offset_mpi.iloc[0]
        rows = group[["op", "offset", "req_bytes", "ret_bytes", "errno"]].itertuples(index=False)
        assert [tuple(r) for r in rows] == [
            (f"aio_{way}", offset, block, -1, 0), ("aio_return", offset, block, block, 0)], (pid, call_id)
        submitted, collected = group.iloc[0], group.iloc[1]
        assert direction(collected.op, collected.aux) == way and direction(submitted.op, submitted.aux) is None
        assert collected.t_start >= collected.t_end_mpi, "collected by the completion, after the i* call returned"
        assert (group.tid == group.tid_mpi).all()
    assert kids.groupby(["pid", "call_id_mpi"]).ngroups == len(calls)


def test_data_sieving_amplification(matrix):
    """The strided independent write and read (4 runs of 1000 bytes per rank, others' runs in between): under
    ROMIO, data sieving reads (and for the write rewrites, under a lock) whole extents, so the POSIX bytes exceed
    the MPI bytes, by at most the span the rank's runs cover; OMPIO writes the runs themselves but sieves reads."""
    events = matrix.mpi("strided")
    write = events[events.op == "MPI_File_write"]
    kids = matrix.children(write, "strided")
    span = (4 - 1) * NRANKS * RUN + RUN  # first to last byte of a rank's runs
    for rank, mine in kids.groupby("rank"):
        written = mine[directions(mine) == "write"].ret_bytes.sum()
        if matrix.config[1] == "ompio":
            assert written == BLOCK, f"rank {rank}"
        else:
            assert BLOCK < written <= span, f"rank {rank}: {written} bytes written for {BLOCK}"
            # The read of the extent returns what already exists (maybe nothing: the file is new).
            reads = (directions(mine) == "read").sum()
            locks = mine[mine.op.str.startswith("fcntl")]
            assert reads >= 1 and len(locks) >= 2, f"rank {rank}: read-modify-write under a lock"
    # Reading the runs back independently: both ROMIO and OMPIO sieve reads (read the extent, keep the runs).
    read = events[events.op == "MPI_File_read_at"]
    for rank, mine in matrix.children(read, "strided").groupby("rank"):
        got = mine[directions(mine) == "read"].ret_bytes.sum()
        assert BLOCK < got <= span, f"rank {rank}: read {got} bytes for {BLOCK}"


def test_file_calls_and_view(matrix):
    e = matrix.mpi("file_calls")
    size = {op: calls for op, calls in e.groupby("op")}
    assert (size["MPI_File_set_size"].offset == NRANKS * BLOCK).all()
    assert (size["MPI_File_preallocate"].offset == 2 * NRANKS * BLOCK).all()
    assert (size["MPI_File_get_size"].ret_bytes == 2 * NRANKS * BLOCK).all()
    assert len(size["MPI_File_sync"]) == NRANKS and len(size["MPI_File_close"]) == NRANKS
    view = matrix.mpi("strided")
    view = view[view.op == "MPI_File_set_view"].sort_values("rank")
    assert view.offset.tolist() == [r * RUN for r in range(NRANKS)]  # disp
    assert (view.aux == 4).all()  # etype MPI_INT
    assert (view.req_bytes == 4 * NRANKS * RUN).all()  # filetype extent
    opens = matrix.events[matrix.events.op == "MPI_File_open"]
    assert set(matrix.files.values()) <= set(opens.file_id)


def test_process_facts(matrix):
    """Rank, MPI library, clock offsets at init and finalize with their error, hints in effect per file."""
    streams = {s.rank: s for s in matrix.trace.streams if s.rank >= 0}
    assert sorted(streams) == list(range(NRANKS))
    for stream in streams.values():
        info = stream.info
        assert info["note.mpi.impl"] == matrix.config[0]
        # The library's version text without how it was built (MPICH's configure line and compiler flags).
        library = info["note.mpi.library"]
        assert ("Open MPI v" if matrix.config[0] == "openmpi" else "MPICH Device:") in library, library
        assert "configure:" not in library and "CC:" not in library and len(library) < 300, library
        for phase in ("clock_init", "clock_finalize"):
            local, offset, error = map(int, info[phase].split())
            assert local > 0 and (offset, error) == (0, 0), "one node, one clock: no offset, no error"
        # ROMIO (MPICH) reports every hint in effect; Open MPI 4.1 returns only the hints the program gave.
        path = matrix.trace.files.to_pandas().set_index("file_id").path[matrix.files["at"]]
        hints = info[f"note.mpiio.hints:{path}"]
        assert "cb_buffer_size=" in hints if matrix.config[0] == "mpich" else hints == "", hints
    ops = matrix.events[matrix.events.layer == "process"].op
    assert (ops == "MPI_Init").sum() == NRANKS and (ops == "MPI_Finalize").sum() == NRANKS
    assert matrix.trace.meta["clock_max_error_ns"] >= 0


def run_program(mpi, ioloom_cli, tmp_path, exe: Path, nranks: int, check=True, env=None):
    """Trace `exe FILE` on nranks ranks; returns ioloom's output and the MPI-IO events on FILE."""
    target = tmp_path / "file.dat"
    out = ioloom_cli("run", "-o", tmp_path / "trace", "--", *mpi.command(nranks, [exe, target]),
                     env={**mpi.impl.base_env(), **(env or {})}, check=check, timeout=300)
    trace = open_trace(tmp_path / "trace")
    events = trace.events().to_pandas().astype({"op": str, "layer": str})
    files = trace.files.to_pandas()
    file_id = int(files[files.path == str(target)].file_id.iloc[0])
    return out, events[(events.layer == "mpiio") & (events.file_id == file_id)]


def test_fortran_program_and_measured_clock(mpi, ioloom_cli, tmp_path):
    """Open MPI's Fortran bindings call PMPI_File_*, MPICH's MPI_File_*: recorded under both. The run also
    makes every rank measure its clock offset by ping-pong (IOLOOM_CLOCK_SYNC=every-rank): on one host the
    true offset is 0, so the estimate must lie within its own error bound."""
    if not mpi.impl.mpifort:
        pytest.skip(f"no Fortran compiler for {mpi.name}")
    out, mpiio = run_program(mpi, ioloom_cli, tmp_path, mpi.compile("mpiio_fortran.f90"), 2,
                             env={"IOLOOM_CLOCK_SYNC": "every-rank"})
    stream = next(s for s in open_trace(tmp_path / "trace").streams if s.rank == 1)
    for phase in ("clock_init", "clock_finalize"):
        _, offset, error = map(int, stream.info[phase].split())
        assert 0 < error < 10**8 and abs(offset) <= error, f"{phase}: offset {offset} ns, error {error} ns"
    check_fortran_events(out, mpiio)


def test_fortran_2008_bindings(mpi, ioloom_cli, tmp_path):
    """The same program through `use mpi_f08`, whose bindings reach the C library by yet other routines."""
    if not mpi.impl.mpifort:
        pytest.skip(f"no Fortran compiler for {mpi.name}")
    check_fortran_events(*run_program(mpi, ioloom_cli, tmp_path, mpi.compile("mpiio_fortran_f08.f90"), 2))


def check_fortran_events(out, mpiio: pd.DataFrame) -> None:
    """mpiio_fortran*: open, write_at at rank * BLOCK, read_at_all and close on both ranks."""
    assert "mpiio_fortran: 2 ranks ok" in out.stdout
    for op in ("MPI_File_open", "MPI_File_write_at", "MPI_File_read_at_all", "MPI_File_close"):
        assert sorted(mpiio[mpiio.op == op]["rank"]) == [0, 1], op
    writes = mpiio[mpiio.op == "MPI_File_write_at"].sort_values("rank")
    assert writes.offset.tolist() == [0, BLOCK] and (writes.ret_bytes == BLOCK).all()


def test_hdf5_program(mpi, ioloom_cli, tmp_path, monkeypatch):
    """Parallel HDF5 (MPICH build) reaches the file through MPI-IO: its collective dataset write is an
    MPI_File_write_at_all per rank, with the same sequence number, moving each rank's 50x100 ints."""
    if mpi.name != "mpich":
        pytest.skip("Debian's parallel HDF5 is built against MPICH")
    monkeypatch.chdir(tmp_path)  # h5pcc leaves its object file in the working directory
    exe = mpi.compile("mpiio_hdf5.c", compiler="h5pcc")
    out, mpiio = run_program(mpi, ioloom_cli, tmp_path, exe, 2)
    assert "mpiio_hdf5: 2 ranks ok" in out.stdout
    data = 50 * 100 * 4
    writes = mpiio[(mpiio.op == "MPI_File_write_at_all") & (mpiio.req_bytes == data)]
    assert sorted(writes["rank"]) == [0, 1] and (writes.ret_bytes == data).all()
    assert writes.coll_seq.nunique() == 1 and writes.offset.diff().dropna().abs().tolist() == [data]
    assert (mpiio.op == "MPI_File_set_view").any() and (mpiio.op == "MPI_File_close").sum() == 2


def all_variants_but(*kept: str) -> str:
    """mpiio_matrix's SKIP argument: every variant but `kept`."""
    return ",".join(name for name in list(VARIANTS) + ["large_count", "file_calls"] if name not in kept)


def test_stacks_with_a_pmpi_tool_in_either_order(mpi, ioloom_cli, tmp_path):
    """A profiler's MPI_File_write_at (calling PMPI_File_write_at) preloaded after ioloom's wrappers (as
    `ioloom run` orders them) and before them: the tool counts each call once, ioloom records each once."""
    from ioloom import paths
    from ioloom.run import LAUNCHERS

    tool = mpi.compile("mpiio_pmpi_tool.c", "-shared", "-fPIC")
    exe = mpi.compile("mpiio_matrix.c")
    others = all_variants_but("at")
    ours = [paths.native_lib(f"ioloom-trace-mpi-{mpi.name}"), paths.native_lib("ioloom-trace")]
    for order in ("ioloom-first", "tool-first"):
        data, trace_dir = tmp_path / order, tmp_path / f"{order}.trace"
        data.mkdir()
        command = mpi.command(2, [exe, data, others])
        if order == "ioloom-first":
            out = ioloom_cli("run", "-o", trace_dir, "--", *command,
                             env={**mpi.impl.base_env(), "LD_PRELOAD": str(tool)})
        else:
            out = mpi.run(2, [exe, data, others], env={"LD_PRELOAD": " ".join(map(str, [tool, *ours])),
                                                       "IOLOOM_TRACE_DIR": str(trace_dir),
                                                       "IOLOOM_SKIP_PROGRAMS": ",".join(LAUNCHERS)})
        assert sorted(line for line in out.stdout.splitlines() if line.startswith("pmpi_tool")) == [
            f"pmpi_tool: rank {r} counted 1 MPI_File_write_at" for r in range(2)], (order, out.stdout)
        events = open_trace(trace_dir).events().to_pandas().astype({"op": str})
        writes = events[events.op == "MPI_File_write_at"]
        assert sorted(writes["rank"]) == [0, 1] and (writes.ret_bytes == BLOCK).all(), order
        assert (events.op == "MPI_Finalize").sum() == 2, order


def test_layer_off_and_excluded_paths_pass_through(mpi, tmp_path):
    """With the MPI wrappers preloaded but IOLOOM_LAYERS without mpiio, or the files under an excluded path,
    MPI-IO calls pass through unrecorded (the program still runs and checks its data); the process facts (rank,
    clock) are still written, and POSIX calls made inside MPI calls then have no parent."""
    from ioloom import paths
    from ioloom.run import LAUNCHERS

    exe = mpi.compile("mpiio_matrix.c")
    preload = " ".join(str(paths.native_lib(name)) for name in (f"ioloom-trace-mpi-{mpi.name}", "ioloom-trace"))
    for case, extra in (("layer-off", {"IOLOOM_LAYERS": "posix,stdio"}), ("excluded", {"IOLOOM_EXCLUDE": "{data}"})):
        data, trace_dir = tmp_path / case, tmp_path / f"{case}.trace"
        data.mkdir()
        env = {"LD_PRELOAD": preload, "IOLOOM_TRACE_DIR": str(trace_dir), "IOLOOM_SKIP_PROGRAMS": ",".join(LAUNCHERS),
               **{key: value.format(data=data) for key, value in extra.items()}}
        out = mpi.run(2, [exe, data, all_variants_but("at", "at_all")], env=env)
        assert "mpiio_matrix: 2 ranks ok, 2 variants" in out.stdout, case
        trace = open_trace(trace_dir)
        events = trace.events().to_pandas().astype({"op": str, "layer": str})
        assert not (events.layer == "mpiio").any(), f"{case}: {events[events.layer == 'mpiio'].op.unique()}"
        assert sorted(s.rank for s in trace.streams if s.rank >= 0) == [0, 1] and all(
            "clock_init" in s.info for s in trace.streams if s.rank >= 0), case
        files = trace.files.to_pandas()
        ids = set(files.file_id[files.path.str.startswith(str(data))])
        mine = events[events.file_id.isin(ids)]
        if case == "layer-off":
            writes = mine[mine.op.str.startswith("pwrite")]
            assert writes.ret_bytes.sum() >= 4 * BLOCK and (writes.parent == -1).all(), case
        else:
            assert mine.empty, f"{case}: {mine.op.unique()}"


def test_mpi_wrappers_preloaded_alone_run_the_program(mpi, tmp_path):
    """A hand-made LD_PRELOAD of the MPI wrappers alone loads libioloom-trace.so as their dependency, after
    libc: nothing comes after it to be its "next" sigaction, write or close. The program must run as without
    ioloom (its POSIX calls then bind to libc, not to the tracer); before, it died of a NULL call at start-up."""
    from ioloom import paths
    from ioloom.run import LAUNCHERS

    exe = mpi.compile("mpiio_matrix.c")
    data, trace_dir = tmp_path / "data", tmp_path / "trace"
    data.mkdir()
    env = {"LD_PRELOAD": str(paths.native_lib(f"ioloom-trace-mpi-{mpi.name}")), "IOLOOM_TRACE_DIR": str(trace_dir),
           "IOLOOM_SKIP_PROGRAMS": ",".join(LAUNCHERS)}
    out = mpi.run(2, [exe, data, all_variants_but("at", "at_all")], env=env)
    assert "mpiio_matrix: 2 ranks ok, 2 variants" in out.stdout, out.stderr
    events = open_trace(trace_dir).events().to_pandas().astype({"op": str, "layer": str})
    assert {"MPI_File_write_at", "MPI_File_write_at_all"} <= set(events.op[events.layer == "mpiio"])


MPI4PY_PYTHON = "/usr/bin/python3"  # Debian's python3-mpi4py (scripts/install-deps.sh), built against Open MPI


def test_mpi4py_program(mpi, ioloom_cli, tmp_path):
    """A Python program through mpi4py: its File.Write_at_all / Read_at are MPI_File_* calls like any other."""
    if mpi.name != "openmpi":
        pytest.skip("Debian's python3-mpi4py is built against Open MPI")
    check = subprocess.run([MPI4PY_PYTHON, "-c", "import mpi4py"], capture_output=True)
    assert check.returncode == 0, "python3-mpi4py is missing: run scripts/install-deps.sh"
    program = Path(__file__).parent / "programs" / "mpiio_mpi4py.py"
    target = tmp_path / "file.dat"
    out = ioloom_cli("run", "-o", tmp_path / "trace", "--",
                     *mpi.command(2, [MPI4PY_PYTHON, program, target]), env=mpi.impl.base_env(), timeout=300)
    assert "mpiio_mpi4py: 2 ranks ok" in out.stdout
    trace = open_trace(tmp_path / "trace")
    events = trace.events().to_pandas().astype({"op": str, "layer": str})
    files = trace.files.to_pandas()
    ids = set(files[files.path == str(target)].file_id)
    mpiio = events[(events.layer == "mpiio") & events.file_id.isin(ids)]
    writes = mpiio[mpiio.op == "MPI_File_write_at_all"].sort_values("rank")
    assert writes["rank"].tolist() == [0, 1] and writes.offset.tolist() == [0, BLOCK]
    assert (writes.ret_bytes == BLOCK).all() and writes.coll_seq.nunique() == 1
    reads = mpiio[mpiio.op == "MPI_File_read_at"]
    assert sorted(reads["rank"]) == [0, 1] and (reads.ret_bytes == BLOCK).all()


def _both_mpis():
    found = {impl.name: impl for impl in mpi_impls.implementations()}
    if set(found) != {"openmpi", "mpich"}:
        pytest.skip("needs Open MPI and MPICH")
    return found


def _open_mpi_session_base(tmp_path_factory) -> dict[str, str]:
    """Environment giving Open MPI singletons a session directory base whose top directory (ompi.HOST.UID) exists
    before they start. Two singletons started at once (two processes of mpiexec.mpich) each start a daemon that
    creates that directory when it is missing; Open MPI 4.1 fails the loser with "mkdir ... File exists" (a CI run
    saw it). A subdirectory inside keeps the last daemon to finish from removing the top directory."""
    base = tmp_path_factory.mktemp("ompi", numbered=True)
    (base / f"ompi.{socket.gethostname().split('.')[0]}.{os.getuid()}" / "keep").mkdir(parents=True)
    return {"OMPI_MCA_orte_tmpdir_base": str(base)}


def test_mpi4py_under_mpichs_launcher_gets_its_own_mpis_wrappers(ioloom_cli, tmp_path, tmp_path_factory):
    """mpiexec.mpich running Debian's mpi4py (linked against Open MPI): the wrappers follow the library the
    program loads, not the launcher, so the run works as it does untraced (every process a one-rank job)
    and says why; loading MPICH's wrappers crashed it with 0 events."""
    impls = _both_mpis()
    program = Path(__file__).parent / "programs" / "mpiio_mpi4py.py"
    argv = impls["mpich"].launch(2, [MPI4PY_PYTHON, str(program), str(tmp_path / "file.dat")])
    env = _open_mpi_session_base(tmp_path_factory)
    untraced = subprocess.run(argv, capture_output=True, text=True, timeout=120, env={**os.environ, **env})
    assert untraced.returncode == 0 and untraced.stdout.count("mpiio_mpi4py: 1 ranks ok") == 2, untraced
    out = ioloom_cli("run", "-o", tmp_path / "trace", "--", *argv, env=env, timeout=300)
    assert out.stdout.count("mpiio_mpi4py: 1 ranks ok") == 2
    assert "launcher is mpich's but" in out.stderr and "mpi4py/MPI." in out.stderr and "links openmpi" in out.stderr
    events = open_trace(tmp_path / "trace").events().to_pandas().astype({"op": str, "layer": str})
    writes = events[events.op == "MPI_File_write_at_all"]
    assert len(writes) == 2 and (writes.ret_bytes == BLOCK).all()


def test_mpich_binary_under_open_mpis_launcher_gets_mpichs_wrappers(ioloom_cli, tmp_path):
    """The other way round: an ELF program linked against MPICH (ldd) started by mpiexec.openmpi."""
    impls = _both_mpis()
    exe = MpiRunner(impls["mpich"]).compile("mpi_ranks.c")
    argv = impls["openmpi"].launch(2, [str(exe)])
    env = impls["openmpi"].base_env()
    out = ioloom_cli("run", "-o", tmp_path / "trace", "--", *argv, env=env, timeout=300)
    assert out.stdout.count("rank 0 of 1 sum 0") == 2
    assert f"the launcher is openmpi's but {exe} links mpich" in out.stderr
    assert mpi_impls.examine(argv).impl.name == "mpich" and mpi_impls.examine(argv).launcher.name == "openmpi"


def test_failed_calls_keep_their_result_and_errno(mpi, ioloom_cli, tmp_path):
    """A failed open, a write on a read-only file, a read of a null datatype and a view of a null etype: the error
    class and errno the program sees are the same traced and untraced (the tracer asks the library about no datatype
    a call has not accepted: asked about a null one, it aborts), and the failed calls are recorded with the error
    class and ret_bytes -1 (the read's size, unknown, req_bytes -1)."""
    exe = mpi.compile("mpiio_errno.c")
    seen = {}
    for mode in ("untraced", "traced"):
        work = tmp_path / mode
        work.mkdir()
        command = mpi.command(1, [exe, work])
        if mode == "untraced":
            out = mpi.run(1, [exe, work])
        else:
            out = ioloom_cli("run", "-o", tmp_path / "trace", "--", *command, env=mpi.impl.base_env())
        seen[mode] = [line for line in out.stdout.splitlines() if ": class " in line]
    assert len(seen["traced"]) == 5 and seen["traced"] == seen["untraced"], seen
    events = open_trace(tmp_path / "trace").events().to_pandas().astype({"op": str, "layer": str})
    failed = events[(events.layer == "mpiio") & (events.errno != 0)]
    classes = {line.split(":")[0]: int(line.split()[-3]) for line in seen["traced"]}
    opens = failed[failed.op == "MPI_File_open"]
    assert opens.errno.tolist() == [classes["open missing"]] and (opens.ret_bytes == -1).all()
    writes = failed[failed.op == "MPI_File_write_at"]
    assert writes.errno.tolist() == [classes["write on read-only"]] and (writes.ret_bytes == -1).all()
    reads = failed[failed.op == "MPI_File_read_at"]
    assert reads.errno.tolist() == [classes["read a null datatype"]] and reads.req_bytes.tolist() == [-1]
    views = failed[failed.op == "MPI_File_set_view"]
    assert views.errno.tolist() == [classes["view of a null etype"]] and views.offset.tolist() == [0]


def test_threads_keep_their_calls_apart(mpi, ioloom_cli, tmp_path):
    """4 threads per rank write their own files at once (MPI_THREAD_MULTIPLE): every MPI event carries its
    thread, and every POSIX child ran on the thread of the MPI call it names as parent."""
    exe = mpi.compile("mpiio_threads.c", "-pthread")
    data = tmp_path / "data"
    data.mkdir()
    out = ioloom_cli("run", "-o", tmp_path / "trace", "--", *mpi.command(2, [exe, data]),
                     env=mpi.impl.base_env(), timeout=300)
    assert "mpiio_threads: ok" in out.stdout
    trace = open_trace(tmp_path / "trace")
    events = trace.events().to_pandas().astype({"op": str, "layer": str})
    writes = events[events.op == "MPI_File_write_at"]
    per_thread = writes.groupby(["pid", "tid"]).size()
    assert len(per_thread) == 2 * 4 and (per_thread == 20).all(), per_thread
    assert (writes.ret_bytes == BLOCK).all()
    assert writes.groupby(["pid", "tid"]).file_id.nunique().eq(1).all(), "one file per thread"
    assert events[events.layer == "mpiio"].groupby("pid").call_id.apply(lambda c: c.is_unique).all()
    mpiio = events[events.layer == "mpiio"][["pid", "call_id", "tid"]]
    children = events[(events.layer == "posix") & (events.parent >= 0)]
    joined = children.merge(mpiio, left_on=["pid", "parent"], right_on=["pid", "call_id"], suffixes=("", "_mpi"))
    assert len(joined) == len(children) and (joined.tid == joined.tid_mpi).all()
    pwrites = joined[joined.op.str.startswith("pwrite")]
    assert pwrites.ret_bytes.sum() == 2 * 4 * 20 * BLOCK


def test_writes_ignoring_the_status_record_what_the_status_says(mpi, ioloom_cli, tmp_path):
    """Every blocking write, with a status and then ignoring it: the program checks that MPI_Get_count gives the
    count asked for, and the trace records the same bytes for both: count x type size, the rule for an ignored
    status, is what the library's status says (whether MPI_STATUS_IGNORE reaches the library is not seen here);
    a read past the end of file records the bytes its status says."""
    exe = mpi.compile("mpiio_status_ignored.c")
    out, mpiio = run_program(mpi, ioloom_cli, tmp_path, exe, 2)
    assert "mpiio_status_ignored: 2 ranks ok" in out.stdout, out.stdout + out.stderr
    writes = mpiio[mpiio.op.str.startswith("MPI_File_write")].sort_values(["pid", "t_start"])
    for _, calls in writes.groupby("pid"):
        given, ignored = calls.iloc[0::2], calls.iloc[1::2]
        assert len(given) == len(ignored) == 19 and given.op.tolist() == ignored.op.tolist()
        assert given.ret_bytes.tolist() == ignored.ret_bytes.tolist() == ignored.req_bytes.tolist()
        assert set(given.ret_bytes) == {100, 120, 64}, given.ret_bytes.tolist()
    reads = mpiio[mpiio.op == "MPI_File_read_at"]
    assert len(reads) == 4 and (reads.req_bytes == 4096).all() and (reads.ret_bytes == 10).all()


def test_exit_without_finalize_keeps_mpi_events(mpi, ioloom_cli, tmp_path):
    """One rank: with more, the launcher kills the others as soon as one leaves without MPI_Finalize, and a rank
    killed before its exit flush keeps only what it had flushed (the trace format's rule, tested elsewhere)."""
    exe = mpi.compile("mpiio_no_finalize.c")
    _, mpiio = run_program(mpi, ioloom_cli, tmp_path, exe, 1, check=False)
    ops = mpiio.sort_values("t_start").op.tolist()
    assert ops == ["MPI_File_open", "MPI_File_write_at_all", "MPI_File_close"], ops
    assert mpiio[mpiio.op == "MPI_File_write_at_all"].ret_bytes.tolist() == [BLOCK]


POINTER_CALLS = {"MPI_File_write", "MPI_File_read", "MPI_File_write_all", "MPI_File_read_all", "MPI_File_iwrite",
                 "MPI_File_write_all_begin"}


def test_followed_individual_pointer_is_the_librarys(mpi, ioloom_cli, tmp_path):
    """300 individual-pointer calls in a random order on each of three files (writes and reads, collective,
    non-blocking and split, of ints and of a 3-int type, one in eight failing, reads stopping short at the end of
    file, seeks and views between them, and views set by a library inside MPI_File_sync where the tracer records
    nothing), each after the program asked MPI_File_get_position and MPI_File_get_byte_offset: the aux and offset the
    tracer recorded, following the pointer rather than asking for it (asking for it under MPI_THREAD_MULTIPLE), are
    the position and byte offset the library gave, call for call. One file is plain, one opened MPI_MODE_APPEND over
    data (the pointer starts at its end), one MPI_MODE_SEQUENTIAL (no individual pointer: aux and offset -1); the
    files one after another (two seeds), then at once in three threads. No non-blocking or split reads: Open MPI
    4.1's MPI_Wait can spin for ever on one that reaches the end of file, untraced too."""
    exe = mpi.compile("mpiio_pointer.c", "-pthread")
    tool = mpi.compile("mpiio_view_tool.c", "-shared", "-fPIC")
    for seed, how in ((1, "serial"), (2, "serial"), (3, "threads")):
        trace_dir = tmp_path / f"trace{seed}"
        out = ioloom_cli("run", "-o", trace_dir, "--",
                         *mpi.command(1, [exe, tmp_path / f"file{seed}", "300", str(seed), how]),
                         env={**mpi.impl.base_env(), "LD_PRELOAD": str(tool)}, timeout=300)
        noted = {line.split()[1].rstrip(":"): [tuple(map(int, p.split(":"))) for p in line.split()[2:]]
                 for line in out.stdout.splitlines() if line.startswith("positions ")}
        assert len(noted) == 3 and int(out.stdout.split("view_tool: ")[1].split()[0]) > 0, out.stdout
        trace = open_trace(trace_dir)
        events = trace.events().to_pandas().astype({"op": str, "layer": str})
        files = trace.files.to_pandas()
        traced = {path: events[(events.layer == "mpiio") & events.op.isin(POINTER_CALLS)
                               & events.file_id.isin(files.file_id[files.path == path])].sort_values("call_id")
                  for path in noted}
        assert noted[str(tmp_path / f"file{seed}.1")][0][0] > 0, "precondition: the append file opens past 0"
        sequential = traced[str(tmp_path / f"file{seed}.2")]
        assert len(sequential) == 300 and (sequential.aux == -1).all() and (sequential.offset == -1).all(), (
            how, "the tracer followed a pointer on the sequential file", sequential[["aux", "offset"]].value_counts())
        for path, expected in noted.items():
            mine = traced[path]
            assert len(expected) == 300 and list(zip(mine.aux, mine.offset)) == expected, (how, path)
