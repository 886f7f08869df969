#!/usr/bin/env bash
# GPU check for the CUDA replay backend, for a machine with an NVIDIA GPU and
# driver (run from the repository root; shared/ beside it or TOKSCOPE_SHARED).
# 1. builds with --features cuda, 2. runs the NVRTC/PTX and GPU parity tests
# (TOKSCOPE_REQUIRE_NVRTC=1: a missing libnvrtc fails instead of skipping),
# 3. a small decode benchmark through the CLI on the reference model.
set -euo pipefail
export TOKSCOPE_REQUIRE_NVRTC=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
# NVRTC from pip when the system has none (the test also finds it by itself).
python3 -c "import nvidia" 2>/dev/null || pip install --quiet nvidia-cuda-nvrtc
cargo build --features cuda
cargo test --features cuda --test cuda_kernels --test gpu_parity -- --nocapture
cargo test --features cuda --test replay --test decoder_golden
model="${TOKSCOPE_SHARED:-../shared}/models/tiny-stories-a"
bin="${CARGO_TARGET_DIR:-target}/debug/tokscope"
for device in cpu auto; do
  start=$(date +%s.%N)
  for _ in 1 2 3 4 5; do "$bin" decode --model "$model" --prompt "Once upon a time," --max-new-tokens 40 --device "$device" --json >/dev/null; done
  end=$(date +%s.%N)
  echo "decode x5 --device $device: $(echo "$end - $start" | bc) s"
done
