"""Dorier 2014 Ch. 6: probability of concurrent I/O (Eqs. 6.1-6.2), Δ-graphs under proportional sharing and
CALCioM's choice by machine time wasted (Eqs. 6.4-6.5)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ioloom import models


def test_eq_6_1_uses_exponent_k_not_n():
    """The printed Eq. 6.1 raises E(mu) to n; the binomial it describes needs k (the probabilities sum to 1)."""
    for n in (1, 3, 7):
        probs = [models.p_in_io(k, n, 0.1) for k in range(n + 1)]
        assert sum(probs) == pytest.approx(1.0)
    assert models.p_in_io(1, 3, 0.1) == pytest.approx(3 * 0.1 * 0.9 ** 2)


def test_eq_6_2_against_simulation():
    dist = {0: 0.05, 1: 0.2, 2: 0.25, 4: 0.3, 9: 0.2}
    rng = np.random.default_rng(3)
    x = rng.choice(list(dist), p=list(dist.values()), size=200_000)
    y = rng.binomial(x, 0.1)
    assert models.p_concurrent_io(dist, 0.1) == pytest.approx((y > 1).mean(), abs=0.004)


def test_eq_6_2_normalises_a_histogram_and_edges():
    assert models.p_concurrent_io({2: 10, 3: 30}, 0.5) == pytest.approx(models.p_concurrent_io({2: .25, 3: .75}, .5))
    assert models.p_concurrent_io({1: 1.0}, 1.0) == 0.0          # one application never interferes
    assert models.p_concurrent_io({5: 1.0}, 1.0) == pytest.approx(1.0)
    assert models.p_concurrent_io({5: 1.0}, 0.0) == 0.0


@settings(max_examples=50, deadline=None)
@given(t=st.floats(0.1, 100), frac=st.floats(-0.999, 0.999))
def test_equal_applications_interference_factor_is_2_minus_dt_over_t(t, frac):
    """Sec. 6.1.2: two equal applications sharing proportionally both see I = 2 - |dt|/T."""
    run = models.proportional_sharing(t, t, frac * t)
    assert run.i_a == pytest.approx(2 - abs(frac)) and run.i_b == pytest.approx(2 - abs(frac))


def test_delta_graph_is_a_mirror_and_small_application_suffers_more():
    """Swapping A and B mirrors the graph; a small application beside a big one sees the larger factor."""
    g = models.delta_graph(10.0, 2.0, w_a=744, w_b=24, points=13)
    mirror = models.delta_graph(2.0, 10.0, w_a=24, w_b=744, points=13)
    for a, b in zip(g, reversed(mirror)):
        assert (a.dt, a.i_a, a.i_b) == pytest.approx((-b.dt, b.i_b, b.i_a))
    overlapping = [r for r in g if 0 <= r.dt < 10.0]
    assert max(r.i_b for r in overlapping) > 5 > max(r.i_a for r in overlapping)
    assert g[0].i_a == g[-1].i_b == 1.0   # no overlap at the ends


def test_calciom_interrupts_until_three_quarters_of_a():
    """Eqs. 6.4-6.5 with N_A = N_B and T_A = 4 T_B: interrupt A iff dt < 3/4 T_A, else serialise B."""
    t_a, t_b, n = 8.0, 2.0, 2048
    for dt in np.linspace(0.01, 7.99, 40):
        c = models.calciom_choice(n, t_a, n, t_b, float(dt))
        assert c.serialise == pytest.approx(n * t_a + n * (t_a + t_b - dt))
        assert c.interrupt == pytest.approx(n * (t_a + t_b) + n * t_b)
        assert c.best == ("interrupt" if dt < 0.75 * t_a else "serialise"), dt
    assert models.calciom_choice(n, t_a, n, t_b, -1.0).best == "serialise"   # B first: A waits for B


def test_calciom_no_overlap_needs_no_coordination():
    c = models.calciom_choice(100, 5.0, 10, 1.0, 6.0)
    assert c.best == "interfere" and c.interfere == c.serialise == c.interrupt == 100 * 5 + 10 * 1


@pytest.mark.parametrize("call,name", [
    (lambda: models.p_concurrent_io({2: 1.0}, 1.5), "mean_io_fraction"),
    (lambda: models.p_concurrent_io({2: 1.0}, -0.1), "mean_io_fraction"),
    (lambda: models.p_concurrent_io({2: -1.0}, 0.5), "weight of n=2"),
    (lambda: models.p_concurrent_io({}, 0.5), "job_counts"),
    (lambda: models.proportional_sharing(-1, 1, 0), "t_a"),
    (lambda: models.calciom_choice(0, 1, 1, 1, 0), "n_a"),
])
def test_bad_input_is_refused_by_name(call, name):
    with pytest.raises(ValueError, match=name):
        call()


SWF = """; Version: 2.2
; a three-job log: job 1 runs 0-100, job 2 runs 50-150, job 3 runs 300-400 (idle 150-300)
1 0 0 100 64 -1 -1 64 100 -1 1 1 1 -1 1 -1 -1 -1
2 40 10 100 64 -1 -1 64 100 -1 1 1 1 -1 1 -1 -1 -1
3 300 0 100 64 -1 -1 64 100 -1 1 1 1 -1 1 -1 -1 -1
4 310 -1 -1 64 -1 -1 64 100 -1 0 1 1 -1 1 -1 -1 -1
"""


def test_job_count_distribution_from_a_standard_workload_log(tmp_path):
    log = tmp_path / "tiny.swf"
    log.write_text(SWF)
    dist = models.concurrency_from_swf(log)          # of 400 s: 150 s idle, 200 s one job, 50 s two
    assert dist == pytest.approx({0: 150 / 400, 1: 200 / 400, 2: 50 / 400})
    assert models.p_concurrent_io(dist, 1.0) == pytest.approx(50 / 400)
    log.write_text("1 2 three\n")
    with pytest.raises(ValueError, match="tiny.swf:1"):
        models.concurrency_from_swf(log)
