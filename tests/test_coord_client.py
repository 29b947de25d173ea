"""The C client (native/coord/): its API called through ctypes against a real coordinator, and
ioloom-coord-writer phases on the emulated storage: FCFS and interruption between two writers, a writer that
loses the coordinator or waits past its bound goes on writing, counted."""
import ctypes
import json
import signal
import socket
import subprocess
import sys
import time

import pytest

import coord_support
from ioloom import paths
from ioloom.coord.client import Client

coordinator = coord_support.coordinator  # the fixture
MB = 1_000_000


class Counters(ctypes.Structure):
    _fields_ = [("phases", ctypes.c_uint64), ("waits", ctypes.c_uint64), ("waited_seconds", ctypes.c_double),
                ("timeouts", ctypes.c_uint64), ("lost", ctypes.c_uint64)]


@pytest.fixture(scope="module")
def lib():
    so = ctypes.CDLL(str(paths.native_lib("ioloom-coord")))
    so.ioloom_coord_open.restype = ctypes.c_void_p
    so.ioloom_coord_open.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
    for name in ("close", "complete", "inform", "wait"):
        getattr(so, f"ioloom_coord_{name}").argtypes = [ctypes.c_void_p]
    so.ioloom_coord_prepare.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_double]
    so.ioloom_coord_revise.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_double]
    so.ioloom_coord_release.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
    so.ioloom_coord_set_bound.argtypes = [ctypes.c_void_p, ctypes.c_double]
    so.ioloom_coord_check.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    so.ioloom_coord_counters.argtypes = [ctypes.c_void_p, ctypes.POINTER(Counters)]
    return so


def counters(lib, handle):
    out = Counters()
    lib.ioloom_coord_counters(handle, ctypes.byref(out))
    return out


def check(lib, handle):
    ok = ctypes.c_int(-1)
    assert lib.ioloom_coord_check(handle, ctypes.byref(ok)) == 0
    return ok.value


def test_api_serialises_and_ends_the_phase_at_the_last_complete(lib, coordinator):
    address = coordinator("fcfs").encode()
    a, b = lib.ioloom_coord_open(address, b"app a", 8), lib.ioloom_coord_open(address, b"b", 1)
    try:
        lib.ioloom_coord_prepare(a, 4 * MB, 4.0)
        lib.ioloom_coord_prepare(a, MB, 0.0)        # an inner level: the outer one's estimates stand
        assert lib.ioloom_coord_inform(a) == 1
        lib.ioloom_coord_release(a, MB)
        with Client(address.decode()) as watcher:
            phase = watcher.status()["order"][0]
        assert (phase["name"], phase["cores"], phase["bytes"], phase["written"]) == ("app_a", 8, 4 * MB, MB)
        assert phase["t_alone"] == pytest.approx(4.0)
        lib.ioloom_coord_prepare(b, MB, 1.0)
        assert lib.ioloom_coord_inform(b) == 0 and check(lib, b) == 0
        lib.ioloom_coord_set_bound(b, 0.05)
        assert lib.ioloom_coord_wait(b) == 0      # bound passed: goes on, counted
        lib.ioloom_coord_complete(a)
        assert check(lib, b) == 0                  # one level of A's is still open
        lib.ioloom_coord_complete(a)
        assert check(lib, b) == 1 and lib.ioloom_coord_wait(b) == 1
        k = counters(lib, b)
        assert (k.phases, k.waits, k.timeouts, k.lost) == (1, 3, 1, 0) and k.waited_seconds >= 0.04
    finally:
        lib.ioloom_coord_close(a)
        lib.ioloom_coord_close(b)


def test_api_revise_replaces_the_innermost_estimates(lib, coordinator):
    address = coordinator("fcfs").encode()
    a = lib.ioloom_coord_open(address, b"a", 1)
    try:
        lib.ioloom_coord_prepare(a, 4 * MB, 4.0)
        assert lib.ioloom_coord_inform(a) == 1
        lib.ioloom_coord_revise(a, 2 * MB, 1.5)
        assert lib.ioloom_coord_inform(a) == 1
        with Client(address.decode()) as watcher:
            phase = watcher.status()["order"][0]
        assert (phase["bytes"], phase["t_alone"]) == (2 * MB, pytest.approx(1.5))
    finally:
        lib.ioloom_coord_close(a)


def written(address):
    with Client(address.decode()) as watcher:
        return watcher.status()["order"][0]["written"]


def test_api_reports_released_bytes_by_eighths_of_the_phase_or_with_a_request(lib, coordinator):
    """Each report wakes the coordinator: released bytes are sent once they reach 1/8 of the phase's, with the
    next request, or a second after the last one; none is lost."""
    address = coordinator("fcfs").encode()
    a = lib.ioloom_coord_open(address, b"a", 1)
    try:
        lib.ioloom_coord_prepare(a, 16 * MB, 16.0)
        assert lib.ioloom_coord_inform(a) == 1
        lib.ioloom_coord_release(a, MB)
        time.sleep(0.2)                       # sent, it would have been read by now
        assert written(address) == 0
        lib.ioloom_coord_release(a, MB)        # 2 MB: 1/8 of the phase
        assert check(lib, a) == 1 and written(address) == 2 * MB   # CHECK's reply: everything before it was read
        lib.ioloom_coord_release(a, MB // 2)
        assert check(lib, a) == 1 and written(address) == 2 * MB + MB // 2   # sent with the CHECK
        time.sleep(1.05)
        lib.ioloom_coord_release(a, 1)         # a second after the last request
        time.sleep(0.2)
        assert written(address) == 2 * MB + MB // 2 + 1
    finally:
        lib.ioloom_coord_close(a)


def test_api_new_estimates_are_sent_without_waiting_and_the_new_place_learnt_next(lib, coordinator):
    """Under dynamic a short phase interrupts a long one; revised 50 times longer, it goes behind: the inform
    sending the revision answers at once with the authorisation it had, a later one with the new place."""
    address = coordinator("dynamic").encode()
    a, b = lib.ioloom_coord_open(address, b"a", 1), lib.ioloom_coord_open(address, b"b", 1)
    try:
        lib.ioloom_coord_prepare(a, 100 * MB, 10.0)
        lib.ioloom_coord_prepare(b, MB, 1.0)
        assert lib.ioloom_coord_inform(a) == 1 and lib.ioloom_coord_inform(b) == 1   # b interrupts a
        lib.ioloom_coord_revise(b, 50 * MB, 50.0)
        assert lib.ioloom_coord_inform(b) == 1
        deadline = time.monotonic() + 5
        while lib.ioloom_coord_inform(b) == 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert lib.ioloom_coord_inform(b) == 0 and lib.ioloom_coord_inform(a) == 1
    finally:
        lib.ioloom_coord_close(a)
        lib.ioloom_coord_close(b)


def free_tcp_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_api_over_tcp_serialises(lib, coordinator):
    """A cluster's coordinator on tcp:HOST:PORT: the C client and the Python one reach it, FCFS holds."""
    address = coordinator("fcfs", address=f"tcp:127.0.0.1:{free_tcp_port()}").encode()
    a, b = lib.ioloom_coord_open(address, b"a", 1), lib.ioloom_coord_open(address, b"b", 1)
    try:
        lib.ioloom_coord_prepare(a, MB, 1.0)
        lib.ioloom_coord_prepare(b, MB, 1.0)
        assert lib.ioloom_coord_inform(a) == 1 and lib.ioloom_coord_inform(b) == 0
        with Client(address.decode()) as watcher:
            assert [p["name"] for p in watcher.status()["order"]] == ["a", "b"]
        lib.ioloom_coord_complete(a)
        assert lib.ioloom_coord_wait(b) == 1 and counters(lib, b).lost == 0
    finally:
        lib.ioloom_coord_close(a)
        lib.ioloom_coord_close(b)


def test_api_without_a_coordinator_authorises_and_counts_it_lost(lib, tmp_path):
    h = lib.ioloom_coord_open(str(tmp_path / "none.sock").encode(), b"x", 1)
    lib.ioloom_coord_prepare(h, MB, 0.0)
    assert lib.ioloom_coord_inform(h) == 1 and check(lib, h) == 1
    assert lib.ioloom_coord_wait(h) == 0            # not authorised by anyone: it goes on anyway
    assert counters(lib, h).lost == 1
    lib.ioloom_coord_close(h)
    assert lib.ioloom_coord_inform(None) == 1      # a NULL handle authorises everything
    h = lib.ioloom_coord_open(f"tcp:127.0.0.1:{free_tcp_port()}".encode(), b"x", 1)  # nobody listens there
    assert lib.ioloom_coord_inform(h) == 1 and counters(lib, h).lost == 1
    lib.ioloom_coord_close(h)


def writer(tmp_path, name, size, start_at, coord=None, weight=1, bound=None):
    argv = [str(paths.native_bin("ioloom-coord-writer")), "--name", name, "--bytes", str(size), "--chunk",
            str(MB), "--weight", str(weight), "--storage", str(tmp_path / "storage"), "--bandwidth", str(100 * MB),
            "--start-at", str(start_at), "--out", str(tmp_path / f"{name}.out")]
    argv += ["--coord", coord] if coord else []
    argv += ["--bound", str(bound)] if bound else []
    return subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)


def phases(*procs):
    out = []
    for p in procs:
        stdout, _ = p.communicate(timeout=60)
        assert p.returncode == 0, stdout
        out.append(json.loads(stdout))
    return out


@pytest.mark.parametrize("policy", ["fcfs", "interrupt"])
def test_writers_follow_the_policy(tmp_path, coordinator, policy):
    """A big writer (80 MB, 0.8 s alone, weight 4) and a small one (5 MB, 0.05 s) arriving 0.1 s later: under
    FCFS the small one waits for the big one's end; interrupting, the small one finishes at once."""
    address = coordinator(policy)
    t0 = time.monotonic() + 0.5                     # both programs started (and sleeping) by then
    big, small = phases(writer(tmp_path, "big", 80 * MB, t0, address, weight=4),
                        writer(tmp_path, "small", 5 * MB, t0 + 0.1, address))
    assert (tmp_path / "big.out").stat().st_size == 80 * MB and (tmp_path / "small.out").stat().st_size == 5 * MB
    if policy == "fcfs":
        assert small["waits"] >= 1 and big["waits"] == 0
        assert small["end"] >= big["end"] + 0.045   # written after the big one's last step
    else:
        assert big["waits"] >= 1 and small["waits"] == 0
        assert small["end"] <= big["end"] - 0.4     # done while the big one still had steps left
    assert big["lost"] == small["lost"] == 0


def test_writer_goes_on_when_the_coordinator_dies(tmp_path):
    address = str(tmp_path / "dying.sock")
    env = {"PYTHONPATH": str(paths.REPO_ROOT / "python")}
    server = subprocess.Popen([sys.executable, "-m", "ioloom", "coord", "serve", "--address", address, "--policy",
                               "fcfs"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        server.stdout.readline()
        with Client(address, "holder") as holder:
            holder.inform(10**9, 100.0)            # holds the storage for good
            w = writer(tmp_path, "w", 3 * MB, time.monotonic(), address)
            time.sleep(0.5)                        # w waits for the holder
            server.send_signal(signal.SIGKILL)
            (out,) = phases(w)
    finally:
        server.kill()
        server.wait()
    assert out["lost"] == 1 and out["waits"] >= 1 and (tmp_path / "w.out").stat().st_size == 3 * MB


def test_writer_waits_at_most_its_bound(tmp_path, coordinator):
    address = coordinator("fcfs")
    with Client(address, "holder") as holder:
        holder.inform(10**9, 100.0)
        (out,) = phases(writer(tmp_path, "w", 2 * MB, time.monotonic(), address, bound=0.1))
    assert out["timeouts"] == 2 and out["lost"] == 0 and 0.2 <= out["waited_seconds"] < 2.0


def test_writer_refuses_bad_options_in_one_line():
    run = subprocess.run([str(paths.native_bin("ioloom-coord-writer")), "--bytes", "-3"], capture_output=True,
                         text=True)
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "--bytes must be > 0" in run.stderr
