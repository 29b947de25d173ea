"""The predictor where memory runs out (docs/predict.md, "Memory"): ioloom-predict-oom, the C model built so
that a grammar's rewrites outgrow their reserved nodes, fed noisy operations under a memory budget or under an
address-space limit where malloc itself fails. It must never abort: what it could not allocate is counted, the
budget is never passed, and it goes on predicting."""
from __future__ import annotations

import subprocess

from ioloom import paths


def _oom(*args: str) -> dict[str, int]:
    out = subprocess.run([str(paths.native_bin("ioloom-predict-oom")), *args], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr  # an abort() would be -6, a crash -11
    words = out.stdout.split()
    return {key: int(value) for key, value in zip(words[::2], words[1::2])}


def test_a_budget_is_never_passed_and_its_refusals_are_counted():
    free = _oom("budget", "0", "20000")
    assert free["refused"] == 0 and free["stopped"] == 0 and free["peak"] > 8 << 20
    for cap in (1 << 20, 4 << 20):
        capped = _oom("budget", str(cap), "20000")
        assert capped["peak"] <= cap and capped["refused"] > 0
        assert capped["predicted"] > 0 and capped["main_past_cap"] == free["main_past_cap"] == 0


def test_malloc_failing_in_the_middle_of_a_rewrite_stops_grammars_not_the_program():
    """Under an address-space limit, malloc fails: grammars whose rewrite could not get a node stop learning
    (counted), others leave inputs unlearnt (counted), and the model still predicts."""
    counts = _oom("rlimit", "16", "20000")
    assert counts["stopped"] + counts["main_stopped"] > 0
    assert counts["refused"] + counts["main_refused"] > 0 and counts["predicted"] > 0
