#!/usr/bin/env bash
# Soak: RUNS scheduled runs (`tokscope run --config`) back to back over a
# bucket that grows, with object-store faults injected at random by
# tests/support/fault_proxy.py in front of a loopback S3 server (moto):
# 500 InternalError, 503 SlowDown and 429 throttling, delays past the
# client's request timeout, connections dropped halfway through an upload
# and dropped after the store answered. Each run gets a fault rate drawn from
# 0-20 % of its requests; six runs in seven add one object of
# REQUESTS_PER_OBJECT requests (the next day of a generated log; every
# tenth object with a line no format reads), so the bucket grows and some
# runs find nothing new. Runs ingest, compact and export (to the same S3,
# `keep = 3`). Uploads over 256 KiB go as multipart uploads
# (TOKSCOPE_UPLOAD_PART), as a large dataset's files do.
#
# After the last run, one more without faults, then checks (exit 1 if any fails):
#   - the dataset equals a clean ingest of the bucket's objects, row for row
#     (`requests` and `rejects` whole, ordered; `request_counts` summed per key);
#   - no object under the dataset but its side files and the files
#     `_files.json` names, no incomplete multipart upload in any bucket;
#   - the export's `latest.json` names objects that exist.
# Prints one line per run, then a summary (docs/RELIABILITY.md, "Soak").
#
# Usage: bench/soak.sh [RUNS=200] [REQUESTS_PER_OBJECT=2000] [SEED=1]
# TOKSCOPE_BIN=path uses an already built binary (a dev build is fine).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-200}
PER_OBJECT=${2:-2000}
SEED=${3:-1}
# A run whose lease release was lost to an injected fault holds the lease
# until it expires: the next run waits that long. A run here takes seconds,
# so a short expiry keeps 200 runs within the hour (LEASE_EXPIRY=120 is
# what a nightly job would use).
LEASE_EXPIRY=${LEASE_EXPIRY:-20}
WORK=${BENCH_DIR:-${CARGO_TARGET_DIR:-target}/bench/soak}
rm -rf "$WORK" && mkdir -p "$WORK/objects" "$WORK/proxy"
WORK=$(realpath "$WORK")
. bench/lib.sh
BIN=$(tokscope_bin)
STARTED=$(date +%s)

PORT=$(free_port)
PART=262144
# moto refuses parts under 5 MiB unless told otherwise.
S3_UPLOAD_PART_MIN_SIZE=$PART python3 -m moto.server -H 127.0.0.1 -p "$PORT" > "$WORK/moto.log" 2>&1 &
MOTO=$!
trap 'kill $MOTO 2>/dev/null || true' EXIT
MOTO_URL="http://127.0.0.1:$PORT"
export AWS_ENDPOINT_URL=$MOTO_URL AWS_ALLOW_HTTP=true AWS_ACCESS_KEY_ID=testing \
  AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
export TOKSCOPE_UPLOAD_PART=$PART
wait_port "$PORT"
python3 -c "
import boto3
s3 = boto3.client('s3')
for b in ('logs', 'lake', 'site'):
    s3.create_bucket(Bucket=b)
"

# One log over RUNS days, cut into RUNS objects of about a day each.
"$BIN" generate --requests $((RUNS * PER_OBJECT)) --days "$RUNS" --seed "$SEED" --output-chars 200 \
  --out "$WORK/all.jsonl"
split -n "l/$RUNS" -d -a 4 --additional-suffix=.jsonl "$WORK/all.jsonl" "$WORK/objects/day-"
rm "$WORK/all.jsonl"
i=0
for f in "$WORK"/objects/day-*.jsonl; do
  if [ $((i % 10)) -eq 9 ]; then echo '{"this line": "is no known format"' >> "$f"; fi
  i=$((i + 1))
done

cat > "$WORK/soak.toml" <<EOF
dataset = "s3://lake/soak"
sources = ["s3://logs/gateway/"]
pricing = "$(realpath config/pricing.example.toml)"
[export]
to = "s3://site/dash"
jobs = ["report", "daily", "eos", "cost"]
keep = 3
[store]
max_retries = 4
retry_timeout_s = 30
backoff_initial_ms = 20
backoff_max_s = 0.5
timeout_s = 2
connect_timeout_s = 1
[lease]
expiry_s = $LEASE_EXPIRY
wait_s = $(( LEASE_EXPIRY + 10 ))
EOF

add_object() {
  python3 -c "
import boto3, sys
boto3.client('s3').upload_file(sys.argv[1], 'logs', 'gateway/' + sys.argv[1].rsplit('/', 1)[1])
" "$1"
}

# The fault rate of run $1: 0, 2, 5, 10 or 20 % of its requests, seeded.
rate() { python3 -c "import random; print(random.Random($SEED * 100003 + $1).choice([0, 0.02, 0.05, 0.1, 0.2]))"; }

mapfile -t OBJECTS < <(ls "$WORK"/objects/day-*.jsonl)
next=0
for run in $(seq 1 "$RUNS"); do
  if [ $((run % 7)) -ne 0 ] && [ $next -lt ${#OBJECTS[@]} ]; then
    add_object "${OBJECTS[$next]}"
    next=$((next + 1))
  fi
  r=$(rate "$run")
  coproc PROXY { exec python3 tests/support/fault_proxy.py --upstream "$MOTO_URL" --fault-rate "$r" \
    --seed $((SEED * 1000 + run)) --delay 3 > "$WORK/proxy/$run.log"; }
  for _ in $(seq 100); do grep -q listening "$WORK/proxy/$run.log" 2>/dev/null && break; sleep 0.1; done
  PROXY_PORT=$(awk '/listening/ {print $2}' "$WORK/proxy/$run.log")
  date=$(date -u -d "2025-01-01 + $run days" +%F)
  t0=$(date +%s.%N)
  set +e
  AWS_ENDPOINT_URL="http://127.0.0.1:$PROXY_PORT" timeout 900 "$BIN" run --config "$WORK/soak.toml" --quiet \
    --date "$date" > "$WORK/run-$run.out" 2> "$WORK/run-$run.err"
  rc=$?
  set -e
  t1=$(date +%s.%N)
  kill "$PROXY_PID" 2>/dev/null || true
  wait "$PROXY_PID" 2>/dev/null || true
  faults=$( (grep -o "(injected [a-z0-9-]*)" "$WORK/proxy/$run.log" || true) | sort | uniq -c | awk '{printf "%s=%s ", substr($3, 1, length($3) - 1), $1}')
  printf 'run %3d: objects %3d, fault rate %-4s exit %-3s %6.1fs  %s\n' "$run" "$next" "$r" "$rc" \
    "$(awk "BEGIN {print $t1 - $t0}")" "$faults" | tee -a "$WORK/runs.txt"
  echo "$rc" >> "$WORK/codes.txt"
done

# Anything the bucket still lacks, then one run without faults.
while [ $next -lt ${#OBJECTS[@]} ]; do add_object "${OBJECTS[$next]}"; next=$((next + 1)); done
set +e
"$BIN" run --config "$WORK/soak.toml" --quiet --date 2026-01-01 > "$WORK/final.out" 2> "$WORK/final.err"
FINAL=$?
set -e
echo "final run without faults: exit $FINAL"
"$BIN" ingest --quiet --out s3://lake/clean s3://logs/gateway/ > /dev/null 2> "$WORK/clean.err" || true

python3 - "$BIN" "$WORK" "$RUNS" "$FINAL" "$STARTED" <<'EOF'
import collections, hashlib, json, re, subprocess, sys, time
import boto3
bin, work, runs, final, started = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
s3 = boto3.client("s3")
ok = True

def check(good, what):
    global ok
    ok &= bool(good)
    print(("ok:     " if good else "FAILED: ") + what)

def digest(data, sql):
    out = subprocess.run([bin, "query", "--format", "csv", "--data", data, sql], capture_output=True, check=True)
    return hashlib.sha256(out.stdout).hexdigest(), out.stdout.count(b"\n") - 1

tables = {
    "requests": "SELECT * FROM requests ORDER BY source_file, source_line",
    "rejects": "SELECT * FROM rejects ORDER BY source_file, source_line, record",
    "request_counts": "SELECT date, model, variant, context_bin, context_bin_lo, eos_status, has_eos_marker, "
    "sum(requests) AS requests FROM request_counts GROUP BY 1, 2, 3, 4, 5, 6, 7 ORDER BY 1, 2, 3, 4, 5, 6, 7",
}
for table, sql in tables.items():
    (soak, n), (clean, m) = digest("s3://lake/soak", sql), digest("s3://lake/clean", sql)
    check(soak == clean and n == m, f"{table}: {n} rows after the soak, {m} in a clean ingest, same bytes: {soak == clean}")

def keys(bucket, prefix=""):
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [o["Key"] for p in pages for o in p.get("Contents", [])]

listed = json.loads(s3.get_object(Bucket="lake", Key="soak/_files.json")["Body"].read())["files"]
side = {"soak/_manifest.jsonl", "soak/_files.json", "soak/_ingest_summary.json"}
orphans = [k for k in keys("lake", "soak/") if k not in side and k[len("soak/"):] not in listed]
check(not orphans, f"objects under the dataset that it does not name: {orphans[:10]}")
missing = [f for f in listed if f"soak/{f}" not in set(keys("lake", "soak/"))]
check(not missing, f"files _files.json names that are missing: {missing[:10]}")
for bucket in ("logs", "lake", "site"):
    uploads = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    check(not uploads, f"incomplete multipart uploads in {bucket}: {[u['Key'] for u in uploads][:10]}")
latest = json.loads(s3.get_object(Bucket="site", Key="dash/latest.json")["Body"].read())
site = set(keys("site"))
absent = [f for f in latest["files"] if f"dash/{latest['date']}/{f}" not in site]
check(not absent, f"latest.json names {latest['date']} with {len(latest['files'])} files, absent: {absent}")
dated = sorted({k.split("/")[1] for k in site if re.match(r"dash/\d{4}-\d\d-\d\d/", k)})
check(len(dated) <= 3 + 1, f"dated exports kept: {dated} (keep = 3, and the one latest names)")

codes = collections.Counter(int(c) for c in open(f"{work}/codes.txt").read().split())
faults = collections.Counter()
for line in open(f"{work}/runs.txt"):
    for kind, n in re.findall(r"([a-z0-9-]+)=(\d+)", line):
        faults[kind] += int(n)
check(set(codes) <= {0, 1, 3, 4, 75}, f"exit codes of the {runs} runs: {dict(sorted(codes.items()))}")
check(final in (0, 3, 4), f"the run without faults after them: exit {final}")
print(f"faults injected: {sum(faults.values())} ({dict(sorted(faults.items()))})")
print(f"time: {time.time() - started:.0f} s")
sys.exit(0 if ok else 1)
EOF
