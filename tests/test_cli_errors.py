"""Every `ioloom` command refuses input it cannot use with one line that says what is wrong and what to do, a
non-zero exit status and no traceback (issue 12 item 6): the cases the issue names, then every command of the
command tree walked with values no command can accept."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer

from ioloom.cli import app, main

WALK_SKIPS = {"doctor": "takes no value that can be wrong (only --json)"}
# Parameters whose every text is a valid value, so the walk's "x" would run the command for real.
PARAM_SKIPS = {("coord", "serve"): {"address": "any path is a socket address: the server would start and serve"},
               ("run",): {"coord": "any path is an address, and a run whose coordinator does not answer writes on "
                                   "(fail-open, docs/coord.md)"}}


def ioloom(*args) -> tuple[int, str, str]:
    """Run the command line in this process: (exit status, stdout, stderr)."""
    import io
    from contextlib import redirect_stderr, redirect_stdout
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main([str(a) for a in args])
            status = 0
        except SystemExit as done:
            status = done.code if isinstance(done.code, int) else 1
    return status, out.getvalue(), err.getvalue()


def refused(*args, says: str | None = None) -> str:
    """The command fails (status 2) with one message and no traceback; returns its stderr."""
    status, _, err = ioloom(*args)
    assert status == 2, f"ioloom {' '.join(map(str, args))}: status {status}\n{err}"
    assert "Traceback" not in err and "internal error" not in err, err
    assert err.strip(), "no message"
    if says:
        assert says in " ".join(err.replace("│", " ").split()), err
    return err


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> Path:
    """A real trace of dd (and a logfs container it wrote), shared by the tests of this module."""
    work = tmp_path_factory.mktemp("cli-errors")
    (work / "mnt").mkdir()
    out = subprocess.run([sys.executable, "-m", "ioloom", "run", "-o", "trace", "--logfs", "mnt", "--", "dd",
                          "if=/dev/zero", "of=mnt/data", "bs=4096", "count=8", "status=none"],
                         cwd=work, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    (work / "regular").write_text("not a trace\n")
    (work / "not-a-trace").mkdir()
    return work


def _stream(traced: Path) -> bytes:
    return next((traced / "trace").glob("*.ioloom")).read_bytes()


@pytest.mark.parametrize("command", [["stats"], ["report", "-o", "{work}/report.html"], ["export", "-f", "csv"]])
@pytest.mark.parametrize("content,says", [
    (b"a regular file\n", "not an ioloom trace stream"),
    (b"XXXXXXXX" + b"\0" * 8, "not an ioloom trace stream"),
    ("future", "format version 9"),
    ("header", "nothing after its header"),
])
def test_unreadable_trace_is_refused(traced, tmp_path, command, content, says):
    """stats, report and export exit 2 on a regular file, a bad magic, a future major version and a stream cut
    to its header, and report writes no report."""
    data = {"future": lambda b: b[:8] + (9).to_bytes(2, "little") + b[10:], "header": lambda b: b[:16]}
    stream = tmp_path / "t" / "one.ioloom"
    stream.parent.mkdir()
    stream.write_bytes(data[content](_stream(traced)) if isinstance(content, str) else content)
    refused(*[c.format(work=tmp_path) for c in command], stream.parent, says=says)
    assert not (tmp_path / "report.html").exists()


def test_header_only_stream_is_named_beside_readable_ones(traced, tmp_path):
    from ioloom.trace import open_trace
    shutil_copy = (traced / "trace")
    (tmp_path / "t").mkdir()
    for p in shutil_copy.glob("*.ioloom"):
        (tmp_path / "t" / p.name).write_bytes(p.read_bytes())
    (tmp_path / "t" / "cut.ioloom").write_bytes(_stream(traced)[:16])
    assert any("cut.ioloom: nothing after its header" in p for p in open_trace(tmp_path / "t").problems)


def test_run_into_an_impossible_directory(traced):
    refused("run", "-o", "/proc/x", "--", "true", says="cannot create the trace directory /proc/x")


@pytest.mark.parametrize("value", ["0", "-5"])
def test_stripe_size_must_be_positive(traced, value):
    refused("stats", "--stripe-size", value, traced / "trace", says="Invalid value for '--stripe-size'")


def test_bench_io_needs_a_rank():
    refused("bench", "io", "-n", "0", says="Invalid value for '-n' / '--ranks'")


def test_advise_trace_that_is_not_a_trace(traced):
    refused("advise", "striping", "--targets", "4", "--trace", traced / "not-a-trace", says="holds no trace streams")
    refused("advise", "dedicated-core", "--cores-per-node", "4", "--trace", traced / "regular",
            says="no readable trace stream")


def test_advise_names_the_option():
    refused("advise", "interference", "--mu", "1.5", "--job-counts", "1:1", says="Invalid value for '--mu'")


def test_a_bug_is_one_line_and_debug_shows_the_traceback(monkeypatch):
    """An exception ioloom did not foresee says it is a bug, in one line, status 70; --debug re-raises it."""
    from ioloom import doctor
    monkeypatch.setattr(doctor, "run_checks", lambda: 1 / 0)  # a bug, where no real one is left
    status, _, err = ioloom("doctor")
    assert status == 70 and err.count("\n") == 1 and "internal error (ZeroDivisionError" in err
    monkeypatch.delenv("IOLOOM_DEBUG", raising=False)
    with pytest.raises(ZeroDivisionError):
        main(["--debug", "doctor"])
    os.environ.pop("IOLOOM_DEBUG", None)


# ---- the walk: every command, each of its values replaced by one that no command accepts

def _commands(group: click.Group, path=()):
    """(path, command) of every leaf command, asked as click asks (the root loads its subcommands lazily)."""
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name), command


def _bad_values(param: click.Parameter, work: Path) -> list[str]:
    """Values this parameter can never take: not a number, out of its range, a path under a regular file, or text
    no command knows."""
    kind = param.type
    if isinstance(kind, click.types.BoolParamType) or getattr(param, "is_flag", False):
        return []
    values = ["x"] if not isinstance(kind, click.Path) else [str(work / "regular" / "x")]
    if isinstance(kind, (click.IntRange, click.FloatRange)):
        values += [str(kind.min - 1)] if kind.min is not None else []
        values += [str(kind.max + 1)] if kind.max is not None else []
    return values


def _base(path: tuple[str, ...], work: Path) -> list[str]:
    """Arguments with which each command would run (or, for the benchmarks, fail fast): one value at a time is
    then replaced by a bad one."""
    trace, container = str(work / "trace"), str(work / "mnt" / "data")
    return {
        "run": ["-o", str(work / "out"), "--", "true"], "stats": [trace], "report": [trace, "-o", str(work / "r.html")],
        "export": [trace, "-f", "csv", "-o", str(work / "csv")],
        "advise ost-load": ["--targets", "8", "--stripes", "2", "--jobs", "2"],
        "advise plfs": ["--targets", "8", "--ranks", "4"],
        "advise striping": ["--targets", "8", "--writers", "4", "--bytes-per-writer", "1M", "--request-size", "64K"],
        "advise interference": ["--job-counts", "1:0.5,2:0.5", "--mu", "0.5", "--t-a", "1", "--t-b", "1"],
        "advise dedicated-core": ["--compute", "10", "--write", "1", "--cores-per-node", "8"],
        "advise energy": ["--t-base", "1", "--iterations", "2", "--cores-per-node", "4", "--nodes", "2", "--p-max",
                          "200", "--p-idle", "100"],
        "container ls": [container], "container stat": [container], "container cat": [container],
        "container check": [container], "container recover": [container],
        "container flatten": [container, str(work / "flat")], "container rm": [container],
        "container run": ["-m", str(work / "mnt"), "--", "true"],
        "bench sweep": [str(work / "regular")], "bench fuzz": ["--cases", "1", "--dir", str(work / "fuzz")],
    }.get(" ".join(path), [])


def _replace(base: list[str], param: click.Parameter, value: str, position: int) -> list[str]:
    """base with param's value replaced by value (an option is added when base does not give it)."""
    if isinstance(param, click.Argument):
        args = [a for a in base if not a.startswith("-") or a == "--"]
        if param.nargs == -1 and "--" in base:
            return base[:base.index("--") + 1] + [value]
        if position < len(args):
            where = base.index(args[position])
            return base[:where] + [value] + base[where + 1:]
        return base + [value]
    out, names = list(base), set(param.opts)
    for i, arg in enumerate(out):
        if arg in names:
            out[i + 1] = value
            return out
    return ([*out[:out.index("--")], param.opts[0], value, *out[out.index("--"):]] if "--" in out
            else [*out, param.opts[0], value])


def _walk_cases(work: Path):
    root = typer.main.get_command(app)
    for path, command in _commands(root):
        if " ".join(path) in WALK_SKIPS:
            continue
        arguments = [p for p in command.params if isinstance(p, click.Argument)]
        for param in command.params:
            if param.name in PARAM_SKIPS.get(path, {}):
                continue
            position = arguments.index(param) if param in arguments else 0
            for value in _bad_values(param, work):
                yield path, param.name, _replace(_base(path, work), param, value, position)


def test_walk_covers_every_command(traced):
    walked = {path for path, _, _ in _walk_cases(traced)}
    listed = {path for path, _ in _commands(typer.main.get_command(app)) if " ".join(path) not in WALK_SKIPS}
    assert walked == listed and {("stats",), ("bench", "fuzz"), ("container", "rm"), ("advise", "energy")} <= listed


def test_every_command_refuses_bad_values(traced, tmp_path):
    """Each command with one value replaced by one it cannot take: a non-zero status, a message, no traceback."""
    failures = []
    for path, name, args in _walk_cases(traced):
        status, _, err = ioloom(*path, *args)
        if status == 0 or "Traceback" in err or "internal error" in err or not err.strip():
            failures.append(f"ioloom {' '.join([*path, *args])} ({name}): status {status}: {err.strip()[-300:]}")
    assert not failures, "\n".join(failures)


def test_unreadable_darshan_log_is_one_line(tmp_path, capfd):
    """libdarshan-util's own "Error:" lines (written to descriptor 2 by C) do not join ioloom's one line."""
    log = tmp_path / "bad.darshan"
    log.write_text("not a darshan log\n")
    status, _, err = ioloom("stats", log)
    assert status == 2 and "not a readable Darshan log" in err
    assert capfd.readouterr().err.strip() == ""


def test_advise_refusal_is_one_line(tmp_path):
    swf = tmp_path / "jobs.swf"
    swf.write_text("not a job line\n")
    err = refused("advise", "interference", "--swf", swf, "--mu", "0.5", says="not an SWF job line")
    assert err.count("\n") == 1
