"""`ioloom bench sweep`: a small NSEG/TMP/CLIENTS grid runs for real and draws its figures; bad grids are refused."""
from __future__ import annotations

import json

import pytest

GRID = """
ranks = 2
args = ["-a", "mpiio", "-w", "-r", "-e", "--verify"]
restart_read = true
[[test]]
name = "SFSA-strided-NSEG"
vary = "segments"
values = [1, 4]
bytes_per_rank = "256k"
transfer = "64k"
args = ["--pattern", "strided"]
[[test]]
name = "MFWA-TMP"
vary = "wait"
values = [0, 2]
args = ["-F", "-b", "128k", "-t", "64k"]
[[test]]
name = "SFSA-CLIENTS"
vary = "ranks"
values = [1, 3]
args = ["-b", "128k", "-t", "64k"]
[[test]]
name = "SFSA-SMP"
vary = "ranks_per_node"
values = [1, 2]
args = ["-b", "128k", "-t", "64k", "-c", "-C"]
"""


@pytest.mark.mpi
def test_sweep_runs_the_grid_and_draws_png_and_html(ioloom_cli, tmp_path):
    config = tmp_path / "grid.toml"
    config.write_text(GRID)
    out = ioloom_cli("bench", "sweep", config, "-o", tmp_path / "out")
    rows = json.loads((tmp_path / "out" / "sweep.json").read_text())
    points = {(r["test"], r["x"], r["op"]): r for r in rows}
    assert len(rows) == 16 and len(points) == 16
    nseg4 = points[("SFSA-strided-NSEG", 4, "write")]
    assert nseg4["args"][nseg4["args"].index("-b") + 1] == str(64 << 10)  # 256k in 4 segments
    assert points[("SFSA-CLIENTS", 3, "read")]["ranks"] == 3
    assert all(0 < r["effective_min"] <= r["effective_median"] <= r["effective_max"] for r in rows)
    assert all(r["restarted"] for r in rows)  # the read of every point ran in a launch of its own
    # the reads were not preceded by dropping the cache and fit in memory: said in the rows, titles and lines
    assert all(r["page_cache"] == (r["op"] == "read") for r in rows)
    assert "(page cache)" in out.stdout and "drop_caches = true" in out.stdout
    html = (tmp_path / "out" / "sweep.html").read_text()
    assert "read: segment count (from the page cache)" in html and "write: segment count (from" not in html
    assert "SFSA-strided-NSEG" in html and "read: clients (ranks)" in html and "write: segment count" in html
    assert "ranks per (emulated) node" in html
    smp = points[("SFSA-SMP", 2, "write")]["args"]
    assert smp[smp.index("--ranks-per-node") + 1] == "2" and "plotly.js" in html.lower()
    png = (tmp_path / "out" / "sweep.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert "MFWA-TMP" in out.stdout and "wrote" in out.stdout
    assert not list((tmp_path / "out").glob("tmp*"))  # the benchmark's scratch directory is gone


@pytest.mark.parametrize("edit, words", [
    (('vary = "wait"', 'vary = "latency"'), "vary = 'latency': expected one of segments, wait, ranks"),
    (("values = [1, 4]", "values = [1, 3]"), "segment count 3 does not divide bytes_per_rank"),
    (('bytes_per_rank = "256k"\n', ""), "needs bytes_per_rank"),
    (('transfer = "64k"', 'transfer = "lots"'), "transfer 'lots': use a size above 0"),
    (("ranks = 2", "ranks = 0"), "ranks = 0: expected a whole number >= 1"),
    (("restart_read = true", "restart_read = 1"), "restart_read = 1: expected true or false"),
])
def test_bad_grids_are_refused_with_the_key_named(ioloom_cli, tmp_path, edit, words):
    config = tmp_path / "grid.toml"
    config.write_text(GRID.replace(*edit))
    out = ioloom_cli("bench", "sweep", config, "-o", tmp_path / "out", check=False)
    assert out.returncode == 2 and words in out.stderr, out.stderr
    assert not (tmp_path / "out" / "sweep.json").exists()


def test_a_yaml_grid_reads_as_its_toml_twin(tmp_path):
    import tomllib

    import yaml

    from ioloom.bench import sweep

    (tmp_path / "grid.toml").write_text(GRID)
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump(tomllib.loads(GRID)))
    assert sweep.load(tmp_path / "grid.yaml") == sweep.load(tmp_path / "grid.toml")
    (tmp_path / "bad.yaml").write_text("test: [1, 2\n")
    with pytest.raises(sweep.ConfigError, match="sweep grid .*bad.yaml is not valid YAML"):
        sweep.load(tmp_path / "bad.yaml")
    (tmp_path / "latin1.toml").write_bytes(b"# r\xe9sum\xe9\n" + GRID.encode())
    with pytest.raises(sweep.ConfigError, match=r"sweep grid .*latin1.toml is not UTF-8 text \(byte 3\)"):
        sweep.load(tmp_path / "latin1.toml")
