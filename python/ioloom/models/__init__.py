"""The documents' models: storage-target contention (Wright Ch. 6), cross-application interference and
CALCioM (Dorier Ch. 6), dedicated I/O cores and energy (Dorier Eq. 3.2, Eqs. 5.1-5.4), striping and Wan's
chunk refactoring. Formulas, sources and assumptions: docs/models.md.
"""
from ioloom.models.contention import (
    d_inuse_equal,
    expected_max_load,
    ost_load,
    plfs_load,
    plfs_tipping_point,
    sharing_distribution,
)
from ioloom.models.dedicated import dedicated_core, dedicated_nodes_power, energy, sim_time
from ioloom.models.interference import (
    METRICS,
    Pending,
    calciom_choice,
    concurrency_from_swf,
    delta_graph,
    p_concurrent_io,
    p_in_io,
    proportional_sharing,
    serial_cost,
    shared_ends,
    sharing_cost,
    speeds,
)
from ioloom.models.striping import Pattern
from ioloom.models.striping import advise as advise_striping

__all__ = ["d_inuse_equal", "expected_max_load", "ost_load", "plfs_load", "plfs_tipping_point",
           "sharing_distribution", "dedicated_core", "dedicated_nodes_power", "energy", "sim_time",
           "calciom_choice", "concurrency_from_swf", "delta_graph", "p_concurrent_io", "p_in_io",
           "proportional_sharing", "METRICS", "Pending", "serial_cost", "shared_ends", "sharing_cost", "speeds",
           "Pattern", "advise_striping"]
