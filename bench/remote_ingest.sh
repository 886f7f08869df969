#!/usr/bin/env bash
# Ingest into an object store: a generated log spread over DAYS days (a file
# per day and writer thread, plus request_counts) ingested into a bucket of a
# moto S3 server on loopback, directly and through bench/latency_proxy.py,
# which delays every packet by DELAY_MS each way (10 ms: about a round trip to
# S3 in the same region). Prints the best of REPEAT runs of each and their
# ratio: how much of a remote run is waiting on the store.
# Needs moto[server] and boto3 (pip). Usage:
#   bench/remote_ingest.sh [REQUESTS=20000] [DAYS=30] [DELAY_MS=10]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20000}
DAYS=${2:-30}
DELAY_MS=${3:-10}
REPEAT=${REPEAT:-3}
WORK=${BENCH_DIR:-${CARGO_TARGET_DIR:-target}/bench/remote}
mkdir -p "$WORK"
. bench/lib.sh
BIN=$(tokscope_bin)
LOG="$WORK/canonical-$N-${DAYS}d.jsonl"
[ -f "$LOG" ] || "$BIN" generate --requests "$N" --days "$DAYS" --out "$LOG"

start_s3_behind_proxy "$DELAY_MS"
python3 -c "
import boto3
boto3.client('s3', endpoint_url='http://127.0.0.1:$S3_PORT', region_name='us-east-1').create_bucket(Bucket='bench-ds')"

# Seconds of one ingest through the endpoint on port $1, into a dataset of its own.
ingest_once() {
  AWS_ENDPOINT_URL="http://127.0.0.1:$1" whole "$BIN" ingest --quiet --out "s3://bench-ds/run-$1-$(date +%s%N)" "$LOG"
}
DIRECT=$(best ingest_once "$S3_PORT")
DELAYED=$(best ingest_once "$PROXY_PORT")
FILES=$(AWS_ENDPOINT_URL="http://127.0.0.1:$S3_PORT" python3 -c "
import boto3, json
s3 = boto3.client('s3', region_name='us-east-1')
keys = [o['Key'] for o in s3.list_objects_v2(Bucket='bench-ds', Prefix='run-')['Contents'] if o['Key'].endswith('/_files.json')]
print(len(json.loads(s3.get_object(Bucket='bench-ds', Key=keys[0])['Body'].read())['files']))")
echo "input: $LOG ($N requests over $DAYS days), $FILES files a run"
echo "ingest to moto directly:           ${DIRECT} s (best of $REPEAT)"
echo "ingest through ${DELAY_MS} ms each way:     ${DELAYED} s (best of $REPEAT)"
python3 -c "print(f'ratio: {$DELAYED / $DIRECT:.2f}x the direct run')"
