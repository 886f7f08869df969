#!/usr/bin/env bash
# Ingest of a bucket of many gzipped logs, by one or more builds: the inputs
# read ahead of the one being parsed (src/ingest/read_ahead.rs) against a
# build that reads them one after another. A generated log is cut into FILES
# objects of whole lines, each `gzip -1`, and ingested
#   (a) from a local folder, the page cache holding it;
#   (b) from a moto S3 server on loopback through bench/latency_proxy.py,
#       which delays every packet by DELAY_MS each way (10 ms: about a round
#       trip to S3 in one region), into a local dataset.
# Each round runs every build once in turn, alternating which goes first;
# prints each build's median and best wall time and the median over rounds
# of its time over the first build's; and the CPU time of the threads that
# read and inflate the inputs (`ingest-split`, `ingest-open`) over all CPU
# time, from `perf record` of one more local run each (perf samples the
# short-lived per-input threads that /proc polling misses). One input's splitter is one thread, which its parsing waits on: with
# D inputs read ahead (the run's `_ingest_summary.json`, `inputs_ahead`),
# D + 1 of them run at once while each object fits a reader's queue (8
# chunks of 4 MiB), so the serial fraction is s = that share / (D + 1), and
# Amdahl's law projects the speed-up from 2 threads to 16 as
# (s + (1 - s) / 2) / (s + (1 - s) / 16); D is 1 at 2 threads, 4 at 16.
# Needs moto[server] and boto3 (pip). Usage:
#   bench/ingest_bucket.sh BIN [BIN...]
# Variables: FILES (50), REQUESTS (200000), DELAY_MS (10), ROUNDS (3),
# THREADS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: $0 BIN [BIN...]" >&2; exit 2; }
FILES=${FILES:-50}
REQUESTS=${REQUESTS:-200000}
DELAY_MS=${DELAY_MS:-10}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
WORK=${BENCH_DIR:-${CARGO_TARGET_DIR:-target}/bench/ingest_bucket}
mkdir -p "$WORK"
. bench/lib.sh
BINS=()
for b in "$@"; do BINS+=("$(realpath "$b")"); done

BUCKET="$WORK/bucket-$REQUESTS-$FILES"
if [ ! -d "$BUCKET" ]; then
  LOG="$WORK/canonical-$REQUESTS.jsonl"
  [ -f "$LOG" ] || "${BINS[0]}" generate --requests "$REQUESTS" --output-chars 700 --out "$LOG"
  mkdir -p "$BUCKET.tmp"
  split -n "l/$FILES" -d -a 4 --additional-suffix=.jsonl "$LOG" "$BUCKET.tmp/part-"
  gzip -1 "$BUCKET.tmp"/*.jsonl
  mv "$BUCKET.tmp" "$BUCKET"
fi
cat "$BUCKET"/* > /dev/null

start_s3_behind_proxy "$DELAY_MS"
python3 - "$S3_PORT" "$BUCKET" <<'EOF'
import os, sys, boto3
port, folder = sys.argv[1:3]
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1")
s3.create_bucket(Bucket="logs")
for name in sorted(os.listdir(folder)):
    s3.upload_file(os.path.join(folder, name), "logs", f"gz/{name}")
EOF

python3 - "$WORK" "$THREADS" "$ROUNDS" "$BUCKET" "$PROXY_PORT" "${BINS[@]}" <<'EOF'
import json, os, shutil, statistics, subprocess, sys, time

work, threads, rounds, bucket, proxy = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
bins = sys.argv[6:]

def run(binary, source, env, perf=None):
    """Wall seconds and the run's inputs read ahead; under `perf record` into `perf` when given."""
    out = os.path.join(work, "ds")
    shutil.rmtree(out, ignore_errors=True)
    cmd = [binary, "--threads", threads, "ingest", "--quiet", "--out", out, source]
    if perf:
        cmd = ["perf", "record", "-q", "-e", "cpu-clock", "-F", "1999", "-o", perf, "--"] + cmd
    start = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    summary = json.load(open(os.path.join(out, "_ingest_summary.json")))
    return wall, summary["memory"].get("inputs_ahead", 0)

def reading_share(binary, source, env):
    """Share of the CPU samples in threads that read and inflate inputs
    (perf samples every thread, however short-lived; /proc would miss them)."""
    data = os.path.join(work, "perf.data")
    run(binary, source, env, perf=data)
    report = subprocess.run(["perf", "report", "-i", data, "--sort", "comm", "--stdio", "-q"],
                            capture_output=True, text=True, check=True).stdout
    share = 0.0
    for line in report.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].endswith("%") and parts[1] in ("ingest-split", "ingest-open"):
            share += float(parts[0].rstrip("%")) / 100
    return share

env = dict(os.environ)
remote = dict(env, AWS_ENDPOINT_URL=f"http://127.0.0.1:{proxy}")
for label, source, environ in [("local folder", bucket, env), ("S3 through the proxy", "s3://logs/gz/", remote)]:
    walls = {b: [] for b in bins}
    shares = {}
    ratios = {b: [] for b in bins}
    ahead = {}
    for r in range(rounds):
        order = bins if r % 2 == 0 else bins[::-1]
        got = {}
        for b in order:
            got[b], ahead[b] = run(b, source, environ)
            walls[b].append(got[b])
        for b in bins:
            ratios[b].append(got[b] / got[bins[0]])
    if source == bucket and shutil.which("perf"):
        for b in bins:
            shares[b] = reading_share(b, source, environ)
    print(f"{label}: {len(os.listdir(bucket))} gzipped objects, --threads {threads}, {rounds} rounds")
    amdahl = lambda s: (s + (1 - s) / 2) / (s + (1 - s) / 16)
    for b in bins:
        print(f"  {b}: median {statistics.median(walls[b]):.2f} s, best {min(walls[b]):.2f} s, "
              f"over the first build {statistics.median(ratios[b]):.3f} (rounds {', '.join(f'{x:.2f}' for x in ratios[b])}); "
              f"{ahead[b]} inputs read ahead")
        if b in shares:
            share = shares[b]
            s = share / (ahead[b] + 1)
            print(f"    reading and inflating {100 * share:.1f} % of CPU (perf): serial {100 * s:.1f} %, "
                  f"Amdahl 16 over 2 threads {amdahl(s):.1f}x"
                  + (f"; with 4 read ahead, as at 16 threads: {amdahl(share / 5):.1f}x" if ahead[b] else ""))
EOF
