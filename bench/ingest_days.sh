#!/usr/bin/env bash
# Ingest of logs spanning many days under memory budgets: the default
# (`auto`), a tight one that makes rows spill (`TIGHT`, default 512M, the
# budget that once shrank row groups to ~160 rows), and none. For each log
# and budget: the best wall time of REPEAT runs, peak RSS (GNU time), the
# bytes spilled, and the row groups of `requests` (count, smallest, median);
# each budget's time over the unlimited run's, which the default must keep
# within 1.15. Usage:
#   bench/ingest_days.sh [REQUESTS=1000000] [THREADS=2]
# DAYS="30 90" (default) names the spans; REPEAT=3; TIGHT=512M.
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS=${1:-1000000}
THREADS=${2:-2}
REPEAT=${REPEAT:-3}
TIGHT=${TIGHT:-512M}
WORK=${BENCH_DIR:-${CARGO_TARGET_DIR:-target}/bench/ingest_days}
mkdir -p "$WORK"
. bench/lib.sh
BIN=$(tokscope_bin)

# seconds and peak RSS (MiB) of one ingest of $1 under limit $2 into $3.
run() {
  rm -rf "$3"
  /usr/bin/time -f "%e %M" -o "$WORK/time.txt" \
    "$BIN" --threads "$THREADS" ingest --quiet --json --memory-limit "$2" --out "$3" "$1" > "$WORK/summary.json"
  awk '{printf "%s %d\n", $1, $2 / 1024}' "$WORK/time.txt"
}

for days in ${DAYS:-30 90}; do
  LOG="$WORK/canonical-${REQUESTS}-${days}d.jsonl"
  [ -f "$LOG" ] || "$BIN" generate --requests "$REQUESTS" --output-chars 300 --days "$days" --out "$LOG"
  echo "input: $LOG ($(( $(stat -c %s "$LOG") / 1000000 )) MB), $days days, threads=$THREADS"
  declare -A best=()
  for _ in $(seq "$REPEAT"); do
    # Alternating, so a shared machine's drift spreads over every budget.
    for limit in auto "$TIGHT" none; do
      read -r secs rss < <(run "$LOG" "$limit" "$WORK/ds-$limit")
      prev=${best[$limit]:-}
      if [ -z "$prev" ] || python3 -c "import sys; sys.exit(0 if $secs < ${prev%% *} else 1)"; then
        best[$limit]="$secs $rss"
      fi
      cp "$WORK/summary.json" "$WORK/summary-$limit.json"
    done
  done
  none=${best[none]%% *}
  for limit in auto "$TIGHT" none; do
    read -r secs rss <<< "${best[$limit]}"
    python3 - "$WORK/ds-$limit" "$WORK/summary-$limit.json" "$limit" "$secs" "$rss" "$none" <<'PY'
import glob, json, statistics, sys
import pyarrow.parquet as pq
ds, summary, limit, secs, rss, none = sys.argv[1:]
groups = [pq.ParquetFile(f).metadata.row_group(i).num_rows
          for f in glob.glob(f"{ds}/requests/*/*.parquet")
          for i in range(pq.ParquetFile(f).metadata.num_row_groups)]
s = json.load(open(summary))
plan = s["memory"]
budget = "none" if plan["limit"] is None else f"{plan['limit'] / 2**20:.0f} MiB"
print(f"  {limit:>6} (budget {budget}, {plan['writer_threads']} writers): {float(secs):.2f} s "
      f"= {float(secs) / float(none):.2f}x none, peak RSS {rss} MiB, spilled {s['spilled_bytes'] / 2**20:.0f} MiB, "
      f"{len(groups)} row groups (smallest {min(groups)}, median {statistics.median(groups):.0f})")
PY
  done
  unset best
done
