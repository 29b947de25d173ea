"""ioloom sim: the engine on SimGrid against exact fluid answers, the workload against the bench's own layouts and
option parsing, the documents' validation rows, and bad input through the command line."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from ioloom import paths
from ioloom.bench import pattern
from ioloom.sim import engine, platform, results, validate, workload

pytestmark = pytest.mark.skipif(not (paths.build_dir() / "bin" / "ioloom-sim").exists(),
                                reason="ioloom-sim is not built (Debian: libsimgrid-dev)")


def small(**sections) -> platform.Platform:
    doc = {"clients": {"nodes": 4, "ranks_per_node": 1}, "servers": {"count": 2}, "targets": {"count": 8}}
    for key, values in sections.items():
        doc.setdefault(key, {}).update(values)
    return platform.from_dict(doc)


def test_one_stream_takes_bytes_over_bandwidth_plus_latencies():
    """One rank, one target, write-through, RPCs one at a time: each RPC costs its latency (the route's links) plus
    size over the narrowest link, exactly (CM02 max-min, no TCP factors), and the first write obtains the object's
    lock."""
    p = small(targets={"count": 1, "write_bandwidth": 2e8, "latency": 1e-3}, servers={"count": 1},
              rpc={"in_flight": 1}, metadata={"create": 0.0, "close": 0.0}, cache={"dirty_limit": 0})
    w = workload.bench_job(p, workload.parse_bench_args("-F -b 8m -t 2m -w"), 1, 1)
    o = engine.run(p, w)
    data = results.job_document(o, 0)["phases"][0]["time"]["data"]["max"]
    latency = p["clients.nic_latency"] + p["servers.latency"] + p["targets.latency"]
    rpcs = 8
    assert data == pytest.approx((8 << 20) / 2e8 + rpcs * latency + p["locks.grant"], rel=1e-6)


def test_write_back_cache_streams_windows_and_fsync_waits_for_them():
    """Through the cache (4 MiB per target, windows of 2 RPCs of 1 MiB): the writer's first copy, then the flusher
    sends 8 MiB in back-to-back 2 MiB windows (each its latency plus size over bandwidth) while the writer refills,
    and fsync returns one commit (targets.commit_latency) after the last window: exactly, from write to sync."""
    p = small(targets={"count": 1, "write_bandwidth": 2e8, "latency": 1e-3}, servers={"count": 1},
              rpc={"in_flight": 2}, cache={"dirty_limit": 4 << 20, "copy_bandwidth": 4e9})
    w = workload.bench_job(p, workload.parse_bench_args("-F -b 8m -t 2m -e -w"), 1, 1)
    o = engine.run(p, w)
    kinds = w.ops["kind"]
    first_write = o.times[kinds == workload.KINDS["write"], 0].min()
    sync_end = o.times[kinds == workload.KINDS["sync"], 1].max()
    latency = p["clients.nic_latency"] + p["servers.latency"] + p["targets.latency"]
    windows = 4
    expected = p["locks.grant"] + (2 << 20) / 4e9 + windows * (latency + (2 << 20) / 2e8) + p["targets.commit_latency"]
    assert sync_end - first_write == pytest.approx(expected, rel=1e-6)
    assert o.pieces.size == windows and (o.pieces["bytes"] == 2 << 20).all()
    data = results.job_document(o, 0)["phases"][0]["time"]["data"]["max"]
    assert data < 0.6 * (sync_end - first_write)  # the first 4 MiB went into the cache at copy speed


@pytest.fixture(scope="module")
def dd_trace(tmp_path_factory):
    """A real trace: dd writing 16 blocks of 64 KiB with fsync, a pause, then dd reading them back."""
    import subprocess
    import sys
    work = tmp_path_factory.mktemp("sim-trace")
    out = subprocess.run([sys.executable, "-m", "ioloom", "run", "-o", "trace", "--", "sh", "-c",
                          "dd if=/dev/zero of=data bs=64k count=16 conv=fsync status=none; sleep 0.1; "
                          "dd if=data of=/dev/null bs=64k status=none"], cwd=work, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return work / "trace"


def test_trace_replays_each_process_calls_with_offsets_and_gaps(dd_trace):
    """Each dd is a rank; its data calls keep their offsets and sizes, the writer's open creates, its fsync waits
    for the cache; the reader starts after the writer's end plus the pause, as traced."""
    p = small()
    w = workload.from_trace(p, dd_trace)
    assert w.jobs == [(0.0, 2, 2, 0)] and len(w.layouts) == 1
    for rank, kind in ((0, "write"), (1, "read")):
        mine = w.ops[(w.ops["rank"] == rank) & (w.ops["kind"] == workload.KINDS[kind])]
        assert mine["offset"].tolist() == [i << 16 for i in range(16)] and (mine["length"] == 1 << 16).all()
    opens = w.ops[w.ops["kind"] == workload.KINDS["open"]]
    assert opens["offset"].tolist() == [1, 0]  # O_CREAT on the writer's open only
    assert (w.ops["gap"] >= 0).all() and w.ops[w.ops["rank"] == 1]["gap"][0] >= 0.1
    o = engine.run(p, w)
    doc = results.replay_document(o)
    assert doc["calls"]["write"]["bytes"] == 1 << 20 and doc["calls"]["sync"]["calls"] == 1
    assert o.pieces["bytes"][o.pieces["kind"] == workload.KINDS["write"]].sum() == 1 << 20
    assert doc["simulated_time"] >= w.ops[w.ops["rank"] == 1]["gap"][0]


def test_trace_without_offsets_is_refused():
    import pyarrow as pa

    from ioloom.trace import EVENT_SCHEMA, FILE_SCHEMA, Trace
    row = {name: [-1] for name in EVENT_SCHEMA.names}
    row.update(t_start=[0], t_end=[1000], pid=[7], layer=["posix"], op=["write"], file_id=[0], req_bytes=[10],
               ret_bytes=[10], errno=[0])
    events = pa.Table.from_pydict(row).cast(EVENT_SCHEMA)
    trace = Trace.from_tables(events, FILE_SCHEMA.empty_table())
    with pytest.raises(workload.WorkloadError, match="1 data calls have no offset"):
        workload.from_trace(small(), trace)


MIX = """
[[job]]
name = "big"
ranks = 8
ranks_per_node = 4
bench = "-F -b 2m -t 1m -e -w"
stripe_count = 2

[[job]]
name = "small"
ranks = 2
start = 0.5
bench = "-b 1m -t 1m -s 2 -e -w"
logfs = true
"""


def test_job_mix_runs_each_job_on_its_own_nodes_from_its_start(ioloom_cli, tmp_path):
    (tmp_path / "mix.toml").write_text(MIX)
    w, names = workload.job_mix(small(clients={"nodes": 4}), tmp_path / "mix.toml")
    assert names == ["big", "small"] and w.jobs == [(0.0, 8, 4, 0), (0.5, 2, 1, 2)]
    assert len(w.index_files) == 2 and all(f >= workload.FILES_PER_JOB for f in w.layouts if f in w.index_files)
    assert all(len(targets) == 2 for f, (_, targets) in w.layouts.items() if f < workload.FILES_PER_JOB)
    (tmp_path / "p.toml").write_text("[clients]\nnodes = 4\nranks_per_node = 1\n")
    doc = json.loads(ioloom_cli("sim", "run", "-p", tmp_path / "p.toml", "--jobs", tmp_path / "mix.toml",
                                "--json").stdout)
    big, little = doc["jobs"]
    assert (big["name"], big["nranks"], little["name"], little["simulator"]["start"]) == ("big", 8, "small", 0.5)
    assert little["simulator"]["log_structured"] and not big["simulator"]["log_structured"]
    first_small_call = min(r["end"] - r["total"] for r in little["phases"][0]["ranks"])
    assert first_small_call >= 0 and little["phases"][0]["bytes"] == 2 * (2 << 20)


def test_yaml_platform_and_job_mix_read_as_their_toml(ioloom_cli, tmp_path):
    """A platform file and a job mix in YAML (by their .yaml / .yml names) give what the same keys in TOML give;
    bad YAML, or YAML that is not a table of keys, is one line naming the file."""
    import tomllib

    import yaml

    (tmp_path / "p.yaml").write_text("clients:\n  nodes: 4\n  ranks_per_node: 1\nservers: {count: 4}\n"
                                     "targets:\n  count: 16\n  write_bandwidth: 2.0e+8\n"
                                     "layout: {stripe_count: 2, placement: round_robin}\n")
    assert platform.load(tmp_path / "p.yaml") == platform.from_dict(
        {"clients": {"nodes": 4, "ranks_per_node": 1}, "servers": {"count": 4},
         "targets": {"count": 16, "write_bandwidth": 2e8},
         "layout": {"stripe_count": 2, "placement": "round_robin"}})
    (tmp_path / "mix.yml").write_text(yaml.safe_dump(tomllib.loads(MIX)))
    (tmp_path / "mix.toml").write_text(MIX)
    p = small(clients={"nodes": 4})
    (from_yaml, names), (from_toml, _) = (workload.job_mix(p, tmp_path / f) for f in ("mix.yml", "mix.toml"))
    assert names == ["big", "small"] and (from_yaml.ops == from_toml.ops).all()
    assert from_yaml.layouts == from_toml.layouts and from_yaml.jobs == from_toml.jobs
    for text, message in (("clients: [1, 2\n", "is not valid YAML"), ("- 1\n- 2\n", "must be a table")):
        (tmp_path / "bad.yaml").write_text(text)
        out = ioloom_cli("sim", "run", "-p", tmp_path / "bad.yaml", check=False)
        assert out.returncode == 2 and message in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("mix, message", [
    ("[[job]]\nranks = 4\n", "job 0: `bench` is missing"),
    ("[[job]]\nranks = 4\nbench = \"-w\"\nstripes = 2\n", "job 0: unknown key `stripes`"),
    ("[[job]]\nranks = \"4\"\nbench = \"-w\"\n", "job 0: `ranks` must be of type int"),
    ("[[job]]\nranks = 4\nbench = \"-w\"\nstripe_count = 999\n", "more than the platform's 480 targets"),
    ("[jobs]\n", "give one [[job]] table per job"),
])
def test_bad_job_mix_is_one_line(ioloom_cli, tmp_path, mix, message):
    (tmp_path / "mix.toml").write_text(mix)
    out = ioloom_cli("sim", "run", "--jobs", tmp_path / "mix.toml", check=False)
    assert out.returncode == 2 and message in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_every_byte_reaches_the_target_its_stripe_names():
    """Bytes per target from the engine's transfers equal a numpy oracle of the striping (object i of a file on
    its layout's target i, stripes dealt round robin), for uneven writes crossing stripes."""
    p = small(targets={"count": 8}, layout={"stripe_count": 3, "stripe_size": 65536})
    w = workload.bench_job(p, workload.parse_bench_args("-b 300k -t 100k -s 3 -w"), 4, 1)
    o = engine.run(p, w)
    size, targets = w.layouts[0]
    writes = w.ops[w.ops["kind"] == workload.KINDS["write"]]
    offsets = np.concatenate([np.arange(o_, o_ + n) for o_, n in zip(writes["offset"], writes["length"])])
    oracle = np.bincount(np.array(targets)[(offsets // size) % len(targets)], minlength=8)
    moved = np.bincount(o.pieces["target"], weights=o.pieces["bytes"], minlength=8)
    assert moved.tolist() == oracle.tolist()


@pytest.mark.parametrize("name", ["strided", "contiguous", "fpp", "nfiles"])
def test_workload_layouts_are_the_benchmarks(name):
    """Each pattern's operations write every byte of every file once, by the rank docs/bench.md's table names
    (bench/pattern.py, the benchmark's own definition); -z only reorders."""
    n, block, segments = 3, 4096, 2
    args = workload.parse_bench_args(f"--pattern {name} -b {block} -t 1024 -s {segments} -z -w")
    w = workload.bench_job(small(), args, n, 1)
    writes = w.ops[w.ops["kind"] == workload.KINDS["write"]]
    for f in range(len(pattern.file_names("x", name, n, segments))):
        mine = writes[writes["file"] == f]
        writer = np.full(pattern.file_size(name, n, block, segments), -1)
        for op in mine:
            assert (writer[op["offset"]:op["offset"] + op["length"]] == -1).all()
            writer[op["offset"]:op["offset"] + op["length"]] = op["rank"]
        assert writer.tolist() == pattern.writers(name, n, block, segments, f).tolist()


@pytest.mark.mpi
def test_bench_options_mean_what_ioloom_bench_says(mpi, tmp_path):
    """The simulator reads ioloom-bench's options as the benchmark itself does: its JSON's params are the oracle."""
    from ioloom.bench.io import run_bench
    for argv in (["-b", "64k", "-t", "16k", "-s", "3", "-w"], ["-F", "-b", "1m", "-t", "256k", "-e", "-z"],
                 ["--pattern", "contiguous", "-b", "128k", "-t", "64k", "-i", "2", "--wait", "1"]):
        real = run_bench(mpi.impl, 1, [*argv, "-o", str(tmp_path / "b.dat")])["params"]
        sim = workload.parse_bench_args(argv)
        assert (sim.pattern, sim.block, sim.transfer, sim.segments, sim.fsync, sim.random, sim.repetitions,
                sim.wait_ms) == (real["pattern"], real["block_size"], real["transfer_size"], real["segment_count"],
                                 real["fsync"], real["random"], real["repetitions"], real["wait_ms"])


def test_extent_locks_make_n1_strided_pay_and_logfs_does_not():
    """N-1 strided over one object per target: writers of different nodes take turns (revocation round trips);
    with locks off, or re-woven by logfs (each writer its own log), they do not."""
    args = workload.parse_bench_args("-b 1m -t 1m -s 8 -w")

    def write_time(lock: bool, logfs: bool = False) -> float:
        p = small(locks={"enabled": lock, "revoke": 5e-3}, layout={"stripe_count": 2})
        w = workload.bench_job(p, args, 4, 1)
        w = workload.logfs(w, p) if logfs else w
        return results.job_document(engine.run(p, w), 0)["phases"][0]["time"]["data"]["max"]

    locked, free, logs = write_time(True), write_time(False), write_time(True, logfs=True)
    assert locked > 1.5 * free
    assert logs < locked


def test_extent_locks_let_nodes_write_disjoint_ranges_of_one_object_at_once():
    """Locks cover byte ranges, as Lustre's LDLM extent locks do: eight nodes writing their own 8 MiB segment of one
    object revoke the first writer's whole-object lock, then hold their own ranges and write at once (as fast as
    with locks off), where 1 MiB blocks strided over the same object keep revoking each other's locks."""
    def write_time(args: str, lock: bool) -> float:
        p = small(clients={"nodes": 8}, locks={"enabled": lock, "revoke": 5e-3}, layout={"stripe_count": 1},
                  cache={"dirty_limit": 0})
        w = workload.bench_job(p, workload.parse_bench_args(args), 8, 1)
        return results.job_document(engine.run(p, w), 0)["phases"][0]["time"]["data"]["max"]

    segmented, strided = "-b 8m -t 1m -s 1 -w", "-b 1m -t 1m -s 8 -w"
    free = write_time(segmented, False)
    assert write_time(strided, False) == pytest.approx(free, rel=0.05)  # the same bytes at the same speed
    assert write_time(segmented, True) < 1.05 * free
    assert write_time(strided, True) > 1.2 * free


def test_logfs_weaving_conserves_data_and_adds_two_files_per_writer():
    p = small(layout={"stripe_count": 1})
    w = workload.bench_job(p, workload.parse_bench_args("-b 64k -t 16k -s 4 -w"), 4, 1)
    lw = workload.logfs(w, p)

    def data(x):
        return x.ops[(x.ops["kind"] == workload.KINDS["write"]) & ~np.isin(x.ops["file"], list(x.index_files))]
    assert data(lw)["length"].sum() == data(w)["length"].sum()
    assert len(lw.layouts) == 2 * 4 and len(lw.index_files) == 4
    creates = lw.ops[(lw.ops["kind"] == workload.KINDS["open"]) & (lw.ops["offset"] == 1)]
    assert creates.size == 2 * 4
    index_writes = lw.ops[np.isin(lw.ops["file"], list(lw.index_files)) & (lw.ops["kind"] == workload.KINDS["write"])]
    assert (index_writes["length"] == workload.INDEX_ENTRY_BYTES).all()  # a strided run is one entry (-t < -b too)
    shuffled = workload.logfs(workload.bench_job(p, workload.parse_bench_args("-b 64k -t 64k -s 8 -z -w"), 4, 1), p)
    index_writes = shuffled.ops[np.isin(shuffled.ops["file"], list(shuffled.index_files)) &
                                (shuffled.ops["kind"] == workload.KINDS["write"])]
    assert (index_writes["length"] > workload.INDEX_ENTRY_BYTES).all()  # shuffled blocks break the pattern


def test_background_load_is_reproducible_and_slows_targets():
    args = workload.parse_bench_args("-F -b 8m -t 1m -w")

    def data_time(modes, seed=1):
        p = small(background={"modes": modes, "period": 0.005, "horizon": 0.5}, run={"seed": seed},
                  cache={"dirty_limit": 0})
        o = engine.run(p, workload.bench_job(p, args, 4, 1))
        return results.job_document(o, 0)["phases"][0]["time"]["data"]["max"]

    idle, loaded = data_time([]), data_time([[0.25, 1.0], [0.5, 1.0]])
    assert loaded > 1.3 * idle
    assert data_time([[0.25, 1.0], [0.5, 1.0]]) == loaded


@pytest.mark.parametrize("check", ["table-6.2", "delta-graph", "small-beside-big", "wan-chunks",
                                   "collective-buffering"])
def test_validation_rows_agree(check):
    rows = validate.run([check])
    assert rows and all(r.ok for r in rows), [r for r in rows if not r.ok]


def test_log_layer_beats_plain_n1_at_small_rank_counts():
    """The rising side of Wright's PLFS curve (Table E.6, 48 ranks): FLASH-IO-like N-1 through the log layer beats
    plain N-1 (locks serialise the shared file's writers; the logs are written in parallel)."""
    rows = validate.tipping_point(nodes=(4,))
    assert rows[0].ok and rows[0].simulated > 2, rows[0]
    assert rows[-1].check.endswith("where the log layer loses") and "no crossing up to 48 ranks" in rows[-1].note


def test_log_layer_loses_past_a_crossing_by_its_index_loads():
    """The falling side of the curve: under the log layer every writer loads the other writers' index journals at
    its sync point (an open and a close each at the metadata server), N (N - 1) pairs in all, so the layer's cost
    grows as N^2 while plain N-1 grows as N: it wins at 4 ranks and loses at 32 on one metadata service slot."""
    args = workload.parse_bench_args("-b 1m -t 1m -s 16 -e -w")
    p = small(clients={"nodes": 32}, targets={"count": 16}, layout={"stripe_count": 2},
              metadata={"open": 1e-3, "close": 1e-3, "threads": 1})

    def phase(w: workload.Workload) -> dict:
        return results.job_document(engine.run(p, w), 0)["phases"][0]

    for ranks, log_wins in ((4, True), (32, False)):
        plain_w = workload.bench_job(p, args, ranks, 1)
        plain, logs = phase(plain_w), phase(workload.logfs(plain_w, p))
        assert (logs["effective_bw"] > plain["effective_bw"]) == log_wins, (ranks, plain["span"], logs["span"])
        # the last writer's sync waited for all N (N - 1) journal opens and closes on the one service slot
        assert logs["time"]["sync"]["max"] >= ranks * (ranks - 1) * 2e-3
    assert plain["time"]["sync"]["max"] < 0.1 * logs["time"]["sync"]["max"]


def test_collective_buffering_beats_independent_n1_strided_under_extent_locks():
    """N-1 strided in 64 KiB blocks, 4 ranks on each of 8 nodes, 4 stripes of 1 MiB: independently, nodes' blocks
    interleave within every stripe and their extent locks ping-pong; collectively (-c), one aggregator per object
    gathers the blocks over the network and writes whole stripes under locks nobody else asks for."""
    p = small(clients={"nodes": 8}, targets={"count": 16}, servers={"count": 4}, layout={"stripe_count": 4})

    def run(options: str) -> tuple[float, workload.Workload]:
        w = workload.bench_job(p, workload.parse_bench_args(options), 32, 4)
        return results.job_document(engine.run(p, w), 0)["summary"][0]["effective_bw"]["mean"], w

    independent, _ = run("-a mpiio -b 64k -t 64k -s 16 -w")
    collective, w = run("-a mpiio -c -b 64k -t 64k -s 16 -w")
    assert collective > 1.5 * independent, (independent, collective)
    writes, sends = (w.ops[w.ops["kind"] == workload.KINDS[k]] for k in ("write", "send"))
    # the aggregators are the first rank of nodes 0-3 (one per object); each call's 2 MiB are two whole stripes
    assert set(writes["rank"]) == {0, 4, 8, 12} and writes.size == 32 and (writes["length"] == 1 << 20).all()
    # segment s's stripes 2s, 2s + 1 go to the aggregators of nodes 2s mod 4, 2s + 1 mod 4: the first stripe's
    # blocks come from nodes 0-3, one of which aggregates it (12 ranks send), the second's from nodes 4-7 (16 send)
    assert (sends["offset"] < 4).all() and sends["length"].sum() == 16 * (12 + 16) * (64 << 10)


def test_collective_reads_go_the_other_way_and_a_file_per_rank_stays_independent():
    p = small(clients={"nodes": 4}, layout={"stripe_count": 2})
    w = workload.bench_job(p, workload.parse_bench_args("-a mpiio -c -b 1m -t 1m -s 2 -r"), 8, 2)
    reads, sends = (w.ops[w.ops["kind"] == workload.KINDS[k]] for k in ("read", "send"))
    assert set(reads["rank"]) == {0, 2} and set(sends["rank"]) <= {0, 2}  # aggregators read, then scatter
    doc = results.job_document(engine.run(p, w), 0)
    assert doc["params"]["collective"] and doc["phases"][0]["bytes"] == 16 << 20
    fpp = workload.bench_job(p, workload.parse_bench_args("-a mpiio -c -F -b 1m -t 1m -w"), 8, 2)
    assert not (fpp.ops["kind"] == workload.KINDS["send"]).any()


def test_collective_calls_keep_the_computation_before_them():
    """--wait under -c: each call's computation comes before its first barrier, so the run takes it and the
    document counts it as waiting, as for independent calls (it was dropped)."""
    p = small(clients={"nodes": 4}, layout={"stripe_count": 2})
    for options in ("-a mpiio -b 1m -t 1m -s 4 -w --wait 50", "-a mpiio -c -b 1m -t 1m -s 4 -w --wait 50"):
        w = workload.bench_job(p, workload.parse_bench_args(options), 8, 2)
        assert w.ops["gap"].sum() == pytest.approx(8 * 4 * 0.05)
        phase = results.job_document(engine.run(p, w), 0)["phases"][0]
        assert phase["time"]["wait"]["min"] == pytest.approx(4 * 0.05) and phase["span"] > 4 * 0.05, options


def test_a_node_reads_what_it_wrote_from_its_own_cache_while_it_fits():
    """-w -r on a file per rank: the node holds what it wrote (cache.capacity), so its reads never reach the
    targets; with no capacity they all do, and with 6 MiB of 16 only the last 6 MiB written are served locally; with
    6.5 MiB the last 6.5 (the oldest bytes leave, as many as the capacity is exceeded by: not the oldest write)."""
    def read_flows(capacity: int) -> float:
        p = small(cache={"capacity": capacity})
        o = engine.run(p, workload.bench_job(p, workload.parse_bench_args("-F -b 16m -t 1m -e -w -r"), 4, 1))
        return float(o.pieces["bytes"][o.pieces["kind"] == workload.KINDS["read"]].sum())

    assert read_flows(1 << 30) == 0
    assert read_flows(0) == 4 * (16 << 20)
    assert read_flows(6 << 20) == 4 * (10 << 20)
    assert read_flows(13 << 19) == 4 * (19 << 19)


def test_another_nodes_write_makes_a_cached_copy_stale():
    """Rank 0 (node 0) writes a block, rank 1 (node 1) overwrites its second half, then rank 0 reads the block: the
    half node 1 wrote comes from the targets, the rest from node 0's cache."""
    p = small()
    k = workload.KINDS
    half = 1 << 19
    rank0 = [(k["write"], 0, 2 * half), (k["barrier"], 0, 0), (k["barrier"], 0, 0), (k["read"], 0, 2 * half)]
    rank1 = [(k["barrier"], 0, 0), (k["write"], half, half), (k["barrier"], 0, 0)]
    rows = [(0, r, kind, 0, offset, length, 0.0) for r, ops in enumerate((rank0, rank1))
            for kind, offset, length in ops]
    ops = np.array(rows, dtype=workload.OP)
    w = workload.Workload(ops, {0: (1 << 20, [0])}, [(0.0, 2, 1, 0)], np.zeros(ops.size, int), [(0, "write", 0)])
    o = engine.run(p, w)
    assert o.pieces["bytes"][o.pieces["kind"] == k["read"]].sum() == half


@pytest.mark.parametrize("network, share", [
    ({"topology": "fat_tree", "leaf_nodes": 2, "oversubscription": 1.0}, 1.0),
    ({"topology": "fat_tree", "leaf_nodes": 2, "oversubscription": 2.0}, 0.5),
    ({"topology": "fat_tree", "leaf_nodes": 1, "pod_leaves": 4, "pod_oversubscription": 4.0}, 0.25),
    ({"routers": 1, "router_bandwidth": 1e8}, 0.25),
])
def test_a_fat_trees_oversubscription_and_routers_cut_what_the_nodes_move(network, share):
    """4 nodes each writing its own file write-through, NICs (100 MB/s) the only limit: leaves of 2 with uplinks cut
    by 2 halve it, one pod of 4 leaves cut by 4 quarters it, one router of one NIC's bandwidth quarters it."""
    def bandwidth(net: dict) -> float:
        p = small(clients={"nic_bandwidth": 1e8}, cache={"dirty_limit": 0}, network=net)
        w = workload.bench_job(p, workload.parse_bench_args("-F -b 64m -t 4m -w"), 4, 1)
        return results.job_document(engine.run(p, w), 0)["phases"][0]["raw_bw"]

    assert bandwidth(network) / bandwidth({}) == pytest.approx(share, rel=0.02)


@pytest.mark.parametrize("network, to, bandwidth", [
    ({"topology": "fat_tree", "leaf_nodes": 2, "oversubscription": 4.0}, 1, 1e8),
    ({"topology": "fat_tree", "leaf_nodes": 2, "oversubscription": 4.0}, 2, 5e7),
    ({"topology": "fat_tree", "leaf_nodes": 1, "oversubscription": 2.0, "pod_leaves": 2, "pod_oversubscription": 4.0},
     1, 5e7),
    ({"topology": "fat_tree", "leaf_nodes": 1, "oversubscription": 2.0, "pod_leaves": 2, "pod_oversubscription": 4.0},
     2, 2.5e7),
])
def test_two_nodes_under_one_switch_exchange_through_it_not_its_uplinks(network, to, bandwidth):
    """Node 0 sends 64 MiB to node `to` (a collective's exchange), NICs of 100 MB/s. Leaves of 2 nodes with uplinks
    cut by 4 (50 MB/s): node 1 shares node 0's leaf and gets the NIC's 100 MB/s, node 2 is behind the uplinks. Leaves
    of one node (uplinks 50 MB/s) in pods of 2 cut by 4 (25 MB/s): node 1 is in node 0's pod and gets the leaf
    uplinks' 50, node 2 the pod's 25."""
    p = small(clients={"nic_bandwidth": 1e8, "nic_latency": 0.0}, network=network)
    size = 64 << 20
    ops = np.array([(0, 0, workload.KINDS["send"], 0, to, size, 0.0)] +
                   [(0, r, workload.KINDS["barrier"], 0, 0, 0, 0.0) for r in range(3)], dtype=workload.OP)
    ops = np.sort(ops, order=["job", "rank"], kind="stable")
    w = workload.Workload(ops, {0: (1 << 20, [0])}, [(0.0, 3, 1, 0)], np.zeros(ops.size, int), [(0, "write", 0)])
    o = engine.run(p, w)
    send = np.flatnonzero(ops["kind"] == workload.KINDS["send"])[0]
    assert o.times[send, 1] - o.times[send, 0] == pytest.approx(size / bandwidth, rel=1e-3)


@pytest.mark.parametrize("network, message", [
    ({"topology": "torus"}, "`network.topology` = 'torus': use star or fat_tree"),
    ({"oversubscription": 0.5}, "`network.oversubscription` = 0.5: a ratio of at least 1"),
    ({"leaf_nodes": 2.5}, "`network.leaf_nodes` = 2.5: a whole number"),
    ({"router_bandwidth": 0}, "`network.router_bandwidth` must be positive"),
])
def test_bad_network_values_are_refused_naming_the_key(network, message):
    with pytest.raises(platform.PlatformError, match=re.escape(message)):
        small(network=network)
    with pytest.raises(platform.PlatformError, match="drop one"):
        small(network={"topology": "fat_tree"}, clients={"nodes_per_group": 2})


def test_four_ior_jobs_share_the_targets():
    """Wright's four tuned IOR jobs at once, at a quarter of the validation's size: each gets a fraction of its lone
    bandwidth, together more than one alone."""
    rows = validate.four_ior_jobs(ranks=64)
    assert rows and all(r.ok for r in rows), rows


def test_placement_matches_table_6_3_binomial():
    rows = validate.table_6_3(draws=200)
    assert len(rows) == 20 and all(r.ok for r in rows), [r for r in rows if not r.ok]


def test_validate_command_prints_every_row(ioloom_cli):
    out = ioloom_cli("sim", "validate", "--check", "delta-graph").stdout
    assert re.search(r"4 of 4 rows agree", out)


def test_run_command_prints_the_bench_document(ioloom_cli):
    doc = json.loads(ioloom_cli("sim", "run", "-n", "4", "--ranks-per-node", "2", "--json", "--",
                                "-b", "1m", "-t", "256k", "-w").stdout)
    assert doc["ioloom_bench"] == 2 and doc["nranks"] == 4 and doc["params"]["block_size"] == 1 << 20
    assert doc["phases"][0]["bytes"] == 4 << 20 and doc["summary"][0]["effective_bw"]["mean"] > 0
    from ioloom.bench.io import print_result  # the bench's own printer reads the simulated document
    print_result(doc, per_rank=True)
    write = doc["phases"][0]
    assert write["access_bw"] <= write["raw_bw"] and write["span"] >= max(r["end"] for r in write["ranks"]) - 1e-12


@pytest.mark.parametrize("toml, args, message", [
    ("[targets]\nwrite_bandwith = 1e9\n", [],
     "unknown key `targets.write_bandwith`: did you mean `targets.write_bandwidth`"),
    ("[targets]\nwrite_bandwidth = 0\n", [], "`targets.write_bandwidth` must be positive"),
    ("[layout]\nstripe_count = 500\n", [], "`layout.stripe_count` = 500 is impossible with 480 targets"),
    ("[targets\n", [], "is not valid TOML"),
    ("", ["-n", "5000"], "needs 313 nodes"),
    ("", ["--", "-c", "-w"], "-c needs -a mpiio"),
    ("", ["--", "-b", "3m", "-t", "2m"], "must be positive and divide -b"),
    ("[run]\ntime_budget = 1e-6\n", [], "simulated time budget ran out"),
])
def test_bad_input_is_one_line_naming_the_fix(ioloom_cli, tmp_path, toml, args, message):
    (tmp_path / "p.toml").write_text(toml)
    out = ioloom_cli("sim", "run", "-p", tmp_path / "p.toml", *args, check=False)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_an_explicit_target_list_places_every_new_file_and_bad_lists_are_refused():
    p = small(layout={"targets": [5, 2, 7], "stripe_count": 2})
    w = workload.bench_job(p, workload.parse_bench_args("-F -b 1m -t 1m -w"), 3, 1)
    assert all(targets == [5, 2] for _, targets in w.layouts.values()) and len(w.layouts) == 3
    for bad, message in (([1, 1], "distinct"), ([8], "from 0 to 7"), ([3], "exceeds")):
        with pytest.raises(platform.PlatformError, match=message):
            small(layout={"targets": bad, "stripe_count": 2 if message == "exceeds" else 1})


def test_docs_list_every_platform_key_with_its_default():
    doc = (paths.REPO_ROOT / "docs" / "sim.md").read_text()
    for key, (default, _, _) in platform.DEFAULTS.items():
        assert re.search(rf"\| `{re.escape(key)}` \| `{re.escape(repr(default))}` \|", doc), key
    for key, (required, _, _) in workload.JOB_KEYS.items():
        assert f"| `{key}` | {'yes' if required else 'no'} |" in doc, key


def test_bench_sim_prints_events_time_and_memory(ioloom_cli):
    """`ioloom bench sim` (a quick look at small sizes): write-through, every 1 MiB write is one flow, so its events
    are exactly the operations (open, barrier, writes, fsync, close, barrier per rank) plus the writes; figures are
    per round, the rounds interleaved."""
    out = ioloom_cli("bench", "sim", "--ranks", "64", "--writes", "3", "--base-ranks", "32", "--base-writes", "2",
                     "--rounds", "2", "--quick", "--json").stdout
    doc = json.loads(out)
    through = doc["figures"]["write-through"]
    assert through["events"]["rounds"] == [32 * (5 + 2) + 32 * 2] * 2
    scale = doc["figures"]["scale"]
    assert len(scale["wall"]["rounds"]) == 2 and scale["rss"]["max"] > 1 << 20 and doc["goal"]["met"]
    assert all(v > 0 for v in scale["events_per_s"]["rounds"]) and set(doc["load"]) == {"before", "after"}
    too_few = ioloom_cli("bench", "sim", "--rounds", "3", check=False)
    assert too_few.returncode == 2 and "at least 10 interleaved rounds" in too_few.stderr


def test_advise_striping_simulate_ranks_layouts(ioloom_cli, dd_trace):
    """--simulate ranks every candidate layout by simulated time (fastest first), the log layer among them; the
    counts the targets allow only; with --trace the trace itself is replayed (1 MiB written by dd)."""
    doc = json.loads(ioloom_cli("advise", "striping", "--targets", "8", "--writers", "4", "--bytes-per-writer",
                                "4MiB", "--request-size", "1MiB", "--simulate", "--json").stdout)
    ranked = doc["simulated"]
    seconds = [c["seconds"] for c in ranked]
    assert seconds == sorted(seconds) and any(c["logfs"] for c in ranked)
    assert {c["stripe_count"] for c in ranked} <= {1, 4, 8} and 8 in {c["stripe_count"] for c in ranked}
    assert all(c["bandwidth"] == pytest.approx(4 * (4 << 20) / c["seconds"]) for c in ranked)
    replayed = json.loads(ioloom_cli("advise", "striping", "--targets", "8", "--trace", dd_trace, "--simulate",
                                     "--json").stdout)["simulated"]
    assert all(c["bandwidth"] == pytest.approx((1 << 20) / c["seconds"]) for c in replayed)


def test_html_page_has_every_figure(ioloom_cli, tmp_path):
    """--html writes one self-contained page: the jobs' table, then each figure under its own id (distinct from
    the sections', or plotly draws over the headings), the correlation of the targets that moved data."""
    (tmp_path / "mix.toml").write_text(MIX)
    (tmp_path / "p.toml").write_text("[clients]\nnodes = 4\n")
    ioloom_cli("sim", "run", "-p", tmp_path / "p.toml", "--jobs", tmp_path / "mix.toml", "--html", tmp_path / "s.html")
    text = (tmp_path / "s.html").read_text()
    ids = re.findall(r'id="([^"]+)"', text)
    for anchor in ("summary", "latency", "time", "correlation", "latency-histogram", "rank-series", "target-series",
                   "correlation-matrix"):
        assert ids.count(anchor) == 1, anchor
    assert "Plotly.newPlot" in text and "<td>big</td>" in text and "<td>small</td>" in text
    assert re.search(r"Pearson r between the throughput series of the \d+ targets", text)


def test_sweep_gives_the_same_rows_on_dask_and_in_process(ioloom_cli):
    """A 2 x 2 x 1 sweep on a Dask LocalCluster (one worker process) and in this process: identical rows, in the
    order of the points, wider stripes faster for the shared file."""
    argv = ["sim", "sweep", "--ranks", "4,8", "--stripe-count", "1,4", "--stripe-size", "1m", "--json", "--",
            "-b", "1m", "-t", "1m", "-s", "4", "-e", "-w"]
    on_dask = json.loads(ioloom_cli(*argv[:2], "--workers", "1", *argv[2:]).stdout)
    serial = json.loads(ioloom_cli(*argv[:2], "--serial", *argv[2:]).stdout)
    assert on_dask == serial and [(r["ranks"], r["stripe_count"]) for r in serial] == [(4, 1), (4, 4), (8, 1), (8, 4)]
    assert serial[1]["write_effective_bw"] > serial[0]["write_effective_bw"]
    bad = ioloom_cli("sim", "sweep", "--stripe-count", "1,999", "--serial", "--", "-w", check=False)
    assert bad.returncode == 2 and "--stripe-count 999 exceeds the platform's 480 targets" in bad.stderr
