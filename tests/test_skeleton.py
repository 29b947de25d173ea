"""The skeleton: the command line, doctor, MPI discovery and the MPI test harness."""
import json
import re

from ioloom import __version__
from ioloom import mpi as mpi_impls


def test_version_and_help(ioloom_cli):
    assert ioloom_cli("--version").stdout.strip() == f"ioloom {__version__}"
    help_text = ioloom_cli("--help").stdout
    for sub in ("doctor", "bench"):
        assert sub in help_text


def test_doctor_json_reports_every_mpi_and_build(ioloom_cli):
    out = ioloom_cli("doctor", "--json", check=False)
    checks = {c["name"]: c for c in json.loads(out.stdout)}
    for impl in mpi_impls.implementations():
        assert checks[f"MPI {impl.name}"]["ok"]
        assert checks[f"built for {impl.name}"]["ok"], checks[f"built for {impl.name}"]
    assert checks["HDF5"]["ok"]
    assert checks["python numpy"]["ok"]
    failed = [c for c in checks.values() if c["required"] and not c["ok"]]
    assert (out.returncode == 0) == (not failed)
    assert all(c["fix"] for c in failed), "every failed check must say how to fix it"


def test_doctor_names_the_fix_when_the_build_is_missing(ioloom_cli, tmp_path):
    out = ioloom_cli("doctor", "--json", check=False, env={"IOLOOM_BUILD_DIR": str(tmp_path)})
    assert out.returncode == 1
    checks = {c["name"]: c for c in json.loads(out.stdout)}
    assert not checks["preloading"]["ok"] and "make build" in checks["preloading"]["fix"]


def test_mpi_harness_runs_n_ranks(mpi):
    exe = mpi.compile("mpi_ranks.c")
    out = mpi.run(3, [exe])
    lines = sorted(re.findall(r"rank (\d) of (\d) sum (\d)", out.stdout))
    assert lines == [("0", "3", "3"), ("1", "3", "3"), ("2", "3", "3")]


def test_detect_recognises_launcher_and_binary(mpi):
    exe = mpi.compile("mpi_ranks.c")
    assert mpi_impls.detect([mpi.impl.mpiexec, "-n", "2", str(exe)]).name == mpi.name
    assert mpi_impls.detect([str(exe)]).name == mpi.name
    assert mpi_impls.detect(["/bin/true"]) is None
