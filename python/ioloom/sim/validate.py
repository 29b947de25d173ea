"""`ioloom sim validate`: the simulator against the documents, one row per check: what the document (or its
equation) says, what the simulation gives, and whether they agree within the stated tolerance.

Rows (docs/sim.md, "Validation"):
- Wright Table 6.3: targets shared by exactly k of 4 jobs under random placement, against the binomial of
  Ch. 6 (within 4 standard errors of the mean over `placements` draws), the thesis's measured counts beside.
- Wright Table 6.2: targets in use (D_inuse) for 1-10 jobs of R = 160 and 64 stripes on 480 targets, Eq. 6.2.
- Dorier Ch. 6.1.2: the Δ-graph of two equal applications, I = 2 - dt/T under proportional sharing.
- Wright Ch. 6.2: IOR on 1,024 ranks, 2 stripes of 1 MB against 160 stripes of 128 MB: an order of magnitude
  (the thesis: 313 against 15,609 MB/s), simulated at a smaller scale with the same shape (`ranks`).
- Dorier Fig. 6.9, Wright's four IOR jobs, Wan's 64 MB chunks, the PLFS tipping point (Table E.6, the metadata
  server's rate from Table G.9) and collective buffering (Table C.5): each check's docstring.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ioloom.models import contention, interference
from ioloom.sim import engine, results, workload
from ioloom.sim.platform import DEFAULTS, Platform, from_dict

# Wright Table 6.3, "OST Usage" (mean of five runs on lscratchc): R -> targets used by exactly 1, 2, 3, 4 jobs.
TABLE_6_3 = {32: (103.2, 11.2, 0.8, 0.0), 64: (172.6, 35.8, 3.4, 0.4), 96: (199.4, 76.4, 9.8, 0.6),
             128: (211.6, 111.4, 22.4, 2.6), 160: (191.8, 147.0, 41.8, 7.2)}
# Wright Table 6.2, D_inuse after n jobs (n = 1..10) on 480 targets, for R = 160 and R = 64.
TABLE_6_2 = {160: (160.000, 266.667, 337.778, 385.185, 416.790, 437.860, 451.907, 461.271, 467.514, 471.676),
             64: (64.000, 119.467, 167.538, 209.199, 245.306, 276.599, 303.719, 327.223, 347.593, 365.247)}


# Wright Table E.6, FLASH-IO on Sierra (12 cores per node): nodes -> (ad_ufs MB/s, ad_plfs MB/s).
TABLE_E_6 = {1: (332.150, 282.513), 2: (234.704, 677.992), 4: (323.962, 1073.471), 8: (382.921, 1468.949),
             16: (406.641, 1642.854), 32: (439.282, 1284.342), 64: (464.171, 709.821), 128: (477.430, 201.701),
             256: (518.736, 183.701)}
# Wright Table G.9, IOR through ad_plfs on the same lscratchc (Table 6.1: each rank 100 x 4 MB, 400 MB, and one size
# query at the end): ranks -> MB/s, at the largest scale measured.
TABLE_G_9_PLFS = {4096: 3069.054}
IOR_MB_PER_RANK = 400


@dataclass
class Row:
    check: str
    document: float
    simulated: float
    tolerance: str
    ok: bool
    note: str = ""


def _placements(platform: Platform, stripes: int, jobs: int, draws: int) -> np.ndarray:
    """Per draw, how many targets exactly k of `jobs` jobs use (k = 0..jobs), with the simulator's placement."""
    out = np.zeros((draws, jobs + 1))
    for d in range(draws):
        placement = workload.Placement(platform, seed_offset=d)
        users = np.zeros(platform["targets.count"], dtype=int)
        for _ in range(jobs):
            users[placement.place(stripes)] += 1
        out[d] = np.bincount(users, minlength=jobs + 1)
    return out


def table_6_3(draws: int = 400) -> list[Row]:
    p = from_dict({"targets": {"count": 480}})
    rows = []
    for stripes, measured in TABLE_6_3.items():
        sim = _placements(p, stripes, 4, draws)
        expected = contention.sharing_distribution([stripes] * 4, 480)
        for k in range(1, 5):
            # the sample's standard error, floored by the binomial's own (a rare count may never occur in the draws)
            se = max(sim[:, k].std(ddof=1), np.sqrt(expected[k] * (1 - expected[k] / 480))) / np.sqrt(draws)
            mean = sim[:, k].mean()
            rows.append(Row(f"Table 6.3 R={stripes}: targets used by {k} of 4 jobs", float(expected[k]), float(mean),
                            "4 s.e.", abs(mean - expected[k]) <= 4 * se + 1e-9, f"thesis measured {measured[k - 1]}"))
    return rows


def table_6_2(draws: int = 200) -> list[Row]:
    p = from_dict({"targets": {"count": 480}})
    rows = []
    for stripes, column in TABLE_6_2.items():
        for n in (1, 4, 10):
            users = _placements(p, stripes, n, draws)[:, 1:].sum(axis=1)
            mean, se = users.mean(), users.std(ddof=1) / np.sqrt(draws)
            rows.append(Row(f"Table 6.2 R={stripes}: D_inuse with {n} job(s)", column[n - 1], float(mean), "4 s.e.",
                            abs(mean - column[n - 1]) <= 4 * se + 1e-6))
    return rows


def _small_platform(**sections) -> Platform:
    base = {"clients": {"nodes": 8}, "servers": {"count": 4}, "targets": {"count": 16},
            "layout": {"stripe_count": -1}}
    for key, values in sections.items():
        base.setdefault(key, {}).update(values)
    return from_dict(base)


def delta_graph(offsets=(0.0, 0.25, 0.5, 0.75)) -> list[Row]:
    """Two equal jobs (4 ranks each on their own nodes, a file per process, fsync at the end: the phase lasts until
    its data is on the target) started dt apart on one shared target: the model's premise is that each application
    alone saturates the storage both share (a job spread over several targets leaves some idle part of the time,
    and the other job's I/O then costs it less)."""
    p = _small_platform(targets={"count": 1, "write_bandwidth": 1e8}, servers={"count": 1})
    args = workload.parse_bench_args("-F -b 8m -t 1m -s 2 -e -w")

    def job(i: int) -> workload.Workload:
        return workload.bench_job(p, args, 4, 1, job=i, first_node=4 * i, first_file=100 * i)

    alone = results.job_document(engine.run(p, job(0)), 0)["phases"][0]["time"]["total"]["max"]
    rows = []
    for frac in offsets:
        both = engine.run(p, workload.combine([job(0), job(1)], [0.0, frac * alone]))
        took = results.job_document(both, 0)["phases"][0]["time"]["total"]["max"]
        expected = interference.proportional_sharing(alone, alone, frac * alone).i_a
        rows.append(Row(f"Δ-graph dt = {frac:g} T: interference factor of the first job", expected, took / alone,
                        "5%", abs(took / alone - expected) <= 0.05 * expected))
    return rows


def _ior_platform(nodes: int) -> Platform:
    """Wright's lscratchc as the IOR rows see it: targets that write what the thesis's tuned job got per stripe
    (15,609 MB/s over 160 stripes: about 100 MB/s), 4 MiB RPCs."""
    return from_dict({"clients": {"nodes": nodes}, "targets": {"write_bandwidth": 1e8}, "rpc": {"size": 4 << 20}})


def ior_tuning(ranks: int = 256) -> list[Row]:
    """IOR N-1 strided (-b 128m -t 4m): 2 stripes of 1 MiB against 160 stripes of 128 MiB, one job, 16 per node."""
    p = _ior_platform(ranks // 16)
    args = workload.parse_bench_args("-b 128m -t 4m -s 1 -w")

    def bandwidth(count: int, size: int) -> float:
        w = workload.bench_job(p, args, ranks, 16, stripe_count=count, stripe_size=size)
        return results.job_document(engine.run(p, w), 0)["summary"][0]["effective_bw"]["mean"]

    narrow, wide = bandwidth(2, 1 << 20), bandwidth(160, 128 << 20)
    return [Row(f"IOR tuning on {ranks} ranks: 160x128 MiB over 2x1 MiB stripes", 15609 / 313, wide / narrow,
                ">= 10x", wide / narrow >= 10,
                f"simulated {narrow / 2**20:.0f} -> {wide / 2**20:.0f} MiB/s; thesis 313 -> 15,609 MB/s on 1,024")]


def small_beside_big(offset: float = 0.0) -> list[Row]:
    """Dorier Fig. 6.9 in kind: 768 ranks, 24 per node, split 744 (A) and 24 (B), each rank writing 16 MiB in 2 MiB
    pieces (a file per rank, the workload this row has had since before -c was simulated) to 16 shared targets,
    B starting `offset` x T_A(alone) after A; fsync ends each phase. B's own node stream to a target is one of 32,
    so it is slowed far more than A is by it."""
    p = from_dict({"clients": {"nodes": 32}, "servers": {"count": 4}, "targets": {"count": 16},
                   "layout": {"stripe_count": -1}})
    args = workload.parse_bench_args("-F -b 16m -t 2m -e -w")
    big = workload.bench_job(p, args, 744, 24)
    small = workload.bench_job(p, args, 24, 24, first_node=31, first_file=1000)

    def took(o: engine.Outcome, job: int) -> float:
        return results.job_document(o, job)["phases"][0]["time"]["total"]["max"]

    alone_a, alone_b = took(engine.run(p, big), 0), took(engine.run(p, small), 0)
    both = engine.run(p, workload.combine([big, small], [0.0, offset * alone_a]))
    i_a, i_b = took(both, 0) / alone_a, took(both, 1) / alone_b
    return [Row(f"Dorier: 24-rank job beside a 744-rank one (dt = {offset:g} T_A): interference factor of the small",
                14.0, i_b, ">= 5", i_b >= 5, "thesis: up to 14 (Grid'5000, 24 against 744 cores)"),
            Row("Dorier: the same, interference factor of the big job", 1.0, i_a, "<= 1.2", i_a <= 1.2,
                "the big job barely notices the small one")]


def four_ior_jobs(ranks: int = 256) -> list[Row]:
    """Wright Ch. 6.2: four tuned IOR jobs (160 stripes of 128 MiB each, placed at random) at once on 480 targets,
    each on its own nodes, against one alone: each gets a fraction of its lone bandwidth, together more."""
    p = _ior_platform(4 * ranks // 16)
    args = workload.parse_bench_args("-b 128m -t 4m -s 1 -w")
    placement = workload.Placement(p)
    jobs = [workload.bench_job(p, args, ranks, 16, job=j, first_node=j * ranks // 16, first_file=j,
                               placement=placement, stripe_count=160, stripe_size=128 << 20) for j in range(4)]

    def bandwidth(o: engine.Outcome, job: int) -> float:
        return results.job_document(o, job)["summary"][0]["effective_bw"]["mean"]

    alone = bandwidth(engine.run(p, jobs[0]), 0)
    together = engine.run(p, workload.combine(jobs, [0.0] * 4))
    each = np.array([bandwidth(together, j) for j in range(4)])
    share = float(each.mean() / alone)
    return [Row(f"IOR tuning, four jobs at once ({ranks} ranks each): bandwidth of each / alone", 4541 / 15609, share,
                "< 0.75, sum > 1", share < 0.75 and share * 4 > 1,
                f"simulated {alone / 2**20:.0f} alone -> {each.mean() / 2**20:.0f} MiB/s each; thesis 15,609 -> "
                "4,541 MB/s")]


def wan_chunks(nodes: int = 96, chunk: int = 64 << 20, chunks: int = 4) -> list[Row]:
    """Wan Sec. VI: one rank per node writes 256 MiB; stock: its own file on one target, allocated round robin (rank
    i on target i); refactored: 64 MiB chunks, chunk j of rank i on target (i + j) mod D_total. Both under the same
    multimodal background load and seed, with a 64 MiB per-target client cache (the per-client buffering Wan
    credits): a chunk fits the cache of its target, a 256 MiB write does not. Write time: the write call's."""
    p = from_dict({"clients": {"nodes": nodes, "ranks_per_node": 1}, "servers": {"count": nodes // 4},
                   "targets": {"count": nodes}, "layout": {"placement": "round_robin"},
                   "cache": {"dirty_limit": chunk},
                   "background": {"modes": [[1.0, 0.5], [0.5, 0.3], [0.1, 0.2]], "period": 0.5}})
    args = workload.parse_bench_args(f"-F -b {chunk * chunks} -t {chunk * chunks} -w")
    stock = workload.bench_job(p, args, nodes, 1)
    refactored = workload.bench_job(p, args, nodes, 1)
    refactored.layouts = {i: (chunk, [(i + j) % nodes for j in range(chunks)]) for i in range(nodes)}

    def write_times(w: workload.Workload) -> np.ndarray:
        o = engine.run(p, w)
        writes = w.ops["kind"] == workload.KINDS["write"]
        return o.times[writes, 1] - o.times[writes, 0]

    before, after = write_times(stock), write_times(refactored)
    return [Row(f"Wan: {chunk >> 20} MiB chunks on (i + j) mod D over stock placement, {stat} write time", 1.0,
                float(f(after) / f(before)), "< 1", f(after) < f(before),
                f"{f(before):.3g} -> {f(after):.3g} s ({nodes} ranks and targets)")
            for stat, f in (("mean", np.mean), ("maximum", np.max))]


def lscratchc_journal_seconds() -> float:
    """The metadata server's time per index journal a log-layer load opens and closes (metadata.open +
    metadata.close over its `metadata.threads` slots), read from Table G.9: IOR through PLFS on 4,096 ranks took
    4,096 x 400 MB / 3,069 MB/s = 534 s, and each writer's size query at the end loads the other 4,095 journals, so
    the server served N (N - 1) journals in (at most) that time. The data's own time (256 nodes moving 87 GB/s,
    19 s) is left in: the rate is a lower bound, the journal's time an upper one."""
    ranks, bandwidth = next(iter(TABLE_G_9_PLFS.items()))
    took = ranks * IOR_MB_PER_RANK / bandwidth
    return from_dict({})["metadata.threads"] * took / (ranks * (ranks - 1))


def _sierra(nodes: int) -> Platform:
    """Sierra's lscratchc as FLASH-IO saw it: 480 targets writing what one got alone (IOR on 1 stripe, Appendix F:
    242 MB/s), files on 2 stripes of 1 MiB (the default), 12 ranks per node, a node moving what one node moved
    alone (Table E.6: 332 MB/s plain on 1 node, 339 per node through PLFS on 2: the client's HDF5 path, not its
    link). No seek penalty: plain N-1 on the same 2 targets rises from 324 to 519 MB/s between 4 and 256 nodes
    (Table E.6), so a target's capacity does not fall with its concurrent streams. The metadata server's time per
    journal comes from Table G.9 (`lscratchc_journal_seconds`), split between open and close as the defaults are."""
    journal = lscratchc_journal_seconds()
    open_s, close_s = DEFAULTS["metadata.open"][0], DEFAULTS["metadata.close"][0]
    share = open_s / (open_s + close_s)
    return from_dict({"clients": {"nodes": nodes, "nic_bandwidth": 3.4e8},
                      "targets": {"write_bandwidth": 2.5e8}, "layout": {"stripe_count": 2},
                      "metadata": {"open": journal * share, "close": journal * (1 - share)}})


def tipping_point(nodes=(4, 16, 64, 128, 256)) -> list[Row]:
    """Wright Ch. 5.4 / Table E.6: FLASH-IO-like N-1 (each rank 4 segments of 4 MiB, fsync) written plainly and
    through the log layer (a log and an index per rank; at its fsync each writer loads the others' index journals),
    12 ranks per node, on 480 targets: the ratio of the bandwidths on either side of 1 as the thesis measured it,
    and the first rank count where the log layer loses, beside Eq. 6.6's load (a data file of 2 stripes per rank).
    Each note gives the log layer's longest sync (its data reaching the targets, then the index loads)."""
    args = workload.parse_bench_args("-b 4m -t 4m -s 4 -e -w")
    rows, crossing = [], None
    for count in nodes:
        ranks = count * 12
        p = _sierra(count)
        plain_w = workload.bench_job(p, args, ranks, 12)
        plain, logs = (results.job_document(engine.run(p, w), 0) for w in (plain_w, workload.logfs(plain_w, p)))
        bandwidth = [d["summary"][0]["effective_bw"]["mean"] for d in (plain, logs)]
        ratio = bandwidth[1] / bandwidth[0]
        ufs, plfs = TABLE_E_6[count]
        load = contention.plfs_load(ranks, 480).d_load
        crossing = crossing or (ranks if ratio < 1 else None)
        rows.append(Row(f"PLFS tipping point, {ranks} ranks: log layer / plain N-1 bandwidth", plfs / ufs, ratio,
                        "same side of 1", (ratio > 1) == (plfs > ufs),
                        f"simulated {bandwidth[0] / 1e6:.0f} -> {bandwidth[1] / 1e6:.0f} MB/s (thesis {ufs:.0f} -> "
                        f"{plfs:.0f}); log layer's sync {logs['phases'][0]['time']['sync']['max']:.3g} s; "
                        f"Eq. 6.6 load {load:.3g}"))
    measured = min(12 * n for n, (ufs, plfs) in TABLE_E_6.items() if n > 16 and plfs < ufs)
    rows.append(Row("PLFS tipping point: first rank count where the log layer loses", measured,
                    float(crossing or "nan"), "same", crossing == measured,
                    f"Eq. 6.6 load there: thesis {contention.plfs_load(measured, 480).d_load:.3g}" +
                    (f", simulated {contention.plfs_load(crossing, 480).d_load:.3g}" if crossing else
                     f"; no crossing up to {12 * max(nodes):,} ranks")))
    return rows


# Wright Table C.5, FLASH-IO on Sierra at 192 cores: MB/s with data sieving off, independent and collective.
TABLE_C_5_192 = (467.650, 549.125)


def collective_buffering() -> list[Row]:
    """Wright Table C.5 in kind: on Lustre, collective buffering (one aggregator per node) beats independent
    writes of a shared file once data sieving is off. Simulated: N-1 strided in 64 KiB blocks, 4 ranks on each of
    8 nodes, 4 stripes of 1 MiB, under extent locks: independently the nodes' blocks interleave within every stripe
    and their locks ping-pong; collectively each object's aggregator writes whole stripes."""
    p = _small_platform(targets={"count": 16}, layout={"stripe_count": 4})

    def bandwidth(options: str) -> float:
        w = workload.bench_job(p, workload.parse_bench_args(options), 32, 4)
        return results.job_document(engine.run(p, w), 0)["summary"][0]["effective_bw"]["mean"]

    independent, collective = (bandwidth(f"-a mpiio {c} -b 64k -t 64k -s 16 -w") for c in ("", "-c"))
    ufs, cb = TABLE_C_5_192
    return [Row("Collective buffering: collective over independent N-1 strided bandwidth", cb / ufs,
                collective / independent, "> 1", collective > independent,
                f"simulated {independent / 2**20:.0f} -> {collective / 2**20:.0f} MiB/s; thesis FLASH-IO on 192 "
                f"cores, data sieving off, {ufs:.0f} -> {cb:.0f} MB/s (Table C.5)")]


CHECKS = {"table-6.3": table_6_3, "table-6.2": table_6_2, "delta-graph": delta_graph, "ior-tuning": ior_tuning,
          "small-beside-big": small_beside_big, "four-ior-jobs": four_ior_jobs, "wan-chunks": wan_chunks,
          "tipping-point": tipping_point, "collective-buffering": collective_buffering}


def run(names: list[str] | None = None) -> list[Row]:
    rows = []
    for name in names or list(CHECKS):
        rows += CHECKS[name]()
    return rows
