#!/usr/bin/env bash
# Ingest benchmark at matched settings: tokscope against DuckDB (read_ndjson ->
# COPY to Parquet) and polars (scan_ndjson -> sink_parquet, when installed),
# with the two floors of any ingest beside them. Usage:
#   bench/ingest.sh [REQUESTS=200000] [THREADS=2]
# OUTPUT_CHARS=1500 characters of output text per request; DAYS=1 (one date
# partition: every engine writes the same one table); ROUNDS=5 rounds;
# INPUTS="ascii rich": the generated log as it is, and a copy whose prompts
# are nested chat messages and whose texts carry JSON escapes and Unicode
# (bench/ingest.py, rich_copy).
#
# Every engine runs pinned to the first THREADS cores with THREADS threads,
# writes zstd level 1 with row groups of 131,072 rows, no bloom filters and
# a file per writing thread where the engine offers it (DuckDB);
# the order rotates each round; the figure is the median (and range) of the
# per-round ratios, on the whole process's clock and on each engine's own
# (a Python peer's starts after its interpreter and module: their start is
# timed apart); every output is checked (row count, sample cells) and a
# mismatch fails the script (bench/fair.py). Floors, from
# examples/ingest_floors.rs: the log read and parsed into a null sink, and
# tokscope's `requests` columns written alone; `zstd -1` over the plain
# column bytes is printed as a reference. Every run is saved to
# $WORK/ingest.json.
# TOKSCOPE_BIN / FLOORS_BIN: already built release binaries (bench/lib.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS=${1:-200000}
export THREADS=${2:-2}
export ROUNDS=${ROUNDS:-5}
OUTPUT_CHARS=${OUTPUT_CHARS:-1500}
DAYS=${DAYS:-1}
INPUTS=${INPUTS:-ascii rich}
export WORK=${BENCH_DIR:-${CARGO_TARGET_DIR:-target}/bench/ingest}
mkdir -p "$WORK"
. bench/lib.sh
export BIN=$(tokscope_bin)
export FLOORS_BIN=${FLOORS_BIN:-$(example_bin ingest_floors)}
python3 -c "import duckdb, pyarrow" || { echo "bench/ingest.sh needs duckdb and pyarrow (pip install duckdb pyarrow polars)" >&2; exit 1; }
command -v zstd >/dev/null || { echo "bench/ingest.sh needs the zstd command" >&2; exit 1; }

BASE="$WORK/canonical-$REQUESTS-${OUTPUT_CHARS}c-${DAYS}d"
[ -f "$BASE.jsonl" ] || "$BIN" generate --requests "$REQUESTS" --output-chars "$OUTPUT_CHARS" --days "$DAYS" --out "$BASE.jsonl"
LOGS=()
for input in $INPUTS; do
  case $input in
    ascii) LOGS+=("$BASE.jsonl") ;;
    rich)
      [ -f "$BASE-rich.jsonl" ] || python3 bench/ingest.py --rich "$BASE.jsonl" "$BASE-rich.jsonl"
      LOGS+=("$BASE-rich.jsonl") ;;
    *) echo "unknown input '$input' (ascii, rich)" >&2; exit 1 ;;
  esac
done
python3 bench/ingest.py "${LOGS[@]}"
