"""ioloom coord's decision rules against Dorier Ch. 6's analytic cases (Eqs. 6.4-6.5) and the queue they
generalise to."""
import pytest

from ioloom import models
from ioloom.coord.policy import Policy
from ioloom.models import Pending


def two_phases(n_a, t_a, n_b, t_b, dt):
    """A announced at 0 and writing alone until dt, B announced at dt: what the coordinator sees at dt."""
    return [Pending(n_a, t_a, t_a - dt, elapsed=dt)], Pending(n_b, t_b, t_b)


@pytest.mark.parametrize("dt", [0.1, 1.0, 2.9, 5.9, 6.1, 7.0, 7.9])
def test_dynamic_interrupts_iff_dt_below_three_quarters_of_t_a(dt):
    """N_A = N_B, T_A = 4 T_B: interrupt A iff dt < 3/4 T_A (Eq. 6.5), otherwise serialise B after A."""
    order, b = two_phases(2048, 8.0, 2048, 2.0, dt)
    place = Policy("dynamic").place(order, b)
    assert place == (0 if dt < 6.0 else 1)
    assert ("interrupt" if place == 0 else "serialise") == models.calciom_choice(2048, 8.0, 2048, 2.0, dt).best


@pytest.mark.parametrize("n_a,n_b,t_a,t_b", [(744, 24, 10.0, 1.0), (2048, 2048, 4.0, 4.0), (100, 400, 6.0, 3.0)])
def test_dynamic_core_seconds_rule_dt_below_t_a_minus_n_a_over_n_b_t_b(n_a, n_b, t_a, t_b):
    """The core-seconds rule in general: interrupt iff N_A T_B < N_B (T_A - dt)."""
    for i in range(1, 40):
        dt = t_a * i / 40
        order, b = two_phases(n_a, t_a, n_b, t_b, dt)
        want_interrupt = n_a * t_b < n_b * (t_a - dt)
        assert (Policy("dynamic").place(order, b) == 0) == want_interrupt, dt


def test_dynamic_factors_rule_dt_below_t_a_minus_t_b_squared_over_t_a():
    """With f = sum of interference factors: interrupt iff dt < T_A - T_B^2 / T_A, whatever the core counts."""
    t_a, t_b = 8.0, 2.0
    for i in range(1, 80):
        dt = t_a * i / 80
        order, b = two_phases(10, t_a, 1000, t_b, dt)
        assert (Policy("dynamic", "factors").place(order, b) == 0) == (dt < t_a - t_b ** 2 / t_a), dt
        assert models.calciom_choice(10, t_a, 1000, t_b, dt, "factors").best == \
            ("interrupt" if dt < t_a - t_b ** 2 / t_a else "serialise")


def test_small_application_interrupts_a_big_one_and_waits_behind_a_small_one():
    """Sec. 6.3.3: interruption pays when a small application meets a big one, not between equal ones."""
    big_first, small = two_phases(744, 10.0, 24, 0.5, 1.0)
    assert Policy("dynamic", "factors").place(big_first, small) == 0
    equal_first, equal = two_phases(384, 4.0, 384, 4.0, 1.0)
    assert Policy("dynamic").place(equal_first, equal) == 1


def test_fixed_policies_and_queue_place():
    order = [Pending(1, 4.0, 3.0, 1.0), Pending(1, 4.0, 4.0)]
    newcomer = Pending(1, 1.0, 1.0)
    assert Policy("fcfs").place(order, newcomer) == 2
    assert Policy("interfere").place(order, newcomer) == 2 and Policy("interfere").shares
    assert Policy("interrupt").place(order, newcomer) == 0
    # a short newcomer behind a paused long phase and a queued long one: dynamic puts it first (shortest first)
    assert Policy("dynamic").place(order, newcomer) == 0
    # a long newcomer goes last: it would delay both
    assert Policy("dynamic").place(order, Pending(1, 9.0, 9.0)) == 2


def test_dynamic_never_costs_more_than_fcfs_or_interrupt():
    """The chosen place minimises f over every place, so it is never worse than either fixed rule."""
    order = [Pending(8, 5.0, 2.0, 3.0), Pending(2, 1.0, 1.0, 0.5), Pending(4, 3.0, 3.0, 0.1)]
    for newcomer in (Pending(1, 0.2, 0.2), Pending(16, 2.0, 2.0), Pending(4, 9.0, 9.0)):
        def cost(k, newcomer=newcomer):
            return models.serial_cost([*order[:k], newcomer, *order[k:]])
        chosen = cost(Policy("dynamic").place(order, newcomer))
        assert chosen <= cost(0) and chosen <= cost(len(order)) and chosen == min(cost(k) for k in range(4))


def test_unknown_policy_or_metric_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown policy 'lifo'"):
        Policy("lifo")
    with pytest.raises(ValueError, match="unknown metric"):
        Policy("dynamic", "energy")


def test_advise_interference_takes_the_metric(ioloom_cli):
    """N_A = N_B, T_A = 4 T_B, dt = 6.5: core-seconds serialises (dt >= 3/4 T_A), factors interrupts
    (dt < T_A - T_B^2/T_A = 7.5)."""
    import json
    common = ("advise", "interference", "--t-a", "8", "--t-b", "2", "--dt", "6.5", "--json")
    by_core_seconds = json.loads(ioloom_cli(*common).stdout)["choices"][0]
    by_factors = json.loads(ioloom_cli(*common, "--metric", "factors").stdout)["choices"][0]
    assert (by_core_seconds["best"], by_factors["best"]) == ("serialise", "interrupt")
    assert by_factors["interrupt"] == pytest.approx(1 + 10 / 8)
    bad = ioloom_cli(*common, "--metric", "energy", check=False)
    assert bad.returncode == 2 and "metric must be one of core-seconds, factors" in bad.stderr
