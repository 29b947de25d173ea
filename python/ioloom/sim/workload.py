"""What the simulated ranks do: per-rank operations in program order plus each file's layout.

A workload comes from a bench pattern with `ioloom bench io`'s options (the layouts of docs/bench.md, "Layout of
the patterns"), from a job mix (several such jobs with start times), and can be re-woven as the log-structured
layer does (`logfs`: every writer appends to its own log and writes an index at close).
"""
from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ioloom import docfile, units
from ioloom.sim.platform import Platform

OP = np.dtype([("job", "<i4"), ("rank", "<i4"), ("kind", "<i4"), ("file", "<i4"), ("offset", "<i8"),
               ("length", "<i8"), ("gap", "<f8")])
assert OP.itemsize == 40  # native/sim/sim.hpp: struct Op
KINDS = {"write": 1, "read": 2, "open": 3, "close": 4, "sync": 5, "barrier": 6, "stat": 7, "send": 8}
# a barrier inside a collective call (kind, file, offset 1, length): its wait is part of the call's time
IN_CALL_BARRIER = (KINDS["barrier"], 0, 1, 0)
INDEX_ENTRY_BYTES = 80  # docs/logfs-format.md: an index entry (a pattern of any length is one)


class WorkloadError(ValueError):
    """Options or a job mix that describe no workload the simulator can run; the message says what to change."""


@dataclass
class BenchArgs:
    """The subset of ioloom-bench's options a simulated job takes (same letters, same defaults)."""
    pattern: str = "strided"
    block: int = 1 << 20
    transfer: int = 256 << 10
    segments: int = 1
    write: bool = False
    read: bool = False
    fsync: bool = False
    random: bool = False
    wait_ms: float = 0.0
    repetitions: int = 1
    api: str = "posix"
    collective: bool = False

    def phases(self) -> list[str]:
        return [p for p, on in (("write", self.write), ("read", self.read)) if on] or ["write", "read"]


def parse_size(text: str) -> int:
    """A size as ioloom-bench reads it ('4m' -> 4194304), refused as a WorkloadError."""
    try:
        return units.size(text, "size")
    except units.UnitError as e:
        raise WorkloadError(str(e)) from None


_FLAGS = {"-F": ("pattern", "fpp"), "-c": ("collective", True), "-e": ("fsync", True), "-z": ("random", True),
          "-w": ("write", True), "-r": ("read", True)}
# bench option -> (the field it sets, the parser of its value)
_VALUES: dict[str, tuple[str, Callable[[str], object]]] = {
    "-b": ("block", parse_size), "--block-size": ("block", parse_size), "-t": ("transfer", parse_size),
    "--transfer-size": ("transfer", parse_size), "-s": ("segments", int), "--segments": ("segments", int),
    "--pattern": ("pattern", str), "--wait": ("wait_ms", float), "-i": ("repetitions", int),
    "--repetitions": ("repetitions", int), "-a": ("api", str), "--api": ("api", str)}
_NOT_SIMULATED = {"-C": "reading another node's data (-C) is not simulated yet",
                  "--kernel": "kernels (--kernel) are not simulated yet: use a pattern"}


def parse_bench_args(text: str | list[str]) -> BenchArgs:
    """ioloom-bench options (e.g. "-b 4m -t 1m -s 4 -w") as a BenchArgs; options that do not change what the
    storage sees (-o, --dir, -k, --json, --verify, --hint) are accepted and ignored."""
    argv = shlex.split(text) if isinstance(text, str) else list(text)
    args, i = BenchArgs(), 0
    while i < len(argv):
        opt = argv[i]
        if opt in _NOT_SIMULATED:
            raise WorkloadError(_NOT_SIMULATED[opt])
        if opt in _FLAGS:
            setattr(args, *_FLAGS[opt])
        elif opt in _VALUES or opt in ("-o", "--dir", "--hint", "--ranks-per-node"):
            if i + 1 == len(argv):
                raise WorkloadError(f"{opt} needs a value")
            if opt in _VALUES:
                name, parse = _VALUES[opt]
                setattr(args, name, parse(argv[i + 1]))
            i += 1
        elif opt not in ("-k", "--keep", "--json", "--verify"):
            raise WorkloadError(f"unknown bench option {opt!r} (ioloom bench io --help lists them)")
        i += 1
    _check(args)
    return args


def _check(a: BenchArgs) -> None:
    if a.pattern not in ("strided", "contiguous", "fpp", "nfiles"):
        raise WorkloadError(f"--pattern {a.pattern}: use strided, contiguous, fpp or nfiles")
    if a.api not in ("posix", "mpiio"):
        raise WorkloadError(f"-a {a.api}: the simulator replays posix or independent mpiio data calls")
    if a.collective and a.api != "mpiio":
        raise WorkloadError("-c needs -a mpiio: POSIX has no collective calls")
    if a.transfer <= 0 or a.block <= 0 or a.block % a.transfer:
        raise WorkloadError(f"-t {a.transfer} must be positive and divide -b {a.block}")
    if a.segments <= 0 or a.repetitions <= 0 or a.wait_ms < 0:
        raise WorkloadError("-s and -i must be positive and --wait not negative")


@dataclass
class Workload:
    ops: np.ndarray                              # OP records grouped by job, then rank, each in program order
    layouts: dict[int, tuple[int, list[int]]]     # file id -> (stripe size, targets)
    jobs: list[tuple[float, int, int, int]]      # (start, ranks, ranks per node, first node)
    phase: np.ndarray                            # per operation: its phase's index in `phases` (-1: none)
    phases: list[tuple[int, str, int]]           # (job, "write" or "read", repetition)
    args: list[BenchArgs] = field(default_factory=list)
    index_files: set[int] = field(default_factory=set)  # logfs index journals: their writes belong to close
    recorded: np.ndarray | None = None  # a replayed trace: each operation's (start, end) as traced, s from its first
    calls: np.ndarray | None = None  # a replayed trace: each operation's traced call (open64, pwrite...)
    paths: list[str] | None = None  # a replayed trace: each file's traced path, by file id


class Placement:
    """Lustre-like target allocation for new files: random distinct targets, or round robin from a rotating
    start, reproducible from the platform's seed; or the platform's explicit list (`layout.targets`)."""

    def __init__(self, platform: Platform, seed_offset: int = 0):
        self.targets = platform["targets.count"]
        self.rng = np.random.default_rng(platform["run.seed"] + seed_offset)
        self.policy = platform["layout.placement"]
        self.explicit = list(platform["layout.targets"])
        self.next_start = int(self.rng.integers(self.targets))

    def place(self, count: int) -> list[int]:
        if self.explicit:
            count = len(self.explicit) if count == -1 else count
            if count > len(self.explicit):
                raise WorkloadError(f"a stripe count of {count} exceeds the {len(self.explicit)} targets of "
                                    "`layout.targets`: list more targets or lower the stripe count")
            return self.explicit[:count]
        count = self.targets if count == -1 else count
        if self.policy == "random":
            return [int(t) for t in self.rng.choice(self.targets, size=count, replace=False)]
        start, self.next_start = self.next_start, (self.next_start + count) % self.targets
        return [(start + i) % self.targets for i in range(count)]


def _ops(n: int, **columns) -> np.ndarray:
    out = np.zeros(n, dtype=OP)
    for name, value in columns.items():
        out[name] = value
    return out


def _data_offsets(a: BenchArgs, nranks: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(file index, offset) of every transfer, shape (nranks, segments * block / transfer), each rank's in the order
    it moves them (docs/bench.md's table; -z shuffles each rank's transfers within each of its files)."""
    x = np.arange(a.block // a.transfer, dtype=np.int64) * a.transfer
    s = np.arange(a.segments, dtype=np.int64)[:, None]
    r = np.arange(nranks, dtype=np.int64)[:, None, None]
    base = {"strided": (s * nranks + r) * a.block, "contiguous": (r * a.segments + s) * a.block,
            "fpp": s * a.block + 0 * r, "nfiles": 0 * s + 0 * r}[a.pattern]
    offsets = np.broadcast_to(base + x, (nranks, a.segments, x.size)).copy()
    files = {"strided": 0 * r + 0 * s, "contiguous": 0 * r + 0 * s, "fpp": r + 0 * s,
             "nfiles": r * a.segments + s}[a.pattern]
    files = np.broadcast_to(files, offsets.shape).copy()
    if a.random:
        per_file = offsets.reshape(nranks, -1) if a.pattern != "nfiles" else offsets.reshape(nranks * a.segments, -1)
        for row in per_file:
            rng.shuffle(row)
    return files.reshape(nranks, -1), offsets.reshape(nranks, -1)


def _phase(a: BenchArgs, kind: str, nranks: int, rng: np.random.Generator,
           exchange: Callable[[np.ndarray], list[np.ndarray]] | None = None) -> list[np.ndarray]:
    """One phase of every rank: open, barrier, the transfers, fsync (-e, writes), close, barrier; nfiles opens and
    closes a file per segment. `exchange` rewrites the transfers (nranks, calls) as collective buffering does. One
    array of operations per rank."""
    files, offsets = _data_offsets(a, nranks, rng)
    per_seg = a.block // a.transfer
    gap = a.wait_ms / 1000.0
    create = int(kind == "write")
    rank_col = np.arange(nranks)[:, None]
    data: np.ndarray = _ops(files.size, kind=KINDS[kind], file=files.ravel(), offset=offsets.ravel(),
                            length=a.transfer, gap=gap).reshape(nranks, -1)
    if a.pattern == "nfiles":
        data = data.reshape(nranks, a.segments, per_seg)
        opens = _ops(nranks * a.segments, kind=KINDS["open"], offset=create,
                     file=data["file"][:, :, 0].ravel()).reshape(nranks, a.segments, 1)
        closes = opens.copy()
        closes["kind"], closes["offset"] = KINDS["close"], 0
        body = np.concatenate([opens, data, closes], axis=2).reshape(nranks, -1)
        head, tail = np.zeros((nranks, 0), OP), np.zeros((nranks, 0), OP)
    else:
        head = _ops(nranks, kind=KINDS["open"], file=data["file"][:, 0],
                    offset=create if a.pattern == "fpp" else (rank_col.ravel() == 0) * create).reshape(nranks, 1)
        tail = _ops(nranks, kind=KINDS["close"], file=data["file"][:, 0]).reshape(nranks, 1)
        body = data
    barrier = _ops(nranks, kind=KINDS["barrier"]).reshape(nranks, 1)
    sync = _ops(nranks, kind=KINDS["sync"], file=data["file"].reshape(nranks, -1)[:, 0]).reshape(nranks, 1)
    before, after = [head, barrier], ([sync] if a.fsync and kind == "write" else []) + [tail, barrier]
    bodies = exchange(body) if exchange else list(body)
    return [np.concatenate([*(p[r] for p in before), bodies[r], *(p[r] for p in after)]) for r in range(nranks)]


def _pieces(rank: int, offset: int, length: int, stripe: int) -> list[tuple[int, int, int, int]]:
    """A transfer cut at stripe boundaries: (rank, offset, length, stripe index) each."""
    out, at, end = [], offset, offset + length
    while at < end:
        n = min(end - at, stripe - at % stripe)
        out.append((rank, at, n, at // stripe))
        at += n
    return out


def two_phase(kind: str, stripe: int, count: int, nranks: int, ranks_per_node: int,
              first_node: int) -> Callable[[np.ndarray], list[np.ndarray]]:
    """Collective buffering (ROMIO's two-phase I/O) of a shared file's transfers, one collective call per column
    (every rank's i-th transfer, as `ioloom bench io -c` calls MPI_File_write_at_all): one aggregator per node,
    the first rank of each (ROMIO's default, cb_config_list "*:1"; Wright Ch. 5.2.1), at most one per object and
    each object's stripes to one aggregator, object i's to aggregator i mod A (ROMIO's Lustre driver with
    romio_lustre_co_ratio 1: file domains stripe-aligned so that no two aggregators write one object). A call:
    a barrier (the offsets' exchange), then for a write each rank sends its pieces to their aggregators (over the
    network; nothing within a node), a barrier, and each aggregator writes its pieces, adjacent ones joined; a read
    the other way round. Each call's data are one cycle (under cb_buffer_size per aggregator in the patterns'
    sizes: a cycle per 16 MiB is left out)."""
    nodes = -(-nranks // ranks_per_node)
    aggregators = min(nodes, count)
    assert aggregators >= 1  # a job has a node and a file an object

    def node_of(rank: int) -> int:
        return first_node + rank // ranks_per_node

    def rewrite(body: np.ndarray) -> list[np.ndarray]:
        file = int(body["file"][0, 0])
        out: list[list] = [[] for _ in range(nranks)]
        for call in body.T:
            pieces = [p for r in range(nranks) for p in _pieces(r, int(call["offset"][r]), int(call["length"][r]),
                                                                 stripe)]
            moved = _exchange(pieces, count, aggregators, node_of, ranks_per_node, kind, file, nranks)
            for r in range(nranks):  # the rank's computation before the call (--wait) is before its first barrier
                out[r] += [(*IN_CALL_BARRIER, float(call["gap"][r]))] + [(*op, 0.0) for op in moved[r]]
        return [np.array([(0, r, *op) for op in ops], dtype=OP) for r, ops in enumerate(out)]

    return rewrite


def _exchange(pieces: list[tuple[int, int, int, int]], count: int, aggregators: int, node_of: Callable[[int], int],
              ranks_per_node: int, kind: str, file: int, nranks: int) -> list[list]:
    """One collective call's operations per rank: the sends and, on the aggregators, their joined pieces."""
    sends: dict[tuple[int, int], int] = {}
    runs: dict[int, list[list[int]]] = {}
    for rank, offset, length, index in sorted(pieces, key=lambda p: p[1]):
        agg = (index % count) % aggregators * ranks_per_node
        sends[rank, agg] = sends.get((rank, agg), 0) + length
        mine = runs.setdefault(agg, [])
        if mine and mine[-1][0] + mine[-1][1] == offset:
            mine[-1][1] += length
        else:
            mine.append([offset, length])
    moved: list[list] = [[] for _ in range(nranks)]
    io = {agg: [(KINDS[kind], file, o, n) for o, n in mine] for agg, mine in runs.items()}
    for (rank, agg), n in sends.items():
        src, dst = (rank, agg) if kind == "write" else (agg, rank)
        if node_of(src) != node_of(dst):
            moved[src].append((KINDS["send"], 0, node_of(dst), n))
    for r in range(nranks):
        own = io.get(r, [])
        moved[r] = moved[r] + [IN_CALL_BARRIER] + own if kind == "write" else own + [IN_CALL_BARRIER] + moved[r]
    return moved


def file_count(a: BenchArgs, nranks: int) -> int:
    return {"strided": 1, "contiguous": 1, "fpp": nranks, "nfiles": nranks * a.segments}[a.pattern]


def bench_job(platform: Platform, a: BenchArgs, nranks: int, ranks_per_node: int, job: int = 0,
              first_node: int = 0, first_file: int = 0, placement: Placement | None = None,
              stripe_count: int | None = None, stripe_size: int | None = None) -> Workload:
    """Job `job`'s operations and files for pattern `a` on nranks ranks (write phase, then read, per repetition)."""
    placement = placement or Placement(platform)
    rng = np.random.default_rng(platform["run.seed"] + 7919 * (job + 1))
    count = stripe_count if stripe_count is not None else platform["layout.stripe_count"]
    size = stripe_size or platform["layout.stripe_size"]
    layouts = {first_file + f: (size, placement.place(count)) for f in range(file_count(a, nranks))}
    shared = a.collective and a.pattern in ("strided", "contiguous")  # a file per rank: its collectives are its own
    names = [(job, kind, rep) for rep in range(a.repetitions) for kind in a.phases()]
    parts = [_phase(a, kind, nranks, rng, two_phase(kind, size, len(layouts[first_file][1]), nranks, ranks_per_node,
                                                    first_node) if shared else None) for _, kind, _ in names]
    per_rank = [np.concatenate([p[r] for p in parts]) for r in range(nranks)]
    phase = np.concatenate([np.full(p[r].size, i) for r in range(nranks) for i, p in enumerate(parts)])
    ops = np.concatenate(per_rank)
    ops["job"], ops["rank"] = job, np.repeat(np.arange(nranks), [r.size for r in per_rank])
    ops["file"] += first_file
    return Workload(ops, layouts, [(0.0, nranks, ranks_per_node, first_node)], phase, names, [a])


def logfs(w: Workload, platform: Platform, placement: Placement | None = None) -> Workload:
    """The workload re-woven as logfs (N-1 mode, fan-out per rank) does it: each rank's data calls on a file go to
    its own log of that file, appended in program order (reads of a rank's own data read its log back); opening
    creates the rank's log and index (two creates at the metadata server), closing writes the index (one entry
    per run of writes, 80 bytes each: a regular run is one entry). A handle loads the writers' index journals
    (docs/logfs-format.md, "Consistency"): a writer the others' at every sync point and size query (stat), a
    reader all of them when it opens (native/logfs/lf_file.c)."""
    placement = placement or Placement(platform, seed_offset=104729)
    ops = w.ops.copy()
    count, size = platform["layout.stripe_count"], platform["layout.stripe_size"]
    log_of: dict[tuple[int, int, int], int] = {}
    layouts: dict[int, tuple[int, list[int]]] = {}
    next_id = max(w.layouts) + 1 if w.layouts else 0

    def log_file(job: int, rank: int, file: int, which: int) -> int:
        nonlocal next_id
        key = (job, rank, file * 2 + which)
        if key not in log_of:
            log_of[key] = next_id
            layouts[next_id] = (size, placement.place(count))
            next_id += 1
        return log_of[key]

    out: list[np.ndarray] = []
    tags: list[np.ndarray] = []
    writers = _writers(ops)
    for (job, rank), rows, phase in _by_rank(ops, w.phase):
        entries = _index_entries(rows)
        cursor: dict[int, int] = {}
        for op, tag in zip(rows, phase):
            kind, file = int(op["kind"]), int(op["file"])
            others = len(writers.get((job, file), ())) - ((job, file) in writers and rank in writers[(job, file)])
            if kind in (KINDS["write"], KINDS["read"]):
                log = log_file(job, rank, file, 0)
                op["file"], op["offset"] = log, cursor.get(log, 0)
                cursor[log] = int(op["offset"]) + int(op["length"])
                emitted = [op]
            elif kind == KINDS["open"]:  # a write phase creates every writer's own log and index; a reader loads all
                phase_kind = w.phases[tag][1] if tag >= 0 else ""
                op["offset"] = int(phase_kind == "write")
                op["length"] = len(writers.get((job, file), ())) if phase_kind == "read" else 0
                index = op.copy()
                op["file"] = log_file(job, rank, file, 0)
                index["file"], index["gap"], index["length"] = log_file(job, rank, file, 1), 0, 0
                emitted = [op, index]
            elif kind in (KINDS["sync"], KINDS["stat"]):  # on the rank's log; then the others' indexes are loaded
                op["file"], op["offset"] = log_file(job, rank, file, 0), others
                emitted = [op]
            elif kind == KINDS["close"]:
                index = _ops(1, job=job, rank=rank, kind=KINDS["write"], file=log_file(job, rank, file, 1),
                             length=max(entries.get(file, 0), 1) * INDEX_ENTRY_BYTES)[0]
                emitted = [index, op]
            else:
                emitted = [op]
            out.append(np.array(emitted, dtype=OP))
            tags.append(np.full(len(emitted), tag))
    index_files = {f for (_, _, which), f in log_of.items() if which % 2}
    return Workload(np.concatenate(out), layouts, w.jobs, np.concatenate(tags), w.phases, w.args, index_files)


def _writers(ops: np.ndarray) -> dict[tuple[int, int], set[int]]:
    """(job, file) -> the ranks that write it: each has an index journal of the file under the log layer."""
    out: dict[tuple[int, int], set[int]] = {}
    writes = ops[ops["kind"] == KINDS["write"]]
    for job, rank, file in np.unique(np.stack([writes["job"], writes["rank"], writes["file"]], axis=1), axis=0):
        out.setdefault((int(job), int(file)), set()).add(int(rank))
    return out


def _index_entries(rows: np.ndarray) -> dict[int, int]:
    """Index entries of one rank's writes per file, by logfs's merging rules (docs/logfs-format.md, "Index
    journals"): writes that follow each other in the file join into one record (the log is appended in order), and
    records of one length at one stride are one pattern entry."""
    out = {}
    writes = rows[rows["kind"] == KINDS["write"]]
    for file in np.unique(writes["file"]):
        mine = writes[writes["file"] == file]
        starts, ends = mine["offset"], mine["offset"] + mine["length"]
        joined = np.flatnonzero(np.concatenate([[True], starts[1:] != ends[:-1]]))  # first write of each record
        offsets = starts[joined]
        lengths = np.add.reduceat(mine["length"], joined)
        entries, count, stride = 1, 1, None
        for i in range(1, offsets.size):
            step = int(offsets[i] - offsets[i - 1])
            if lengths[i] == lengths[i - 1] and step >= lengths[i] and (count == 1 or step == stride):
                stride, count = step, count + 1
            else:
                entries, count, stride = entries + 1, 1, None
        out[int(file)] = entries
    return out


def rank_rows(ops: np.ndarray) -> list[np.ndarray]:
    """Each (job, rank)'s operations: their indices in ops, in program order (the ops are grouped so)."""
    keys = ops["job"].astype(np.int64) << 32 | ops["rank"].astype(np.int64)
    return np.split(np.arange(keys.size), np.flatnonzero(np.diff(keys)) + 1)


def _by_rank(ops: np.ndarray, phase: np.ndarray):
    """Each (job, rank), its operations and their phases: views of ops and phase, which the caller may change."""
    for rows in rank_rows(ops):
        part = slice(int(rows[0]), int(rows[-1]) + 1)
        yield (int(ops["job"][part.start]), int(ops["rank"][part.start])), ops[part], phase[part]


def combine(workloads: list[Workload], starts: list[float]) -> Workload:
    """Several jobs as one simulation: job i is workloads[i]'s job renumbered i, starting at starts[i]."""
    ops, tags, layouts, jobs, args, index_files = [], [], {}, [], [], set()
    names: list[tuple[int, str, int]] = []
    for i, (w, start) in enumerate(zip(workloads, starts)):
        part = w.ops.copy()
        part["job"] = i
        ops.append(part)
        tags.append(np.where(w.phase >= 0, w.phase + len(names), -1))
        names += [(i, kind, rep) for _, kind, rep in w.phases]
        layouts.update(w.layouts)
        _, n, rpn, node = w.jobs[0]
        jobs.append((start, n, rpn, node))
        args += w.args
        index_files |= w.index_files
    return Workload(np.concatenate(ops), layouts, jobs, np.concatenate(tags), names, args, index_files)


# What a replayed trace keeps of each process's calls (docs/trace-format.md names them): the POSIX and stdio data
# calls (MPI-IO calls are replayed as the POSIX calls they issued), and the opens, closes, syncs and stats of the
# files those move data in.
TRACE_OPENS = {"open", "open64", "openat", "openat64", "creat", "creat64", "__open_2", "__open64_2", "__openat_2",
               "__openat64_2", "fopen", "fopen64", "freopen", "freopen64", "fdopen"}
TRACE_KINDS = {**{op: KINDS["open"] for op in TRACE_OPENS}, "close": KINDS["close"], "fclose": KINDS["close"],
               "fsync": KINDS["sync"], "fdatasync": KINDS["sync"],
               **{op: KINDS["stat"] for op in ("stat", "stat64", "lstat", "lstat64", "__xstat", "__lxstat",
                                               "__xstat64", "__lxstat64")}}
O_CREAT = 0o100  # open(2)'s flag in an open's aux (Linux)


# Files that are not in a file system (the kernel names them so in /proc/PID/fd): MPI's pipes and sockets.
STREAMS = ("pipe:", "socket:", "anon_inode:")


def _trace_events(path):
    """The POSIX and stdio calls of a trace (a directory, or a Trace already open) on files of a file system (not
    pipes or sockets), as a pandas frame in time order; and each file's path by its id."""
    from ioloom.trace import Trace, TraceDamaged, TraceNotFound, open_trace

    try:
        trace = path if isinstance(path, Trace) else open_trace(path)
        events = trace.events(["t_start", "t_end", "rank", "pid", "layer", "op", "file_id", "offset", "ret_bytes",
                               "aux"]).to_pandas()
        files = trace.files.to_pandas()
    except (TraceNotFound, TraceDamaged) as e:
        raise WorkloadError(f"trace {path}: {e}") from None
    events = events.astype({"op": str, "layer": str})
    streams = files["file_id"][files["path"].astype(str).str.startswith(STREAMS)]
    return events[events["layer"].isin(["posix", "stdio"]) & ~events["file_id"].isin(streams)], \
        dict(zip(files["file_id"], files["path"].astype(str)))


def _trace_kinds(events) -> np.ndarray:
    """Each event's operation kind (0: not replayed)."""
    from ioloom.trace.ops import direction

    moved = [direction(op, aux) for op, aux in zip(events["op"], events["aux"])]
    kind = np.array([KINDS[d] if d else TRACE_KINDS.get(op, 0) for d, op in zip(moved, events["op"])], dtype=np.int32)
    data = np.isin(kind, [KINDS["write"], KINDS["read"]])
    kind[data & (events["ret_bytes"].to_numpy() <= 0)] = 0  # failed or empty calls move nothing
    return kind


def from_trace(platform: Platform, path, ranks_per_node: int | None = None, placement: Placement | None = None,
               stripe_count: int | None = None, stripe_size: int | None = None) -> Workload:
    """A traced run as one job: each process a rank (MPI ranks in order, else processes in pid order), its calls in
    time order with the computation between them (start minus the previous call's end) as gaps, the first gap from
    the trace's first call; each file data moved in a new file of the platform's layout."""
    events, paths = _trace_events(path)
    kind = _trace_kinds(events)
    data = np.isin(kind, [KINDS["write"], KINDS["read"]])
    files = np.unique(events["file_id"].to_numpy()[data])
    keep = (kind > 0) & np.isin(events["file_id"].to_numpy(), files)
    events, kind, data = events[keep], kind[keep], data[keep]
    if not data.any():
        raise WorkloadError(f"trace {path}: no POSIX or stdio call moved data: nothing to replay")
    unknown = int((events["offset"].to_numpy()[data] < 0).sum())
    if unknown:
        raise WorkloadError(f"trace {path}: {unknown} data calls have no offset (the tracer could not follow their "
                            "file position): trace the program again with ioloom run, or replay a bench pattern")
    who = np.where(events["rank"].to_numpy() >= 0, events["rank"].to_numpy(), events["pid"].to_numpy())
    owners, rank = np.unique(who, return_inverse=True)
    order = np.lexsort((events["t_start"].to_numpy(), rank))
    t0, t1 = events["t_start"].to_numpy()[order] / 1e9, events["t_end"].to_numpy()[order] / 1e9
    rank, kind, data = rank[order], kind[order], data[order]
    previous_end = np.where(np.r_[True, rank[1:] != rank[:-1]], t0.min(), np.r_[0.0, t1[:-1]])
    aux = events["aux"].to_numpy()[order]
    ops = _ops(rank.size, rank=rank, kind=kind, file=np.searchsorted(files, events["file_id"].to_numpy()[order]),
               offset=np.where(data, events["offset"].to_numpy()[order], (kind == KINDS["open"]) & (aux & O_CREAT > 0)),
               length=np.where(data, events["ret_bytes"].to_numpy()[order], 0),
               gap=np.maximum(t0 - previous_end, 0.0))
    placement = placement or Placement(platform)
    count = stripe_count if stripe_count is not None else platform["layout.stripe_count"]
    size = stripe_size or platform["layout.stripe_size"]
    layouts = {f: (size, placement.place(count)) for f in range(files.size)}
    nranks = owners.size
    job = (0.0, nranks, ranks_per_node or nranks, 0)
    recorded = np.stack([t0, t1], axis=1) - t0.min()
    return Workload(ops, layouts, [job], np.zeros(rank.size, dtype=np.int64), [(0, "replay", 0)], [BenchArgs()],
                    recorded=recorded, calls=events["op"].to_numpy()[order], paths=[paths[f] for f in files])


# A job-mix file's keys per [[job]] table: (required, type, meaning). docs/sim.md, "Job mix".
JOB_KEYS: dict[str, tuple[bool, type, str]] = {
    "name": (False, str, "the job's name in the output (default: job N)"),
    "ranks": (True, int, "ranks of the job"),
    "ranks_per_node": (False, int, "ranks per node (default: the platform's clients.ranks_per_node)"),
    "start": (False, float, "seconds after the simulation starts (default 0)"),
    "bench": (True, str, "ioloom bench io's options, e.g. \"-F -b 16m -t 2m -e -w\""),
    "stripe_count": (False, int, "targets per file (default: layout.stripe_count)"),
    "stripe_size": (False, str, "bytes per stripe, e.g. \"4m\" (default: layout.stripe_size)"),
    "logfs": (False, bool, "re-weave the job as the log layer does (default false)"),
}
FILES_PER_JOB = 1 << 20  # file ids of job j start at j x this, so the jobs' files never meet


def _job_entry(i: int, entry: dict) -> dict:
    if not isinstance(entry, dict):
        raise WorkloadError(f"job {i}: each [[job]] is a table of keys (docs/sim.md lists them)")
    for key, value in entry.items():
        if key not in JOB_KEYS:
            raise WorkloadError(f"job {i}: unknown key `{key}`: use {', '.join(JOB_KEYS)}")
        kind = JOB_KEYS[key][1]
        number = kind is float and isinstance(value, int) and not isinstance(value, bool)
        if not (isinstance(value, kind) and not (kind is int and isinstance(value, bool))) and not number:
            raise WorkloadError(f"job {i}: `{key}` must be of type {kind.__name__} ({JOB_KEYS[key][2]}), not {value!r}")
    for key, (required, _, meaning) in JOB_KEYS.items():
        if required and key not in entry:
            raise WorkloadError(f"job {i}: `{key}` is missing ({meaning})")
    if entry["ranks"] < 1 or entry.get("ranks_per_node", 1) < 1 or entry.get("start", 0) < 0:
        raise WorkloadError(f"job {i}: ranks and ranks_per_node must be positive and start not negative")
    count = entry.get("stripe_count", 1)
    if count == 0 or count < -1:
        raise WorkloadError(f"job {i}: `stripe_count` = {count}: use 1 to the platform's targets, or -1 for all")
    return entry


def job_mix(platform: Platform, path) -> tuple[Workload, list[str]]:
    """The jobs of a job-mix file (TOML or YAML, one [[job]] table each) as one workload, each on nodes of its own
    in file order, their new files placed from one allocator (as one file system places them); and the jobs'
    names."""
    doc = docfile.read(path, "job mix", WorkloadError)
    if set(doc) != {"job"} or not isinstance(doc["job"], list) or not doc["job"]:
        raise WorkloadError(f"job mix {path}: give one [[job]] table per job and nothing else")
    placement, jobs, starts, names, node = Placement(platform), [], [], [], 0
    targets = platform["targets.count"]
    for i, raw in enumerate(doc["job"]):
        entry = _job_entry(i, raw)
        if entry.get("stripe_count", 1) > targets:
            raise WorkloadError(f"job {i}: `stripe_count` = {entry['stripe_count']} is more than the platform's "
                                f"{targets} targets: use 1..{targets} or -1 for all")
        rpn = entry.get("ranks_per_node", platform["clients.ranks_per_node"])
        size = parse_size(entry["stripe_size"]) if "stripe_size" in entry else None
        w = bench_job(platform, parse_bench_args(entry["bench"]), entry["ranks"], rpn, job=i, first_node=node,
                      first_file=i * FILES_PER_JOB, placement=placement, stripe_count=entry.get("stripe_count"),
                      stripe_size=size)
        jobs.append(logfs(w, platform, placement) if entry.get("logfs") else w)
        starts.append(float(entry.get("start", 0.0)))
        names.append(entry.get("name", f"job {i}"))
        node += -(-entry["ranks"] // rpn)
    return combine(jobs, starts), names
