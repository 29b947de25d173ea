"""ioloom sim calibrate and `sim validate --calibration`: the mechanics (a valid platform from this machine's disk,
predictions that run on it, the check's table), not the 20% figure, which is a benchmark's on a quiet machine."""
from __future__ import annotations

import os
import re

import pytest

from ioloom import paths
from ioloom.sim import calibrate, platform

pytestmark = [pytest.mark.skipif(not (paths.build_dir() / "bin" / "ioloom-sim").exists(),
                                 reason="ioloom-sim is not built (Debian: libsimgrid-dev)"), pytest.mark.mpi]


def test_calibrate_writes_a_platform_the_simulator_predicts_on(mpi, ioloom_cli, tmp_path):
    out = tmp_path / "machine.toml"
    printed = ioloom_cli("sim", "calibrate", "-o", out, "--dir", tmp_path, "--size", "256m", "--repeats", "1",
                         "--mpi", mpi.impl.name).stdout
    assert re.search(r"device [\d,]+ MB/s, fsync commit [\d.]+ ms", printed) and "load average" in printed
    p = platform.load(out)
    assert (p["targets.count"], p["clients.nodes"], p["locks.enabled"]) == (1, 1, False)
    assert p["targets.write_bandwidth"] > 0 and p["cache.copy_bandwidth"] > 0
    assert 0 < p["cache.flush_threshold"] <= p["cache.dirty_limit"]
    assert p["clients.cpu_load"] >= 0 and 0 <= p["cache.copy_burst"] <= 256 << 20
    assert p["clients.cores"] == len(os.sched_getaffinity(0))  # the cores it may run on, not the machine's
    assert 0 < p["clients.copy_efficiency"] <= 1 and 0 < p["clients.oversubscribed_efficiency"] <= 1
    assert calibrate.predict(p, 1)["bandwidth"] > 0 and calibrate.predict(p, 4)["bandwidth"] > 0
    assert not list(tmp_path.glob("ioloom-sim-cal-*"))  # bench io's files went with their scratch directory


def test_calibration_check_prints_measured_and_predicted_per_rank_count(mpi, ioloom_cli, tmp_path):
    machine = tmp_path / "machine.toml"
    ioloom_cli("sim", "calibrate", "-o", machine, "--dir", tmp_path, "--size", "256m", "--repeats", "1",
               "--mpi", mpi.impl.name)
    out = ioloom_cli("sim", "validate", "--calibration", "-p", machine, "--rounds", "1", "--quick", "--dir",
                     tmp_path, "--mpi", mpi.impl.name).stdout
    for n in calibrate.CHECK_RANKS:
        assert re.search(rf"│ {n} rank\(s\): MB/s\s+│ [\d,]+ \[[\d,]+, [\d,]+\]\s+│ [\d,]+ \[", out), out
        for t in calibrate.PHASE_TIMES:  # where the time went, measured and predicted
            assert re.search(rf"│   {t} s \(slowest rank\)\s+│ [\d.e-]+ \[", out), out
    # the demo traced under MPICH and replayed (its launcher's pipes left out: they are not storage I/O)
    assert re.search(r"│ demo, 4 ranks: traced s\s+│ [\d.]+ \[[\d.]+, [\d.]+\]\s+│ [\d.]+ \[", out), out
    assert "load average" in out
    refused = ioloom_cli("sim", "validate", "--calibration", "--rounds", "2", check=False)
    assert refused.returncode == 2 and "--quick" in refused.stderr and "Traceback" not in refused.stderr


def test_flush_threshold_above_the_dirty_limit_is_refused():
    with pytest.raises(platform.PlatformError, match="flush_threshold.*lower it"):
        platform.from_dict({"cache": {"dirty_limit": 1 << 20, "flush_threshold": 2 << 20}})


def test_cache_below_the_flush_threshold_is_written_back_at_fsync():
    """The page cache as Linux runs it: below dirty_background the write calls only copy (bytes / copy bandwidth)
    and the fsync sends all of it (bytes / device bandwidth, then the commit)."""
    p = platform.from_dict({"clients": {"nodes": 1, "nic_bandwidth": 1e12, "nic_latency": 0.0},
                            "servers": {"count": 1, "bandwidth": 1e12, "latency": 0.0},
                            "targets": {"count": 1, "write_bandwidth": 2e8, "latency": 1e-3, "commit_latency": 1e-3},
                            "locks": {"enabled": False},
                            "cache": {"dirty_limit": 1 << 30, "flush_threshold": 1 << 29, "copy_bandwidth": 1e9}})
    from ioloom.sim import engine, results, workload

    w = workload.bench_job(p, workload.parse_bench_args("-F -b 64m -t 1m -e -w"), 1, 1)
    t = results.job_document(engine.run(p, w), 0)["phases"][0]["time"]
    assert t["data"]["max"] == pytest.approx((64 << 20) / 1e9, rel=1e-3)
    windows = 64 // 8  # 1 MiB RPCs, 8 in flight: each window pays the target's latency once
    assert t["sync"]["max"] == pytest.approx((64 << 20) / 2e8 + windows * 1e-3 + 1e-3, rel=1e-3)  # then the commit


@pytest.mark.parametrize("cores, slower", [(0, 1.0), (1, 4.0), (2, 2.0)])
def test_copies_into_the_cache_share_the_nodes_cores(cores, slower):
    """Four ranks of one node copy 64 MiB each into the cache: each at copy bandwidth with a core per rank (0), and
    sharing one or two cores (4x, 2x the time)."""
    from ioloom.sim import engine, results, workload

    p = platform.from_dict({"clients": {"nodes": 1, "cores": cores}, "servers": {"count": 1},
                            "targets": {"count": 1}, "locks": {"enabled": False},
                            "cache": {"dirty_limit": 1 << 30, "flush_threshold": 1 << 30, "copy_bandwidth": 1e9}})
    w = workload.bench_job(p, workload.parse_bench_args("-F -b 64m -t 1m -w"), 4, 4)
    t = results.job_document(engine.run(p, w), 0)["phases"][0]["time"]
    assert t["data"]["max"] == pytest.approx(slower * (64 << 20) / 1e9, rel=1e-3)


@pytest.mark.parametrize("ranks", [1, 4])
def test_the_jobs_copies_share_what_the_machines_other_load_leaves_after_a_burst(ranks):
    """Two cores and a load of 3 other sessions: the job's copies together get 2 / (3 + 1) = 0.5 of a core (Linux
    shares the cores among sessions, then among a session's processes), after a burst of 16 MiB per wait on the
    node's own cores (four ranks burst on two cores at once)."""
    from ioloom.sim import engine, results, workload

    burst, speed, size = 16 << 20, 1e9, 64 << 20
    p = platform.from_dict({"clients": {"nodes": 1, "cores": 2, "cpu_load": 3.0}, "servers": {"count": 1},
                            "targets": {"count": 1}, "locks": {"enabled": False},
                            "cache": {"dirty_limit": 1 << 30, "flush_threshold": 1 << 30, "copy_bandwidth": speed,
                                      "copy_burst": burst}})
    w = workload.bench_job(p, workload.parse_bench_args("-F -b 64m -t 1m -w"), ranks, ranks)
    t = results.job_document(engine.run(p, w), 0)["phases"][0]["time"]
    expected = burst / (speed * min(ranks, 2)) + (ranks * size - burst) / (0.5 * speed)
    assert t["data"]["max"] == pytest.approx(expected, rel=1e-3)


def test_copy_fit_recovers_the_burst_and_the_speed():
    """A write timed chunk by chunk as the model runs it (16 MiB at 2 GB/s, then a quarter of that: 2 cores and
    7 other sessions) gives back its copy speed and burst."""
    speed, share, burst, chunk = 2e9, 0.25, 16 << 20, 1 << 20
    cpus, ends, t = [], [], 0.0
    for i in range(256):
        t += chunk / (speed if i < burst // chunk else speed * share)
        ends.append(t)
        cpus.append((i + 1) * chunk / speed)
    assert calibrate.fit_copy(256 * chunk, cpus, ends) == (pytest.approx(speed), pytest.approx(burst))


def test_a_copy_that_costs_more_cpu_as_it_goes_has_no_burst():
    """Alone on its core (CPU time = wall-clock time) but 1.2x the CPU per byte in the second half: a whole core
    throughout, no burst (the rate over the speed read it as a share of 1 / 1.2)."""
    chunk, cpus = 1 << 20, []
    for i in range(256):
        cpus.append((cpus[-1] if cpus else 0.0) + chunk / (5e9 if i < 128 else 5e9 / 1.2))
    assert calibrate.fit_copy(256 * chunk, cpus, cpus)[1] == 0.0


@pytest.mark.parametrize("ranks, slower", [(1, 1.0), (2, 1 / 0.8), (3, 1.5 / 0.7), (4, 2 / 0.6), (6, 3 / 0.6)])
def test_copies_at_once_move_their_efficiency_of_the_cores(ranks, slower):
    """Two cores, copies at 1 GB/s each: one copy alone at full speed; two at once 0.8 of two cores; four (twice the
    cores) 0.6 of them, three halfway between, six as four: each rank's 64 MiB takes its share of that."""
    from ioloom.sim import engine, results, workload

    p = platform.from_dict({"clients": {"nodes": 1, "cores": 2, "copy_efficiency": 0.8,
                                        "oversubscribed_efficiency": 0.6}, "servers": {"count": 1},
                            "targets": {"count": 1}, "locks": {"enabled": False},
                            "cache": {"dirty_limit": 1 << 30, "flush_threshold": 1 << 30, "copy_bandwidth": 1e9}})
    w = workload.bench_job(p, workload.parse_bench_args("-F -b 64m -t 1m -w"), ranks, ranks)
    t = results.job_document(engine.run(p, w), 0)["phases"][0]["time"]
    assert t["data"]["max"] == pytest.approx(slower * (64 << 20) / 1e9, rel=1e-3)


@pytest.mark.parametrize("key", ["copy_efficiency", "oversubscribed_efficiency"])
@pytest.mark.parametrize("value", [0.0, 1.5])
def test_an_efficiency_outside_0_1_is_refused(key, value):
    with pytest.raises(platform.PlatformError, match=rf"clients.{key}.*a fraction in \(0, 1\]"):
        platform.from_dict({"clients": {key: value}})


def test_efficiency_is_what_the_copies_moved_over_the_cores_the_model_gives_them():
    """4 writers moving 6 GB/s on 2 cores of 5 GB/s: 0.6; under a load of 1 the job gets one core: 1.0 (capped)."""
    quiet = calibrate.Client(copy_bandwidth=5e9, copy_burst=0.0, cpu_load=0.0)
    assert calibrate.efficiency(6e9, 4, quiet, cores=2) == pytest.approx(0.6)
    assert calibrate.efficiency(4e9, 1, quiet, cores=2) == pytest.approx(0.8)
    assert calibrate.efficiency(6e9, 4, calibrate.Client(5e9, 0.0, 1.0), cores=2) == 1.0
