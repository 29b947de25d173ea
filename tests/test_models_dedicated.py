"""Dorier 2014: Damaris's break-even (Eq. 3.2, Sec. 3.5.1) and the energy model (Eqs. 5.1-5.4)."""
import pytest

from ioloom import models


def test_break_even_is_one_over_n_minus_one_of_compute_time():
    """Sec. 3.5.1: with 24 cores per node the threshold is p = 100/(N-1) = 4.35 %."""
    assert round(100 * models.dedicated_core(1.0, 0.0, 24).break_even_ratio, 2) == 4.35
    assert models.dedicated_core(100.0, 4.40, 24, write_dedicated=0).worthwhile
    assert not models.dedicated_core(100.0, 4.30, 24, write_dedicated=0).worthwhile


def test_eq_3_2_gain_and_slow_dedicated_core():
    r = models.dedicated_core(compute=10.0, write=2.0, cores_per_node=6)
    assert r.standard == 12.0 and r.dedicated == pytest.approx(12.0)   # C N/(N-1) = 12 = W + C: break-even
    assert not r.worthwhile
    r = models.dedicated_core(compute=10.0, write=5.0, cores_per_node=16, write_dedicated=30.0)
    assert r.dedicated == 30.0 and not r.worthwhile and "bottleneck" in r.reason
    r = models.dedicated_core(compute=1.0, write=2.0, cores_per_node=24)  # W_ded = 2 s > C_ded, yet < W + C = 3 s
    assert r.worthwhile and r.dedicated == 2.0 and "set the pace" in r.reason
    r = models.dedicated_core(compute=10.0, write=5.0, cores_per_node=16)
    assert r.gain == pytest.approx(15 - 10 * 16 / 15) and r.speedup == pytest.approx(15 / (10 * 16 / 15))


def test_eq_5_2_time_and_eq_5_3_power():
    # CM1 on parapluie: T_base = 18.1 s, 2520 iterations, 16 nodes of 24 cores, perfect scaling
    assert models.sim_time(18.1, 2520, 24, 16) == pytest.approx(18.1 * 2520 / 384)
    assert models.sim_time(18.1, 2520, 24, 16, s_core=0.5) == pytest.approx(2 * 18.1 * 2520 / 384)
    assert models.dedicated_nodes_power(15, 1, 200.0, 100.0) == pytest.approx((15 * 200 + 150) / 16)
    assert models.dedicated_nodes_power(4, 0, 200.0, 100.0) == 200.0


def test_eq_5_1_for_the_three_approaches():
    args = dict(t_base=18.1, iterations=2520, cores_per_node=24, nodes=16, p_max=220.0, p_idle=100.0)
    tp = models.energy("time-partitioning", io_time=50.0, **args)
    dc = models.energy("dedicated-cores", dedicated=1, **args)
    dn = models.energy("dedicated-nodes", dedicated=1, **args)
    assert tp.t_sim == pytest.approx(18.1 * 2520 / 384 + 50) and tp.p_sim == 220.0
    assert dc.t_sim == pytest.approx(18.1 * 2520 / (23 * 16)) and dc.p_sim == 220.0   # Eq. 5.4
    assert dn.t_sim == pytest.approx(18.1 * 2520 / (24 * 15))
    assert dn.p_sim == pytest.approx((15 * 220 + 0.5 * 320) / 16)                     # Eq. 5.3
    for e in (tp, dc, dn):
        assert e.energy == pytest.approx(e.t_sim * e.p_sim * 16)


@pytest.mark.parametrize("call,name", [
    (lambda: models.dedicated_core(-1, 1, 8), "compute"),
    (lambda: models.dedicated_core(1, -1, 8), "write"),
    (lambda: models.dedicated_core(1, 1, 1), "cores_per_node"),
    (lambda: models.sim_time(1, 1, 1, 1, s_core=1.5), "s_core"),
    (lambda: models.dedicated_nodes_power(2, 1, 100, 200), "p_idle"),
    (lambda: models.energy("dedicated-nodes", 1, 1, 8, 2, 200, 100, dedicated=2), "dedicated"),
    (lambda: models.energy("dedicated-cores", 1, 1, 8, 2, 200, 100, dedicated=8), "dedicated"),
    (lambda: models.energy("magic", 1, 1, 8, 2, 200, 100), "approach"),
])
def test_bad_input_is_refused_by_name(call, name):
    with pytest.raises(ValueError, match=name):
        call()
