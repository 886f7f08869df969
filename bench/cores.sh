#!/usr/bin/env bash
# Ingest and the jobs at several thread counts on one machine: the checks for
# a machine with more cores than the one that builds tokscope (a GPU
# machine's 16), runnable there from a packed binary, without cargo.
#
#   bench/cores.sh --pack DIR     here: the release binary (stripped, xz) and,
#                                 where pip can fetch it, DuckDB for Python
#                                 3.12 (for a machine without a registry)
#   CORES_BIN=DIR bench/cores.sh  there: unpack DIR's binary (and DuckDB,
#                                 where Python lacks it) and check
#   bench/cores.sh                build (release, bench/lib.sh) and check
#
# The pack (about 46 MB) and the repository travel to a device machine
# together: `echo /.cores/ >> .git/info/exclude; bench/cores.sh --pack .cores`
# here, then `CORES_BIN=.cores bench/cores.sh` there with `.cores` carried.
#
# Each count N of THREADS (default "2 4 8 16"; counts over the machine's
# cores dropped) runs on the first N cores only (CPU affinity): ingest's
# writers, reader and splitter are threads beside the N that parse, so
# `--threads 2` alone would spread over more than 2 cores of a larger
# machine (on this 2-core one, `--threads 1` keeps 1.8 cores busy).
# 1. ingest: a generated log of REQUESTS (default 2,000,000, 2.1 GB) over DAYS
#    (30) ingested with every default (tokscope takes its threads from the
#    cores it may run on, checked against N in its `--verbose` line), REPEAT
#    (2) rounds, the counts alternating in each; prints the best wall time of
#    each count, its speed-up over the first count, its CPU time over wall
#    time and its peak RSS against the memory budget tokscope chose.
#    Targets: the last count at least SPEEDUP (default 6, the target for 16
#    cores over 2) times the first, peak RSS under the budget at every count.
# 2. jobs (when DuckDB imports): `bench/jobs.sh` section (b) over the same log
#    compacted, on the first and the last count of cores, both engines at
#    that many threads: each job DuckDB runs as written over the same files,
#    the median of the per-round ratios of DuckDB's time to tokscope's on
#    both engines' own clocks, opening included (target >= 1). About 3
#    minutes on 2 cores.
#
# The script exits non-zero when a target is missed or a step fails. The
# log, the datasets and the jobs' output: BENCH_DIR (default
# target/bench/cores).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
WORK=${BENCH_DIR:-${CARGO_TARGET_DIR:-target}/bench/cores}

if [ "${1:-}" = --pack ]; then
  dest=${2:?usage: bench/cores.sh --pack DIR}
  mkdir -p "$dest"
  strip -o "$dest/tokscope" "$(tokscope_bin)"
  xz -9 -T0 -f "$dest/tokscope"
  # DuckDB, the peer of step 2, for the Python 3.12 of a machine without a
  # registry: its wheel's files, as xz packs them (two thirds of the wheel's
  # size, so that the binary, DuckDB and the repository travel in 64 MiB).
  wheels=$(mktemp -d)
  if python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    -d "$wheels" duckdb; then
    python3 -m zipfile -e "$wheels"/duckdb-*.whl "$wheels/site"
    tar -C "$wheels/site" -cf - . | xz -9 -T0 >"$dest/duckdb-site.txz"
  else
    echo "no DuckDB wheel fetched: step 2 will be skipped where DuckDB is missing" >&2
  fi
  rm -rf "$wheels"
  ls -l "$dest"
  exit 0
fi

mkdir -p "$WORK"
if [ -n "${CORES_BIN:-}" ]; then
  unpack_bins "$CORES_BIN" "$WORK/bin"
  export TOKSCOPE_BIN=$WORK/bin/tokscope
  if [ -f "$CORES_BIN/duckdb-site.txz" ] && ! python3 -c "import duckdb" 2>/dev/null; then
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2], filter="data")' \
      "$CORES_BIN/duckdb-site.txz" "$WORK/site"
    export PYTHONPATH=$WORK/site${PYTHONPATH:+:$PYTHONPATH}
  fi
fi
BIN=$(tokscope_bin)
REQUESTS=${REQUESTS:-2000000}
DAYS=${DAYS:-30}
REPEAT=${REPEAT:-2}
SPEEDUP=${SPEEDUP:-6}
CORES=$(nproc)
# Runs a command on the first $1 of the cores this process may use (where
# the system refuses CPU affinity, on all of them, with a warning).
on_cores() {
  python3 -c '
import os, sys
try:
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:int(sys.argv[1])])
except OSError as e:
    print(f"warning: not pinned to {sys.argv[1]} cores ({e})", file=sys.stderr)
os.execvp(sys.argv[2], sys.argv[2:])' "$@"
}
COUNTS=""
for t in ${THREADS:-2 4 8 16}; do
  if [ "$t" -le "$CORES" ]; then COUNTS="$COUNTS $t"; else echo "skipping $t threads: this machine has $CORES cores"; fi
done
[ -n "$COUNTS" ] || { echo "no thread count fits this machine's $CORES cores" >&2; exit 1; }
# The log bench/jobs.sh generates for the same settings, so that step 2 reuses it.
LOG="$WORK/canonical-$REQUESTS-${DAYS}d.jsonl"
[ -f "$LOG" ] || "$BIN" generate --requests "$REQUESTS" --days "$DAYS" --out "$LOG"
echo "machine: $CORES cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo); binary: $BIN"

echo "== 1. ingest on$COUNTS cores, best of $REPEAT"
status=0
python3 - "$BIN" "$LOG" "$WORK/ds-ingest" "$REPEAT" "$SPEEDUP" $COUNTS <<'PY' || status=1
import os, re, shutil, subprocess, sys, time

binary, log, out, repeat, target = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
counts = [int(t) for t in sys.argv[6:]]
mb = os.path.getsize(log) / 1e6
with open(log, "rb") as f:  # into the page cache, as for every timed run
    while f.read(1 << 24):
        pass

cpus = sorted(os.sched_getaffinity(0))
try:  # a system that refuses CPU affinity gets --threads, and a warning
    os.sched_setaffinity(0, cpus)
    pinned = True
except OSError as e:
    pinned = False
    print(f"warning: CPU affinity refused ({e}): each count runs with --threads on all cores")

def ingest(threads):
    """Wall seconds, CPU seconds, peak RSS (MiB) and the budget (MiB) of one
    ingest with every default, on the first `threads` cores."""
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    args = [binary, "--verbose"] + ([] if pinned else ["--threads", str(threads)]) + ["ingest", "--out", out, log]
    pin = (lambda: os.sched_setaffinity(0, cpus[:threads])) if pinned else None
    proc = subprocess.Popen(args, preexec_fn=pin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"ingest on {threads} cores failed:\n{err}")
    chosen = re.search(r"; threads: (\d+)", err)
    budget = re.search(r"ingest memory: limit (\d+) MiB", err)
    if chosen is None or budget is None:
        sys.exit(f"ingest on {threads} cores printed no thread count or memory budget:\n{err}")
    if int(chosen.group(1)) != threads:
        sys.exit(f"ingest on {threads} cores took {chosen.group(1)} threads:\n{err}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, int(budget.group(1))

runs = {t: [] for t in counts}
for _ in range(repeat):
    for t in counts:
        runs[t].append(ingest(t))
# Each count's fastest run (wall and CPU time), and whether every run's peak RSS stayed under its budget.
best = {t: min(r, key=lambda run: run[0]) for t, r in runs.items()}
rss_ok = {t: all(run[2] < run[3] for run in r) for t, r in runs.items()}
first, last = counts[0], counts[-1]
print(f"input: {os.path.basename(log)} ({mb:.0f} MB)")
print("| cores | wall | MB/s | speed-up over " f"{first} | CPU / wall | peak RSS | budget |")
print("|---|---|---|---|---|---|---|")
for t in counts:
    wall, cpu, _, budget = best[t]
    rss = max(run[2] for run in runs[t])
    print(f"| {t} | {wall:.2f} s | {mb / wall:.0f} | {best[first][0] / wall:.2f}x | {cpu / wall:.2f} | "
          f"{rss:.0f} MiB | {budget} MiB{'' if rss_ok[t] else ' (OVER)'} |")
speedup = best[first][0] / best[last][0]
met = last == first or speedup >= target
if last > first:
    print(f"{last} cores over {first}: {speedup:.2f}x (target >= {target:g}x: {'met' if met else 'NOT MET'})")
print(f"peak RSS under the budget at every count: {'yes' if all(rss_ok.values()) else 'NO'}")
sys.exit(0 if met and all(rss_ok.values()) else 1)
PY

if python3 -c "import duckdb" 2>/dev/null; then
  set -- $COUNTS
  lo=$1 hi=${!#}
  for t in $(echo "$lo $hi" | tr ' ' '\n' | uniq); do
    echo "== 2. jobs on $t cores against DuckDB"
    # jobs.sh fails on a table that differs from DuckDB's.
    if ! on_cores "$t" env BENCH_DIR="$WORK" SECTIONS=b COMPACT=1 DAYS="$DAYS" REPEAT=3 TOKSCOPE_BIN="$BIN" \
      bench/jobs.sh "$REQUESTS" "$t" | tee "$WORK/jobs-$t.log"; then
      status=1
    fi
    cp "$WORK/jobs.json" "$WORK/jobs-$t.json" 2>/dev/null || true
    # A job whose median paired ratio on the engines' own clocks (opening
    # included) is under 1, DuckDB faster over the same files, misses the target.
    python3 - "$WORK/jobs-$t.json" <<'PY2' || status=1
import json, statistics, sys
slow = [job for job, r in json.load(open(sys.argv[1]))["b"].items()
        if statistics.median(r["duckdb, same files"]["ratio_own"]) < 1]
if slow:
    print(f"jobs slower than DuckDB over the same files: {', '.join(slow)}")
sys.exit(1 if slow else 0)
PY2
  done
else
  echo "== 2. jobs: skipped (DuckDB does not import; bench/cores.sh --pack fetches its wheel)"
fi
exit $status
