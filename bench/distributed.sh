#!/usr/bin/env bash
# The `report` job in this process vs on a loopback Ballista cluster (one
# `tokscope scheduler`, two `tokscope executor`s on this machine), on the
# same dataset: a generated log (default 5M requests over 7 days) split into
# FILES inputs (default 100), each ingested on its own into one dataset of at
# least FILES Parquet files. Prints each side's
# best of REPEAT runs, the ratio, and rows/s (the figure the cluster-size
# projection in docs/performance-history.md, "Projection: 1 TB of logs a day,
# in a one-hour nightly window", starts from).
# Usage: bench/distributed.sh [REQUESTS=5000000] [FILES=100]   (TOKSCOPE_BIN=path skips the build)
# Builds release into BENCH_TARGET_DIR when set, else into CARGO_TARGET_DIR (or ./target).
# SLOTS: task slots per executor (default: half the cores, at least 1).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-5000000}
FILES=${2:-100}
REPEAT=${REPEAT:-3}
SLOTS=${SLOTS:-$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 ))}
WORK=${BENCH_DIR:-${BENCH_TARGET_DIR:-${CARGO_TARGET_DIR:-target}}/bench/distributed}
mkdir -p "$WORK"
. bench/lib.sh
BIN=$(tokscope_bin)

LOGS="$WORK/logs-$N-$FILES"
if [ ! -d "$LOGS" ]; then
  mkdir -p "$LOGS.tmp"
  "$BIN" generate --requests "$N" --days 7 --output-chars 40 --out "$LOGS.tmp/all.jsonl"
  (cd "$LOGS.tmp" && split -n "l/$FILES" -d -a 3 --additional-suffix=.jsonl all.jsonl part- && rm all.jsonl)
  mv "$LOGS.tmp" "$LOGS"
fi
DS=$(realpath -m "$WORK/ds-$N-$FILES")   # absolute: the scheduler and executors read the same path
# One ingest per input, as a dataset fed by many small runs: each writes a
# Parquet file per day its input spans, so the dataset has at least FILES files.
if [ ! -d "$DS/requests" ]; then
  find "$LOGS" -name 'part-*.jsonl' | sort | xargs -n 1 "$BIN" ingest --quiet --out "$DS"
fi
PRICING="$WORK/pricing.toml"
cat > "$PRICING" <<'EOF'
[[model]]
model = "llama-3.1-8b-instruct"
input = 0.1
output = 0.2
[[model]]
model = "qwen2.5-72b-instruct"
input = 1.0
output = 3.0
[[model]]
model = "deepseek-v3"
input = 0.27
output = 1.1
EOF
PARQUET=$(find "$DS/requests" -name '*.parquet' | wc -l)

PIDS=()
stop() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap stop EXIT
SCHED=$(free_port)
"$BIN" scheduler --bind "127.0.0.1:$SCHED" 2>"$WORK/scheduler.log" & PIDS+=($!)
wait_port "$SCHED"
for i in 1 2; do
  FLIGHT=$(free_port); GRPC=$(free_port)
  "$BIN" executor --scheduler "127.0.0.1:$SCHED" --bind "127.0.0.1:$FLIGHT" --grpc-port "$GRPC" \
    --slots "$SLOTS" --work-dir "$WORK/executor$i" 2>"$WORK/executor$i.log" & PIDS+=($!)
  wait_port "$FLIGHT"
done
ENGINE="ballista://127.0.0.1:$SCHED"
echo "dataset $DS: $N requests from $FILES inputs, $PARQUET Parquet files ($(du -sh "$DS" | cut -f1)); cluster: 2 executors x $SLOTS slots on $(nproc) cores; best of $REPEAT"

# The same rows both ways, before timing anything.
"$BIN" job report --data "$DS" --pricing "$PRICING" --format csv | sort > "$WORK/local.csv"
"$BIN" job report --data "$DS" --pricing "$PRICING" --format csv --engine "$ENGINE" | sort > "$WORK/cluster.csv"
python3 - "$WORK/local.csv" "$WORK/cluster.csv" <<'PY'
import sys
a, b = (open(p).read().splitlines() for p in sys.argv[1:])
assert len(a) == len(b), f"{len(a)} local rows vs {len(b)} on the cluster"
for x, y in zip(a, b):
    for u, v in zip(x.split(","), y.split(",")):
        try:
            p, q = float(u), float(v)
            assert abs(p - q) <= 1e-9 * max(abs(p), abs(q)), (u, v)
        except ValueError:
            assert u == v, (u, v)
PY
LOCAL=$(best whole "$BIN" job report --data "$DS" --pricing "$PRICING" --format csv)
CLUSTER=$(best whole "$BIN" job report --data "$DS" --pricing "$PRICING" --format csv --engine "$ENGINE")
python3 -c "
n, l, c = $N, $LOCAL, $CLUSTER
print(f'report: local {l:.3f}s ({n / l:,.0f} requests/s), cluster {c:.3f}s ({n / c:,.0f} requests/s, {n / c / 2:,.0f} per executor); cluster/local {c / l:.2f}')
"
