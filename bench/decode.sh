#!/usr/bin/env bash
# CPU decode throughput: tokscope's replay decoder vs candle-transformers'
# llama, same random checkpoint, same ids (prompt 1..=P, then N greedy steps),
# same thread count, in one run; with the machine's memory bandwidth measured
# in the same run (bench/stream.rs, STREAM-like copy and read) and each engine's
# decode rate set against the rate that bandwidth allows for the bytes it
# streams per token. tokscope reads the weights in their stored precision
# (bf16 for the 1B preset), candle converts them to f32 at load (its CPU
# llama computes in f32). Peak RSS of each process from /usr/bin/time.
#
#   bench/decode.sh [P=128] [N=64]
#
# Env: MODEL (100m: the default ~100M-parameter f32 model; 1b: Llama-3.2-1B's shape, bf16),
# THREADS (default 2; RAYON_NUM_THREADS for both engines), REPEAT (runs
# per engine, alternating; best and median reported; default 3), CKPT (checkpoint dir, default
# bench/llama-$MODEL under the target directory, generated once), TOKSCOPE_BIN (skip building
# tokscope), TOKSCOPE_TARGET_DIR (default target; TOKSCOPE_DEV_TARGET_DIR for
# the dev build of the checkpoint generator, examples/random_checkpoint.rs),
# CANDLE_TARGET_DIR (default bench/candle-llama/target), STREAM_MIB (MiB per
# bandwidth array, default 1024).
set -euo pipefail
cd "$(dirname "$0")/.."
P=${1:-128}
N=${2:-64}
MODEL=${MODEL:-100m}
THREADS=${THREADS:-2}
REPEAT=${REPEAT:-3}
case "$MODEL" in
  100m) SHAPE=() ;;
  1b) SHAPE=(2048 16 32 8 8192 128256 bf16) ;;
  *) echo "MODEL must be 100m or 1b" >&2; exit 2 ;;
esac
CKPT=${CKPT:-${TOKSCOPE_DEV_TARGET_DIR:-${CARGO_TARGET_DIR:-target}}/bench/llama-$MODEL}
CANDLE_TARGET_DIR=${CANDLE_TARGET_DIR:-$PWD/bench/candle-llama/target}

(cd bench/candle-llama && CARGO_TARGET_DIR="$CANDLE_TARGET_DIR" cargo build --release --quiet)
candle="$CANDLE_TARGET_DIR/release/candle-llama-bench"
if [ -z "${TOKSCOPE_BIN:-}" ]; then
  CARGO_TARGET_DIR="${TOKSCOPE_TARGET_DIR:-target}" cargo build --release --quiet --bin tokscope
  TOKSCOPE_BIN="${TOKSCOPE_TARGET_DIR:-target}/release/tokscope"
fi
[ -f "$CKPT/model.safetensors" ] ||
  CARGO_TARGET_DIR="${TOKSCOPE_DEV_TARGET_DIR:-${TOKSCOPE_TARGET_DIR:-target}}" cargo run --quiet --example random_checkpoint -- "$CKPT" "${SHAPE[@]}"

out=$(mktemp -d)
rustc -C opt-level=3 --edition 2021 -o "$out/stream" bench/stream.rs
"$out/stream" "${STREAM_MIB:-1024}" "$THREADS" 5 > "$out/stream.json"

export RAYON_NUM_THREADS=$THREADS
for r in $(seq "$REPEAT"); do
  /usr/bin/time -f %M -o "$out/candle.$r.rss" "$candle" --model "$CKPT" --prompt-tokens "$P" --new-tokens "$N" > "$out/candle.$r.json"
  /usr/bin/time -f %M -o "$out/tokscope.$r.rss" "$TOKSCOPE_BIN" decode-bench --model "$CKPT" --prompt-tokens "$P" --new-tokens "$N" --json > "$out/tokscope.$r.json"
done
python3 - "$out" "$REPEAT" "$CKPT" <<'PY'
import json, os, sys
out, repeat, ckpt = sys.argv[1], int(sys.argv[2]), sys.argv[3]
stream = json.load(open(f"{out}/stream.json"))
runs = {e: [json.load(open(f"{out}/{e}.{r}.json")) for r in range(1, repeat + 1)] for e in ("candle", "tokscope")}
rss = {e: max(int(open(f"{out}/{e}.{r}.rss").read().split()[-1]) * 1024 for r in range(1, repeat + 1)) for e in runs}
best = {e: {k: max(x[k] for x in rs) for k in ("prefill_tps", "decode_tps")} for e, rs in runs.items()}
med = {e: {k: sorted(x[k] for x in rs)[len(rs) // 2] for k in ("prefill_tps", "decode_tps")} for e, rs in runs.items()}
t = runs["tokscope"][0]
file_bytes = os.path.getsize(f"{ckpt}/model.safetensors")
# Bytes each engine streams per decoded token: tokscope its stored weights; candle the same
# matrices widened to f32 (stored bytes per parameter: 4 for f32, 2 for bf16/f16).
stored = round(file_bytes / t["params"])
per_token = {"tokscope": t["weight_bytes"], "candle": t["weight_bytes"] * 4 // stored}
print(f"memory bandwidth ({stream['threads']} threads): copy {stream['copy_gb_s']:.1f} GB/s, read {stream['read_gb_s']:.1f} GB/s")
print(f"checkpoint {ckpt}: {t['params'] / 1e6:.1f}M params, file {file_bytes / 1e9:.2f} GB")
for e, rs in runs.items():
    limit = stream["read_gb_s"] * 1e9 / per_token[e]
    print(f"{e:9s} threads={rs[0]['threads']} prefill {best[e]['prefill_tps']:8.1f} tok/s  decode {best[e]['decode_tps']:7.2f} tok/s"
          f"   (runs: prefill " + ", ".join("%.1f" % x["prefill_tps"] for x in rs)
          + "; decode " + ", ".join("%.2f" % x["decode_tps"] for x in rs) + ")")
    print(f"{'':9s} {per_token[e] / 1e9:.2f} GB streamed per token: bandwidth limit {limit:.2f} tok/s, best decode at "
          f"{best[e]['decode_tps'] / limit:.0%} of it; peak RSS {rss[e] / 1e9:.2f} GB = {rss[e] / file_bytes:.2f}x the checkpoint file")
for k in ("prefill_tps", "decode_tps"):
    print(f"ratio tokscope/candle {k}: best {best['tokscope'][k] / best['candle'][k]:.2f}, "
          f"median {med['tokscope'][k] / med['candle'][k]:.2f}")
a, b = runs["tokscope"][0]["greedy_ids"], runs["candle"][0]["greedy_ids"]
same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), len(a))
print(f"greedy ids agree: {a == b} (first {same} of {len(a)} equal; tokscope {a[:8]}..., candle {b[:8]}...)")
PY
rm -r "$out"
