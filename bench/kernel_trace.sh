#!/usr/bin/env bash
# Kernel-trace ingest: a generated PyTorch-profiler trace (bench/gen_kernel_trace.py,
# pretty-printed, a large string before the events) of SIZE_MB megabytes is
# ingested under /usr/bin/time -v. Prints size, events, wall time, MB/s and peak
# RSS, checks the summary against what the generator wrote, and fails when the
# peak RSS is above LIMIT_MB (default 1024: a trace must never be loaded whole).
# Usage:
#   bench/kernel_trace.sh [SIZE_MB=300]
# TOKSCOPE_BIN: an already built binary (default: build and use the release one).
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MB=${1:-300}
LIMIT_MB=${LIMIT_MB:-1024}
WORK=${BENCH_DIR:-${CARGO_TARGET_DIR:-target}/bench/kernel_trace}
mkdir -p "$WORK"
. bench/lib.sh
BIN=$(tokscope_bin)
TRACE="$WORK/trace-${SIZE_MB}mb.pt.trace.json"
if [ ! -f "$TRACE" ] || [ ! -f "$TRACE.expected" ]; then
  python3 bench/gen_kernel_trace.py --mb "$SIZE_MB" --out "$TRACE" > "$TRACE.expected"
fi
rm -rf "$WORK/ds"
/usr/bin/time -v -o "$WORK/time.txt" "$BIN" ingest --quiet --json --out "$WORK/ds" "$TRACE" > "$WORK/summary.json"
python3 - "$TRACE" "$WORK/summary.json" "$WORK/time.txt" "$LIMIT_MB" <<'PY'
import json, os, sys
trace, summary, timing, limit_mb = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
want = json.load(open(trace + ".expected"))
got = json.load(open(summary))["totals"]
fields = dict(line.strip().split(": ", 1) for line in open(timing) if ": " in line)
rss_mb = int(fields["Maximum resident set size (kbytes)"]) / 1024
wall = 0.0
for part in fields["Elapsed (wall clock) time (h:mm:ss or m:ss)"].split(":"):
    wall = wall * 60 + float(part)
size_mb = os.path.getsize(trace) / 1e6
print(f"trace: {trace} ({size_mb:.1f} MB, {want['events_read'] + want['skipped']} events)")
print(f"ingest: {wall:.1f} s, {size_mb / wall:.1f} MB/s, peak RSS {rss_mb:.0f} MiB (limit {limit_mb:.0f} MiB)")
checks = {
    "lines_read": want["events_read"], "lines_ingested": want["events_read"],
    "rows_written": want["rows"], "lines_rejected": 0, "lines_skipped": want["skipped"],
}
bad = {k: (got[k], v) for k, v in checks.items() if got[k] != v}
if bad:
    sys.exit(f"summary differs from the generator (got, want): {bad}")
if rss_mb > limit_mb:
    sys.exit(f"peak RSS {rss_mb:.0f} MiB is above {limit_mb:.0f} MiB")
PY
