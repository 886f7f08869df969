#!/usr/bin/env bash
# GPU check for the CUDA replay backend: one prepared script for a machine with
# an NVIDIA GPU and driver, run from the repository root. A failed step does not
# stop the others; the script exits non-zero at the end if any failed, after a
# table of the figures (what docs/PERFORMANCE.md's GPU row and
# docs/performance-history.md, "Decode on the GPU (CUDA)", record).
#
#   bench/gpu_check.sh                    build (release) with cargo, then check
#   bench/gpu_check.sh --pack DIR         only build, and pack the binaries into
#                                         DIR (stripped, xz): for a GPU machine
#                                         without a Rust toolchain or registry
#   GPU_CHECK_BIN=DIR bench/gpu_check.sh  check with the binaries packed in DIR
#
# Steps:
# 1. kernels: the NVRTC-compiled kernels against the CPU (tests/model/cuda_kernels.rs;
#    TOKSCOPE_REQUIRE_NVRTC=1 makes a missing NVRTC fail instead of skip);
# 2. parity: the whole model on the GPU against the CPU (tests/model/gpu_parity.rs)
#    on tiny-stories-a (logits within 1e-3, the same greedy ids, P(EOS),
#    teacher-forced log-probs) and on a random checkpoint with Llama-3.2-1B's
#    shape in bf16 (relative logit error under 1e-4, the same argmax);
# 3. bandwidth: the device's memory bandwidth measured in the same run, a
#    4 GiB device-to-device copy through PyTorch (bytes read + written), median
#    of 20 copies: the limit a decode step, which reads every weight once, is
#    held to;
# 4. decode tokens/s of the CUDA forward pass (weights widened to f32 on the
#    GPU) on a random ~100M-parameter f32 checkpoint and on the 1B one, each as
#    a fraction of that bandwidth, and the 1B on the CPU (bf16) beside it;
# 5. cli: `tokscope decode` on tiny-stories-a with --device cpu and --device
#    cuda gives the same greedy ids and last logits within 1e-3, and --device
#    auto takes the GPU;
# 6. replay: the bundled sample logs ingested and their suspects replayed on
#    each device give the same verdicts and continuations, P(EOS) within 1e-4;
# 7. user: the README's main job (`tokscope run`) with every default on this
#    machine's cores and memory, and the test matrix that runs the product
#    as other machines would (tests/ingest/machines.rs: run, ingest, export,
#    compact and replay at 1 to 64 threads under a simulated container
#    budget), from the packed test binary.
# TOKSCOPE_CUDA_FORWARD=1 turns the CUDA forward pass on while
# replay::cuda::FORWARD_AVAILABLE is false (until this check has passed). Logs and JSON: BENCH_DIR (default
# target/bench/gpu).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
export TOKSCOPE_REQUIRE_NVRTC=1 TOKSCOPE_CUDA_FORWARD=1
work=${BENCH_DIR:-${CARGO_TARGET_DIR:-target}/bench/gpu}
mkdir -p "$work"

# Release builds of the binaries the check runs, stripped, into $1.
build_bins() {
  local dest=$1 release="${CARGO_TARGET_DIR:-target}/release" name exe
  mkdir -p "$dest"
  cargo build --release --bin tokscope --example random_checkpoint || return 1
  strip -o "$dest/tokscope" "$release/tokscope" || return 1
  strip -o "$dest/random_checkpoint" "$release/examples/random_checkpoint" || return 1
  cargo test --release --no-run --test model --test ingest --message-format=json \
    | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "test" in m["target"]["kind"]:
        print(m["target"]["name"], m["executable"])' >"$dest/tests.txt" || return 1
  while read -r name exe; do strip -o "$dest/$name" "$exe" || return 1; done <"$dest/tests.txt"
  rm "$dest/tests.txt"
}

if [ "${1:-}" = --pack ]; then
  dest=${2:?usage: bench/gpu_check.sh --pack DIR}
  build_bins "$dest" || exit 1
  xz -9 -T0 -f "$dest"/*
  ls -l "$dest"
  exit 0
fi

bin=$work/bin
if [ -n "${GPU_CHECK_BIN:-}" ]; then
  unpack_bins "$GPU_CHECK_BIN" "$bin"
else
  build_bins "$bin" || exit 1
fi

# NVRTC and cuBLAS: the pip wheels' directories (nvidia/cu13/lib, ...) and the toolkit's.
libdirs=$(python3 tests/support/cuda_lib_dirs.py --toolkit nvrtc cublas)
export LD_LIBRARY_PATH="${libdirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Test binaries find tests/data through it when not run by cargo.
export CARGO_MANIFEST_DIR=$PWD
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv || true

failed=()
step() {
  local name=$1
  shift
  echo "== $name"
  local start=$SECONDS
  if "$@" 2>&1 | tee "$work/$name.log"; then
    echo "-- $name: ok ($((SECONDS - start)) s)"
  else
    echo "-- $name: FAILED ($((SECONDS - start)) s)"
    failed+=("$name")
  fi
}

small=$work/llama-100m-f32 large=$work/llama-1b-bf16
[ -f "$small/model.safetensors" ] || step checkpoint-100m "$bin/random_checkpoint" "$small"
[ -f "$large/model.safetensors" ] || step checkpoint-1b "$bin/random_checkpoint" "$large" 2048 16 32 8 8192 128256 bf16

# A test binary whose tests must all run: on this machine a skip (no GPU, no
# NVRTC, no checkpoint) is a failure.
no_skips() {
  local log rc
  log=$("$@" 2>&1)
  rc=$?
  echo "$log"
  if [ $rc -eq 0 ] && grep -q "skip:" <<<"$log"; then
    echo "a test skipped"
    return 1
  fi
  return $rc
}
step kernels no_skips "$bin/model" cuda_kernels:: --nocapture --test-threads=1
export TOKSCOPE_GPU_PARITY_MODEL=$large
step parity no_skips "$bin/model" gpu_parity:: --nocapture --test-threads=1

bandwidth() {
  python3 - "$work/bandwidth.json" <<'PY'
import json, sys, torch
n = 1 << 30  # 4 GiB of f32
a = torch.rand(n, device="cuda")
b = torch.empty_like(a)
for _ in range(3):
    b.copy_(a)
times = []
for _ in range(20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); b.copy_(a); e.record(); e.synchronize()
    times.append(s.elapsed_time(e) / 1e3)
assert torch.equal(a, b)
t = sorted(times)[len(times) // 2]
r = {"device": torch.cuda.get_device_name(), "bytes": 2 * n * 4, "median_s": t, "gb_s": 2 * n * 4 / t / 1e9}
json.dump(r, open(sys.argv[1], "w"))
print(f"device-to-device copy: {r['gb_s']:.0f} GB/s (read + write, median of 20)")
PY
}
step bandwidth bandwidth

bench() {
  local name=$1
  shift
  "$bin/tokscope" decode-bench "$@" --json >"$work/$name.json" && head -c 400 "$work/$name.json" && echo
}
step bench-100m-cuda bench bench-100m-cuda --model "$small" --device cuda --prompt-tokens 128 --new-tokens 256
step bench-1b-cuda bench bench-1b-cuda --model "$large" --device cuda --prompt-tokens 128 --new-tokens 256
step bench-1b-cpu bench bench-1b-cpu --model "$large" --device cpu --prompt-tokens 128 --new-tokens 32

cli() {
  local device start
  for device in cpu cuda; do
    start=$(date +%s.%N)
    "$bin/tokscope" decode --model tests/data/models/tiny-stories-a --prompt "Once upon a time," \
      --max-new-tokens 40 --device "$device" --json >"$work/decode-$device.json" || return 1
    echo "tokscope decode --device $device: $(python3 -c "print(round($(date +%s.%N) - $start, 2))") s"
  done
  # --device auto finds the driver, NVRTC and cuBLAS and takes the GPU.
  "$bin/tokscope" decode --model tests/data/models/tiny-stories-a --prompt "Once" \
    --max-new-tokens 4 --device auto --json >/dev/null 2>"$work/decode-auto.err" || return 1
  if grep -q "device auto: using the CPU" "$work/decode-auto.err"; then cat "$work/decode-auto.err"; return 1; fi
  echo "--device auto: the GPU"
  python3 - "$work/decode-cpu.json" "$work/decode-cuda.json" <<'PY'
import json, sys
cpu, gpu = (json.load(open(p)) for p in sys.argv[1:])
diff = max(abs(a - b) for a, b in zip(cpu["last_logits"], gpu["last_logits"]))
print(f"greedy ids equal: {cpu['greedy_ids'] == gpu['greedy_ids']}, max abs last-logit diff {diff:.2e}")
sys.exit(0 if cpu["greedy_ids"] == gpu["greedy_ids"] and diff < 1e-3 else 1)
PY
}
step cli cli

# The replay command end to end: the bundled sample logs ingested, their
# suspects replayed on each device: the same verdicts and continuations, P(EOS)
# at the cut within 1e-4.
replay_check() {
  local device
  rm -rf "$work/replay"
  for device in cpu cuda; do
    "$bin/tokscope" ingest sample_logs --out "$work/replay/$device" >/dev/null || return 1
    "$bin/tokscope" replay --data "$work/replay/$device" --model tests/data/models/tiny-stories-a \
      --device "$device" --json || return 1
    echo "SELECT request_id, verdict, continuation, p_eos_at_cut, device FROM replay_verdicts ORDER BY request_id;" \
      | "$bin/tokscope" sql --data "$work/replay/$device" --format json --no-history >"$work/replay-$device.ndjson" \
      || return 1
  done
  python3 - "$work/replay-cpu.ndjson" "$work/replay-cuda.ndjson" <<'PY'
import json, sys
cpu, gpu = ([json.loads(l) for l in open(p) if l.strip()] for p in sys.argv[1:])
assert len(cpu) == len(gpu) > 0, (len(cpu), len(gpu))
assert all(r["device"].startswith("cuda") for r in gpu), gpu[0]["device"]
same = all((a["request_id"], a["verdict"], a["continuation"]) == (b["request_id"], b["verdict"], b["continuation"])
           for a, b in zip(cpu, gpu))
diff = max(abs((a["p_eos_at_cut"] or 0) - (b["p_eos_at_cut"] or 0)) for a, b in zip(cpu, gpu))
print(f"{len(cpu)} verdicts; verdicts and continuations equal: {same}; max P(EOS) at the cut diff {diff:.2e}")
sys.exit(0 if same and diff < 1e-4 else 1)
PY
}
step replay replay_check

# The README's first command as a user runs it (the packed binary for `cargo
# run --`): no flags, every default derived from this machine; then the
# thread-count matrix of the test suite.
user_commands() {
  "$bin/tokscope" run || return 1
  nproc
  TOKSCOPE_BIN=$bin/tokscope "$bin/ingest" machines:: --test-threads=1
}
step user user_commands

python3 - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
def load(name):
    try:
        return json.load(open(os.path.join(work, name + ".json")))
    except (OSError, ValueError):
        return None
bw = load("bandwidth")
print(f"\n{'run':<16} {'params':>8} {'weights/token':>13} {'prefill tok/s':>13} {'decode tok/s':>12} {'GB/s':>7} {'of copy bw':>10} {'load s':>6}")
for name in ("bench-100m-cuda", "bench-1b-cuda", "bench-1b-cpu"):
    r = load(name)
    if r is None:
        print(f"{name:<16} (no result)")
        continue
    frac = f"{r['decode_weight_gb_s'] / bw['gb_s']:.1%}" if bw and "cuda" in r["engine"] else "-"
    print(f"{name:<16} {r['params']/1e6:>7.0f}M {r['weight_bytes']/1e9:>11.2f}GB {r['prefill_tps']:>13.0f} "
          f"{r['decode_tps']:>12.1f} {r['decode_weight_gb_s']:>7.0f} {frac:>10} {r['load_s']:>6.1f}")
if bw:
    print(f"device-to-device copy on {bw['device']}: {bw['gb_s']:.0f} GB/s")
PY

if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "all GPU checks passed"
