"""`ioloom bench riot`: the RIOT overhead study (Wright, Table A.2) runs untraced, POSIX-traced and fully traced,
checks that each traced run recorded every MPI-IO call it made, and reports times with confidence intervals.
Small sizes here: the figures themselves are what the command prints, not what a test asserts."""
import json

FUNCTIONS = {"MPI_File_write", "MPI_File_read", "MPI_File_write_all", "MPI_File_read_all", "MPI_File_write_at_all",
             "MPI_File_read_at_all"}


def test_riot_runs_three_configurations_and_checks_the_traces(mpi, ioloom_cli, tmp_path):
    out = ioloom_cli("bench", "riot", "--json", "-n", "2", "--ops", "3", "--size", "64k", "--repeats", "2",
                     "--mpi", mpi.name, "--dir", tmp_path, env=mpi.impl.launch_env())
    report = json.loads(out.stdout)
    (run,) = report["runs"]
    assert run["mpi"] == mpi.name and set(run["functions"]) == FUNCTIONS
    # Each traced run was read back: full tracing saw 2 ranks x 3 calls of every function, POSIX-only none.
    assert {f: run["events"]["all"][f] for f in FUNCTIONS} == {f: 6 for f in FUNCTIONS}
    assert {f: run["events"]["posix"][f] for f in FUNCTIONS} == {f: 0 for f in FUNCTIONS}
    assert run["events"]["posix"]["posix"] > 0
    for function, figures in run["functions"].items():
        for config in ("none", "posix", "all"):
            samples = figures[config]["samples_s"]
            assert len(samples) == 2 and all(s > 0 for s in samples), (function, config)
            assert abs(figures[config]["mean_s"] - sum(samples) / 2) < 1e-12
        change = figures["change_pct_all"]
        low, high = change["ci95"]
        assert low <= change["mean"] <= high, (function, change)
        assert figures["thesis_change_pct"]["max"] >= figures["thesis_change_pct"]["min"] > 0
    assert list(tmp_path.iterdir()) == [], "the test file and traces are removed"


def test_riot_refuses_an_unknown_mpi(ioloom_cli):
    out = ioloom_cli("bench", "riot", "--mpi", "no-such-mpi", check=False)
    assert out.returncode != 0 and "no-such-mpi" in out.stderr
