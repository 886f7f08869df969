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
# 3. A day's scheduled run over that dataset: `run --config` ingesting
#    DAY_REQUESTS new requests (one day), compacting, exporting every
#    dashboard job, timed whole with each step's share (the run's `steps`),
#    with the export's queries 4 at a time (the default) and one after
#    another (`jobs_at_once = 1`), alternating, REPEAT times each (default 2;
#    the fastest of each is shown), each on a fresh copy of the dataset.
#
# Usage: bench/scheduled.sh [OBJECTS=1000] [REQUESTS=1000000] [EXPORT_REQUESTS=5000000] [DAY_REQUESTS=1000000]
# SECTIONS="1 2 3" (default) picks sections.
# TOKSCOPE_BIN=path uses an already built release binary.
set -euo pipefail
cd "$(dirname "$0")/.."
OBJECTS=${1:-1000}
REQUESTS=${2:-1000000}
EXPORT_REQUESTS=${3:-5000000}
DAY_REQUESTS=${4:-1000000}
SECTIONS=${SECTIONS:-1 2 3}
WORK=${BENCH_DIR:-${CARGO_TARGET_DIR:-target}/bench/scheduled}
mkdir -p "$WORK"
. bench/lib.sh
BIN=$(tokscope_bin)

if section 1; then
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
fi

# --- 2. the export's own time over a large dataset ---------------------------
# (the dataset is also section 3's history)
BIG="$WORK/export-$EXPORT_REQUESTS"
if [ ! -d "$BIG/requests" ]; then
  "$BIN" generate --requests "$EXPORT_REQUESTS" --days 30 --out "$WORK/export.jsonl"
  "$BIN" ingest --quiet --out "$BIG" "$WORK/export.jsonl"
  rm -f "$WORK/export.jsonl"
fi

if section 2; then
rm -rf "$WORK/site"
"$BIN" export --data "$BIG" --to "$WORK/site" --pricing config/pricing.example.toml --json > "$WORK/export.json"
python3 - "$WORK/export.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
own = s["elapsed_s"] - s["jobs_s"]
print(f"export over the dataset: {s['elapsed_s']:.3f}s, of which jobs {s['jobs_s']:.3f}s ({', '.join(s['jobs'])})")
print(f"export's own time: {own:.3f}s (target < 1 s); page: {s['page_bytes'] / 1e6:.3f} MB (target < 2 MB)")
EOF
fi

# --- 3. a day's scheduled run: ingest, compaction, export --------------------
if section 3; then
  DAY="$WORK/day-$DAY_REQUESTS.jsonl"
  [ -f "$DAY" ] || "$BIN" generate --requests "$DAY_REQUESTS" --days 1 --seed 7 --out "$DAY"
  rm -rf "$WORK/incoming" && mkdir -p "$WORK/incoming" && ln -s "$(realpath "$DAY")" "$WORK/incoming/"
  day_run() {
    rm -rf "$WORK/day-lake" "$WORK/day-site"
    cp -r "$BIG" "$WORK/day-lake"
    cat > "$WORK/day.toml" <<EOF
dataset = "$(realpath "$WORK")/day-lake"
sources = ["$(realpath "$WORK")/incoming"]
pricing = "$PWD/config/pricing.example.toml"
[export]
to = "$(realpath "$WORK")/day-site"
jobs_at_once = $1
EOF
    "$BIN" run --config "$WORK/day.toml" --quiet --json > "$WORK/day-$1-$2.json" || [ $? -eq 4 ]
  }
  rm -f "$WORK"/day-[14]-*.json
  for r in $(seq "${REPEAT:-2}"); do
    day_run 4 "$r"
    day_run 1 "$r"
  done
  python3 - "$WORK" "$DAY_REQUESTS" "$EXPORT_REQUESTS" <<'EOF'
import glob, json, sys
work = sys.argv[1]
fastest = lambda n: min((json.load(open(p)) for p in glob.glob(f"{work}/day-{n}-*.json")), key=lambda r: r["elapsed_s"])
runs = [fastest(4), fastest(1)]
new, history = int(sys.argv[2]), int(sys.argv[3])
print(f"a day's run: {new:,} new requests into a dataset of {history:,}, compaction, export (fastest of each)")
for r in runs:
    s, e = r["steps"], r["export"]
    share = lambda x: f"{x:.2f} s ({100 * x / r['elapsed_s']:.0f}%)"
    print(f"  export queries {e['jobs_at_once']} at a time: {r['elapsed_s']:.2f} s: ingest {share(s['ingest_s'])}, "
          f"compact {share(s['compact_s'])}, export {share(s['export_s'])} (its {len(e['jobs'])} jobs' queries "
          f"{e['jobs_s']:.2f} s), other {share(s['other_s'])}")
at_once, in_turn = runs[0]["export"], runs[1]["export"]
print(f"  export with its queries one after another, over {at_once['jobs_at_once']} at a time: "
      f"{in_turn['elapsed_s'] / at_once['elapsed_s']:.2f}x (the queries {in_turn['jobs_s'] / at_once['jobs_s']:.2f}x)")
EOF
fi
