"""The predictor's shared test vectors (tests/vectors/predict/sequences.txt, written by ioloom-predict-vectors from
the C grammar, native/predict/): the Python model predicts the same sets, holds grammars of the same size and
counts the same inputs past its cap after every input; the C program still writes the committed vectors."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ioloom import paths
from ioloom.predict.model import LocalModel, Sequence

VECTORS = Path(__file__).parent / "vectors" / "predict" / "sequences.txt"


def blocks() -> list[tuple[list[str], list[list[str]]]]:
    """(header words, rows of tab-separated fields) per block of the vector file."""
    out: list[tuple[list[str], list[list[str]]]] = []
    for line in VECTORS.read_text().splitlines():
        if line.startswith(("stream ", "local ")):
            out.append((line.split(), []))
        else:
            out[-1][1].append(line.split("\t"))
    return out


STREAMS = [b for b in blocks() if b[0][0] == "stream"]


@pytest.mark.parametrize("header,rows", STREAMS, ids=[b[0][1] for b in STREAMS])
def test_python_sequence_predicts_as_the_c_one(header, rows):
    cap, runs = int(header[3]), header[5] == "1"
    sequence = Sequence(cap=cap, limit=24, runs=runs, local_cap=4096)
    for index, (symbol, predicted, size, past_cap) in enumerate(rows):
        sequence.input(int(symbol))
        expected = [int(s) for s in predicted.split(",")] if predicted else []
        assert sorted(sequence.predicted()) == expected, f"{header[1]}: input {index}"
        assert (sequence.grammar.size, sequence.grammar.past_cap) == (int(size), int(past_cap)), \
            f"{header[1]}: input {index}"


def test_python_local_model_predicts_as_the_c_one():
    header, rows = next(b for b in blocks() if b[0][0] == "local")
    model = LocalModel(int(header[2]), header[4], runs=header[6] == "1", cap=4096)
    for value, predicted in rows:
        model.observe(int(value))
        assert model.predict() == int(predicted)


def test_c_writes_the_committed_vectors(tmp_path):
    subprocess.run([str(paths.native_bin("ioloom-predict-vectors")), str(tmp_path)], check=True)
    assert (tmp_path / "sequences.txt").read_text() == VECTORS.read_text(), \
        "the C grammar no longer predicts as the committed vectors say (a change of docs/predict.md: new version)"
