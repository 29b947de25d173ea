"""`ioloom advise` end to end through the installed command: JSON figures, readable text, refusals."""
import json
import subprocess

import pytest

from ioloom import paths


def advise(*args, ok=True):
    proc = subprocess.run([str(paths.REPO_ROOT / ".venv" / "bin" / "ioloom"), "advise", *args],
                          capture_output=True, text=True, timeout=60)
    assert (proc.returncode == 0) == ok, proc.stdout + proc.stderr
    return proc


def advise_json(*args):
    return json.loads(advise(*args, "--json").stdout)


def test_ost_load_json_reproduces_table_6_2_and_shares():
    r = advise_json("ost-load", "--targets", "480", "--stripes", "64", "--jobs", "10")
    assert [round(x["d_load"], 3) for x in r["rows"]][-1] == 1.752                 # Table 6.2, R = 64
    assert sum(r["shared_by_k"]) == pytest.approx(480)
    assert 1 <= r["expected_max_load"] <= 10
    mixed = advise_json("ost-load", "--targets", "480", "--stripes", "160", "--stripes", "64")
    assert mixed["requests"] == [160, 64]
    assert round(mixed["rows"][1]["d_inuse"], 3) == round(160 + 64 - 160 * 64 / 480, 3)


def test_plfs_json_loads_and_tipping_point():
    r = advise_json("plfs", "--targets", "480", "--ranks", "512", "--ranks", "4096", "--load", "3")
    assert [round(x["d_load"], 3) for x in r["rows"]] == [2.419, 17.067]
    assert 512 < r["tipping_point_ranks"] < 688


def test_striping_text_gives_reasons():
    out = advise("striping", "--targets", "480", "--writers", "1024", "--bytes-per-writer", "256MiB",
                 "--request-size", "1MiB", "--jobs", "4").stdout
    for word in ("stripe count", "romio_cb_write", "cb_nodes", "log layer", "64 MiB", "Eqs. 6.2-6.4"):
        assert word in out, word
    r = advise_json("striping", "--targets", "480", "--writers", "4096", "--bytes-per-writer", "8MiB",
                    "--request-size", "46KiB", "--strided")
    assert r["log_layer"]["value"] is False and r["pattern"]["contiguous"] is False
    assert r["hints"]["romio_cb_write"]["value"] == "enable"


def test_striping_advises_no_collective_buffering_with_the_log_layer():
    """Where the log layer is advised, romio_cb_write=enable would have aggregators log the span of the ranks'
    pieces in every call (docs/logfs-format.md, Hints): the hint follows the layer's advice."""
    r = advise_json("striping", "--targets", "480", "--writers", "16", "--bytes-per-writer", "8MiB",
                    "--request-size", "46KiB", "--strided")
    assert r["log_layer"]["value"] is True
    cb_write = r["hints"]["romio_cb_write"]
    assert cb_write["value"] == "disable" and "--logfs" in cb_write["reason"] and "enable" in cb_write["reason"]


def test_interference_from_a_workload_log(tmp_path):
    log = tmp_path / "w.swf"
    log.write_text("; two jobs overlapping half the time\n1 0 0 100 8 -1\n2 50 0 100 8 -1\n")
    r = advise_json("interference", "--swf", str(log), "--mu", "0.5")
    assert r["job_counts"] == {"1": pytest.approx(2 / 3), "2": pytest.approx(1 / 3)}
    assert r["p_two_or_more_in_io"] == pytest.approx(1 / 3 * 0.25)


def test_interference_dedicated_core_energy_json():
    r = advise_json("interference", "--job-counts", "1:0.5,3:0.5", "--mu", "0.2", "--t-a", "8", "--t-b", "2",
                    "--n-a", "2048", "--n-b", "2048", "--dt", "1")
    assert r["p_two_or_more_in_io"] == pytest.approx(0.5 * (1 - 0.8 ** 3 - 3 * 0.2 * 0.8 ** 2))
    assert r["choices"][0]["best"] == "interrupt"
    graph = advise_json("interference", "--t-a", "4", "--t-b", "4", "--points", "5")
    assert [round(x["i_a"], 3) for x in graph["runs"]] == [1.0, 1.5, 2.0, 1.5, 1.0]
    d = advise_json("dedicated-core", "--compute", "100", "--write", "5", "--cores-per-node", "24")
    assert d["worthwhile"] is True and d["gain"] == pytest.approx(105 - 100 * 24 / 23)
    e = advise_json("energy", "--t-base", "18.1", "--iterations", "2520", "--cores-per-node", "24", "--nodes",
                    "16", "--p-max", "220", "--p-idle", "100", "--io-time", "300")
    assert [a["approach"] for a in e["approaches"]] == ["time-partitioning", "dedicated-cores", "dedicated-nodes"]
    assert e["least_energy"] == "dedicated-cores"


@pytest.mark.parametrize("args,message", [
    (["ost-load", "--targets", "100", "--stripes", "160"], "more targets than exist"),
    (["interference", "--job-counts", "2:1", "--mu", "1.5"], "Invalid value for '--mu'"),
    (["striping", "--targets", "480", "--writers", "4", "--bytes-per-writer", "lots", "--request-size", "1M"],
     "--bytes-per-writer"),
    (["striping", "--targets", "480"], "--writers"),
    (["plfs", "--targets", "480", "--ranks", "0"], "ranks"),
    (["dedicated-core", "--compute", "-1", "--write", "1", "--cores-per-node", "8"], "compute"),
])
def test_bad_input_exits_2_naming_the_parameter(args, message):
    proc = advise(*args, ok=False)
    assert proc.returncode == 2 and message in " ".join(proc.stderr.split())
