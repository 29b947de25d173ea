"""Test plugin for libioloom-async's Python plugins: for each block it is given, numpy's sum, mean and max of each
variable, computed on the writer side, appended as one JSON line to $IOLOOM_ASYNC_TEST_STATS.<pid>, with whether
every array views memory it does not own (no copy) and its shape."""
import json
import os


def statistics(event, iteration, block, arrays):
    line = {"event": event, "iteration": iteration, "block": block,
            "stats": {name: [float(a.sum()), float(a.mean()), float(a.max())] for name, a in arrays.items()},
            "views": all(not a.flags.owndata and not a.flags.writeable for a in arrays.values()),
            "shapes": {name: list(a.shape) for name, a in arrays.items()}, "pid": os.getpid()}
    with open(f"{os.environ['IOLOOM_ASYNC_TEST_STATS']}.{os.getpid()}", "a") as out:
        out.write(json.dumps(line) + "\n")


def fails(event, iteration, block, arrays):
    raise RuntimeError(f"plugin failure at {iteration}")


def node_sums(event, iteration, block, arrays):
    """A node-scope plugin: arrays by (variable, block), all the server's clients at once."""
    line = {"iteration": iteration, "block": block, "keys": sorted(f"{name}@{b}" for name, b in arrays),
            "sums": {f"{name}@{b}": float(a.sum()) for (name, b), a in arrays.items()}, "pid": os.getpid()}
    with open(f"{os.environ['IOLOOM_ASYNC_TEST_STATS']}.{os.getpid()}", "a") as out:
        out.write(json.dumps(line) + "\n")
