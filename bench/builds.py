"""Two builds of tokscope on the same ingest, through bench/fair.py: each
binary pinned to the same cores with the same threads, the order rotated
each round, the median and range of the per-round ratios on the whole
process's clock and on ingest's own (`elapsed_s` of its summary), every
output checked (rows written and lines read equal the log's lines).

Usage: python3 bench/builds.py BEFORE_BIN AFTER_BIN LOG [LOG...]
Environment: THREADS (default 2), ROUNDS (default 5), WORK (scratch directory).
bench/builds.sh makes the logs and calls it."""

import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fair  # noqa: E402

THREADS = int(os.environ.get("THREADS", "2"))
ROUNDS = int(os.environ.get("ROUNDS", "5"))
WORK = os.environ.get("WORK", "target/bench/builds")


def engine(name: str, binary: str, log: str, lines: int) -> fair.Engine:
    out = os.path.join(WORK, f"ds-{name}")

    def clean():
        shutil.rmtree(out, ignore_errors=True)

    def summary():
        with open(os.path.join(out, "_ingest_summary.json")) as f:
            return json.load(f)

    def own_clock(_stdout, _stderr):
        return float(summary()["elapsed_s"])

    def check(_stdout):
        t = summary()["totals"]
        problems = []
        if t["lines_read"] != lines or t["lines_ingested"] != lines:
            problems.append(f"{name}: {t['lines_ingested']} of {t['lines_read']} lines ingested, the log has {lines}")
        return problems

    t = str(THREADS)
    return fair.Engine(
        name,
        [binary, "--threads", t, "ingest", "--quiet", "--out", out, log],
        env={"TOKSCOPE_THREADS": t, "TOKIO_WORKER_THREADS": t},
        before=clean,
        inproc=own_clock,
        check=check,
    )


def main() -> None:
    before, after, logs = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(WORK, exist_ok=True)
    cores = fair.first_cores(THREADS)
    results = {}
    for log in logs:
        with open(log, "rb") as f:
            lines = sum(1 for _ in f)
        print(f"\n-- ingest {log} ({lines} lines), {THREADS} threads, {ROUNDS} rounds")
        engines = [engine("before", before, log, lines), engine("after", after, log, lines)]
        runs = fair.rounds(engines, ROUNDS, cores)
        print()
        res = fair.summary(runs, engines, "after")
        r = res["before"]
        print(f"before's time over after's: whole process {fair.spread(r['ratio_whole'])}, "
              f"own clocks {fair.spread(r['ratio_own'])} (at least 1.0: the new build is no slower)")
        results[log] = res
    fair.write_json(os.path.join(WORK, "builds.json"), results)


if __name__ == "__main__":
    main()
