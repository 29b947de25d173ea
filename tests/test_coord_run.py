"""ioloom run --coord: an unmodified program (coreutils dd) announces its writing phase to the coordinator and
waits its turn between two writes, goes on when the coordinator is absent or its wait passes the bound, and is
traced as usual."""
import os
import signal
import subprocess
import sys
import time

import coord_support
from ioloom import paths
from ioloom.coord.client import Client

coordinator = coord_support.coordinator  # the fixture
MB = 1 << 20


def ioloom_run(tmp_path, address, extra_env=None):
    env = {**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "python"), **(extra_env or {})}
    argv = [sys.executable, "-m", "ioloom", "run", "--coord", address, "-o", str(tmp_path / "trace"), "--",
            "dd", "if=/dev/zero", f"of={tmp_path / 'out'}", "bs=1M", "count=8", "status=none"]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finished(proc):
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return err


def test_dd_waits_for_the_phase_ahead_then_writes(tmp_path, coordinator):
    address = coordinator("fcfs")
    with Client(address, "holder") as holder:
        assert holder.inform(10**9, 100.0)
        run = ioloom_run(tmp_path, address, {"IOLOOM_COORD_IDLE": "0.1"})   # its wait keeps the phase
        deadline = time.monotonic() + 60
        while len(order := holder.status()["order"]) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [p["name"] for p in order][0] == "holder" and order[1]["name"].startswith("dd-")
        assert not order[1]["may_write"] and order[1]["written"] == 0   # dd waits before its first write
        time.sleep(0.3)
        holder.done()
        err = finished(run)
        assert holder.status()["order"] == []                           # dd's phase ended with it
    assert (tmp_path / "out").stat().st_size == 8 * MB
    assert "1 phases, told to wait 1 times" in err and "0 without the coordinator" in err, err
    assert "events:" in err                                              # traced as well


def test_dd_writes_without_a_coordinator(tmp_path):
    err = finished(ioloom_run(tmp_path, str(tmp_path / "nobody.sock")))
    assert (tmp_path / "out").stat().st_size == 8 * MB
    assert "1 without the coordinator (wrote anyway)" in err, err


def test_dd_waits_at_most_its_bound(tmp_path, coordinator):
    address = coordinator("fcfs")
    with Client(address, "holder") as holder:
        holder.inform(10**9, 100.0)
        err = finished(ioloom_run(tmp_path, address, {"IOLOOM_COORD_WAIT": "0.05"}))
    assert (tmp_path / "out").stat().st_size == 8 * MB
    assert "8 waits past their bound" in err, err


def test_dd_goes_on_when_the_coordinator_dies_while_it_waits(tmp_path):
    address = str(tmp_path / "dying.sock")
    server = subprocess.Popen([sys.executable, "-m", "ioloom", "coord", "serve", "--address", address, "--policy",
                               "fcfs"], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "python")})
    try:
        server.stdout.readline()                                     # listening
        with Client(address, "holder") as holder:
            holder.inform(10**9, 100.0)                              # holds the storage for good
            run = ioloom_run(tmp_path, address)
            deadline = time.monotonic() + 60
            while len(holder.status()["order"]) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)                                     # dd announced and waits
            server.send_signal(signal.SIGKILL)
            err = finished(run)
    finally:
        server.kill()
        server.wait()
    assert (tmp_path / "out").stat().st_size == 8 * MB
    assert "told to wait 1 times" in err and "1 without the coordinator (wrote anyway)" in err, err


def test_a_killed_parents_phase_ends_although_its_forked_child_lives(tmp_path, coordinator):
    """The child drops its copy of the parent's connection at the fork: the killed parent's phase ends at once,
    not when the child exits (30 s later) nor when the lease (60 s) runs out."""
    address = coordinator("fcfs", lease=60.0)
    script = tmp_path / "forks.py"
    script.write_text(f"""import os, signal, time
with open({str(tmp_path / 'out')!r}, "wb") as f:
    f.write(b"x" * 4096)
    f.flush()
    if os.fork() == 0:
        os.setsid()  # out of the command's process group, which ioloom run may end with it
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # nor keeping ioloom run's pipes open
            os.dup2(null, fd)
        open({str(tmp_path / 'child')!r}, "w").write(str(os.getpid()))
        time.sleep(30)
        os._exit(0)
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGKILL)
""")
    env = {**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "python")}
    subprocess.run([sys.executable, "-m", "ioloom", "run", "--coord", address, "-o", str(tmp_path / "trace"), "--",
                    sys.executable, str(script)], env=env, capture_output=True, timeout=120)
    child = int((tmp_path / "child").read_text())
    try:
        with Client(address, "watcher") as watcher:
            deadline = time.monotonic() + 2.0
            while watcher.status()["order"] and time.monotonic() < deadline:
                time.sleep(0.05)
            assert watcher.status()["order"] == []
    finally:
        os.kill(child, signal.SIGKILL)


def poll(client, until, seconds=60.0):
    """The coordinator's state once `until(state)` holds (None if it never does within `seconds`)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if until(state := client.status()):
            return state
        time.sleep(0.02)
    return None


def test_phase_time_alone_from_its_first_calls_then_from_the_same_phase_before(tmp_path, coordinator):
    """A program writes 24 MiB in 1 MiB writes on an emulated storage of 20 MB/s (1.26 s), twice from one call
    site; the coordinator's estimate would be 25 s (1 MB/s). The first phase's time is revised after its first
    calls; the second is announced with the first's rate (while it waits behind another phase, unwritten)."""
    address = coordinator("fcfs")
    script = tmp_path / "twice.py"
    script.write_text(f"""import os, time
fd = os.open({str(tmp_path / 'out')!r}, os.O_WRONLY | os.O_CREAT, 0o644)
for phase in (1, 2):
    for _ in range(24):
        os.write(fd, b"x" * {MB})
    while phase == 1 and not os.path.exists({str(tmp_path / 'go')!r}):
        time.sleep(0.02)
""")
    env = {"IOLOOM_COORD_NAME": "prog", "IOLOOM_COORD_BYTES": str(24 * MB), "IOLOOM_COORD_IDLE": "0.2",
           "IOLOOM_COORD_STORAGE": str(tmp_path / "storage"), "IOLOOM_COORD_BANDWIDTH": "2e7"}
    env = {**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "python"), **env}
    run = subprocess.Popen([sys.executable, "-m", "ioloom", "run", "--coord", address, "-o", str(tmp_path / "trace"),
                            "--", sys.executable, "-B", str(script)], env=env, stderr=subprocess.PIPE, text=True)
    with Client(address, "holder") as holder:
        first = poll(holder, lambda s: s["order"] and s["order"][0]["written"] >= 4 * MB)
        assert first and 0.5 < first["order"][0]["t_alone"] < 4.0, first      # revised, not 25 s
        assert poll(holder, lambda s: s["counts"]["finished"] == 1)            # the first phase ended
        assert holder.inform(10**9, 100.0)
        (tmp_path / "go").touch()
        second = poll(holder, lambda s: len(s["order"]) == 2)
        assert second and second["order"][1]["written"] == 0, second
        assert 0.5 < second["order"][1]["t_alone"] < 4.0, second               # announced with the first's rate
        holder.done()
        finished(run)
    assert (tmp_path / "out").stat().st_size == 48 * MB


def test_a_phase_of_given_size_ends_with_its_last_byte_and_a_launcher_is_not_coordinated(tmp_path, coordinator):
    """With IOLOOM_COORD_BYTES, dd's phase ends at its 8th MiB, not IOLOOM_COORD_IDLE (30 s) later: the program
    still sleeps when the coordinator counts it finished. dd named in IOLOOM_SKIP_PROGRAMS (as `ioloom run`
    names the MPI launchers and daemons) writes past a holder without a word to the coordinator."""
    address = coordinator("fcfs")
    env = {**os.environ, "PYTHONPATH": str(paths.REPO_ROOT / "python"), "IOLOOM_COORD_BYTES": str(8 * MB),
           "IOLOOM_COORD_IDLE": "30"}
    script = f"dd if=/dev/zero of={tmp_path / 'out'} bs=1M count=8 status=none && sleep 20"
    run = subprocess.Popen([sys.executable, "-m", "ioloom", "run", "--coord", address, "-o", str(tmp_path / "sized"),
                            "--", "sh", "-c", script], env=env, stderr=subprocess.PIPE, text=True)
    with run, Client(address, "watcher") as watcher:
        try:
            assert poll(watcher, lambda s: s["counts"]["finished"] == 1, seconds=15), watcher.status()
            assert run.poll() is None                                   # ended by its size, not by the program
        finally:
            run.kill()
        with Client(address, "holder") as holder:
            assert holder.inform(10**9, 100.0)
            finished(ioloom_run(tmp_path, address, {"IOLOOM_SKIP_PROGRAMS": "dd"}))
            assert holder.status()["counts"]["announced"] == 2       # the sized phase and the holder's: no dd
    assert (tmp_path / "out").stat().st_size == 8 * MB   # written uncoordinated (and untraced: skipped too)
