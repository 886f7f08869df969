"""The comparison harness of the bench/ scripts that put tokscope beside a peer.

What makes a figure fair here (the DuckDB / ClickBench rules, applied to two
engines on one machine):

- every engine runs as its own process pinned to the same cores (CPU
  affinity: `cores`), with the same thread count, over the same input;
- the engines run in turn within a round, and the order rotates every round
  (round r starts with engine r mod n), so no engine always follows the
  page-cache warm-up of another or always runs on a cooler machine;
- two clocks side by side: the whole process (start to exit, measured here),
  and the engine's own clock around its work where it reports one (a Python
  peer's clock starts after the interpreter and its module are loaded; the
  cost of that start is measured apart, by an engine that only starts);
- the figure is the median of the per-round paired ratios (peer over
  tokscope in the same round) with their range, never the best run alone;
- every timed run's output is checked after it (untimed): a check that
  finds a problem fails the script (exit 1), so no ratio of a wrong result is
  printed as a figure.

CPU time comes from wait4 of each process, peak RSS from GNU time
(/usr/bin/time) around it where there is one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Optional


@dataclasses.dataclass
class Engine:
    """One engine's timed command."""

    name: str
    argv: list
    env: Optional[dict] = None
    # Untimed, before each run (removes the last run's output).
    before: Optional[Callable[[], None]] = None
    # The engine's own clock: seconds read from its stdout/stderr (or its files).
    inproc: Optional[Callable[[str, str], Optional[float]]] = None
    # Untimed, after each run: a list of problems with its output (empty: right).
    check: Optional[Callable[[str], list]] = None
    # Shown apart, not compared (a floor, an interpreter start, a reference).
    role: str = "engine"


@dataclasses.dataclass
class Run:
    engine: str
    round: int
    whole_s: float
    inproc_s: Optional[float]
    cpu_s: float
    rss_mib: float


def first_cores(n: int) -> list:
    """The first n cores this process may run on; fails when there are fewer."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < n:
        sys.exit(f"fair.py: {n} threads asked for, but only {len(allowed)} cores are allowed here")
    return allowed[:n]


def run_once(engine: Engine, cores: list) -> tuple:
    """Runs one engine pinned to `cores`; (whole seconds, cpu seconds, peak RSS MiB, stdout, stderr)."""
    if engine.before:
        engine.before()
    env = dict(os.environ)
    env.update(engine.env or {})
    # Pinned by taskset where there is one, and the peak RSS read by GNU time
    # where there is one: a process Python starts begins as a copy of Python,
    # whose resident pages Linux carries into the child's peak across exec.
    argv, pin = list(map(str, engine.argv)), None
    if shutil.which("taskset"):
        argv = ["taskset", "-c", ",".join(map(str, cores))] + argv
    else:
        pin = lambda: os.sched_setaffinity(0, cores)  # noqa: E731
    gnu_time = os.path.exists("/usr/bin/time")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile("r") as rss:
        if gnu_time:
            argv = ["/usr/bin/time", "-f", "%M", "-o", rss.name] + argv
        t = time.perf_counter()
        p = subprocess.Popen(argv, env=env, stdout=out, stderr=err, preexec_fn=pin)
        _, status, usage = os.wait4(p.pid, 0)
        whole = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
        peak_kib = int(rss.read().split()[-1]) if gnu_time and p.returncode == 0 else usage.ru_maxrss
    if p.returncode != 0:
        sys.exit(f"fair.py: {engine.name} exited with {p.returncode}: {' '.join(map(str, engine.argv))}\n{stderr[-2000:]}")
    return whole, usage.ru_utime + usage.ru_stime, peak_kib / 1024, stdout, stderr


def rounds(engines: list, n_rounds: int, cores: list, log=print) -> list:
    """Runs every engine once per round, the order rotated each round; checks every output."""
    runs, problems = [], []
    for r in range(n_rounds):
        k = r % len(engines)
        order = engines[k:] + engines[:k]
        for pos, e in enumerate(order):
            whole, cpu, rss, stdout, stderr = run_once(e, cores)
            inproc = e.inproc(stdout, stderr) if e.inproc else None
            runs.append(Run(e.name, r, whole, inproc, cpu, rss))
            if e.check:
                found = e.check(stdout)
                problems += [f"{e.name}, round {r + 1}: {p}" for p in found]
            clock = f", own clock {inproc:.3f} s" if inproc is not None else ""
            log(f"  round {r + 1}/{n_rounds} #{pos + 1} {e.name}: {whole:.3f} s{clock}, CPU {cpu:.2f} s, peak RSS {rss:.0f} MiB")
    if problems:
        for p in problems:
            print(f"MISMATCH {p}", file=sys.stderr)
        sys.exit(f"fair.py: {len(problems)} output check(s) failed; no figure printed")
    return runs


def per_engine(runs: list, name: str) -> list:
    return sorted((r for r in runs if r.engine == name), key=lambda r: r.round)


def spread(values: list, digits: int = 2) -> str:
    """'median (min-max)' of positive numbers, `digits` after the point."""
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def paired(runs: list, peer: str, base: str, clock: str = "whole_s") -> list:
    """Per-round ratios peer / base of one clock (rounds where both have it)."""
    a, b = per_engine(runs, peer), per_engine(runs, base)
    out = []
    for x, y in zip(a, b):
        px, py = getattr(x, clock), getattr(y, clock)
        if px is not None and py is not None and py > 0:
            out.append(px / py)
    return out


def summary(runs: list, engines: list, base: str) -> dict:
    """Per engine: medians and ranges of both clocks, CPU/wall, peak RSS, and
    the paired ratios against `base` (peer time over base time: above 1, base
    is faster). Printed as a table and returned as a dict (for JSON)."""
    out = {}
    print(f"{'engine':40s} {'whole s (median, range)':>26s} {'own clock s':>22s} {'CPU/wall':>9s} {'peak RSS MiB':>13s}")
    for e in engines:
        rs = per_engine(runs, e.name)
        whole = [r.whole_s for r in rs]
        own = [r.inproc_s for r in rs if r.inproc_s is not None]
        cpu = [r.cpu_s / r.whole_s for r in rs]
        print(
            f"{e.name:40s} {spread(whole, 4):>26s} {spread(own, 4) if own else '-':>22s} "
            f"{statistics.median(cpu):9.2f} {max(r.rss_mib for r in rs):13.0f}"
        )
        out[e.name] = {
            "role": e.role,
            "whole_s": whole,
            "own_s": own,
            "cpu_over_wall_median": statistics.median(cpu),
            "peak_rss_mib": max(r.rss_mib for r in rs),
        }
    print(f"\npaired per-round ratios, time over {base}'s (above 1: {base} is faster), median (range) of {len(per_engine(runs, base))} rounds:")
    for e in engines:
        if e.name == base:
            continue
        whole = paired(runs, e.name, base)
        own = paired(runs, e.name, base, "inproc_s")
        text = f"  {e.name:38s} whole process {spread(whole)}"
        if own:
            text += f"   own clocks {spread(own)}"
        if e.role != "engine":
            text += f"   [{e.role}]"
        print(text)
        out[e.name]["ratio_whole"] = whole
        out[e.name]["ratio_own"] = own
    return out


def write_json(path: str, data: dict) -> None:
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
