"""Wright 2014 Ch. 6: Eqs. 6.1-6.6 against the printed Tables 6.2-6.4 and the PLFS loads of Sec. 6.3, and the
k-shared distribution against a Monte Carlo simulation of random stripe placement."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ioloom import models

# Table 6.2, left half: D_total = 480, R = 160; right half: R = 64. Rows: jobs, D_inuse, D_req, D_load.
TABLE_6_2_R160 = [(1, 160.000, 160, 1.000), (2, 266.667, 320, 1.200), (3, 337.778, 480, 1.421),
                  (4, 385.185, 640, 1.662), (5, 416.790, 800, 1.919), (6, 437.860, 960, 2.192),
                  (7, 451.907, 1120, 2.478), (8, 461.271, 1280, 2.775), (9, 467.514, 1440, 3.080),
                  (10, 471.676, 1600, 3.392)]
TABLE_6_2_R64 = [(1, 64.000, 64, 1.000), (2, 119.467, 128, 1.071), (3, 167.538, 192, 1.146),
                 (4, 209.199, 256, 1.224), (5, 245.306, 320, 1.304), (6, 276.599, 384, 1.388),
                 (7, 303.719, 448, 1.475), (8, 327.223, 512, 1.565), (9, 347.593, 576, 1.657),
                 (10, 365.247, 640, 1.752)]
# Table 6.4: Stampede, D_total = 160, R = 128.
TABLE_6_4 = [(1, 128.000, 128, 1.000), (2, 153.600, 256, 1.667), (3, 158.720, 384, 2.419),
             (4, 159.744, 512, 3.205), (5, 159.949, 640, 4.001), (6, 159.990, 768, 4.800),
             (7, 159.998, 896, 5.600), (8, 160.000, 1024, 6.400), (9, 160.000, 1152, 7.200),
             (10, 160.000, 1280, 8.000)]
# Table 6.3, predicted columns: four jobs on 480 targets; R, D_req, D_inuse, D_load.
TABLE_6_3_PREDICTED = [(32, 128, 115.759, 1.106), (64, 256, 209.199, 1.224), (96, 384, 283.392, 1.355),
                       (128, 512, 341.182, 1.501), (160, 640, 385.185, 1.662)]


@pytest.mark.parametrize("d_total,stripes,table", [(480, 160, TABLE_6_2_R160), (480, 64, TABLE_6_2_R64),
                                                    (160, 128, TABLE_6_4)], ids=["6.2-R160", "6.2-R64", "6.4"])
def test_tables_6_2_and_6_4(d_total, stripes, table):
    rows = models.ost_load([stripes] * len(table), d_total)
    assert [(r.jobs, round(r.d_inuse, 3), r.d_req, round(r.d_load, 3)) for r in rows] == table
    # Eq. 6.2 is the closed form of the recurrence Eq. 6.1 when every job asks for the same R
    for r in rows:
        assert models.d_inuse_equal(stripes, r.jobs, d_total) == pytest.approx(r.d_inuse, rel=1e-12)


def test_table_6_3_predicted_columns():
    got = []
    for stripes, _, _, _ in TABLE_6_3_PREDICTED:
        last = models.ost_load([stripes] * 4, 480)[-1]
        got.append((stripes, last.d_req, round(last.d_inuse, 3), round(last.d_load, 3)))
    assert got == TABLE_6_3_PREDICTED


def test_plfs_loads_section_6_3():
    """Eqs. 6.5-6.6 on 480 targets: 2.419, 3.038, 8.535, 17.067 at 512, 688, 2,048, 4,096 ranks."""
    loads = [round(models.plfs_load(n, 480).d_load, 3) for n in (512, 688, 2048, 4096)]
    assert loads == [2.419, 3.038, 8.535, 17.067]


def test_plfs_files_per_rank_is_more_tasks():
    assert models.plfs_load(256, 480, files_per_rank=2).d_load == pytest.approx(models.plfs_load(512, 480).d_load)


@pytest.mark.parametrize("load", [1.5, 2.419, 3.0, 8.0])
def test_plfs_tipping_point_is_the_first_rank_count_past_the_load(load):
    n = models.plfs_tipping_point(load, 480)
    assert models.plfs_load(n, 480).d_load > load
    assert n == 1 or models.plfs_load(n - 1, 480).d_load <= load


def test_sharing_distribution_closed_form_and_sums():
    """Equal requests: D_total C(n,k) p^k (1-p)^(n-k); it counts every target once and every stripe once."""
    dist = models.sharing_distribution([160] * 4, 480)
    p = 1 / 3
    assert dist.tolist() == pytest.approx([480 * c * p ** k * (1 - p) ** (4 - k)
                                           for k, c in enumerate([1, 4, 6, 4, 1])])
    assert dist.sum() == pytest.approx(480)
    assert (dist * np.arange(5)).sum() == pytest.approx(640)          # D_req
    assert 480 - dist[0] == pytest.approx(385.185, abs=5e-4)           # D_inuse, Table 6.3


def _simulate(requests, d_total, trials, rng):
    """Per trial: how many jobs use each target, each job drawing its r distinct targets uniformly."""
    load = np.zeros((trials, d_total), dtype=int)
    for r in requests:
        picks = np.argsort(rng.random((trials, d_total)), axis=1)[:, :r]
        np.put_along_axis(load, picks, np.take_along_axis(load, picks, axis=1) + 1, axis=1)
    return load


@settings(max_examples=25, deadline=None)
@given(d_total=st.integers(2, 64), data=st.data(), seed=st.integers(0, 2 ** 32 - 1))
def test_sharing_distribution_matches_monte_carlo(d_total, data, seed):
    requests = data.draw(st.lists(st.integers(1, d_total), min_size=1, max_size=6), label="requests")
    trials = 3000
    load = _simulate(requests, d_total, trials, np.random.default_rng(seed))
    counts = np.stack([(load == k).sum(axis=1) for k in range(len(requests) + 1)], axis=1)
    expected = models.sharing_distribution(requests, d_total)
    # Five standard errors. A rare k may never show up in the sample (empirical spread 0), so the spread is at
    # least that of a count with the expected mean (a sum of indicators: variance <= mean).
    spread = np.sqrt(np.maximum(counts.var(axis=0), expected))
    tolerance = 5 * spread / np.sqrt(trials) + 1e-9
    assert np.all(np.abs(counts.mean(axis=0) - expected) <= tolerance)


@pytest.mark.parametrize("requests,d_total", [([160] * 4, 480), ([64] * 10, 480), ([2] * 512, 480),
                                              ([128] * 3, 160)])
def test_expected_max_load_close_to_monte_carlo(requests, d_total):
    """The independence approximation against simulation: within 0.15 of a job."""
    load = _simulate(requests, d_total, 400, np.random.default_rng(7))
    assert models.expected_max_load(requests, d_total) == pytest.approx(load.max(axis=1).mean(), abs=0.15)


@pytest.mark.parametrize("call,name", [
    (lambda: models.ost_load([160, 500], 480), "stripe request of job 2"),
    (lambda: models.ost_load([0], 480), "stripe request of job 1"),
    (lambda: models.ost_load([4], -3), "targets"),
    (lambda: models.ost_load([], 480), "requests"),
    (lambda: models.plfs_load(0, 480), "ranks"),
    (lambda: models.plfs_load(10, 480, stripes_per_file=481), "stripes"),
    (lambda: models.plfs_tipping_point(0.5, 480), "load"),
])
def test_impossible_input_is_refused_by_name(call, name):
    with pytest.raises(ValueError, match=name):
        call()
