#!/usr/bin/env bash
# Two builds of tokscope on the same ingest (bench/builds.py: pinned cores,
# rotated order, paired per-round ratios on both clocks, every output checked):
# whether a change made ingest slower. Usage:
#   bench/builds.sh BEFORE_BIN AFTER_BIN [REQUESTS=200000] [THREADS=2]
# The logs: the generated canonical log as bench/ingest.sh makes it (1,500
# characters of output a request, one day), and the same log with a team,
# user, tags and provider per request (`generate --attribution`, made by
# AFTER_BIN). ROUNDS=5 rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE=$1
AFTER=$2
REQUESTS=${3:-200000}
export THREADS=${4:-2}
export ROUNDS=${ROUNDS:-5}
export WORK=${BENCH_DIR:-${CARGO_TARGET_DIR:-target}/bench/builds}
mkdir -p "$WORK"
PLAIN="$WORK/canonical-$REQUESTS.jsonl"
ATTRIBUTED="$WORK/canonical-$REQUESTS-attributed.jsonl"
[ -f "$PLAIN" ] || "$AFTER" generate --requests "$REQUESTS" --output-chars 1500 --days 1 --out "$PLAIN"
[ -f "$ATTRIBUTED" ] || "$AFTER" generate --requests "$REQUESTS" --output-chars 1500 --days 1 --attribution \
  --out "$ATTRIBUTED"
python3 bench/builds.py "$BEFORE" "$AFTER" "$PLAIN" "$ATTRIBUTED"
