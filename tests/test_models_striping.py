"""Striping advice (Wright Ch. 6, Wan Sec. VI) and the model inputs measured from a trace's events."""
import pandas as pd
import pytest

from ioloom import models
from ioloom.models import from_trace, striping

MiB = 1024 * 1024


def test_alone_stripes_as_wide_as_the_data_fills():
    a = models.advise_striping(models.Pattern(1024, 64 * MiB, 4 * MiB), targets=480, jobs=1)
    assert a.stripe_count.value == 480 and a.stripe_size.value == 4 * MiB


def test_contended_count_keeps_the_load_under_the_limit_and_is_the_widest_that_does():
    a = models.advise_striping(models.Pattern(1024, 64 * MiB, 1 * MiB), targets=480, jobs=4, max_load=1.224)
    r = a.stripe_count.value
    assert models.ost_load([r] * 4, 480)[-1].d_load <= 1.224 < models.ost_load([r + 1] * 4, 480)[-1].d_load
    assert r == 64   # Table 6.3: four jobs of 64 stripes give D_load = 1.224
    assert "1.224" in a.stripe_count.reason


def test_stripe_size_is_an_aligned_multiple_of_the_request():
    for q in (4096, 47008, MiB, 3 * MiB, 5 * MiB + 17):
        size = striping.stripe_size(models.Pattern(4, 512 * MiB, q)).value
        assert size % (64 * 1024) == 0 and size >= MiB
        assert size >= q
    assert striping.stripe_size(models.Pattern(4, 1024 * MiB, 256 * 1024)).value == MiB
    assert striping.stripe_size(models.Pattern(4, 1024 * MiB, 256 * MiB)).value == 64 * MiB


def test_hints_follow_the_pattern():
    pattern = models.Pattern(64, 16 * MiB, 47008, contiguous=False)
    small_strided = models.advise_striping(pattern, 480, 1, nodes=8)
    plain_file = striping.romio_hints(pattern, small_strided.stripe_count.value, small_strided.stripe_size.value, 8)
    assert plain_file["romio_cb_write"].value == "enable"
    # the log layer is advised for this pattern, and collective buffering would log the span of the pieces there
    assert small_strided.log_layer.value is True and small_strided.hints["romio_cb_write"].value == "disable"
    assert small_strided.hints["romio_ds_write"].value == "disable"
    assert small_strided.hints["cb_nodes"].value == 8
    assert small_strided.hints["cb_buffer_size"].value == small_strided.stripe_size.value
    big = models.advise_striping(models.Pattern(64, 16 * MiB, 4 * MiB), 480, 1)
    assert big.hints["romio_cb_write"].value == "disable"
    assert all(a.reason for a in big.hints.values())


def test_log_layer_helps_small_unaligned_writes_until_files_overload_targets():
    assert models.advise_striping(models.Pattern(512, 16 * MiB, 47008), 480).log_layer.value is True
    too_many = models.advise_striping(models.Pattern(2048, 16 * MiB, 47008), 480).log_layer
    assert too_many.value is False and "8.535" in too_many.reason          # Eq. 6.6 at 2,048 ranks
    assert models.advise_striping(models.Pattern(512, 16 * MiB, MiB), 480).log_layer.value is False
    per_process = models.Pattern(512, 16 * MiB, 47008, shared_file=False)
    assert models.advise_striping(per_process, 480).log_layer.value is False
    assert models.advise_striping(per_process, 480).stripe_count.value == 1


def test_wan_chunk_plan_rotates_targets():
    """Wan Fig. 9: 256 MB per writer on 1,008 targets: 4 chunks of 64 MB, chunk j of writer i on (i+j) mod 1008."""
    a = models.advise_striping(models.Pattern(1008, 256 * MiB, 256 * MiB), targets=1008)
    assert a.chunks.value["chunks_per_writer"] == 4 and a.chunks.value["chunk_size"] == 64 * MiB
    assert all(p["target"] == (p["writer"] + p["chunk"]) % 1008 and p["bytes"] == 64 * MiB for p in a.plan)
    wrap = striping.chunk_plan(models.Pattern(1008, 256 * MiB, MiB), 1008, show=1008)[1]
    assert {(p["writer"], p["chunk"]): p["target"] for p in wrap}[(1007, 1)] == 0
    assert models.advise_striping(models.Pattern(4, 64 * MiB, MiB), 480).chunks.value is None


@pytest.mark.parametrize("make,name", [
    (lambda: models.Pattern(0, MiB, MiB), "writers"),
    (lambda: models.Pattern(4, MiB, 2 * MiB), "request_size"),
    (lambda: models.advise_striping(models.Pattern(4, MiB, MiB), 0), "targets"),
    (lambda: models.advise_striping(models.Pattern(4, MiB, MiB), 480, max_load=0.5), "max_load"),
    (lambda: models.advise_striping(models.Pattern(4, MiB, MiB), 480, jobs=0), "jobs"),
])
def test_bad_input_is_refused_by_name(make, name):
    with pytest.raises(ValueError, match=name):
        make()


def _events(rows):
    """A frame shaped like Trace.ops_named() (the analysis contract's columns)."""
    cols = ["rank", "layer", "op", "file_id", "offset", "req_bytes", "ret_bytes", "t_start", "t_end"]
    return pd.DataFrame(rows, columns=cols)


def _strided_shared_run(ranks=4, writes=3, block=MiB):
    rows, s = [], 10**9
    for r in range(ranks):
        t = 0
        rows.append((r, "process", "MPI_Init", -1, -1, 0, 0, t, t + 1000))
        for i in range(writes):
            t += 2 * s                                               # 2 s of compute before each write
            off = (i * ranks + r) * block
            rows.append((r, "mpiio", "MPI_File_write_at_all", 0, off, block, block, t, t + s // 2))
            rows.append((r, "posix", "pwrite", 0, off, block, block, t + 10, t + s // 2 - 10))
            t += s // 2
    return _events(rows)


def test_pattern_from_trace_counts_one_layer():
    p = from_trace.pattern(_strided_shared_run())
    assert (p.writers, p.bytes_per_writer, p.request_size) == (4, 3 * MiB, MiB)
    assert p.shared_file and not p.contiguous


def test_pattern_from_trace_file_per_process_contiguous():
    rows = [(r, "posix", "write", r, i * 4096, 4096, 4096, i, i + 1) for r in range(3) for i in range(5)]
    p = from_trace.pattern(_events(rows))
    assert not p.shared_file and p.contiguous and p.bytes_per_writer == 5 * 4096


def test_compute_write_split_from_trace():
    split = from_trace.compute_write_split(_strided_shared_run())
    assert split.write == pytest.approx(1.5) and split.compute == pytest.approx(6.0, abs=1e-5)
    assert not models.dedicated_core(split.compute, split.write, 4).worthwhile   # W/C = 0.25 < 1/3
    assert models.dedicated_core(split.compute, split.write, 8).worthwhile       # 0.25 > 1/7


def test_non_mpi_processes_are_told_apart_by_pid():
    rows = [(-1, pid, "posix", "write", 0, pid * 8192 + i * 4096, 4096, 4096, i, i + 1)
            for pid in (100, 200) for i in range(2)]
    frame = pd.DataFrame(rows, columns=["rank", "pid", "layer", "op", "file_id", "offset", "req_bytes",
                                        "ret_bytes", "t_start", "t_end"])
    p = from_trace.pattern(frame)
    assert p.writers == 2 and p.shared_file and p.bytes_per_writer == 8192
