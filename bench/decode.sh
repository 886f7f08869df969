#!/usr/bin/env bash
# CPU decode throughput: tokscope's replay decoder vs candle-transformers'
# llama, same random ~100M-parameter f32 checkpoint, same ids (prompt 1..=P,
# then N greedy steps), same thread count, in one run (issue 5).
#
#   bench/decode.sh [P=128] [N=64]
#
# Env: THREADS (default 2; RAYON_NUM_THREADS for both engines), REPEAT (runs
# per engine, alternating; best and median reported; default 3), CKPT (checkpoint dir, default
# target/bench/llama-100m under the target directory, generated once), TOKSCOPE_BIN (skip building
# tokscope), TOKSCOPE_TARGET_DIR (default target; TOKSCOPE_DEV_TARGET_DIR for
# the dev build of the checkpoint generator, examples/random_checkpoint.rs),
# CANDLE_TARGET_DIR (default bench/candle-llama/target).
set -euo pipefail
cd "$(dirname "$0")/.."
P=${1:-128}
N=${2:-64}
THREADS=${THREADS:-2}
REPEAT=${REPEAT:-3}
CKPT=${CKPT:-${CARGO_TARGET_DIR:-target}/bench/llama-100m}
CANDLE_TARGET_DIR=${CANDLE_TARGET_DIR:-$PWD/bench/candle-llama/target}

(cd bench/candle-llama && CARGO_TARGET_DIR="$CANDLE_TARGET_DIR" cargo build --release --quiet)
candle="$CANDLE_TARGET_DIR/release/candle-llama-bench"
if [ -z "${TOKSCOPE_BIN:-}" ]; then
  CARGO_TARGET_DIR="${TOKSCOPE_TARGET_DIR:-target}" cargo build --release --quiet --bin tokscope
  TOKSCOPE_BIN="${TOKSCOPE_TARGET_DIR:-target}/release/tokscope"
fi
[ -f "$CKPT/model.safetensors" ] ||
  CARGO_TARGET_DIR="${TOKSCOPE_DEV_TARGET_DIR:-${TOKSCOPE_TARGET_DIR:-target}}" cargo run --quiet --example random_checkpoint -- "$CKPT"

export RAYON_NUM_THREADS=$THREADS
out=$(mktemp -d)
for r in $(seq "$REPEAT"); do
  "$candle" --model "$CKPT" --prompt-tokens "$P" --new-tokens "$N" > "$out/candle.$r.json"
  "$TOKSCOPE_BIN" decode-bench --model "$CKPT" --prompt-tokens "$P" --new-tokens "$N" --json > "$out/tokscope.$r.json"
done
python3 - "$out" "$REPEAT" <<'PY'
import json, sys
out, repeat = sys.argv[1], int(sys.argv[2])
runs = {e: [json.load(open(f"{out}/{e}.{r}.json")) for r in range(1, repeat + 1)] for e in ("candle", "tokscope")}
best = {e: {k: max(x[k] for x in rs) for k in ("prefill_tps", "decode_tps")} for e, rs in runs.items()}
med = {e: {k: sorted(x[k] for x in rs)[len(rs) // 2] for k in ("prefill_tps", "decode_tps")} for e, rs in runs.items()}
for e, rs in runs.items():
    print(f"{e:9s} threads={rs[0]['threads']} prefill {best[e]['prefill_tps']:8.1f} tok/s  decode {best[e]['decode_tps']:7.2f} tok/s"
          "   (runs: prefill " + ", ".join("%.1f" % x["prefill_tps"] for x in rs)
          + "; decode " + ", ".join("%.2f" % x["decode_tps"] for x in rs) + ")")
for k in ("prefill_tps", "decode_tps"):
    print(f"ratio tokscope/candle {k}: best {best['tokscope'][k] / best['candle'][k]:.2f}, "
          f"median {med['tokscope'][k] / med['candle'][k]:.2f}")
a, b = runs["tokscope"][0]["greedy_ids"], runs["candle"][0]["greedy_ids"]
same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), len(a))
print(f"greedy ids agree: {a == b} (first {same} of {len(a)} equal; tokscope {a[:8]}..., candle {b[:8]}...)")
PY
rm -r "$out"
