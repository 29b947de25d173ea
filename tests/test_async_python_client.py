"""libioloom-async's Python client (ioloom.async_io.client, docs/async.md "Python client"): a Python program
started with each MPI's mpiexec writes by copy and in place through the library in the modes its configuration
chooses, the reader gives every block back with the values it computed, a mistaken call raises AsyncError with the
library's message, and a configuration error is raised on every rank."""
from __future__ import annotations

import re
import sys

import pytest

from ioloom import paths
from ioloom.async_io.kernel import Setup
from test_async import check_output

PROGRAM = paths.REPO_ROOT / "tests" / "programs" / "async_client.py"


@pytest.mark.parametrize("mode", ["dedicated-cores", "helper-thread"])
def test_python_program_writes_through_the_library(mpi, tmp_path, mode):
    setup = Setup(tmp_path / "out", mode=mode, variables=("u", "v"), dims=(8, 6, 4), buffer=1 << 20)
    out = mpi.run(3, [sys.executable, PROGRAM, setup.write(tmp_path / "c.yaml"), "4"], timeout=120)
    clients = 2 if mode == "dedicated-cores" else 3
    output = check_output(tmp_path / "out", setup, clients, 4)  # v: written in place
    assert output.mode == mode and len(output.events) == 4 * clients
    # each client's line (the ranks' lines may share one line of the launcher's output)
    wrong = re.findall(r"rank (\d+): libioloom-async \(usage error\): variable 'u': the buffer has 16", out.stdout)
    assert sorted(map(int, wrong)) == list(range(clients)), out.stdout


def test_python_configuration_error_on_every_rank(mpi, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("name: x\nmode: sideways\n")
    program = tmp_path / "bad.py"
    # each rank writes what it raised to its own file: two ranks' stdout interleave through mpiexec
    program.write_text("import os, sys\nfrom ioloom.async_io.client import AsyncError, Client\ntry:\n"
                       "    Client(sys.argv[1])\nexcept AsyncError as error:\n"
                       "    open(f'{sys.argv[2]}/raised.{os.getpid()}', 'w').write(f'{error.status} {error}')\n")
    out = mpi.run(2, [sys.executable, program, config, tmp_path], timeout=120)
    lines = [p.read_text() for p in tmp_path.glob("raised.*")]
    assert len(lines) == 2 and all(line.startswith("1 ") and "mode must be one of" in line for line in lines), \
        (lines, out.stdout)
