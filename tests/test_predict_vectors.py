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


LOCALS = [b for b in blocks() if b[0][0] == "local"]


@pytest.mark.parametrize("header,rows", LOCALS, ids=[f"{b[0][4]}-runs{b[0][6]}" for b in LOCALS])
def test_python_local_model_predicts_as_the_c_one(header, rows):
    model = LocalModel(int(header[2]), header[4], runs=header[6] == "1", cap=4096)
    for value, predicted in rows:
        model.observe(int(value))
        assert model.predict() == int(predicted), f"{header}: after {value}"


def test_c_writes_the_committed_vectors(tmp_path):
    subprocess.run([str(paths.native_bin("ioloom-predict-vectors")), str(tmp_path)], check=True)
    assert (tmp_path / "sequences.txt").read_text() == VECTORS.read_text(), \
        "the C grammar no longer predicts as the committed vectors say (a change of docs/predict.md: new version)"


PROCESS_VECTORS = VECTORS.with_name("process.txt")
KIND_NAMES = ("open", "close", "read", "write")  # process.h's enum pg_kind


def vector_blocks(path: Path, header: str) -> list[tuple[list[str], list[str]]]:
    """(header words, operation lines) per stream of a vector file whose streams start with `header`."""
    out: list[tuple[list[str], list[str]]] = []
    for line in path.read_text().splitlines():
        if line.startswith(header + " "):
            out.append((line.split(), []))
        else:
            out[-1][1].append(line)
    return out


def _candidates(text: str) -> list[tuple[int, int, int, float]]:
    fields = (c.split(",") for c in text.split(";") if c)
    return [(int(s), int(size), int(offset), float(gap)) for s, size, offset, gap in fields]


PROCESSES = vector_blocks(PROCESS_VECTORS, "process")


@pytest.mark.parametrize("header,lines", PROCESSES, ids=[f"{b[0][1]}-{b[0][3]}" for b in PROCESSES])
def test_python_process_model_predicts_as_the_c_one(header, lines):
    """Before every operation, the same candidates: symbols, sizes, offsets and gaps (the gaps' doubles equal)."""
    from ioloom.predict.model import Operation, Options, ProcessModel

    model = ProcessModel({}, {}, Options(run_positions=int(header[3])))
    for index, line in enumerate(lines):
        fields, count, candidates = line.split("\t")
        symbol, kind, place, offset, size, t_start, t_end, moved = (int(f) for f in fields.split())
        predicted = [tuple(c) for c in model.predict()]
        assert (len(predicted), predicted[:64]) == (int(count), _candidates(candidates)), \
            f"{header[1]}: operation {index}"
        model.kinds.setdefault(symbol, KIND_NAMES[kind])
        model.places.setdefault(symbol, str(place))
        model.observe(Operation(symbol, KIND_NAMES[kind], str(place), place, offset, size, t_start, t_end, moved))


def test_c_writes_the_committed_process_vectors(tmp_path):
    subprocess.run([str(paths.native_bin("ioloom-predict-vectors")), str(tmp_path)], check=True)
    assert (tmp_path / "process.txt").read_text() == PROCESS_VECTORS.read_text(), \
        "the C process model no longer predicts as the committed vectors say (a change of docs/predict.md)"


FOLDED_VECTORS = VECTORS.with_name("folded.txt")


def _folded_blocks() -> dict[str, tuple[int, int, list[int]]]:
    """Per stream of folded.txt: its cap, how many symbols were left for the tail, and the rules as stored."""
    lines = FOLDED_VECTORS.read_text().splitlines()
    out = {}
    for header, values in zip(lines[::2], lines[1::2]):
        _, name, _, cap, _, tail = header.split()
        out[name] = (int(cap), int(tail), [int(v) for v in values.split()])
    return out


@pytest.mark.parametrize("name", list(_folded_blocks()))
def test_c_folds_a_stream_as_the_folded_trace_writer(name):
    """The C grammar's rules written out (pg_grammar_rules) are those a folded trace stores for the same tokens
    (python/ioloom/trace/folded.py's fold(): rule 0 is S, the others in order of making): the grammar section is
    one format, writable from C (docs/trace-format.md, "Folded traces")."""
    import numpy as np

    from ioloom.trace.folded import fold, unfold

    cap, tail, stored = _folded_blocks()[name]
    header, rows = next(b for b in STREAMS if b[0][1] == name)
    tokens = np.array([int(row[0]) for row in rows], dtype=np.int64)
    rules, rest = fold(tokens, cap)
    assert [len(rules), *(v for rule in rules for v in (len(rule), *rule))] == stored and len(rest) == tail
    assert unfold(rules, rest).tolist() == tokens.tolist()


def test_c_writes_the_committed_folded_vectors(tmp_path):
    subprocess.run([str(paths.native_bin("ioloom-predict-vectors")), str(tmp_path)], check=True)
    assert (tmp_path / "folded.txt").read_text() == FOLDED_VECTORS.read_text()


PHASE_VECTORS = VECTORS.with_name("phases.txt")


def _phase(text: str) -> tuple:
    """A phase as the C program prints it (-1: None), as interface.Phase's fields."""
    done, remaining, end, length, written, to_write = (int(f) for f in text.split())
    none = [None if v == -1 else v for v in (remaining, end, length, to_write)]
    return (done, none[0], none[1], none[2], written, none[3])


PHASE_STREAMS = vector_blocks(PHASE_VECTORS, "phases")


@pytest.mark.parametrize("header,lines", PHASE_STREAMS, ids=[f"{b[0][1]}-{b[0][3]}-{b[0][5]}" for b in PHASE_STREAMS])
def test_python_phases_answer_as_the_c_ones(header, lines):
    """Before every operation (asked at its start: past the gap, the phase it begins) and after it, the same
    phase: operations done and remaining, end, length, bytes written and to write (docs/predict.md, "Prediction
    interface"); in one stream the process is held (waits for a coordinator) 2 ms, past the gap, within phases."""
    from ioloom.predict.interface import Phases
    from ioloom.predict.model import Operation, Options, ProcessModel

    options = Options()
    model, phases = ProcessModel({}, {}, options), Phases(options, int(header[3]))
    for index, line in enumerate(lines):
        fields, before, after = line.split("\t")
        symbol, kind, place, offset, size, t_start, t_end, held = (int(f) for f in fields.split())
        phases.hold(held)
        assert tuple(phases.now(model.predict, t_start)) == _phase(before), f"{header[1]}: before {index}"
        phases.observe(KIND_NAMES[kind], size, t_start, t_end)
        model.kinds.setdefault(symbol, KIND_NAMES[kind])
        model.places.setdefault(symbol, str(place))
        model.observe(Operation(symbol, KIND_NAMES[kind], str(place), place, offset, size, t_start, t_end))
        assert tuple(phases.now(model.predict)) == _phase(after), f"{header[1]}: after {index}"


def test_c_writes_the_committed_phase_vectors(tmp_path):
    subprocess.run([str(paths.native_bin("ioloom-predict-vectors")), str(tmp_path)], check=True)
    assert (tmp_path / "phases.txt").read_text() == PHASE_VECTORS.read_text(), \
        "the C phase interface no longer answers as the committed vectors say (a change of docs/predict.md)"
