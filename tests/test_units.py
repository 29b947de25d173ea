"""ioloom.units, the one reading of sizes and comma-separated lists: what each accepts and refuses, and the
commands that read lists (probe run, sim sweep, bench async) refusing bad ones in one line, before any work."""
from __future__ import annotations

import pytest

from ioloom import units


@pytest.mark.parametrize("text, expected", [("16m", 16 << 20), ("64KiB", 64 << 10), ("1.5GB", 1_500_000_000),
                                            (" 4 k ", 4096), ("1048576", 1 << 20), (4096, 4096), ("2t", 2 << 40)])
def test_sizes_read_as_ioloom_bench_reads_them(text, expected):
    assert units.size(text, "-b") == expected


@pytest.mark.parametrize("text", ["0", "lots", "4q", "", "-1m", "0.1b", True, 0, -4])
def test_sizes_refused_name_the_option_and_an_example(text):
    with pytest.raises(units.UnitError, match=r"bytes_per_rank .*: use a size above 0 such as 4m"):
        units.size(text, "bytes_per_rank")


def test_lists_of_numbers_and_of_sizes():
    assert units.numbers("1,4, 16", "--ranks") == [1, 4, 16]
    assert units.numbers("0.5,2", "--multiples", float) == [0.5, 2.0]
    assert units.sizes("1m,4MiB", "--requests") == [1 << 20, 4 << 20]
    assert units.numbers("-1,4", "--stripe-count", also=(-1,)) == [-1, 4]


@pytest.mark.parametrize("text", ["", "1,,4", "0,4", "-1,4", "a", "1.5"])
def test_lists_refused_name_the_option(text):
    with pytest.raises(units.UnitError, match=r"--ranks .*: give values above 0 separated by commas, e\.g\. 1,4,16"):
        units.numbers(text, "--ranks")


@pytest.mark.parametrize("argv, option", [
    (["probe", "run", "{tmp}", "-o", "{tmp}/store", "--requests", "1m,0"], "--requests"),
    (["sim", "sweep", "--ranks", "16,x"], "--ranks"),
    (["sim", "sweep", "--stripe-size", "1m,lots"], "--stripe-size"),
    (["bench", "async", "--dims", "8,0,8"], "--dims"),
])
def test_commands_refuse_bad_lists_in_one_line(ioloom_cli, tmp_path, argv, option):
    out = ioloom_cli(*(a.format(tmp=tmp_path) for a in argv), check=False)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert option in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
