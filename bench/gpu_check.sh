#!/usr/bin/env bash
# GPU check for the CUDA replay backend, for a machine with an NVIDIA GPU and
# driver (run from the repository root).
# 1. builds with --features cuda, 2. runs the NVRTC/PTX and GPU parity tests
# (TOKSCOPE_REQUIRE_NVRTC=1: a missing libnvrtc fails instead of skipping;
# gpu_parity includes the full-model logits parity on tiny-stories-a),
# 3. decode tokens/s of the CUDA forward pass on a random ~100M-parameter f32
# checkpoint, with the fraction of the weight-bandwidth limit
# (params * 4 bytes per token at BANDWIDTH_GBS, default 4800: H200 HBM3e),
# and the CLI on the reference model with --device cpu and cuda.
# TOKSCOPE_CUDA_FORWARD=1 enables the CUDA forward pass, which is off by
# default until this check has passed on a GPU (replay::cuda::FORWARD_AVAILABLE).
set -euo pipefail
export TOKSCOPE_REQUIRE_NVRTC=1 TOKSCOPE_CUDA_FORWARD=1
BANDWIDTH_GBS=${BANDWIDTH_GBS:-4800}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
# NVRTC from pip when the system has none (the test also finds it by itself).
python3 -c "import nvidia" 2>/dev/null || pip install --quiet nvidia-cuda-nvrtc
cargo build --features cuda --bin tokscope --example random_checkpoint
cargo test --features cuda --test cuda_kernels --test gpu_parity -- --nocapture
cargo test --features cuda --test replay --test decoder_golden
target="${CARGO_TARGET_DIR:-target}/debug"
work=${BENCH_DIR:-${CARGO_TARGET_DIR:-target}/bench}
mkdir -p "$work"
ckpt=${CKPT:-$work/llama-100m}
[ -f "$ckpt/model.safetensors" ] || "$target/examples/random_checkpoint" "$ckpt"
# Host code is the dev build (launches only; the GPU does the work).
"$target/tokscope" decode-bench --model "$ckpt" --device cuda --prompt-tokens 128 --new-tokens 256 --json \
  | tee "$work/gpu_decode_bench.json"
python3 - "$BANDWIDTH_GBS" "$work/gpu_decode_bench.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
limit = float(sys.argv[1]) * 1e9 / (r["params"] * 4)
print(f"{r['engine']}: {r['params']/1e6:.1f}M params f32, prefill {r['prefill_tps']:.0f} tok/s, "
      f"decode {r['decode_tps']:.1f} tok/s = {r['decode_weight_gb_s']:.0f} GB/s of weights, "
      f"{r['decode_tps']/limit:.1%} of the {sys.argv[1]} GB/s limit ({limit:.0f} tok/s)")
PY
model=tests/data/models/tiny-stories-a
for device in cpu cuda; do
  start=$(date +%s.%N)
  for _ in 1 2 3 4 5; do "$target/tokscope" decode --model "$model" --prompt "Once upon a time," --max-new-tokens 40 --device "$device" --json >/dev/null; done
  end=$(date +%s.%N)
  echo "decode x5 --device $device: $(echo "$end - $start" | bc) s"
done
