#!/usr/bin/env bash
# Peak RSS of ingesting a large canonical log (default 20 GB: a generated
# 1 GB log over 30 days, repeated, streamed through a named pipe so the disk
# holds only the 1 GB and the dataset), measured by GNU time; checks that
# every line was read and fails when the peak is over LIMIT_MIB (default
# 1024) with ingest's default --memory-limit. Usage:
#   bench/ingest_rss.sh [SIZE_GB=20] [LIMIT_MIB=1024] [-- extra ingest flags]
# Needs about a fifth of SIZE_GB of disk for the dataset, plus the 1 GB log.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_GB=${1:-20}
LIMIT_MIB=${2:-1024}
shift $(( $# < 2 ? $# : 2 ))
[ "${1:-}" = "--" ] && shift
WORK=${BENCH_DIR:-${CARGO_TARGET_DIR:-target}/bench/ingest_rss}
mkdir -p "$WORK"
. bench/lib.sh
BIN=$(tokscope_bin)
ONE="$WORK/canonical-1gb.jsonl"
[ -f "$ONE" ] || "$BIN" generate --requests 1000000 --output-chars 700 --days 30 --out "$ONE"
PIPE="$WORK/canonical-${SIZE_GB}x.jsonl"
rm -f "$PIPE" && mkfifo "$PIPE"
trap 'rm -f "$PIPE"' EXIT
( for _ in $(seq "$SIZE_GB"); do cat "$ONE"; done > "$PIPE" ) &
feeder=$!
rm -rf "$WORK/ds"
/usr/bin/time -v "$BIN" ingest --quiet --json --format canonical --out "$WORK/ds" "$@" "$PIPE" \
  > "$WORK/summary.json" 2> "$WORK/time.txt"
wait "$feeder"
PEAK_KIB=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/time.txt")
EXPECT_BYTES=$(( SIZE_GB * $(stat -c %s "$ONE") ))
EXPECT_LINES=$(( SIZE_GB * $(wc -l < "$ONE") ))
python3 - "$WORK/summary.json" "$EXPECT_BYTES" "$EXPECT_LINES" <<'PY'
import json, sys
s = c = json.load(open(sys.argv[1]))["totals"]
print(f"read {s['bytes_read'] / 1e9:.2f} GB, {c['lines_read']} lines: {c['rows_written']} rows, {c['lines_rejected']} rejected")
assert s["bytes_read"] == int(sys.argv[2]), f"bytes_read {s['bytes_read']} != {sys.argv[2]}"
assert c["lines_read"] == int(sys.argv[3]) == c["rows_written"] + c["lines_rejected"], c
PY
echo "dataset: $(du -sh "$WORK/ds" | cut -f1), peak RSS: $(( PEAK_KIB / 1024 )) MiB, limit ${LIMIT_MIB} MiB"
grep -E "Elapsed|Maximum resident|User time|System time" "$WORK/time.txt"
[ $(( PEAK_KIB / 1024 )) -le "$LIMIT_MIB" ]
