"""The simulated machine, from a TOML or YAML platform file over documented defaults (docs/sim.md, "Platform").

`DEFAULTS` is the one statement of every key, its default, its unit and what it means: the engine's parameters,
the docs' table and the validation all come from it. Units: bytes, bytes per second, seconds.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ioloom import docfile

# section.key: (default, engine parameter or None, meaning). A key whose engine parameter is None is used by the
# driver itself.
DEFAULTS: dict[str, tuple[Any, str | None, str]] = {
    "clients.nodes": (64, "nodes", "client nodes"),
    "clients.ranks_per_node": (16, None, "ranks per node (a workload may set its own)"),
    "clients.cores": (0, "cores", "cores of a node: ranks' copies into the write-back cache share them, each "
                                  "at cache.copy_bandwidth on one core (0: a core per rank)"),
    "clients.cpu_load": (0.0, "cpu_load", "other processes running on a node (its load average): with clients.cores "
                                          "set, a copy into the cache past its burst gets cores / (cpu_load + "
                                          "copies under way) of a core"),
    "clients.copy_efficiency": (1.0, "copy_efficiency", "the fraction of cores x cache.copy_bandwidth a node's "
                                                        "copies move together when as many run at once as it has "
                                                        "cores (they share its memory bus and page allocator); "
                                                        "from 1 copy (1) linearly, with clients.cores set"),
    "clients.oversubscribed_efficiency": (1.0, "oversubscribed_efficiency",
                                          "the same fraction with twice as many copies as cores, time-sliced on "
                                          "them (switches, caches refilled); linear from clients.copy_efficiency, "
                                          "held beyond"),
    "clients.nic_bandwidth": (1.25e9, "nic_bandwidth", "bytes/s of a node's network link, each direction"),
    "clients.nic_latency": (2e-6, "nic_latency", "seconds of a node's network link"),
    "clients.nodes_per_group": (0, "nodes_per_group", "nodes behind one switch (0: all; a star)"),
    "clients.uplink_bandwidth": (0.0, "uplink_bandwidth",
                                 "bytes/s of a switch group's uplink, each direction (0: not a constraint)"),
    "network.topology": ("star", None, "star (every node straight to one switch, or behind clients.nodes_per_group "
                                       "groups) | fat_tree (leaves of network.leaf_nodes nodes with uplinks cut "
                                       "by network.oversubscription, optionally grouped in pods)"),
    "network.leaf_nodes": (18, None, "nodes per leaf switch of the fat tree (half the ports of a 36-port "
                                     "InfiniBand switch, the other half up)"),
    "network.oversubscription": (1.0, None, "a leaf's nodes' bandwidth over its uplinks' (1: full bisection; "
                                            "3: the uplinks carry a third)"),
    "network.pod_leaves": (0, None, "leaves per pod, a third level whose uplinks are cut by "
                                    "network.pod_oversubscription (0: leaves reach a non-blocking core)"),
    "network.pod_oversubscription": (1.0, None, "a pod's leaves' uplink bandwidth over the pod's uplinks'"),
    "network.routers": (0, "routers", "LNet routers between the clients' fabric and the servers, server o's "
                                      "traffic through router o mod routers (0: servers on the clients' fabric)"),
    "network.router_bandwidth": (4e9, "router_bandwidth", "bytes/s of a router, each direction (a QDR "
                                                          "InfiniBand port: 32 Gb/s of data)"),
    "servers.count": (40, "servers", "object storage servers; targets are numbered contiguously per server"),
    "servers.bandwidth": (2.5e9, "server_bandwidth", "bytes/s of a server's network link, each direction"),
    "servers.latency": (1e-5, "server_latency", "seconds of a server's network link"),
    "targets.count": (480, "targets", "storage targets (D_total)"),
    "targets.write_bandwidth": (4e8, "write_bandwidth", "bytes/s a target writes"),
    "targets.read_bandwidth": (5e8, "read_bandwidth", "bytes/s a target reads"),
    "targets.latency": (5e-4, "target_latency", "seconds per request at a target"),
    "targets.commit_latency": (5e-4, "commit_latency", "seconds a target takes to make a file's data durable at "
                                                       "fsync (one round trip: a journal commit)"),
    "targets.seek_penalty": (0.0, "seek_penalty",
                             "a target's capacity with n concurrent streams is capacity / (1 + seek_penalty (n-1))"),
    "metadata.open": (3e-4, "mds_open", "seconds the metadata server spends on an open"),
    "metadata.create": (1e-3, "mds_create", "seconds on a create"),
    "metadata.stat": (2e-4, "mds_stat", "seconds on a stat"),
    "metadata.close": (1e-4, "mds_close", "seconds on a close"),
    "metadata.threads": (8, "mds_threads", "requests the metadata server serves at once (the rest queue)"),
    "locks.enabled": (True, "extent_locks", "writes take per-object extent locks held per node"),
    "locks.grant": (2e-4, "lock_grant", "seconds to obtain a lock nobody holds"),
    "locks.revoke": (1e-3, "lock_revoke", "seconds to take a lock another node holds (revocation round trip)"),
    "rpc.size": (1 << 20, "rpc_size", "bytes per RPC (Lustre: 1 or 4 MiB)"),
    "rpc.in_flight": (8, "rpcs_in_flight", "RPCs a node keeps under way per target (one flow: a window of them)"),
    "cache.dirty_limit": (32 << 20, "dirty_limit", "bytes of written data a node caches per target before writes "
                                                   "wait (Lustre's max_dirty_mb); 0: write-through"),
    "cache.capacity": (24 << 30, "cache_capacity", "bytes of its own written data a node keeps (clean once sent) "
                                                   "and serves its reads of from memory, oldest dropped first "
                                                   "(Lustre's max_cached_mb: 3/4 of a 32 GB Cab node); 0: none"),
    "cache.copy_bandwidth": (5e9, "copy_bandwidth", "bytes/s a rank copies into the cache (0: instantly)"),
    "cache.copy_burst": (0, "copy_burst", "bytes a rank copies on a core of its own after it waited, ahead of "
                                          "clients.cpu_load (Linux's sleeper credit), with clients.cores set"),
    "cache.flush_threshold": (0, "flush_threshold", "bytes a node caches per target before it starts sending them "
                                                    "(0: at once, as a Lustre client sends each full RPC; Linux's "
                                                    "page cache: dirty_background_ratio of memory); fsync sends "
                                                    "them at once"),
    "layout.stripe_count": (1, None, "targets per file (-1: all)"),
    "layout.stripe_size": (1 << 20, None, "bytes per stripe"),
    "layout.targets": ([], None, "an explicit list of targets, in stripe order, for every new file (Lustre's "
                                 "`lfs setstripe -o`): a file of n stripes takes the first n; empty: "
                                 "layout.placement chooses"),
    "layout.placement": ("random", None, "first target and the rest: random (distinct targets drawn at random) | "
                                         "round_robin (consecutive targets from a rotating start)"),
    "background.modes": ([], None, "per-target load: list of [capacity left (0-1], weight]; empty: no load"),
    "background.period": (1.0, None, "seconds between two draws of a target's load"),
    "background.horizon": (600.0, None, "seconds of load drawn (then it repeats)"),
    "background.shared": (0.0, None, "chance that a target takes its server's draw for a period instead of its "
                                     "own, so that a server's targets move together (Wan: Pearson r = shared^2)"),
    "run.seed": (1, None, "seed of placement and load"),
    "run.time_budget": (1e6, "time_budget", "simulated seconds after which the run stops, reported unfinished"),
}

POSITIVE = {"clients.nodes", "clients.ranks_per_node", "clients.nic_bandwidth", "servers.count",
            "servers.bandwidth", "network.leaf_nodes", "network.router_bandwidth", "targets.count",
            "targets.write_bandwidth", "targets.read_bandwidth",
            "metadata.threads", "rpc.size", "rpc.in_flight", "layout.stripe_size", "background.period",
            "background.horizon", "run.time_budget"}


class PlatformError(ValueError):
    """A platform file or value that cannot describe a machine; the message names the key and the fix."""


@dataclass
class Platform:
    values: dict[str, Any] = field(default_factory=lambda: {k: v[0] for k, v in DEFAULTS.items()})

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def engine_params(self) -> dict[str, float]:
        """The engine's named parameters (docs/sim.md, "Engine input")."""
        params = {engine: float(self.values[key]) for key, (_, engine, _) in DEFAULTS.items() if engine}
        if not params["nodes_per_group"]:
            params["nodes_per_group"] = params["nodes"]
        params.update(nodes_per_pod=params["nodes"], pod_uplink_bandwidth=0.0)
        if self.values["network.topology"] == "fat_tree":
            params.update(self._fat_tree(params["nic_bandwidth"]))
        return params

    def _fat_tree(self, nic: float) -> dict[str, float]:
        """The fat tree as the engine's levels: leaf uplinks carry the leaf's nodes' bandwidth over the
        oversubscription, pod uplinks the pod's leaf uplinks over the pod's."""
        leaf, pod_leaves = self.values["network.leaf_nodes"], self.values["network.pod_leaves"]
        leaf_uplink = leaf * nic / self.values["network.oversubscription"]
        out = {"nodes_per_group": float(leaf), "uplink_bandwidth": leaf_uplink}
        if pod_leaves:
            out.update(nodes_per_pod=float(leaf * pod_leaves),
                       pod_uplink_bandwidth=pod_leaves * leaf_uplink / self.values["network.pod_oversubscription"])
        return out


def _flatten(doc: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in doc.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _check_value(key: str, value: Any) -> None:
    default = DEFAULTS[key][0]
    kind = type(default)
    if kind is bool:
        ok = isinstance(value, bool)
    elif kind in (int, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise PlatformError(f"`{key}` must be a {kind.__name__} (default {default!r}), not {value!r}")
    if key in POSITIVE and value <= 0:
        raise PlatformError(f"`{key}` must be positive, not {value!r} ({DEFAULTS[key][2]})")
    if kind in (int, float) and key not in POSITIVE and value < 0 and key != "layout.stripe_count":
        raise PlatformError(f"`{key}` cannot be negative ({value!r})")


def _check_whole(p: Platform) -> None:
    count, targets = p["layout.stripe_count"], p["targets.count"]
    if count == 0 or count < -1 or count > targets:
        raise PlatformError(f"`layout.stripe_count` = {count} is impossible with {targets} targets: "
                            f"use 1..{targets}, or -1 for all")
    explicit = p["layout.targets"]
    if explicit and (len(set(explicit)) != len(explicit) or
                     not all(isinstance(t, int) and 0 <= t < targets for t in explicit)):
        raise PlatformError(f"`layout.targets` = {explicit!r}: list distinct targets from 0 to {targets - 1}")
    if explicit and count > len(explicit):
        raise PlatformError(f"`layout.stripe_count` = {count} exceeds the {len(explicit)} targets of "
                            "`layout.targets`: list more targets or lower the stripe count")
    if p["layout.placement"] not in ("random", "round_robin"):
        raise PlatformError(f"`layout.placement` = {p['layout.placement']!r}: use random or round_robin")
    for mode in p["background.modes"]:
        if not (isinstance(mode, list) and len(mode) == 2 and 0 < mode[0] <= 1 and mode[1] > 0):
            raise PlatformError(f"`background.modes` entry {mode!r}: each is [capacity left in (0, 1], weight > 0]")
    for key in ("clients.copy_efficiency", "clients.oversubscribed_efficiency"):
        if not 0 < p[key] <= 1:
            raise PlatformError(f"`{key}` = {p[key]!r}: a fraction in (0, 1] (1: copies do not slow each other)")
    if not 0 <= p["background.shared"] <= 1:
        raise PlatformError(f"`background.shared` = {p['background.shared']!r}: a chance, from 0 to 1")
    if p["cache.dirty_limit"] and p["cache.flush_threshold"] > p["cache.dirty_limit"]:
        raise PlatformError(f"`cache.flush_threshold` = {p['cache.flush_threshold']!r} exceeds `cache.dirty_limit` = "
                            f"{p['cache.dirty_limit']!r}: writes would wait for a flush that never starts; lower it")
    _check_network(p)
    if p["servers.count"] > p["targets.count"]:
        raise PlatformError("`servers.count` exceeds `targets.count`: every server holds at least one target")


def _check_network(p: Platform) -> None:
    topology = p["network.topology"]
    if topology not in ("star", "fat_tree"):
        raise PlatformError(f"`network.topology` = {topology!r}: use star or fat_tree")
    for key in ("network.oversubscription", "network.pod_oversubscription"):
        if p[key] < 1:
            raise PlatformError(f"`{key}` = {p[key]!r}: a ratio of at least 1 (1: full bisection)")
    for key in ("network.leaf_nodes", "network.pod_leaves", "network.routers"):
        if not isinstance(p[key], int):
            raise PlatformError(f"`{key}` = {p[key]!r}: a whole number")
    if topology == "fat_tree" and (p["clients.uplink_bandwidth"] or p["clients.nodes_per_group"]):
        raise PlatformError("`clients.nodes_per_group` and `clients.uplink_bandwidth` are the star's switch groups: "
                            "with `network.topology = fat_tree` the leaves come from `network.leaf_nodes` and "
                            "`network.oversubscription`; drop one")


def from_dict(doc: dict) -> Platform:
    """A platform from parsed TOML (or a dict of the same shape); raises PlatformError naming the bad key."""
    p = Platform()
    for key, value in _flatten(doc).items():
        if key not in DEFAULTS:
            near = difflib.get_close_matches(key, DEFAULTS, n=1)
            raise PlatformError(f"unknown key `{key}`" + (f": did you mean `{near[0]}`?" if near else
                                                          " (docs/sim.md lists the keys)"))
        _check_value(key, value)
        p.values[key] = value
    _check_whole(p)
    return p


def load(path: str | Path | None) -> Platform:
    """The platform of a TOML or YAML file (None: the defaults)."""
    if path is None:
        return from_dict({})
    doc = docfile.read(path, "platform file", PlatformError)
    try:
        return from_dict(doc)
    except PlatformError as e:
        raise PlatformError(f"platform file {path}: {e}") from None
