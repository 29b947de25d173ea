"""Op classes are stated once, in native/trace/ioloom_ops.h's table (X(SUFFIX, "name", CLASS)); the Python
tables that classify calls by name (analysis kinds, directions of data calls) must say the same of every op."""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest

from ioloom import paths
from ioloom.analysis.ops import KINDS, kind_codes
from ioloom.trace.ops import direction

HEADER = paths.REPO_ROOT / "native" / "trace" / "ioloom_ops.h"
LIO_READ, LIO_WRITE = 0, 1


def table() -> list[tuple[str, str]]:
    ops = re.findall(r'^ +X\(\w+, "([^"]+)", (\w+)\)', HEADER.read_text(), re.M)
    assert len(ops) > 200 and len({name for name, _ in ops}) == len(ops)
    return ops


def kinds_of(names: list[str], aux: int) -> list[str]:
    codes = kind_codes(pa.array(names).dictionary_encode(), np.full(len(names), aux, np.int64))
    return [KINDS[code] for code in codes]


# What each class is as an analysis kind and a direction, for an event with the given aux. fcntl's kind depends
# on the command in its aux: -1 (no lock command) makes it "other".
EXPECTED = {  # class: [(aux, kind, direction)]
    "READ": [(-1, "read", "read")], "WRITE": [(-1, "write", "write")],
    "COPY": [(0, "read", "read"), (1, "write", "write")],
    "AIO": [(LIO_READ, "read", "read"), (LIO_WRITE, "write", "write")],
    "META": [(-1, "meta", None)], "SYNC": [(-1, "sync", None)], "LOCK": [(-1, "other", None)],
    "OTHER": [(-1, "other", None)],
}


@pytest.mark.parametrize("op_class", sorted(EXPECTED))
def test_python_classifies_every_op_as_the_table_says(op_class):
    names = [name for name, cls in table() if cls == op_class]
    assert names, f"no op of class {op_class}"
    for aux, kind, way in EXPECTED[op_class]:
        assert dict(zip(names, kinds_of(names, aux))) == dict.fromkeys(names, kind)
        assert {name: direction(name, aux) for name in names} == dict.fromkeys(names, way)


def test_every_class_is_known():
    assert {cls for _, cls in table()} == set(EXPECTED)


def test_creat_is_metadata_like_open():
    assert kinds_of(["creat", "creat64", "open"], -1) == ["meta"] * 3
