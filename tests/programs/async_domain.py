"""Test program for blocks in one global domain (docs/async.md, "A global domain"): each client writes its block of
t, cut from the whole array ioloom.async_io.kernel.global_value(iteration, GLOBAL) at the position its configuration
gives it (Client.position), for ITERATIONS iterations; client SKIP writes nothing at iteration 1. Usage:
async_domain.py CONFIG ITERATIONS GLOBAL BLOCK SKIP (GLOBAL and BLOCK as 6,8 and 3,4)."""
import sys

from ioloom.async_io.client import Client
from ioloom.async_io.kernel import global_value

config, iterations, skip = sys.argv[1], int(sys.argv[2]), int(sys.argv[5])
shape, block = (tuple(int(n) for n in arg.split(",")) for arg in sys.argv[3:5])
with Client(config) as io:
    if io.is_client:
        rank, at = io.rank, io.position("t")
        place = tuple(slice(o, o + n) for o, n in zip(at, block))
        print(f"client {rank} at {list(at)}", flush=True)
        for it in range(iterations):
            if not (rank == skip and it == 1):
                io.write("t", global_value(it, shape)[place])
            io.end_iteration()
