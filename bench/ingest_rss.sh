#!/usr/bin/env bash
# Peak RSS of ingesting a large generated canonical log (default 20 GB, made
# once from a 1 GB log repeated), measured by GNU time; fails when the peak is
# over LIMIT_MIB (default 1024). Usage:
#   bench/ingest_rss.sh [SIZE_GB=20] [LIMIT_MIB=1024]
# Needs SIZE_GB of disk for the log plus the dataset (about a fifth of it).
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_GB=${1:-20}
LIMIT_MIB=${2:-1024}
WORK=${BENCH_DIR:-${CARGO_TARGET_DIR:-target}/bench/ingest_rss}
mkdir -p "$WORK"
. bench/lib.sh
BIN=$(tokscope_bin)
ONE="$WORK/canonical-1gb.jsonl"
LOG="$WORK/canonical-${SIZE_GB}gb.jsonl"
[ -f "$ONE" ] || "$BIN" generate --requests 1000000 --output-chars 700 --days 30 --out "$ONE"
if [ ! -f "$LOG" ]; then
  for _ in $(seq "$SIZE_GB"); do cat "$ONE"; done > "$LOG.tmp" && mv "$LOG.tmp" "$LOG"
fi
rm -rf "$WORK/ds"
/usr/bin/time -v "$BIN" ingest --quiet --json --format canonical --out "$WORK/ds" "$LOG" \
  > "$WORK/summary.json" 2> "$WORK/time.txt"
PEAK_KIB=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/time.txt")
echo "input: $(du -h "$LOG" | cut -f1), peak RSS: $(( PEAK_KIB / 1024 )) MiB, limit ${LIMIT_MIB} MiB"
grep -E "Elapsed|Maximum resident" "$WORK/time.txt"
[ $(( PEAK_KIB / 1024 )) -le "$LIMIT_MIB" ]
