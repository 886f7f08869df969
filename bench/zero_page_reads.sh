#!/usr/bin/env bash
# Which code reads anonymous memory before anything wrote it, during an ingest.
#
# The first read of a never-written anonymous page maps the kernel's shared
# zero page; the first write to that page later is a write-protect fault
# (`do_wp_page`) that copies it and flushes the TLB of every CPU the process
# ran on (an inter-processor interrupt, a VM exit on a virtual machine).
# This script records the user-space page faults of one ingest with `perf`
# (read faults on absent pages, error code 0x4, and write faults on present
# read-only pages, 0x7), pairs each write-protect fault with the read fault
# that mapped the same page, and prints the call stacks of those reads, most
# frequent first, with allocator frames left out.
#
# usage: bench/zero_page_reads.sh LOG [LINES]
#   LOG    an NDJSON log (e.g. the file bench/ingest.sh generates)
#   LINES  ingest only the first LINES lines (default 150000)
# env: TOKSCOPE_BIN (default: target/release/tokscope), THREADS (default 2),
#      KEEP=1 keeps the recording and the decoded faults (the directory is printed)
# needs: perf with the exceptions:page_fault_user tracepoint (Debian linux-perf;
# as root or with kernel.perf_event_paranoid <= 1), python3.
set -euo pipefail
LOG=${1:?usage: bench/zero_page_reads.sh LOG [LINES]}
LINES=${2:-150000}
THREADS=${THREADS:-2}
BIN=${TOKSCOPE_BIN:-target/release/tokscope}
WORK=$(mktemp -d)
if [ -n "${KEEP:-}" ]; then echo "recording kept in $WORK"; else trap 'rm -rf "$WORK"' EXIT; fi

head -n "$LINES" "$LOG" > "$WORK/log.jsonl"
perf record -q -m 8M -o "$WORK/perf.data" -e exceptions:page_fault_user \
  --filter 'error_code == 4 || error_code == 7' --call-graph dwarf,32768 -- \
  env RAYON_NUM_THREADS="$THREADS" "$BIN" ingest --quiet --out "$WORK/ds" "$WORK/log.jsonl"
perf script -i "$WORK/perf.data" -F tid,trace,ip,sym 2>/dev/null > "$WORK/faults.txt"

python3 - "$WORK/faults.txt" <<'EOF'
import collections, re, sys

HEADER = re.compile(r"address=(0x[0-9a-f]+) ip=0x[0-9a-f]+ error_code=(0x[0-9a-f]+)")
# Frames of the fault itself, of Vec growth and of the allocator, and inlined ones.
SKIP = re.compile(
    r"exc_page_fault|raw_vec|grow_impl|grow\b|realloc|\bmi_|_mi_|memmove|memcpy"
    r"|__rust|Global|\(inlined\)$"
)

faults = []  # (page, error code, frames)
for line in open(sys.argv[1]):
    m = HEADER.search(line)
    if m:
        faults.append((int(m.group(1), 16) >> 12, int(m.group(2), 16), []))
        continue
    parts = line.split(None, 1)
    if faults and len(parts) == 2:
        faults[-1][2].append(parts[1].strip())

UNWOUND = "(stack not unwound past the allocator)"
last_read = {}  # page -> frames of the latest read fault that mapped it
write_protect, after_read = 0, 0
readers = collections.Counter()
for page, code, frames in faults:
    if code == 0x4:
        last_read[page] = frames
    elif code == 0x7:
        write_protect += 1
        frames_read = last_read.pop(page, None)
        if frames_read is None:
            continue
        after_read += 1
        kept = [f for f in frames_read if not SKIP.search(f)][:3]
        readers[" <- ".join(f[:110] for f in kept) or UNWOUND] += 1

reads = sum(1 for _, code, _ in faults if code == 0x4)
print(f"read faults on absent pages: {reads}; write-protect faults: {write_protect}, "
      f"{after_read} of them on a page a read fault mapped")
print("where those reads came from (count, innermost caller first):")
for stack, n in readers.most_common(12):
    print(f"{n:7d} ({100 * n / max(after_read, 1):4.1f} %)  {stack}")
if readers[UNWOUND] > after_read / 2:
    print("perf could not unwind most of these stacks (it sometimes fails for a whole run): run again")
EOF
