#!/usr/bin/env bash
# Load-test and A/B jobs against the report job, on the same dataset: a
# generated canonical log (default 5M requests) with two experiment arms,
# `control` and `candidate` (the candidate silently truncating 12% of its
# responses to prompts of 16K tokens or more). Times `tokscope job report`,
# `throughput` (60 s windows), `load_summary` and `ab` (1000 bootstrap
# resamples), each the best of REPEAT runs, as the whole process and as the
# query alone (`tokscope query --timing` of the job's SQL), and prints each
# job's ratio to report. Target: throughput and ab within 2x of report.
# Usage: bench/loadab.sh [REQUESTS=5000000] [THREADS=all]   (TOKSCOPE_BIN=path skips the build)
# Builds release into BENCH_TARGET_DIR when set, else into CARGO_TARGET_DIR (or ./target).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-5000000}
THREADS=${2:-$(nproc)}
REPEAT=${REPEAT:-3}
WORK=${BENCH_DIR:-${BENCH_TARGET_DIR:-${CARGO_TARGET_DIR:-target}}/bench/loadab}
mkdir -p "$WORK"
. bench/lib.sh
BIN=$(tokscope_bin)
export TOKIO_WORKER_THREADS=$THREADS RAYON_NUM_THREADS=$THREADS

LOG="$WORK/ab-$N.jsonl"
[ -f "$LOG" ] || "$BIN" generate --requests "$N" --output-chars 40 \
  --arms control,candidate --arm-truncation candidate:0.12:16K --out "$LOG"
DS="$WORK/ds-$N"
[ -d "$DS/requests" ] || "$BIN" ingest --quiet --out "$DS" "$LOG"
PRICING=bench/generated_pricing.toml   # the generated models' prices
echo "input: $LOG ($(du -h "$LOG" | cut -f1), $N requests), dataset $DS ($(du -sh "$DS" | cut -f1)), threads=$THREADS, best of $REPEAT"

# Seconds `tokscope query --timing` reports for SQL file $1 (planning, listing, execution).
query_only() {
  "$BIN" query --data "$DS" --pricing "$PRICING" --format csv --timing "$(cat "$1")" 2>&1 >/dev/null \
    | sed -n 's/^elapsed: \([0-9.]*\) s.*/\1/p'
}

declare -A PARAMS=([report]="" [throughput]="--param window=60s" [load_summary]="" [ab]="--param a=control --param b=candidate")
declare -A WHOLE QUERY
for job in report throughput load_summary ab; do
  # shellcheck disable=SC2086
  "$BIN" job "$job" --show-sql ${PARAMS[$job]} > "$WORK/$job.sql"
  # shellcheck disable=SC2086
  WHOLE[$job]=$(best whole "$BIN" job "$job" --data "$DS" --pricing "$PRICING" --format csv ${PARAMS[$job]})
  QUERY[$job]=$(best query_only "$WORK/$job.sql")
done
for job in report throughput load_summary ab; do
  python3 -c "
w, q, rw, rq = ${WHOLE[$job]}, ${QUERY[$job]}, ${WHOLE[report]}, ${QUERY[report]}
target = ' (target <= 2)' if '$job' in ('throughput', 'ab') else ''
print(f'job $job: query {q:.3f}s (whole process {w:.3f}s)  ratio to report {q / rq:.2f} (whole process {w / rw:.2f}){target}')
"
done
# What the A/B job found, for the record: the 16K+ truncation difference after Holm.
"$BIN" job ab --data "$DS" --pricing "$PRICING" --format csv --param a=control --param b=candidate \
  | grep -E '^(context_bin|[^,]*,(eos_compliance_rate|implicit_truncation_rate),)' | cut -d, -f1,2,5-8,10,13,14
