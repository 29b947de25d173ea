"""ioloom coord serve: the line protocol over a real Unix socket, FCFS and interruption between two clients, a
killed client's phase ended, a silent one's expired, bad requests answered with ERR, the CLI's serve and status."""
import asyncio
import os
import random
import signal
import subprocess
import sys
import time

import pytest

import coord_support
from ioloom.coord import service
from ioloom.coord.client import Client, CoordError
from ioloom.coord.policy import POLICIES, Policy
from ioloom.coord.state import State

coordinator = coord_support.coordinator  # the fixture
# a warning fails the test: a coroutine, socket or loop the coordinator leaves open at shutdown is a bug
pytestmark = pytest.mark.filterwarnings("error")
ENV = {**os.environ, "PYTHONPATH": os.path.join(os.path.dirname(__file__), "..", "python")}


def test_fcfs_second_waits_until_first_is_done(coordinator):
    address = coordinator("fcfs")
    with Client(address, "a") as a, Client(address, "b") as b:
        assert a.inform(8_000_000, 8.0)
        assert not b.inform(2_000_000, 2.0)
        assert not b.wait(0.05)                     # bounded: answered TIMEOUT
        a.release(8_000_000)
        a.done()
        assert b.wait(5.0) and b.check()


def test_dynamic_interrupts_a_long_phase_for_a_short_one_then_resumes_it(coordinator):
    address = coordinator("dynamic")
    with Client(address, "big", 2048) as a, Client(address, "small", 2048) as b:
        assert a.inform(8_000_000, 8.0)
        a.release(1_000_000)                        # 1/8 written: 7 s left > 2 s of B, so B goes first
        assert b.inform(2_000_000, 2.0)
        assert not a.check() and not a.release(0)  # a release is answered as a check
        state = a.status()
        assert [p["name"] for p in state["order"]] == ["small", "big"]
        assert state["order"][1]["remaining"] == pytest.approx(7.0)
        assert state["counts"]["interrupts"] == 1
        b.done()
        assert a.check()


def test_dynamic_serialises_when_little_is_left(coordinator):
    address = coordinator("dynamic")
    with Client(address, "big", 2048) as a, Client(address, "small", 2048) as b:
        assert a.inform(8_000_000, 8.0)
        a.release(7_000_000)                        # 1 s left < 2 s of B: B waits
        assert not b.inform(2_000_000, 2.0)
        assert a.check()


@pytest.mark.parametrize("policy", ["dynamic", "interrupt"])
def test_dynamic_places_a_phase_again_when_its_first_calls_revise_its_time(coordinator, policy):
    """A small phase announced at 0.1 s interrupts an 8-core one with 1.6 s left; its first calls measure 0.5 s
    (8 x 0.5 > 1.6): dynamic puts it behind the big one, where a policy that ignores estimates leaves it."""
    address = coordinator(policy)
    with Client(address, "big", 8) as a, Client(address, "small", 1) as b:
        assert a.inform(160_000_000, 1.6)
        assert b.inform(10_000_000, 0.1) and not a.check()
        b.release(1_000_000)
        assert b.inform(10_000_000, 0.5) == (policy == "interrupt")
        assert a.check() == (policy == "dynamic")
        assert a.status()["counts"]["replaced"] == (policy == "dynamic")
        assert b.inform(10_000_000, 0.6) == (policy == "interrupt")   # revised by less than REVISED_BY: stays


def test_notify_client_is_told_of_an_interruption_without_asking(coordinator):
    """After NOTIFY a client gets NOTE WAIT when a newcomer interrupts it and NOTE GO when it may go on; a
    release's reply may be read after those notes (the C client sends releases without waiting)."""
    address = coordinator("interrupt")
    with Client(address, "big", 8) as a, Client(address, "small", 1) as b:
        assert a.inform(8_000_000, 8.0) and a.ask("NOTIFY") == "GO"
        assert b.inform(1000, 0.1)
        assert a.lines.readline() == b"NOTE WAIT\n"
        a.sock.sendall(b"RELEASE 1000\n")
        assert a.lines.readline() == b"WAIT\n"      # the reply to the release
        b.done()
        assert a.lines.readline() == b"NOTE GO\n"
        assert a.check()


def test_interfere_lets_everyone_write(coordinator):
    address = coordinator("interfere")
    with Client(address, "a") as a, Client(address, "b") as b:
        assert a.inform(1000, 1.0) and b.inform(1000, 1.0) and a.check()


def test_killed_client_phase_ends_and_the_waiting_one_goes(coordinator):
    address = coordinator("fcfs")
    holder = subprocess.Popen([sys.executable, "-c", f"""
from ioloom.coord.client import Client
c = Client({address!r}, "doomed")
assert c.inform(10**9, 100.0)
print("holding", flush=True)
import time; time.sleep(60)
"""], env=ENV, stdout=subprocess.PIPE, text=True)
    with holder:  # closes its pipe
        try:
            assert holder.stdout.readline() == "holding\n"
            with Client(address, "b") as b:
                assert not b.inform(1000, 1.0)
                holder.send_signal(signal.SIGKILL)
                assert b.wait(10.0)
        finally:
            holder.kill()
            holder.wait()


def test_silent_client_phase_expires_after_its_lease(coordinator):
    address = coordinator("fcfs", lease=0.3)
    with Client(address, "silent") as a, Client(address, "b") as b:
        assert a.inform(10**9, 100.0)
        assert not b.inform(1000, 1.0)
        start = time.monotonic()
        assert b.wait(10.0)                        # a waiting client is alive: only the silent one expires
        assert 0.2 < time.monotonic() - start < 5.0
        assert b.status()["counts"]["expired"] == 1
        assert a.check()                           # its phase is gone: it may write (and would announce again)


def test_bad_requests_get_one_err_line(coordinator):
    address = coordinator()
    with Client(address) as c:
        for request, message in [("INFORM x 1", "bytes must be a number"), ("INFORM 0 0", "bytes or its expected"),
                                 ("JUMP", "unknown request 'JUMP'"), ("WAIT", "takes 1 argument"),
                                 ("HELLO 2 x 1", "version 2 not spoken here; this coordinator speaks 1"),
                                 ("RELEASE -5", ">= 0")]:
            with pytest.raises(CoordError, match=message):
                c.ask(request)
        assert c.check()                           # the connection survives bad requests
    with pytest.raises(CoordError, match="no coordinator at"):
        Client(address + ".none")


def test_shutdown_closes_every_connection_and_leaves_no_task(tmp_path):
    """A coordinator stopped while a client is connected ends that client's connection itself: no handler is
    left pending for the closed event loop to destroy (writer.close() then raised 'Event loop is closed')."""
    address = str(tmp_path / "s.sock")

    async def main():
        ready = asyncio.Event()
        server = asyncio.create_task(service.serve(address, Policy("fcfs"), 10.0, 1e6, ready.set))
        await ready.wait()
        reader, writer = await asyncio.open_unix_connection(address)
        writer.write(b"HELLO 1 app 1\nINFORM 1000 1.0\n")
        assert [await reader.readline(), await reader.readline()] == [b"OK 1\n", b"GO\n"]
        server.cancel()
        await asyncio.gather(server, return_exceptions=True)
        assert asyncio.all_tasks() == {asyncio.current_task()}
        assert await reader.read() == b""  # closed by the coordinator
        writer.close()
        await writer.wait_closed()
    asyncio.run(main())


def test_a_bad_tcp_address_is_refused_in_one_line():
    run = subprocess.run([sys.executable, "-m", "ioloom", "coord", "status", "--address", "tcp:localhost"],
                         capture_output=True, text=True, env=ENV, timeout=60)
    assert run.returncode != 0 and run.stderr.strip().count("\n") == 0 and "tcp:HOST:PORT" in run.stderr, run.stderr


def test_no_hello_no_service(coordinator):
    import socket
    s = socket.socket(socket.AF_UNIX)
    s.connect(coordinator())
    s.sendall(b"CHECK\n")
    assert s.makefile().readline().startswith("ERR say HELLO 1")
    s.close()


@pytest.mark.parametrize("policy", POLICIES)
def test_one_phase_always_may_write(policy):
    """No deadlock: under any policy, after any sequence of announcements, progress and ends by clients of three
    applications, some announced phase may write (with a serialising policy exactly the head, or the phases at the
    head that dynamic let write together)."""
    rng = random.Random(policy)
    state = State(Policy(policy), lease=1e9, bandwidth=1.0)
    for step in range(2000):
        client = rng.randrange(8)
        action = rng.random()
        if action < 0.5:
            state.inform(client, f"app{client % 3}", rng.randint(1, 64), rng.randint(1, 100), rng.uniform(0, 10),
                         now=step)
        elif action < 0.8:
            state.release(client, rng.randint(0, 50), now=step)
        else:
            state.finish(client)
        members = [c for p in state.order for c in p.members]
        assert len(members) == len(set(members)) and all(p.members for p in state.order)
        assert len({p.name for p in state.order}) == len(state.order)
        writers = [p for p in state.order if all(state.may_write(c) for c in p.members)]
        want = len(state.order) if policy == "interfere" else min(state.writing, len(state.order))
        assert len(writers) == want and (not state.order or state.writing >= 1)
        assert all(state.may_write(c) for p in state.order[:state.writing] for c in p.members)


def test_processes_of_one_application_share_its_phase(coordinator):
    """Two ranks of one application (same name) join one phase: it is placed once, its bytes are summed, and it
    ends when both are done; another application waits for it all along (FCFS)."""
    address = coordinator("fcfs")
    with Client(address, "mpi-job", 4) as r0, Client(address, "mpi-job", 4) as r1, Client(address, "other") as o:
        assert r0.inform(1000, 1.0) and r1.inform(3000, 2.0)
        assert not o.inform(10, 0.1)
        r0.release(1000)
        job = o.status()["order"][0]
        assert (job["name"], job["clients"], job["bytes"], job["written"], job["t_alone"]) == \
            ("mpi-job", [1, 2], 4000, 1000, 2.0)
        r0.done()
        assert not o.check() and r1.check()        # r1 still writes the job's phase
        r1.done()
        assert o.check()


def test_cli_serve_status_and_a_second_serve_refused(tmp_path):
    address = str(tmp_path / "cli.sock")
    cmd = [sys.executable, "-m", "ioloom", "coord"]
    server = subprocess.Popen([*cmd, "serve", "--address", address, "--policy", "fcfs"], env=ENV,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert "policy fcfs (core-seconds), listening on" in server.stdout.readline()
        assert os.sched_getscheduler(server.pid) == os.SCHED_BATCH  # it does not preempt the writers it serves
        with Client(address, "app", 4) as c:
            c.inform(4096, 0.5)
            out = subprocess.run([*cmd, "status", "--address", address], env=ENV, capture_output=True, text=True)
            assert out.returncode == 0 and "writes app (clients [1], 4 cores): 0/4096 bytes" in out.stdout
        again = subprocess.run([*cmd, "serve", "--address", address], env=ENV, capture_output=True, text=True)
        assert again.returncode == 2 and again.stderr.count("\n") == 1
        assert "a coordinator already listens on" in again.stderr
        bad = subprocess.run([*cmd, "serve", "--address", address, "--policy", "lifo"], env=ENV,
                             capture_output=True, text=True)
        assert bad.returncode == 2 and "unknown policy 'lifo'" in bad.stderr
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(10) == 0
        server.stdout.close()
    assert not os.path.exists(address)
    gone = subprocess.run([*cmd, "status", "--address", address], env=ENV, capture_output=True, text=True)
    assert gone.returncode == 2 and "no coordinator at" in gone.stderr
