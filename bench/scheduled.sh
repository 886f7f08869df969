#!/usr/bin/env bash
# Scheduled runs over a bucket, and the export's own cost.
#
# 1. A bucket of OBJECTS log objects on a loopback S3 server (moto), REQUESTS
#    requests in all. `run --config` (ingest only: no [export]) twice: the
#    first ingests everything, the second finds nothing new (listing + the
#    manifest check). Prints both times and second / first (target < 5%).
# 2. `export` over a dataset of EXPORT_REQUESTS requests: the export's
#    elapsed time minus the time its jobs' queries took (both from the same
#    run's `--json` summary), and the page size (targets: < 1 s, < 2 MB).
#
# Usage: bench/scheduled.sh [OBJECTS=1000] [REQUESTS=1000000] [EXPORT_REQUESTS=5000000]
# TOKSCOPE_BIN=path uses an already built release binary.
set -euo pipefail
cd "$(dirname "$0")/.."
OBJECTS=${1:-1000}
REQUESTS=${2:-1000000}
EXPORT_REQUESTS=${3:-5000000}
WORK=${BENCH_DIR:-${CARGO_TARGET_DIR:-target}/bench/scheduled}
mkdir -p "$WORK"
. bench/lib.sh
BIN=$(tokscope_bin)

# --- 1. second run over an unchanged bucket --------------------------------
PORT=$(free_port)
python3 -m moto.server -H 127.0.0.1 -p "$PORT" > "$WORK/moto.log" 2>&1 &
MOTO=$!
trap 'kill $MOTO 2>/dev/null || true' EXIT
export AWS_ENDPOINT_URL="http://127.0.0.1:$PORT" AWS_ALLOW_HTTP=true AWS_ACCESS_KEY_ID=testing \
  AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
wait_port "$PORT"

LOG="$WORK/bucket-$REQUESTS.jsonl"
[ -f "$LOG" ] || "$BIN" generate --requests "$REQUESTS" --days 30 --out "$LOG"
rm -rf "$WORK/objects" && mkdir -p "$WORK/objects"
split -n "l/$OBJECTS" -d -a 5 --additional-suffix=.jsonl "$LOG" "$WORK/objects/part-"
python3 - "$WORK/objects" <<'EOF'
import os, sys, boto3
from concurrent.futures import ThreadPoolExecutor
s3 = boto3.client("s3")
s3.create_bucket(Bucket="logs")
files = sorted(os.listdir(sys.argv[1]))
with ThreadPoolExecutor(16) as pool:
    list(pool.map(lambda f: s3.upload_file(os.path.join(sys.argv[1], f), "logs", f"gateway/{f}"), files))
print(f"bucket: {len(files)} objects")
EOF

DS="$WORK/lake"
rm -rf "$DS"
cat > "$WORK/run.toml" <<EOF
dataset = "$DS"
sources = ["s3://logs/gateway/"]
EOF
seconds() { python3 -c 'import sys, time, subprocess; t = time.perf_counter(); r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); print(f"{time.perf_counter() - t:.3f} {r.returncode}")' "$@"; }
read -r FIRST RC1 < <(seconds "$BIN" run --config "$WORK/run.toml" --quiet)
read -r SECOND RC2 < <(seconds "$BIN" run --config "$WORK/run.toml" --quiet)
echo "first run (ingest $OBJECTS objects, $REQUESTS requests): ${FIRST}s, exit $RC1"
echo "second run (nothing new): ${SECOND}s, exit $RC2 (3 = nothing new)"
python3 -c "print(f'second / first: {$SECOND / $FIRST:.2%} (target < 5%)')"
kill $MOTO 2>/dev/null || true

# --- 2. the export's own time over a large dataset ---------------------------
BIG="$WORK/export-$EXPORT_REQUESTS"
if [ ! -d "$BIG/requests" ]; then
  "$BIN" generate --requests "$EXPORT_REQUESTS" --days 30 --out "$WORK/export.jsonl"
  "$BIN" ingest --quiet --out "$BIG" "$WORK/export.jsonl"
  rm -f "$WORK/export.jsonl"
fi
rm -rf "$WORK/site"
"$BIN" export --data "$BIG" --to "$WORK/site" --pricing config/pricing.example.toml --json > "$WORK/export.json"
python3 - "$WORK/export.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
own = s["elapsed_s"] - s["jobs_s"]
print(f"export over the dataset: {s['elapsed_s']:.3f}s, of which jobs {s['jobs_s']:.3f}s ({', '.join(s['jobs'])})")
print(f"export's own time: {own:.3f}s (target < 1 s); page: {s['page_bytes'] / 1e6:.3f} MB (target < 2 MB)")
EOF
