"""The replay's order across processes (python/ioloom/replay/order.py, docs/replay.md "Order across processes"),
on hand-made calls with the timings that made the demo's replay flaky: an unlock that returns after the lock it
released was granted, and a long write around a short read. Each case also runs every schedule the waits allow,
with record locks and file sizes modelled: none deadlocks and every read moves its recorded byte count. MPI-IO
collectives made again may wait for each other inside the MPI library: the schedules model that too."""
from __future__ import annotations

import fcntl

from ioloom.replay.order import holds, waits
from ioloom.replay.script import Call, Process

FILE = 7
LOCK = fcntl.F_SETLKW | fcntl.F_WRLCK << 16
UNLOCK = fcntl.F_SETLK | fcntl.F_UNLCK << 16


def call(op, t_start, t_end, offset=0, req=0, ret=0, aux=-1, coll_seq=-1):
    return Call(op, t_start, t_end, FILE, 3, offset, req, ret, aux, "mpiio" if op.startswith("MPI_") else "posix",
                coll_seq)


def schedules(processes, rows):
    """Every interleaving the waits and the record locks allow: (deadlocked, reads of another byte count)."""
    outcomes = []
    _walk(processes, rows, [0] * len(processes), 0, {}, 0, outcomes)
    return outcomes


def _walk(processes, rows, done, size, held, wrong, outcomes):
    ready = [p for p, process in enumerate(processes) if done[p] < len(process.calls) and _can_run(
        processes, rows, done, held, p)]
    if not ready:
        outcomes.append((any(d < len(p.calls) for d, p in zip(done, processes)), wrong))
        return
    for p in ready:
        c = processes[p].calls[done[p]]
        new_held = {q: h for q, h in held.items() if q != p or c.aux != UNLOCK}
        for hold in holds(Process("x", [c]), p):  # a process holds one lock at a time in these cases
            new_held[p] = hold
        new_size = max(size, c.offset + c.ret) if c.op == "pwrite" else size
        bad = c.op == "pread" and min(c.req, max(size - c.offset, 0)) != c.ret
        _walk(processes, rows, done[:p] + [done[p] + 1] + done[p + 1:], new_size, new_held, wrong + bad, outcomes)


def _can_run(processes, rows, done, held, p):
    if any(done[q] < k for q, k in rows[p][done[p]].items()) or not _parts_started(processes, rows, done, p):
        return False
    wanted = holds(Process("x", [processes[p].calls[done[p]]]), p)
    return not any(q != p and h.first < w.last and w.first < h.last for w in wanted for q, h in held.items())


def _parts_started(processes, rows, done, p):
    """An MPI-IO collective's part ends only once every initiating part has started, and a completion only once
    every completion has too: each such part is done, or is its process's next call with its waits met (the
    collective synchronizes, as the MPI library may make it; a non-blocking one may progress only in the
    completions)."""
    c = processes[p].calls[done[p]]
    if c.layer != "mpiio" or c.coll_seq < 0:
        return True
    return all(i < done[q] or (i == done[q] and all(done[r] >= k for r, k in rows[q][i].items()))
               for q, process in enumerate(processes) if q != p
               for i, d in enumerate(process.calls) if (d.layer, d.coll_seq) == ("mpiio", c.coll_seq)
               and (d.op != "MPI_Waitall" or c.op == "MPI_Waitall"))


def test_a_lock_waits_for_the_release_that_returned_after_it_was_granted():
    # B holds [0, 100) and unlocks at 30, but returns from the unlock only at 90; A, waiting since 5, is granted
    # at 40. Measured from its end the unlock would wait for A's lock, which waits in the kernel for the unlock.
    b = Process("b", [call("fcntl", 0, 10, 0, 100, 0, LOCK), call("pwrite", 10, 20, 0, 100, 100),
                      call("fcntl", 30, 90, 0, 100, 0, UNLOCK)])
    a = Process("a", [call("fcntl", 5, 40, 0, 100, 0, LOCK), call("pread", 41, 45, 0, 100, 100),
                      call("fcntl", 46, 50, 0, 100, 0, UNLOCK)])
    rows = waits([a, b], {FILE}, {})
    assert rows[0][0] == {1: 3}  # A's lock: after B's unlock (B's third call)
    assert rows[1][2] == {}  # B's unlock waits for nothing of A's
    outcomes = schedules([a, b], rows)
    assert outcomes and all(not dead and wrong == 0 for dead, wrong in outcomes)


def test_a_write_around_a_short_read_comes_after_it():
    # B's write of [200, 300) spans A's read of [0, 150), which found the file ending at 100 (A's own write):
    # the write had not yet extended the file, so it waits for the read; the next read found it, so it waits for
    # the write.
    a = Process("a", [call("pwrite", 0, 5, 0, 100, 100), call("pread", 50, 60, 0, 150, 100),
                      call("pread", 150, 160, 0, 250, 250)])
    b = Process("b", [call("pwrite", 40, 100, 200, 100, 100), call("pread", 200, 210, 0, 10, 10)])
    rows = waits([a, b], {FILE}, {})
    assert rows[1][0] == {0: 2}  # B's write after A's short read (A's second call)
    assert rows[0][2] == {1: 1}  # A's last read after B's write, whose end (100) came before its start (150)
    outcomes = schedules([a, b], rows)
    assert outcomes and all(not dead and wrong == 0 for dead, wrong in outcomes)


def test_a_whole_read_waits_for_the_write_it_saw():
    # A's read of [0, 300) started before B's write of [100, 300) ended, yet read it all: the write came first.
    a = Process("a", [call("pwrite", 0, 5, 0, 100, 100), call("pread", 20, 30, 0, 300, 300)])
    b = Process("b", [call("pwrite", 10, 40, 100, 200, 200)])
    rows = waits([a, b], {FILE}, {})
    assert rows[0][1] == {1: 1}
    assert all(wrong == 0 for _, wrong in schedules([a, b], rows))
    assert waits([a, b], set(), {})[0][1] == {}  # only on files several processes use


def test_a_collective_that_did_not_synchronize_waits_for_nothing_after_it():
    # B's part of the sync (coll_seq 1) ended at 30, before A's part started at 50: in the original it did not wait
    # for A. Measured so, A's part would wait for B's sync and read (both ended before 50), while B's sync, made
    # again, may wait inside MPI for A's part to start. Its parts are taken to end no earlier than the last started.
    a = Process("a", [call("MPI_File_write_at", 0, 10, 0, 100, 100), call("MPI_File_sync", 50, 60, coll_seq=1)])
    b = Process("b", [call("MPI_File_sync", 20, 30, coll_seq=1), call("MPI_File_read_at", 35, 40, 0, 100, 100)])
    rows = waits([a, b], {FILE}, {})
    assert rows[0][1] == {}  # A's sync waits for none of B's calls
    assert rows[1] == [{0: 1}, {}]  # B's calls still follow A's write, which ended before they started
    outcomes = schedules([a, b], rows)
    assert outcomes and all(not dead for dead, _ in outcomes)
    measured_from_original = [[{}, {1: 2}], [{}, {0: 1}]]
    assert all(dead for dead, _ in schedules([a, b], measured_from_original))  # the walk sees the deadlock


def test_a_collective_completion_waits_for_no_completion_of_its_own():
    # A non-blocking collective: B's Waitall ended at 20, before A's began at 50 (A's initiation had made the
    # progress B needed). Made again, B's Waitall may need A to be in its own Waitall: A's must not wait for B's.
    a = Process("a", [call("MPI_File_iwrite_all", 0, 5, 0, 100, -1, coll_seq=2),
                      call("MPI_Waitall", 50, 60, 0, -1, 100, coll_seq=2)])
    b = Process("b", [call("MPI_File_iwrite_all", 1, 6, 100, 100, -1, coll_seq=2),
                      call("MPI_Waitall", 10, 20, 100, -1, 100, coll_seq=2)])
    rows = waits([a, b], {FILE}, {})
    assert rows[0][1] == {1: 1}  # after B's initiation, not its Waitall
    assert all(not dead for dead, _ in schedules([a, b], rows))
    assert all(dead for dead, _ in schedules([a, b], [[{}, {1: 2}], [{}, {}]]))  # measured from the original
