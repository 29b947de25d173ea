"""`ioloom replay run --mpiio` (docs/replay.md, "MPI-IO replayed as MPI-IO"): an MPI program's MPI-IO calls made
again as MPI-IO calls by `ioloom-replay-<mpi>`, per MPI. Traced again, the replay has the original's MPI-IO calls
per operation, bytes per file and each rank's calls in order (file, byte offset, bytes), exactly; the POSIX requests
inside them are the MPI library's, reported beside. tests/programs/mpiio_matrix.c holds every access variant
(explicit offset, individual, shared and ordered pointers; independent and collective; blocking, non-blocking and
split; views with holes; set_size, preallocate, get_size, sync); the demo writes through a view with holes with
individual-pointer calls, whose replay places the pointer past the tracer; and as a bench configuration."""
from __future__ import annotations

import json

from ioloom import open_trace, paths
from ioloom.replay.compare import MATCHES, differences, footprint
from ioloom.replay.script import MPI_CLOSE, MPI_OPEN, Call, Process, open_groups

# mpiio_matrix's variants not replayed: the MPI-4 large-count `_c` calls (left out, docs/replay.md), and the
# non-blocking collectives Open MPI's romio321 lacks are not run at all here (its default ompio has them).
SKIP = "large_count"
MATRIX_CALLS = {"MPI_File_open", "MPI_File_close", "MPI_File_sync", "MPI_File_set_size", "MPI_File_preallocate",
                "MPI_File_get_size", "MPI_File_seek", "MPI_File_seek_shared", "MPI_File_set_view",
                *(f"MPI_File_{way}{form}" for way in ("read", "write")
                  for form in ("_at", "_at_all", "", "_all", "_shared", "_ordered")),
                *(f"MPI_File_i{way}{form}" for way in ("read", "write")
                  for form in ("_at", "_at_all", "", "_all", "_shared")),
                *(f"MPI_File_{way}{form}_{end}" for way in ("read", "write")
                  for form in ("_at_all", "_all", "_ordered") for end in ("begin", "end")),
                "MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome", "MPI_Test", "MPI_Testall", "MPI_Testany",
                "MPI_Testsome"}


def _replay(ioloom_cli, tmp_path, mpi, nranks, argv, check=True):
    """Traces argv under mpi in tmp_path/run, replays it with --mpiio traced: (the report, the original's and the
    replay's footprints at the MPI-IO level). check: the replay is to match (exit 0)."""
    run = tmp_path / "run"
    (run / "data").mkdir(parents=True)
    trace = tmp_path / "trace"
    ioloom_cli("run", "-o", trace, "--", *mpi.command(nranks, argv(run)), env=mpi.env(), cwd=run, timeout=180)
    out = ioloom_cli("replay", "run", trace, "replay", "--trace", "replay-trace", "--mpiio", cwd=tmp_path,
                     timeout=180, check=check)
    return out.stdout, footprint(open_trace(trace), "mpiio"), footprint(open_trace(tmp_path / "replay-trace"), "mpiio")


def test_every_mpiio_variant_replayed_as_mpiio(mpi, ioloom_cli, tmp_path):
    exe = mpi.compile("mpiio_matrix.c")
    report, original, again = _replay(ioloom_cli, tmp_path, mpi, 3, lambda run: [exe, run / "data", SKIP])
    assert f"MPI-IO as MPI-IO: 306 calls, 3 ranks under {mpi.name}'s mpiexec" in report
    assert report.count(", 0 with another outcome than recorded, 0 order waits given up") == 3, report
    assert MATCHES in report
    assert differences(original, again) == []
    made = {call.split(" ", 1)[1] for call in again.calls if call.startswith("mpiio ")}
    assert made == MATRIX_CALLS  # each call by its own name, none made through another
    assert again.calls["mpiio MPI_File_write_at"] == original.calls["mpiio MPI_File_write_at"] == 3
    assert again.bytes["at.dat"] == original.bytes["at.dat"] == {"read": 3 * 4000, "written": 3 * 4000}
    # the POSIX requests inside are the library's: reported apart, not held to the original's
    assert "the MPI library's POSIX requests inside the MPI-IO calls (reported, not compared)" in report
    assert not any(call.startswith("posix ") for call in again.calls)
    assert again.library is not None and again.library.calls["posix pwrite"] + again.library.calls[
        "posix pwritev"] + again.library.calls["posix aio_write"] > 0
    assert not original.not_reproduced  # every MPI-IO call is made again


def test_demo_replayed_as_mpiio_through_its_view(mpi, ioloom_cli, tmp_path):
    """The demo's first phase writes through a view with holes with MPI_File_write: made again through a
    contiguous view, each call's pointer is placed at its recorded first byte (past the tracer), so the replay's
    trace records the original's offsets; MPICH's data sieving (locks, read-modify-write) has nothing to sieve."""
    exe = mpi.compile(paths.DEMO_SOURCE)
    report, original, again = _replay(ioloom_cli, tmp_path, mpi, 2,
                                      lambda run: [exe, run / "data" / "strided.dat", "16", "4096"])
    assert MATCHES in report and differences(original, again) == []
    assert again.calls["mpiio MPI_File_write"] == 2 * 2 and again.calls["mpiio MPI_File_read_at_all"] == 2 * 16
    assert "mpiio MPI_File_seek" not in again.calls  # the pointer placed by the replayer is not a call recorded
    assert again.bytes["strided.dat"] == {"read": 2 * 16 * 4096, "written": 2 * 2 * 16 * 4096}
    if mpi.name == "mpich":
        assert original.library.calls["posix fcntl"] > 0 and again.library.calls["posix fcntl"] == 0
        assert "    posix fcntl: " in report  # reported as the library's difference
        # as a bench configuration, checked at the MPI-IO level without the trace (one MPI: the path is the same)
        ioloom_cli("replay", "config", "--mpiio", tmp_path / "trace", tmp_path / "demo.toml")
        out = ioloom_cli("bench", "replay", tmp_path / "demo.toml", "--rounds", "1", "--check", "--dir", tmp_path)
        assert f"check: {MATCHES}" in out.stdout



def test_opens_that_cannot_be_one_collective_are_made_alone(mpi, ioloom_cli, tmp_path):
    """tests/programs/mpiio_self_groups.c: opens of one path with one open number that were not one collective open
    (on MPI_COMM_SELF with different collectives, or on two overlapping pairs of ranks one after the other, or on
    MPI_COMM_SELF with collectives on two files in crossed orders). Made as one open of all the ranks, the replay
    hung in MPI; each is made alone (MPI_COMM_SELF), the calls per rank as recorded."""
    exe = mpi.compile("mpiio_self_groups.c")
    report, original, again = _replay(ioloom_cli, tmp_path, mpi, 3, lambda run: [exe, run / "data"])
    manifest = json.loads((tmp_path / "replay" / ".ioloom-replay" / "manifest.json").read_text())
    # self.dat's and pair.dat's first opens (3 ranks each) always; of c.dat's and d.dat's the crossed order splits
    # one at least (both, unless one's opens on SELF did not overlap in time and were made alone for that)
    alone = manifest["opens_alone"]
    assert 3 * 3 <= alone <= 3 * 4, alone
    assert f"MPI-IO opens made alone (MPI_COMM_SELF), their communicator in doubt: {alone}" in report
    assert report.count(", 0 with another outcome than recorded") == 3, report
    assert MATCHES in report and differences(original, again) == []
    assert again.calls["mpiio MPI_File_write_at_all"] == 1 + 2 + 3 + 2 + 2 + 3 * 2


def _opens(*collectives: str, t: int = 0) -> Process:
    """A process that opens c.dat (handle 0) and d.dat (handle 1) at t..t+10 and then writes collectively to the
    files named in collectives, in that order, and closes both."""
    calls = [Call(MPI_OPEN, t, t + 10, f, f, -1, 0, 0, 1, "mpiio", 0) for f in (0, 1)]
    seq = [1, 1]
    for i, name in enumerate(collectives):
        f = "cd".index(name)
        calls.append(Call("MPI_File_write_at_all", 20 + i, 21 + i, f, f, 0, 1, 1, 0, "mpiio", seq[f]))
        seq[f] += 1
    calls += [Call(MPI_CLOSE, 50, 51, f, f, -1, 0, 0, 0, "mpiio", seq[f]) for f in (0, 1)]
    return Process("p", calls)


def test_groups_whose_collectives_cross_are_made_alone():
    """Opens that can each be one collective open but whose collectives two processes made in crossed orders
    (c then d, d then c) would deadlock the replay: each open is made alone; in one order they stay together; opens
    that did not overlap in time are made alone."""
    files = {0: "/x/c.dat", 1: "/x/d.dat"}
    groups, _, alone = open_groups([_opens("c", "d"), _opens("c", "d")], files)
    assert (groups, alone) == ([(0, 1)], 0)
    groups, _, alone = open_groups([_opens("c", "d"), _opens("d", "c")], files)
    assert (groups, alone) == ([(0,), (1,)], 4)
    groups, _, alone = open_groups([_opens("c", "d"), _opens("c", "d", t=11)], files)
    assert (groups, alone) == ([(0,), (1,)], 4)


def test_a_view_too_wide_is_made_narrower_not_skipped(mpi, ioloom_cli, tmp_path):
    """tests/programs/mpiio_huge_view.c: rank 0 sets a view whose filetype extent is 2^31 bytes, the others plain
    bytes, and all write collectively. The replay skipped rank 0's set_view (over 2^30) and the others waited for
    it in MPI; it is made with the extent clamped (MAX_VIEW_EXTENT), counted as approximated, and the comparison
    names it as the one difference."""
    exe = mpi.compile("mpiio_huge_view.c")
    report, original, again = _replay(ioloom_cli, tmp_path, mpi, 3, lambda run: [exe, run / "data" / "huge.dat"],
                                      check=False)
    assert report.count(", 0 with another outcome than recorded") == 3, report
    assert report.count(", 1 MPI-IO calls approximated") == 1 and report.count(", 0 MPI-IO calls approximated") == 2
    assert again.calls["mpiio MPI_File_set_view"] == original.calls["mpiio MPI_File_set_view"] == 3
    assert ("original MPI_File_set_view huge.dat offset 0 requested 2,147,483,648 returned 0, replay "
            "MPI_File_set_view huge.dat offset 0 requested 1 returned 0") in report
    assert len(differences(original, again)) == 1
