"""Start-up imports only what the command needs: the heavy libraries (numpy, pandas, pyarrow, plotly, dask,
matplotlib, PyDarshan) are not loaded to show any subcommand's help, and a subcommand loads no other's module."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ioloom.cli import SUBCOMMANDS

HEAVY = ("numpy", "pandas", "pyarrow", "plotly", "dask", "distributed", "matplotlib", "darshan")

# Runs the command line in this interpreter as `ioloom ARGS` would, then prints the modules it imported.
PROBE = """
import json, sys
from ioloom.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def imported(*args: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120)
    return set(json.loads(out.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("args", [["--version"], ["--help"], *([name, "--help"] for name in SUBCOMMANDS),
                                  ["container", "flatten", "--help"], ["bench", "io", "--help"]],
                         ids=" ".join)
def test_help_loads_no_heavy_library(args):
    modules = imported(*args)
    assert "typer" in modules, "the probe ran the command line"
    assert not [m for m in HEAVY if m in modules], sorted(m for m in HEAVY if m in modules)


def test_a_subcommand_loads_only_its_own_module():
    modules = imported("container", "--help")
    assert "ioloom.logfs.cli" in modules
    others = {target.split(":")[0] for name, target in SUBCOMMANDS.items() if name != "container"}
    assert not others & modules, sorted(others & modules)
