#!/usr/bin/env bash
# Batched replay against one suspect at a time, same model, same suspects,
# same thread count, in one run: `tokscope replay --batch 1` (one suspect per
# thread) and `--batch B`, best wall time of REPEAT runs each (alternating),
# their ratio, and the two verdict tables compared column for column (they
# must be equal). Suspects: the golden cases of tests/data/models/tiny-stories-a
# cut after 1 to 8 words, N of them (distinct request ids).
#
#   bench/replay_batch.sh [N=1000] [B=32]
#
# Env: THREADS (default 2), REPEAT (default 3), MODEL_DIR (default the bundled
# tiny-stories-a), TOKSCOPE_BIN (skip building tokscope).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000}
B=${2:-32}
THREADS=${THREADS:-2}
REPEAT=${REPEAT:-3}
MODEL_DIR=${MODEL_DIR:-tests/data/models/tiny-stories-a}
WORK=${BENCH_DIR:-${CARGO_TARGET_DIR:-target}/bench/replay_batch}
rm -rf "$WORK" && mkdir -p "$WORK"
. bench/lib.sh
BIN=$(tokscope_bin)

python3 - "$MODEL_DIR/golden.json" "$N" > "$WORK/log.jsonl" <<'PY'
import json, sys
cases = json.load(open(sys.argv[1]))["cases"]
n = int(sys.argv[2])
for i in range(n):
    case = cases[i % len(cases)]
    words = case["greedy_text"].split(" ")
    output = " ".join(words[: 1 + (i // len(cases)) % 8])
    print(json.dumps({"ts": "2024-06-01T00:00:00Z", "request_id": f"s{i:06d}", "model": "m",
                      "prompt_tokens": 12, "completion_tokens": 9, "max_tokens": 256, "finish_reason": "stop",
                      "prompt": case["prompt"], "model_output": output}))
PY
"$BIN" ingest --quiet "$WORK/log.jsonl" --out "$WORK/data"

# seconds of one replay at batch $1
run() {
  local t0 t1
  t0=$(date +%s.%N)
  "$BIN" --threads "$THREADS" replay --quiet --data "$WORK/data" --model "$MODEL_DIR" --device cpu --batch "$1" --json > "$WORK/summary-$1.json"
  t1=$(date +%s.%N)
  "$BIN" query --data "$WORK/data" --format csv \
    "SELECT request_id, verdict, reason, p_eos_at_cut, continuation, continuation_ended_with_eos FROM replay_verdicts ORDER BY request_id" > "$WORK/verdicts-$1.csv"
  python3 -c "print(f'{$t1 - $t0:.3f}')"
}

best1= bestb=
for _ in $(seq "$REPEAT"); do
  for b in 1 "$B"; do
    s=$(run "$b")
    if [ "$b" = 1 ]; then
      best1=$(python3 -c "print(min(x for x in [$s, ${best1:-1e9}]))")
    else
      bestb=$(python3 -c "print(min(x for x in [$s, ${bestb:-1e9}]))")
    fi
  done
done
cmp -s "$WORK/verdicts-1.csv" "$WORK/verdicts-$B.csv" || { echo "verdicts differ between --batch 1 and --batch $B" >&2; exit 1; }
echo "replay of $N suspects, $THREADS threads, best of $REPEAT: --batch 1 ${best1} s, --batch $B ${bestb} s: $(python3 -c "print(f'{$best1 / $bestb:.2f}')")x faster; verdicts equal"
