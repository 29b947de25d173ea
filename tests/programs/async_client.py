"""Test program for libioloom-async's Python client (ioloom.async_io.client): each client writes u by copy and v
in place (zero copy) for ITERATIONS iterations with the kernel's values (ioloom.async_io.kernel.expected_value),
signals checkpoint, then prints the message of a wrong-size write. Usage: async_client.py CONFIG ITERATIONS."""
import sys

import numpy as np

from ioloom.async_io.client import AsyncError, Client
from ioloom.async_io.kernel import expected_value

config, iterations = sys.argv[1], int(sys.argv[2])
with Client(config) as io:
    if io.is_client:
        rank, shape = io.rank, (8, 6, 4)
        element = np.arange(int(np.prod(shape)))
        for it in range(iterations):
            io.write("u", expected_value(it, rank, 0, element).reshape(shape))
            v = io.alloc("v", np.float64, shape)
            v[...] = expected_value(it, rank, 1, element).reshape(shape)
            io.commit("v")
            io.clear("v")
            io.signal("checkpoint")
            io.end_iteration()
        try:
            io.write("u", np.zeros(2))
        except AsyncError as error:
            print(f"rank {rank}: {error}", flush=True)
