#!/usr/bin/env bash
# Ingest benchmark: tokscope vs DuckDB (read_ndjson -> Parquet zstd) on the same
# generated canonical log, both limited to the same number of threads.
# Prints MB/s of both, the ratio, and peak RSS. Usage:
#   bench/ingest.sh [SIZE_MB=500] [THREADS=2]
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MB=${1:-500}
THREADS=${2:-2}
WORK=${BENCH_DIR:-/tmp/tokscope-bench}
mkdir -p "$WORK"
cargo build --release --quiet
BIN=${CARGO_TARGET_DIR:-target}/release/tokscope
LOG="$WORK/canonical-${SIZE_MB}mb.jsonl"
if [ ! -f "$LOG" ]; then
  # ~1 KB per line with output text.
  "$BIN" generate --requests $(( SIZE_MB * 1000 )) --output-chars 700 --out "$LOG"
fi
BYTES=$(stat -c %s "$LOG")
MB=$(python3 -c "print($BYTES / 1e6)")
echo "input: $LOG ($MB MB, $(wc -l < "$LOG") lines), threads=$THREADS"

rm -rf "$WORK/ds"
/usr/bin/time -f "%e %M" -o "$WORK/t_tok" env RAYON_NUM_THREADS=$THREADS "$BIN" ingest --quiet --out "$WORK/ds" "$LOG"
read -r T_TOK RSS_TOK < "$WORK/t_tok"

rm -f "$WORK/duck.parquet"
/usr/bin/time -f "%e %M" -o "$WORK/t_duck" python3 -c "
import duckdb
con = duckdb.connect()
con.execute('SET threads TO $THREADS')
con.execute(\"COPY (SELECT * FROM read_ndjson('$LOG')) TO '$WORK/duck.parquet' (FORMAT parquet, COMPRESSION zstd)\")
"
read -r T_DUCK RSS_DUCK < "$WORK/t_duck"

python3 - <<PY
mb = $MB
tok, duck = $T_TOK, $T_DUCK
print(f"tokscope ingest: {mb/tok:8.1f} MB/s  ({tok:.2f} s, peak RSS {$RSS_TOK/1024:.0f} MiB)")
print(f"duckdb ndjson->parquet: {mb/duck:8.1f} MB/s  ({duck:.2f} s, peak RSS {$RSS_DUCK/1024:.0f} MiB)")
print(f"ratio tokscope/duckdb: {duck/tok:.2f}x")
PY
