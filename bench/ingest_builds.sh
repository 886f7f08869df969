#!/usr/bin/env bash
# Ingest of one log by several builds, in alternating rounds: each round runs
# every build once, in the order given, so a drift of the machine touches
# them alike. Prints, for each build, the best and median wall time, the
# median peak RSS (GNU time), system time and CPU time over wall time, and
# the median over rounds of its wall time over the first build's in the same
# round (the figure: 1.00 is as fast as the first build). With LIVE=1, one
# more run of each build with mimalloc returning freed memory at once
# (MIMALLOC_PURGE_DELAY=0, so RSS follows live memory), sampled every 0.1 s:
# its highest sample. Usage:
#   bench/ingest_builds.sh LOG BIN_A BIN_B [BIN...]
# ROUNDS=8; THREADS=2 (as RAYON_NUM_THREADS, which builds without a
# `--threads` flag read too). The log: `tokscope generate --requests 500000
# --output-chars 700 [--days N] --out LOG`.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { sed -n '2,14p' "$0"; exit 2; }
LOG=$1
shift
ROUNDS=${ROUNDS:-8}
THREADS=${THREADS:-2}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
RESULTS="$WORK/results.txt"

bins=("$@")
for round in $(seq "$ROUNDS"); do
  for i in $(seq 0 $(($# - 1))); do
    rm -rf "$WORK/ds"
    RAYON_NUM_THREADS=$THREADS /usr/bin/time -f "$round $i %e %U %S %M" -a -o "$RESULTS" \
      "${bins[$i]}" ingest --quiet --out "$WORK/ds" "$LOG" > /dev/null
  done
done

python3 - "$RESULTS" "$@" <<'PY'
import statistics, sys
path, bins = sys.argv[1], sys.argv[2:]
runs = {}
for line in open(path):
    parts = line.split()
    if len(parts) != 6 or not parts[0].isdigit():
        continue  # a line GNU time adds for a failed command
    rnd, i, wall, user, sys_s, rss = parts
    runs.setdefault(int(rnd), {})[int(i)] = (float(wall), float(user), float(sys_s), int(rss) / 1024)
rounds = [r for r in runs.values() if len(r) == len(bins)]
print(f"{len(rounds)} rounds; ratios are wall time over {bins[0]}'s in the same round")
for i, b in enumerate(bins):
    wall = [r[i][0] for r in rounds]
    line = (f"{b}: best {min(wall):.2f} s, median {statistics.median(wall):.2f} s, "
            f"peak RSS {statistics.median(r[i][3] for r in rounds):.0f} MiB, "
            f"system {statistics.median(r[i][2] for r in rounds):.2f} s, "
            f"CPU/wall {statistics.median((r[i][1] + r[i][2]) / r[i][0] for r in rounds):.2f}")
    if i > 0:
        ratios = sorted(r[i][0] / r[0][0] for r in rounds)
        line += f"; over the first: median {statistics.median(ratios):.3f} (" + " ".join(f"{x:.2f}" for x in ratios) + ")"
    print(line)
PY

if [ "${LIVE:-0}" = 1 ]; then
  for bin in "$@"; do
    rm -rf "$WORK/ds"
    RAYON_NUM_THREADS=$THREADS MIMALLOC_PURGE_DELAY=0 "$bin" ingest --quiet --out "$WORK/ds" "$LOG" > /dev/null &
    pid=$!
    peak=0
    while kill -0 "$pid" 2> /dev/null; do
      rss=$(awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$pid/status" 2> /dev/null || echo 0)
      [ "${rss:-0}" -gt "$peak" ] && peak=$rss
      sleep 0.1
    done
    wait "$pid"
    echo "$bin: live memory (RSS with MIMALLOC_PURGE_DELAY=0) at most $peak MiB"
  done
fi
