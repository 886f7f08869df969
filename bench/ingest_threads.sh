#!/usr/bin/env bash
# Ingest's CPU time by thread role, and the serial fraction it implies.
#
# Runs `tokscope --threads THREADS ingest` over a generated log while reading
# every thread's CPU time (/proc/<pid>/task/*/stat, every 50 ms; a thread's
# last reading counts), and sums it by role from the thread names: the main
# thread (it receives parsed slices, cuts row groups, hands them to the
# writers), `ingest-split` (cuts the input into chunks of lines),
# `ingest-read` (read a plain local file's blocks at their positions, one
# thread per eight, several at once),
# `tokscope-pool-N` (parse, derive, build Arrow batches, count requests),
# `ingest-write-N` (encode and compress row groups), and the rest (runtime
# threads). The main thread and the splitter are one thread each, which all
# others wait on when they fall behind: their share of the CPU time is the
# serial fraction s, and Amdahl's law projects the speed-up from 2 threads
# to N as (s + (1 - s) / 2) / (s + (1 - s) / N). Target: s < 5 %.
# Where `perf` is installed, one more run under `perf record -e cpu-clock`
# gives the same shares from samples (finer than /proc's clock ticks, which
# round a thread of a few hundred milliseconds by 10 ms); the projection
# then uses perf's shares. PERF=0 skips it.
#
# Usage: bench/ingest_threads.sh [REQUESTS_THOUSANDS=500] [THREADS=2] [DAYS=]
# (DAYS empty: one request a second, 500k requests over about 6 days).
# COMPRESS=gz ingests the log gzipped (`gzip -1`): decompression runs on the
# splitter thread. The log is read once before, so that the page cache holds it.
# TOKSCOPE_BIN=path uses an already built release binary.
set -euo pipefail
cd "$(dirname "$0")/.."
THOUSANDS=${1:-500}
THREADS=${2:-2}
DAYS=${3:-}
WORK=${BENCH_DIR:-${CARGO_TARGET_DIR:-target}/bench/ingest_threads}
mkdir -p "$WORK"
. bench/lib.sh
BIN=$(tokscope_bin)

LOG="$WORK/canonical-${THOUSANDS}k${DAYS:+-${DAYS}d}.jsonl"
if [ ! -f "$LOG" ]; then
  "$BIN" generate --requests "${THOUSANDS}000" --output-chars 700 ${DAYS:+--days "$DAYS"} --out "$LOG"
fi
if [ "${COMPRESS:-}" = gz ]; then
  [ -f "$LOG.gz" ] || gzip -1 -k "$LOG"
  LOG="$LOG.gz"
fi
cat "$LOG" > /dev/null
rm -rf "$WORK/ds"
python3 - "$BIN" "$THREADS" "$LOG" "$WORK/ds" <<'EOF'
import os, shutil, subprocess, sys, time

binary, threads, log, out = sys.argv[1:5]
tick = os.sysconf("SC_CLK_TCK")
start = time.perf_counter()
proc = subprocess.Popen([binary, "--threads", threads, "ingest", "--quiet", "--out", out, log],
                        stdout=subprocess.DEVNULL)
last = {}  # tid -> (name, cpu seconds)
while True:
    done = proc.poll() is not None
    try:
        tids = os.listdir(f"/proc/{proc.pid}/task")
    except FileNotFoundError:
        tids = []
    for tid in tids:
        try:
            stat = open(f"/proc/{proc.pid}/task/{tid}/stat").read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        last[tid] = ("main" if int(tid) == proc.pid else name, (int(fields[11]) + int(fields[12])) / tick)
    if done:
        break
    time.sleep(0.05)
wall = time.perf_counter() - start
if proc.returncode != 0:
    sys.exit(f"ingest exited {proc.returncode}")

def role_of(name):
    for prefix, role in [("ingest-split", "splitter"), ("ingest-read", "readers"),
                         ("tokscope-pool", "parse pool"), ("ingest-write", "writers")]:
        if name.startswith(prefix):
            return role
    return "main" if name == "main" else "other"

roles = {"main": 0.0, "splitter": 0.0, "readers": 0.0, "parse pool": 0.0, "writers": 0.0, "other": 0.0}
writer_max = 0.0
for name, cpu in last.values():
    roles[role_of(name)] += cpu
    if role_of(name) == "writers":
        writer_max = max(writer_max, cpu)
total = sum(roles.values())
size = os.path.getsize(log) / 1e6
print(f"input: {os.path.basename(log)} ({size:.0f} MB), threads={threads}: wall {wall:.2f} s, "
      f"CPU {total:.2f} s ({total / wall:.2f} cores busy on average)")
for role, cpu in roles.items():
    print(f"  {role:<11} {cpu:6.2f} s  {100 * cpu / total:5.1f} %")
print(f"  (busiest writer {writer_max:.2f} s, {100 * writer_max / total:.1f} %)")
shares = {r: cpu / total for r, cpu in roles.items()}
print(f"serial fraction (main thread + splitter): {100 * (shares['main'] + shares['splitter']):.1f} % of CPU time")

if os.environ.get("PERF", "1") != "0" and shutil.which("perf"):
    data = os.path.join(os.path.dirname(out), "perf.data")
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "1999", "-o", data, "--",
                    binary, "--threads", threads, "ingest", "--quiet", "--out", out, log],
                   stdout=subprocess.DEVNULL, check=True)
    report = subprocess.run(["perf", "report", "-i", data, "--sort", "comm", "--stdio", "-q"],
                            capture_output=True, text=True, check=True).stdout
    shares = dict.fromkeys(roles, 0.0)
    for line in report.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].endswith("%"):
            # The main thread keeps the binary's name.
            name = "main" if parts[1] == os.path.basename(binary)[:15] else parts[1]
            shares[role_of(name)] += float(parts[0].rstrip("%")) / 100
    print("perf samples, share of CPU: " + ", ".join(f"{r} {100 * v:.1f} %" for r, v in shares.items()))
s = shares["main"] + shares["splitter"]
print(f"serial fraction for the projection (main thread + splitter): {100 * s:.1f} % (target < 5 %)")
for n in (8, 16, 64):
    print(f"Amdahl: {n} threads over 2: {(s + (1 - s) / 2) / (s + (1 - s) / n):.2f}x")
# The reading threads run beside the others, min(ceil(n / 8), 8) of them at n
# threads: busy this share of the wall time each at the projected speed, they
# hold nobody up while it stays under 1.
r = shares["readers"]
for n in (16, 64):
    k = min(-(-n // 8), 8)
    print(f"reading threads at {n} threads: {k}, each busy {r * n / k:.2f} of the wall time")
EOF
