#!/usr/bin/env bash
# A scheduled run's cost of a large manifest: NEW small inputs (one LiteLLM
# payload each) ingested into a dataset whose `_manifest.jsonl` already lists
# ENTRIES objects (built synthetically: ENTRIES lines as ingest writes them,
# bucket locations, sizes and ETag versions), against the same inputs
# ingested into an empty dataset, by each build given. Alternating order,
# ROUNDS rounds; prints each build's median wall time and peak RSS (GNU time)
# for both, and the median paired ratio (with a manifest over without). Every
# run is checked: NEW rows, the manifest ENTRIES + NEW lines, the first
# ENTRIES of them byte for byte the ones it had.
# Usage: bench/manifest.sh BIN [BIN...]
# Variables: ENTRIES (1000000), NEW (1000), ROUNDS (3), THREADS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: $0 BIN [BIN...]" >&2; exit 2; }
BINS=()
for b in "$@"; do BINS+=("$(realpath "$b")"); done
export ENTRIES=${ENTRIES:-1000000} NEW=${NEW:-1000} ROUNDS=${ROUNDS:-3} THREADS=${THREADS:-2}
export WORK=${BENCH_DIR:-${CARGO_TARGET_DIR:-target}/bench/manifest}
mkdir -p "$WORK"
python3 - "${BINS[@]}" <<'EOF'
import hashlib, json, os, shutil, statistics, subprocess, sys

bins = sys.argv[1:]
work, entries, new, rounds, threads = (os.environ[k] for k in ("WORK", "ENTRIES", "NEW", "ROUNDS", "THREADS"))
entries, new, rounds = int(entries), int(new), int(rounds)
here = os.getcwd()

manifest = os.path.join(work, f"manifest-{entries}.jsonl")
if not os.path.exists(manifest):
    with open(manifest + ".tmp", "w") as f:
        for i in range(entries):
            day = 1 + i % 28
            etag = hashlib.md5(str(i).encode()).hexdigest()
            f.write(json.dumps({"location": f"s3://gateway-logs/litellm/2026/11/{day:02d}/{i:07d}.json", "size": 4466,
                                "version": f"2026-11-{day:02d}T00:00:00+00:00|\"{etag}\"", "run_id": f"run-{i // 1000}",
                                "rows_written": 1, "lines_rejected": 0}, separators=(",", ":")) + "\n")
    os.rename(manifest + ".tmp", manifest)
inputs = os.path.join(work, f"new-{new}")
if not os.path.isdir(inputs):
    payload = json.loads(open(os.path.join(here, "tests/data/real/litellm_gcs.ndjson")).readline())
    payload.pop("model_map_information", None)
    os.makedirs(inputs + ".tmp")
    for i in range(new):
        p = dict(payload, id=f"chatcmpl-new-{i:07d}")
        with open(os.path.join(inputs + ".tmp", f"{i:07d}.json"), "w") as f:
            f.write(json.dumps(p))
    os.rename(inputs + ".tmp", inputs)
old = open(manifest, "rb").read()

def run(binary, with_manifest):
    out = os.path.join(work, "ds")
    shutil.rmtree(out, ignore_errors=True)
    if with_manifest:
        os.makedirs(out)
        shutil.copyfile(manifest, os.path.join(out, "_manifest.jsonl"))
    stats = os.path.join(work, "time.txt")
    cmd = ["/usr/bin/time", "-f", "%e %M", "-o", stats, binary, "--threads", threads, "ingest", "--quiet", "--json",
           "--out", out, inputs]
    summary = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    wall, rss = open(stats).read().split()[-2:]
    problems = []
    if summary["totals"]["rows_written"] != new:
        problems.append(f"{summary['totals']['rows_written']} rows, want {new}")
    got = open(os.path.join(out, "_manifest.jsonl"), "rb").read()
    want_old = old if with_manifest else b""
    lines, want_lines = got.count(b"\n"), want_old.count(b"\n") + new
    if not got.startswith(want_old) or lines != want_lines:
        problems.append(f"manifest of {lines} lines, want {want_lines} after the old ones")
    if problems:
        sys.exit(f"MISMATCH {binary} (manifest {with_manifest}): {'; '.join(problems)}")
    return float(wall), int(rss) / 1024

res = {(b, m): [] for b in bins for m in (False, True)}
for r in range(rounds):
    order = [(b, m) for b in bins for m in (False, True)]
    if r % 2:
        order.reverse()
    for b, m in order:
        res[(b, m)].append(run(b, m))
        wall, rss = res[(b, m)][-1]
        print(f"  round {r + 1}/{rounds} {b} {'with' if m else 'without'} the manifest: {wall:.2f} s, peak RSS {rss:.0f} MiB")
print(f"{new} new inputs, a manifest of {entries} entries ({len(old) / 2**20:.0f} MiB), {threads} threads, {rounds} rounds")
for b in bins:
    without, with_ = res[(b, False)], res[(b, True)]
    ratios = [w[0] / n[0] for w, n in zip(with_, without)]
    med = lambda xs: statistics.median(xs)
    print(f"  {b}: without {med([x[0] for x in without]):.2f} s ({max(x[1] for x in without):.0f} MiB), "
          f"with {med([x[0] for x in with_]):.2f} s ({max(x[1] for x in with_):.0f} MiB); "
          f"with over without {med(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
EOF
