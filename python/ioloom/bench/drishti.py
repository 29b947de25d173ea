"""`ioloom bench drishti`: ioloom's findings beside Drishti's verdicts on the same real programs (issue 13).

Drishti (the `drishti-io` package, the benchmark-only extra `ioloom[bench-drishti]`) reads Darshan logs. Each
program here runs twice from a fresh directory: once under `ioloom run` (its findings), once with Darshan's
runtime library preloaded (`--darshan-lib`, or DARSHAN_LIB; the library built for the program's MPI is chosen
from the libraries given) for a log that Drishti reads; or a log of the program is given (`--darshan-log`).
The table has, per program and Drishti trigger (findings.drishti_map, the one map of triggers to checks),
Drishti's verdict beside the findings of ioloom's checks that cover it. What is missing (Drishti, a Darshan
library, LAMMPS) is said in one line and the rest still runs.

Programs need a source checkout (examples/, tests/programs/): `demo` (examples/strided_mpiio.c as `make demo`
runs it), `stdio-dumps` (tests/programs/mpiio_stdio_dumps.c: a simulation writing most of its bytes with
fprintf/fwrite), `lammps` (Debian's `lmp` on examples/lammps-melt.in) and `pattern:MODE` (a mode of
tests/programs/pattern_findings.c).
"""
from __future__ import annotations

import csv
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ioloom import mpi, paths
from ioloom.bench import app

DEFAULT_PROGRAMS = ("demo", "stdio-dumps", "lammps")
EXTRA_HINT = "pip install 'ioloom[bench-drishti]'"
NO_VERDICT = "n/a"  # Drishti's column where it had no log to read, or is not installed


class Refused(ValueError):
    """An argument the command cannot use: what is wrong and what to give, in one line."""


class Skipped(Exception):
    """A program that cannot run here (its MPI, LAMMPS or sources missing): why, in one line."""


@dataclass(frozen=True)
class Program:
    """A real program: how to launch it in a run directory, under which MPI."""
    name: str
    impl: mpi.MpiImpl
    argv: tuple[str, ...]
    ranks: int
    inputs: tuple[tuple[Path, str], ...] = ()  # (source, name in the run directory) copied before each run

    def launch(self) -> list[str]:
        return self.impl.launch(self.ranks, list(self.argv))

    def prepare(self, run: Path) -> Path:
        run.mkdir(parents=True)
        for source, name in self.inputs:
            shutil.copy(source, run / name)
        return run


def _compile(source: Path, impl: mpi.MpiImpl, workdir: Path) -> str:
    try:
        return str(impl.build(source, workdir))
    except mpi.BuildFailed as err:
        raise Skipped(str(err)) from None


def program(name: str, impl: mpi.MpiImpl | None, workdir: Path) -> Program:
    """The program called `name` (DEFAULT_PROGRAMS, pattern:MODE) under `impl` (LAMMPS: the MPI `lmp` links)."""
    root = paths.REPO_ROOT
    if name == "lammps":
        lmp = shutil.which("lmp")
        if lmp is None:
            raise Skipped("Debian's LAMMPS (package lammps) is not installed")
        lmp_impl = mpi.detect([lmp])
        if lmp_impl is None:
            raise Skipped(f"{lmp} links no MPI ioloom knows")
        return Program(name, lmp_impl, (lmp, "-in", "in.melt", "-log", "log.lammps", "-screen", "none"), 2,
                       ((root / "examples" / "lammps-melt.in", "in.melt"),))
    if impl is None:
        raise Skipped("no MPI found (mpicc.mpich or mpicc.openmpi with its mpiexec): run `make build`")
    if name == "demo":
        exe = _compile(paths.DEMO_SOURCE, impl, workdir)
        return Program(name, impl, (exe, "strided.dat", "64", "4096"), 4)
    if name == "stdio-dumps":
        exe = _compile(root / "tests" / "programs" / "mpiio_stdio_dumps.c", impl, workdir)
        return Program(name, impl, (exe, ".", "20", "2000"), 4, ((root / "examples" / "lammps-melt.in", "in.script"),))
    if name.startswith("pattern:"):
        exe = _compile(root / "tests" / "programs" / "pattern_findings.c", impl, workdir)
        return Program(name, impl, (exe, name.split(":", 1)[1], "."), 4)
    raise Refused(f"unknown program {name!r}: name {', '.join(DEFAULT_PROGRAMS)} or pattern:MODE")


def _run(argv: list[str], run: Path, env: dict[str, str]) -> None:
    done = subprocess.run(argv, cwd=run, env={**os.environ, **env}, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed in {run}:\n{done.stdout}{done.stderr}")


def ioloom_findings(prog: Program, run: Path) -> set[str]:
    """The codes of the findings ioloom makes on a traced run of `prog` in `run`."""
    from ioloom.analysis import analyse

    _run([sys.executable, "-m", "ioloom", "run", "-o", str(run / "ioloom-trace"), "--", *prog.launch()], run,
         prog.impl.base_env())
    return {f.code for f in analyse(run / "ioloom-trace", workers=1).findings}


def darshan_lib_for(impl: mpi.MpiImpl, libs: list[Path]) -> Path | None:
    """The Darshan runtime library among `libs` built for `impl` (the MPI library it links)."""
    return next((lib for lib in libs if getattr(mpi.detect([str(lib)]), "name", None) == impl.name), None)


def darshan_log(prog: Program, lib: Path, run: Path) -> Path:
    """A Darshan log of `prog` run in `run` with `lib` preloaded. The library must write its log to
    $DARSHAN_LOGPATH (Darshan's configure --with-log-path-by-env=DARSHAN_LOGPATH)."""
    logs = run / "darshan-logs"
    logs.mkdir()
    _run(prog.launch(), run, prog.impl.launch_env(prog.ranks, {"LD_PRELOAD": str(lib), "DARSHAN_LOGPATH": str(logs)}))
    found = sorted(logs.rglob("*.darshan"))
    if not found:
        raise RuntimeError(f"{lib} wrote no log under {logs}: configure Darshan with "
                           "--with-log-path-by-env=DARSHAN_LOGPATH --with-jobid-env=NONE")
    return found[-1]


def drishti_installed() -> bool:
    return importlib.util.find_spec("drishti") is not None


def drishti_verdicts(log: Path, workdir: Path) -> dict[str, bool]:
    """trigger -> whether Drishti reported it on `log` (its --csv export: every trigger, True where it spoke,
    good notes such as P12 included)."""
    out = Path(tempfile.mkdtemp(prefix="drishti-", dir=workdir))
    done = subprocess.run([sys.executable, "-c", "from drishti.reporter import main; main()", "--csv",
                           "--export_dir", str(out), str(log)], capture_output=True, text=True, timeout=600,
                          cwd=out)
    exported = sorted(out.glob("*.csv"))
    if done.returncode != 0 or not exported:
        raise RuntimeError(f"drishti failed on {log}: {(done.stderr or done.stdout).strip()[-500:]}")
    with open(exported[0], newline="") as f:
        header, values = list(csv.reader(f))[:2]
    return {code: value == "True" for code, value in zip(header, values) if code != "JOB"}


@dataclass
class Outcome:
    """One program's side: Drishti's verdict per trigger (None: no log, or Drishti missing) and ioloom's codes."""
    name: str
    verdicts: dict[str, bool] | None
    found: set[str]


def _drishti_cell(outcome: Outcome, trigger: str) -> str:
    return NO_VERDICT if outcome.verdicts is None else ("fired" if outcome.verdicts.get(trigger) else "–")


def rows(outcomes: list[Outcome], reasons: bool = True) -> list[list[str]]:
    """Per Drishti trigger: the trigger, the checks covering it (or none, and with `reasons` why), then per
    program Drishti's verdict and the covering findings that fired; then each finding that fired and covers no
    trigger."""
    from ioloom.analysis.findings import DRISHTI_UNCHECKED, drishti_map  # pandas: not at start-up

    out = []
    for trigger, codes in drishti_map().items():
        cells = [trigger, ", ".join(codes) or ("none: " + DRISHTI_UNCHECKED[trigger] if reasons else "none")]
        for o in outcomes:
            cells += [_drishti_cell(o, trigger), (", ".join(sorted(o.found & set(codes))) or "–") if codes else ""]
        out.append(cells)
    mapped = {code for codes in drishti_map().values() for code in codes}
    for code in sorted(set().union(*(o.found for o in outcomes)) - mapped):
        out.append(["–", f"{code} (ioloom only)", *(c for o in outcomes for c in ("", code if code in o.found
                                                                                 else "–"))])
    return out


def program_rows(outcomes: list[Outcome]) -> list[list[str]]:
    """Per program: the triggers Drishti fired that a check covers, those it fired that none covers, and the
    findings ioloom made (the table by program, for many programs)."""
    from ioloom.analysis.findings import drishti_map

    covered = {t for t, codes in drishti_map().items() if codes}
    out = []
    for o in outcomes:
        fired = [t for t in drishti_map() if o.verdicts and o.verdicts.get(t)]
        theirs = [(", ".join(t for t in fired if (t in covered) == side) or "–") if o.verdicts is not None
                  else NO_VERDICT for side in (True, False)]
        out.append([o.name, *theirs, ", ".join(sorted(o.found)) or "–"])
    return out


PROGRAM_HEADER = ["program", "Drishti (triggers a check covers)", "Drishti (no check)", "ioloom"]


def header(outcomes: list[Outcome]) -> list[str]:
    return ["trigger", "ioloom's checks", *(f"{o.name}: {side}" for o in outcomes for side in ("Drishti", "ioloom"))]


def _parse_logs(given: list[str]) -> dict[str, Path]:
    logs = {}
    for item in given:
        name, sep, path = item.partition("=")
        if not sep or not Path(path).is_file():
            raise Refused(f"--darshan-log {item!r}: give PROGRAM=PATH of an existing .darshan file")
        logs[name] = Path(path)
    return logs


def side_by_side(names: list[str], impl: mpi.MpiImpl | None, libs: list[Path], logs: dict[str, Path],
                 workdir: Path, say) -> list[Outcome]:
    """What Drishti and ioloom say on every program in `names`; `say` gets one line per thing skipped or
    missing."""
    outcomes = []
    use_drishti = drishti_installed()
    if not use_drishti:
        say(f"drishti-io is not installed ({EXTRA_HINT}): Drishti's column is left empty")
    for name in names:
        try:
            prog = program(name, impl, workdir)
        except Skipped as why:
            say(f"{name}: skipped, {why}")
            continue
        slug = name.replace(":", "-")
        found = ioloom_findings(prog, prog.prepare(workdir / f"{slug}-ioloom"))
        log = logs.get(name)
        lib = darshan_lib_for(prog.impl, libs)
        if log is None and lib is not None:
            log = darshan_log(prog, lib, prog.prepare(workdir / f"{slug}-darshan"))
        if log is None:
            say(f"{name}: no Darshan log (give --darshan-lib a libdarshan.so built for {prog.impl.name}, or "
                f"--darshan-log {name}=PATH)")
        verdicts = drishti_verdicts(log, workdir) if log is not None and use_drishti else None
        outcomes.append(Outcome(name, verdicts, found))
    return outcomes


def _print(outcomes: list[Outcome], markdown: bool, by_program: bool) -> None:
    """The table on the terminal, or as Markdown (docs/analysis.md keeps the measured ones; the reasons a trigger
    has no check are in its table of the map)."""
    head, body = (PROGRAM_HEADER, program_rows(outcomes)) if by_program else \
        (header(outcomes), rows(outcomes, reasons=not markdown))
    if markdown:
        for cells in [head, ["---"] * len(head), *body]:
            typer.echo("| " + " | ".join(cells) + " |")
        return
    out = Table(title="Drishti's triggers beside ioloom's findings (–: did not fire)")
    for column in head:
        out.add_column(escape(column), overflow="fold")
    for cells in body:
        out.add_row(*(escape(cell) for cell in cells))
    Console(width=max(120, 40 + 30 * len(outcomes))).print(out)


@app.command("drishti")
def drishti_command(programs: str = typer.Option(",".join(DEFAULT_PROGRAMS), "--programs",
                                                 help="Comma-separated: demo, stdio-dumps, lammps, pattern:MODE."),
                    impl: str = typer.Option(None, "--mpi", help="openmpi or mpich (default: MPICH when present); "
                                             "LAMMPS runs under the MPI it links."),
                    darshan_libs: list[Path] = typer.Option(
                        [], "--darshan-lib", help="Darshan's runtime libdarshan.so, one per MPI (default: "
                        "DARSHAN_LIB, colon-separated); built with --with-log-path-by-env=DARSHAN_LOGPATH."),
                    darshan_logs: list[str] = typer.Option([], "--darshan-log", help="PROGRAM=PATH: a Darshan log "
                                                           "of that program to give Drishti instead of running it."),
                    workdir: Path = typer.Option(None, "--dir", help="Where to run (default: a temporary directory, "
                                                 "removed after)."),
                    keep: bool = typer.Option(False, "--keep", help="Keep the runs, traces and logs."),
                    markdown: bool = typer.Option(False, "--markdown", help="Print the table as Markdown."),
                    by_program: bool = typer.Option(False, "--by-program", help="One row per program (what fired "
                                                    "on each side) instead of one per trigger.")) -> None:
    """Drishti's verdict beside ioloom's findings, per trigger, on the same real programs."""
    try:
        chosen = mpi.chosen(impl)
    except mpi.MpiNotFound as why:
        typer.echo(f"ioloom: {why}", err=True)
        raise typer.Exit(2) from None
    libs = darshan_libs or [Path(p) for p in os.environ.get("DARSHAN_LIB", "").split(":") if p]
    missing = [lib for lib in libs if not lib.is_file()]
    if missing:
        typer.echo(f"ioloom: no such Darshan library {missing[0]}; give the path of a libdarshan.so", err=True)
        raise typer.Exit(2)
    if not libs and not darshan_logs:
        typer.echo("no Darshan library (--darshan-lib or DARSHAN_LIB) nor log (--darshan-log): Debian 12 packages "
                   "no Darshan; build its runtime with --with-log-path-by-env=DARSHAN_LOGPATH --with-jobid-env=NONE "
                   "for each MPI. ioloom's column only.")
    root = Path(tempfile.mkdtemp(prefix="ioloom-bench-drishti-", dir=workdir))
    try:
        names = [n.strip() for n in programs.split(",") if n.strip()]
        _print(side_by_side(names, chosen, libs, _parse_logs(darshan_logs), root, typer.echo), markdown, by_program)
    except Refused as why:
        typer.echo(f"ioloom: {why}", err=True)
        raise typer.Exit(2) from None
    finally:
        if keep:
            typer.echo(f"kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
