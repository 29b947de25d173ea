"""`ioloom sim`: a striped parallel file system simulated on SimGrid (docs/sim.md).

`platform` reads the platform file (TOML or YAML) and its defaults, `workload` turns a bench pattern, a job mix or the
log-structured re-weaving of either into per-rank operations and file layouts, `engine` runs the C++ engine
(native/sim) on them, `results` turns its output into the figures `ioloom bench io` prints and more, `validate`
compares simulated and published values, and `cli` is the command group.
"""
