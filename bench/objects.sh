#!/usr/bin/env bash
# A bucket of many small objects, one LiteLLM payload each (about 2 KB, as
# LiteLLM's S3 logger writes one object per request), in a moto S3 server
# behind bench/latency_proxy.py (DELAY_MS each way: 50 ms, a store in another
# region): tokscope ingest's objects/s against a boto3 client fetching the
# same objects 32 at a time, both pinned to THREADS cores, through
# bench/fair.py (rotated order, paired per-round ratios, every output
# checked: tokscope's dataset holds every object's row once, in the objects'
# order, with the payload's values; boto3's digest of the payloads it read is
# the one the objects were written with). Prints the ratio boto3 time over
# tokscope time (tokscope's objects/s over boto3's) and each one's peak RSS.
# Needs moto[server], boto3 and pyarrow (pip). Usage:
#   bench/objects.sh [BIN]      (default: a release build, bench/lib.sh)
# Variables: OBJECTS (1500), DELAY_MS (50), ROUNDS (5), THREADS (2),
# IO_CONCURRENCY (tokscope's default when unset).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
if [ $# -ge 1 ]; then BIN=$(realpath "$1"); else BIN=$(tokscope_bin); fi
export BIN
export OBJECTS=${OBJECTS:-1500} ROUNDS=${ROUNDS:-5} THREADS=${THREADS:-2}
DELAY_MS=${DELAY_MS:-50}
export WORK=${BENCH_DIR:-${CARGO_TARGET_DIR:-target}/bench/objects}
mkdir -p "$WORK"
start_s3_behind_proxy "$DELAY_MS"
export S3_PORT PROXY_PORT DELAY_MS
python3 bench/objects.py
