#!/usr/bin/env bash
# Causal-trace cost with and without activation reuse: wall time and
# forward-pass equivalents ((layer, position) evaluations / (layers x positions)) of `tokscope trace`.
# Usage: bench/trace.sh [MODEL_DIR] [PROMPT] [SAMPLES]
# Build first (cargo build, or --release for real checkpoints); TOKSCOPE picks the binary.
set -euo pipefail
MODEL=${1:-tests/data/models/tiny-stories-a}
PROMPT=${2:-"Once upon a time, there was a little girl named Lily. She loved to play outside with her dog"}
SAMPLES=${3:-3}
BIN=${TOKSCOPE:-${CARGO_TARGET_DIR:-target}/debug/tokscope}
for mode in reuse no-reuse; do
  flag=""; [ "$mode" = no-reuse ] && flag="--no-reuse"
  "$BIN" trace --model "$MODEL" --prompt "$PROMPT" --samples "$SAMPLES" --seed 1 $flag --json |
    python3 -c "import json,sys; d=json.load(sys.stdin); L=len(d['p_restored']); T=len(d['input_ids']); print(f'$mode: layers={L} positions={T} samples={d[\"samples\"]} forward_equivalents={d[\"forward_equivalents\"]} wall_ms={d[\"wall_ms\"]:.0f}')"
done
