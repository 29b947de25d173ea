"""ioloom coord's decision rules against Dorier Ch. 6's analytic cases (Eqs. 6.4-6.5) and the queue they
generalise to."""
import pytest

from ioloom import models
from ioloom.coord.policy import Placement, Policy
from ioloom.coord.state import State
from ioloom.models import Pending


def two_phases(n_a, t_a, n_b, t_b, dt):
    """A announced at 0 and writing alone until dt, B announced at dt: what the coordinator sees at dt."""
    return [Pending(n_a, t_a, t_a - dt, elapsed=dt)], Pending(n_b, t_b, t_b)


def place(policy: Policy, order: list[Pending], newcomer: Pending) -> int:
    """The newcomer's index when the head of `order` writes alone."""
    return policy.place(order, 1, newcomer).index


@pytest.mark.parametrize("dt", [0.1, 1.0, 2.9, 5.9, 6.1, 7.0, 7.9])
def test_dynamic_interrupts_iff_dt_below_three_quarters_of_t_a(dt):
    """N_A = N_B, T_A = 4 T_B: interrupt A iff dt < 3/4 T_A (Eq. 6.5), otherwise serialise B after A."""
    order, b = two_phases(2048, 8.0, 2048, 2.0, dt)
    index = place(Policy("dynamic", min_gain=0), order, b)
    assert index == (0 if dt < 6.0 else 1)
    assert ("interrupt" if index == 0 else "serialise") == models.calciom_choice(2048, 8.0, 2048, 2.0, dt).best
    # the default min_gain changes no interruption: it only lets B interfere where serialising gains < 5%
    chosen = Policy("dynamic").place(order, 1, b)
    assert (chosen.index == 0) == (dt < 6.0)
    assert chosen == (Placement(1, 2) if dt == 7.9 else Placement(0 if dt < 6 else 1, 1))


@pytest.mark.parametrize("n_a,n_b,t_a,t_b", [(744, 24, 10.0, 1.0), (2048, 2048, 4.0, 4.0), (100, 400, 6.0, 3.0)])
def test_dynamic_core_seconds_rule_dt_below_t_a_minus_n_a_over_n_b_t_b(n_a, n_b, t_a, t_b):
    """The core-seconds rule in general: interrupt iff N_A T_B < N_B (T_A - dt)."""
    for i in range(1, 40):
        dt = t_a * i / 40
        order, b = two_phases(n_a, t_a, n_b, t_b, dt)
        want_interrupt = n_a * t_b < n_b * (t_a - dt)
        assert (place(Policy("dynamic", min_gain=0), order, b) == 0) == want_interrupt, dt


def test_dynamic_factors_rule_dt_below_t_a_minus_t_b_squared_over_t_a():
    """With f = sum of interference factors: interrupt iff dt < T_A - T_B^2 / T_A, whatever the core counts."""
    t_a, t_b = 8.0, 2.0
    for i in range(1, 80):
        dt = t_a * i / 80
        order, b = two_phases(10, t_a, 1000, t_b, dt)
        assert (place(Policy("dynamic", "factors", 0), order, b) == 0) == (dt < t_a - t_b ** 2 / t_a), dt
        assert models.calciom_choice(10, t_a, 1000, t_b, dt, "factors").best == \
            ("interrupt" if dt < t_a - t_b ** 2 / t_a else "serialise")


def test_small_application_interrupts_a_big_one_and_waits_behind_a_small_one():
    """Sec. 6.3.3: interruption pays when a small application meets a big one, not between equal ones."""
    big_first, small = two_phases(744, 10.0, 24, 0.5, 1.0)
    assert place(Policy("dynamic", "factors"), big_first, small) == 0
    equal_first, equal = two_phases(384, 4.0, 384, 4.0, 1.0)
    assert place(Policy("dynamic"), equal_first, equal) == 1


def test_fixed_policies_and_queue_place():
    order = [Pending(1, 4.0, 3.0, 1.0), Pending(1, 4.0, 4.0)]
    newcomer = Pending(1, 1.0, 1.0)
    assert Policy("fcfs").place(order, 1, newcomer) == Placement(2, 1)
    assert Policy("interfere").place(order, 1, newcomer) == Placement(2, 3) and Policy("interfere").shares
    assert Policy("interrupt").place(order, 2, newcomer) == Placement(0, 1)
    # a short newcomer behind a paused long phase and a queued long one: dynamic puts it first (shortest first)
    assert place(Policy("dynamic"), order, newcomer) == 0
    # a long newcomer goes last: it would delay both
    assert place(Policy("dynamic"), order, Pending(1, 9.0, 9.0)) == 2


def test_dynamic_never_costs_more_than_fcfs_or_interrupt():
    """The chosen place minimises f over every place, so it is never worse than either fixed rule."""
    order = [Pending(8, 5.0, 2.0, 3.0), Pending(2, 1.0, 1.0, 0.5), Pending(4, 3.0, 3.0, 0.1)]
    for newcomer in (Pending(1, 0.2, 0.2), Pending(16, 2.0, 2.0), Pending(4, 9.0, 9.0)):
        def cost(k, newcomer=newcomer):
            return models.serial_cost([*order[:k], newcomer, *order[k:]])
        chosen = cost(place(Policy("dynamic", min_gain=0), order, newcomer))
        assert chosen <= cost(0) and chosen <= cost(len(order)) and chosen == min(cost(k) for k in range(4))


@pytest.mark.parametrize("dt", [-0.1, 1.55, 1.6])
def test_dynamic_interferes_where_serialising_gains_nothing(dt):
    """Where the phases barely overlap (A nearly done when B comes, or the reverse) serialising saves under
    min_gain of f: the newcomer joins the one writing and both write (no hand-over to pay). With min_gain 0
    and an overlap, the serial order is kept (proportional sharing never wastes less)."""
    a, b = (8, 1.6), (1, 0.1)
    first, second = (b, a) if dt < 0 else (a, b)
    elapsed = min(abs(dt), first[1])
    order = [Pending(first[0], first[1], first[1] - elapsed, elapsed)]
    newcomer = Pending(*second, second[1])
    assert Policy("dynamic").place(order, 1, newcomer) == Placement(1, 2)
    if elapsed < first[1]:
        assert Policy("dynamic", min_gain=0).place(order, 1, newcomer).writing == 1
    assert models.sharing_cost([*order, newcomer], 2) <= models.serial_cost([*order, newcomer]) * 1.05


def test_sharing_cost_is_proportional_sharing():
    """Two phases writing at once cost what the Δ-graph's proportional sharing says (Sec. 6.1.2)."""
    for dt in (0.0, 0.3, 1.0):
        run = models.proportional_sharing(1.6, 0.1, dt, 8, 1)
        order = [Pending(8, 1.6, 1.6 - dt, dt), Pending(1, 0.1, 0.1)]
        assert models.sharing_cost(order, 2) == pytest.approx(8 * run.t_a + run.t_b)
        assert models.sharing_cost(order, 2, "factors") == pytest.approx(run.i_a + run.i_b)


def test_joined_phases_write_together_until_one_ends():
    """A phase that joins the ones writing writes at once with them; when one of them ends, the others keep
    writing and the first phase queued behind them does not start before they are done."""
    state = State(Policy("dynamic"), lease=10.0, bandwidth=1e9)
    state.inform(1, "a", 8, 1_600, 1.6, now=0.0)
    state.release(1, 1_570, now=1.57)         # 0.03 s left: B joins rather than waits
    state.inform(2, "b", 1, 100, 0.1, now=1.57)
    assert state.writing == 2 and state.may_write(1) and state.may_write(2)
    assert state.counts["shared"] == 1
    state.inform(3, "c", 1, 10_000, 10.0, now=1.58)
    state.order.append(state.order.pop(state.order.index(state.find(3))))  # queued behind both, as fcfs would
    state.writing = 2
    assert not state.may_write(3)
    assert state.finish(1) and state.writing == 1 and state.may_write(2) and not state.may_write(3)
    assert state.finish(2) and state.may_write(3)


def test_a_phase_mostly_its_own_time_is_barely_slowed_by_sharing():
    """A phase whose time alone is 1/4 storage asks a quarter of the bandwidth: beside an 8-core phase using 80%
    it gets the 20% left (more than its 1/9 share) and so runs at 0.8 of its speed alone, the other unslowed;
    with all of both times storage's, sharing is proportional to the cores (Sec. 6.1.2)."""
    big, small = Pending(8, 1.6, 1.6, storage=0.8), Pending(1, 0.4, 0.4, storage=0.25)
    assert models.speeds([big, small]) == pytest.approx([1.0, 0.8])
    assert models.speeds([Pending(8, 1.6, 1.6), Pending(1, 0.4, 0.4)]) == pytest.approx([8 / 9, 1 / 9])
    assert models.speeds([small]) == [1.0]
    assert models.shared_ends([big, small]) == pytest.approx([1.6, 0.5])


def test_a_guessed_newcomer_is_placed_on_the_guess_only_where_it_does_not_hinge_on_it():
    """8-core A with 0.88 s left; 1-core B guessed 0.1 s (its bytes at the whole bandwidth): 8 x 0.1 < 0.88 says
    interrupt, but 8 x 0.15 (REVISED_BY longer) does not, so B joins A until its time is measured. Beside a
    2-core A with 1 s left both say interrupt (with no least gain): B interrupts A at once. A measured newcomer
    (doubt 1) is placed as before."""
    dynamic = Policy("dynamic")
    b = Pending(1, 0.1, 0.1)
    assert dynamic.place([Pending(8, 1.6, 0.88, 0.72)], 1, b) == Placement(0, 1)
    assert dynamic.place([Pending(8, 1.6, 0.88, 0.72)], 1, b, doubt=1.5) == Placement(1, 2)
    assert Policy("dynamic", min_gain=0).place([Pending(2, 1.6, 1.0, 0.6)], 1, b, doubt=1.5) == Placement(0, 1)


def test_a_guessed_phase_is_placed_again_at_its_first_measured_time():
    """A phase announced without a time joins provisionally (here the guess decides nothing: above); its first
    measured time, even one within REVISED_BY of the guess, places it again (a measured phase's needs more than
    REVISED_BY)."""
    state = State(Policy("dynamic"), lease=10.0, bandwidth=1e8)
    state.inform(1, "a", 8, 300_000_000, 3.0, now=0.0)
    state.release(1, 150_000_000, now=1.5)        # 1.5 s left
    state.inform(2, "b", 1, 10_000_000, 0.0, now=1.5)
    assert [p.name for p in state.order] == ["a", "b"] and state.writing == 2 and state.find(2).guessed
    state.inform(2, "b", 1, 10_000_000, 0.13, now=1.52)
    assert state.counts["replaced"] == 1 and not state.find(2).guessed
    state.inform(2, "b", 1, 10_000_000, 0.15, now=1.53)
    assert state.counts["replaced"] == 1
