#!/usr/bin/env bash
# Jobs benchmark on generated canonical logs (default 500k requests), through
# bench/jobs.py and bench/fair.py: every engine pinned to the same THREADS
# cores, the order rotated each round, REPEAT rounds (default 5), the median
# and range of the per-round ratios on the whole process's clock and on each
# engine's own (both include opening the dataset; a Python peer's interpreter
# start is timed apart), every timed output checked against DuckDB's table
# (a mismatch fails the script).
#  (a) `job report` from the raw NDJSON: DuckDB computing the same table from
#      the log (read_ndjson, EOS markers by string tests, context bins and
#      timings derived in SQL) against tokscope's query over its dataset, and
#      against tokscope's ingest + query end to end.
#  (b) like for like: the same SQL text over the same Parquet files in DuckDB
#      and in tokscope, for every job DuckDB runs as written (eos, latency,
#      report, cost, daily; with TOKEN_DATA=1 also jitter, jitter_requests,
#      eos_logprob, and confidence). DuckDB runs bench/duckdb/<name>.sql where
#      the job calls an aggregate DuckDB lacks (confidence). Beside them, what
#      ingest's stored tables save: DuckDB computing eos's request_counts from
#      the requests rows (sql/views/request_counts.sql), and the per-token
#      columns from the token rows (bench/duckdb/requests_from_tokens.sql).
#      Each job's SQL is `tokscope job NAME --show-sql` (sql/<name>.sql with its
#      shared metrics from sql/metrics.sql expanded), saved to $WORK/<name>.sql.
# DuckDB runs report.sql unchanged: `price_usd` is a DuckDB macro with the same
# flat rates as the pricing file below, and DuckDB's quantile_cont is the same
# exact estimator as tokscope's.
#  (c) the fixed cost of a query against the 5 ms limit: opening the dataset
#      (session, file list, tables) plus `SELECT count(*) FROM requests`, and
#      plus `EXPLAIN` of the eos, latency and report jobs (planning, file listing
#      and statistics), and the planning of every job in a warm session.
# Usage: bench/jobs.sh [REQUESTS=500000] [THREADS=all]   (TOKSCOPE_BIN=path skips the build)
# DAYS=N spreads the requests over N days (one date partition each; default: one
# a second from 2024-06-01); COMPACT=1 runs `tokscope compact` after the ingest.
# ATTRIBUTION=1 generates the log with a team, user, tags and provider per
# request (`generate --attribution`), and (b) also compares `job cost --param
# by=team` (saved as cost_by_team).
# TOKEN_DATA=1 generates the log with per-token data (~11 KB a request instead of
# ~1 KB), so that (b) also compares the jobs over the `tokens` table.
# SECTIONS="a b c" (default) picks sections.
# JOBS="cost cost_by_team" picks the jobs of (b).
# Builds release into BENCH_TARGET_DIR when set, else into CARGO_TARGET_DIR (or ./target).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-500000}
REPEAT=${REPEAT:-5}
THREADS=${2:-$(nproc)}
SECTIONS=${SECTIONS:-a b c}
WORK=${BENCH_DIR:-${BENCH_TARGET_DIR:-${CARGO_TARGET_DIR:-target}}/bench/jobs}
mkdir -p "$WORK"
. bench/lib.sh
BIN=$(tokscope_bin)
# tokscope's thread count (its partitions) and its runtime's workers.
export TOKSCOPE_THREADS=$THREADS TOKIO_WORKER_THREADS=$THREADS

DAYS=${DAYS:-}
TOKEN_DATA=${TOKEN_DATA:-}
ATTRIBUTION=${ATTRIBUTION:-}
export ATTRIBUTION
NAME="$N${DAYS:+-${DAYS}d}${TOKEN_DATA:+-tokens}${ATTRIBUTION:+-attributed}"
LOG="$WORK/canonical-$NAME.jsonl"
[ -f "$LOG" ] || "$BIN" generate --requests "$N" ${DAYS:+--days "$DAYS"} ${TOKEN_DATA:+--token-data} \
  ${ATTRIBUTION:+--attribution} --out "$LOG"
DS="$WORK/ds-$NAME"
# A dataset from before request_counts existed is ingested again.
[ -d "$DS/request_counts" ] || { rm -rf "$DS"; "$BIN" ingest --quiet --out "$DS" "$LOG"; }
[ "${COMPACT:-0}" = 1 ] && "$BIN" compact --data "$DS"
# Every job that reads `requests` or the per-token tables; (c) times each one's planning.
PLAN_JOBS="eos latency cost kv_cache report daily throughput load_summary ab jitter jitter_requests confidence eos_logprob"
# DuckDB's copy of each: the same text, but DuckDB names the ordered aggregates
# first_value(x ORDER BY y) and last_value(...) first(...) and last(...); a job
# that calls a tokscope aggregate DuckDB lacks has DuckDB's own spelling in
# bench/duckdb/<name>.sql (its default parameters filled in).
for f in $PLAN_JOBS; do
  "$BIN" job "$f" --show-sql > "$WORK/$f.sql"
  if [ -f "bench/duckdb/$f.sql" ]; then
    cp "bench/duckdb/$f.sql" "$WORK/$f.duck.sql"
  else
    sed 's/\bfirst_value(/first(/g; s/\blast_value(/last(/g' "$WORK/$f.sql" > "$WORK/$f.duck.sql"
  fi
done
if [ -n "$ATTRIBUTION" ]; then
  "$BIN" job cost --param by=team --show-sql > "$WORK/cost_by_team.sql"
  cp "$WORK/cost_by_team.sql" "$WORK/cost_by_team.duck.sql"
fi
FILES=$(find "$DS/requests" -name '*.parquet' ! -name '.*' | wc -l)
echo "input: $LOG ($(du -h "$LOG" | cut -f1), $N requests), dataset $DS ($FILES requests files), threads=$THREADS"

PRICING=bench/generated_pricing.toml   # the generated models' prices

# tokscope's default EOS markers (docs/metrics.md), once for both DuckDB uses
# below: a quoted list for is_eos_marker, ends_with tests for the raw view.
EOS_MARKERS=('<|endoftext|>' '<|im_end|>' '</s>' '<|eot_id|>' '<|end|>' '[EOS]' '<|end▁of▁sentence|>' '<｜end▁of▁sentence｜>')
MARKER_LIST=$(printf "'%s', " "${EOS_MARKERS[@]}")
MARKER_LIST=${MARKER_LIST%, }
ENDS_WITH_MARKER=$(printf "ends_with(o, '%s') OR " "${EOS_MARKERS[@]}")
ENDS_WITH_MARKER=${ENDS_WITH_MARKER% OR }

# The same rates as a DuckDB macro; mistral-7b-instruct stays unpriced in both.
DUCK_MACROS="
CREATE MACRO r_in(m) AS CASE m WHEN 'llama-3.1-8b-instruct' THEN 0.1 WHEN 'qwen2.5-72b-instruct' THEN 1.0 WHEN 'deepseek-v3' THEN 0.27 END;
CREATE MACRO r_out(m) AS CASE m WHEN 'llama-3.1-8b-instruct' THEN 0.2 WHEN 'qwen2.5-72b-instruct' THEN 3.0 WHEN 'deepseek-v3' THEN 1.1 END;
CREATE MACRO r_cached(m) AS CASE m WHEN 'llama-3.1-8b-instruct' THEN 0.05 WHEN 'qwen2.5-72b-instruct' THEN 0.5 WHEN 'deepseek-v3' THEN 0.07 END;
CREATE MACRO price_usd(m, ts, p, c, cw, o) AS CASE WHEN r_in(m) IS NULL THEN NULL ELSE struct_pack(
  input_usd := greatest(p - c - cw, 0) * r_in(m) / 1e6, cached_input_usd := c * r_cached(m) / 1e6,
  cache_write_usd := cw * r_in(m) / 1e6, output_usd := o * r_out(m) / 1e6,
  total_usd := (greatest(p - c - cw, 0) * r_in(m) + c * r_cached(m) + cw * r_in(m) + o * r_out(m)) / 1e6) END;
CREATE MACRO is_eos_marker(t, m) AS trim(t, ' ' || chr(9) || chr(10) || chr(13)) IN ($MARKER_LIST);
"

# The derived columns of docs/metrics.md, from the raw canonical JSON.
RAW_VIEW="
CREATE VIEW requests AS
WITH raw AS (
  SELECT *, rtrim(model_output, ' ' || chr(9) || chr(10) || chr(13)) AS o, coalesce(cached_tokens, 0) AS ct, 0 AS cwt
  FROM read_ndjson('$LOG')
)
SELECT model, ts, prompt_tokens, completion_tokens, ct AS cached_tokens, cwt AS cache_write_tokens,
  ttft_ms, latency_ms, CAST(NULL AS DOUBLE) AS logged_cost_usd,  -- the generated log logs no cost
  CASE WHEN prompt_tokens >= 131072 THEN '128K+' WHEN prompt_tokens >= 65536 THEN '64K-128K'
       WHEN prompt_tokens >= 32768 THEN '32K-64K' WHEN prompt_tokens >= 16384 THEN '16K-32K'
       WHEN prompt_tokens >= 8192 THEN '8K-16K' WHEN prompt_tokens >= 4096 THEN '4K-8K'
       WHEN prompt_tokens >= 2048 THEN '2K-4K' WHEN prompt_tokens >= 1024 THEN '1K-2K' ELSE '0-1K' END AS context_bin,
  CASE WHEN prompt_tokens >= 131072 THEN 131072 WHEN prompt_tokens < 1024 THEN 0
       ELSE CAST(pow(2, floor(log2(prompt_tokens))) AS BIGINT) END AS context_bin_lo,
  CASE
    WHEN model_output IS NOT NULL THEN
      CASE WHEN $ENDS_WITH_MARKER THEN 'eos'
           WHEN finish_reason IN ('length', 'max_tokens') OR completion_tokens >= max_tokens THEN 'length'
           ELSE 'implicit_truncation' END
    WHEN finish_reason IN ('stop', 'eos', 'end_turn', 'stop_sequence', 'tool_calls', 'tool_use') THEN 'eos'
    WHEN finish_reason IN ('length', 'max_tokens') OR completion_tokens >= max_tokens THEN 'length'
    ELSE 'unknown' END AS eos_status,
  CASE WHEN completion_tokens > 1 AND latency_ms >= ttft_ms THEN (latency_ms - ttft_ms) / (completion_tokens - 1) END AS tpot_ms,
  CASE WHEN completion_tokens > 1 AND latency_ms > ttft_ms THEN 1000.0 * (completion_tokens - 1) / (latency_ms - ttft_ms) END AS decode_tps,
  CASE WHEN latency_ms > 0 THEN completion_tokens * 1000.0 / latency_ms END AS e2e_tps
FROM raw;
"
# DuckDB's view $1 over the Parquet files of table $2 (hive partitions).
parquet_view() { echo "CREATE VIEW $1 AS SELECT * FROM read_parquet('$DS/$2/*/*.parquet', hive_partitioning=true);"; }
PARQUET_VIEW=$(parquet_view requests requests)
# eos reads request_counts: DuckDB computes it from the requests rows with the
# table's own definition (sql/views/request_counts.sql), which is the work a
# reader without the table does; (b) also times DuckDB over tokscope's files.
PARQUET_VIEW="$PARQUET_VIEW
CREATE VIEW request_counts AS $(grep -v '^--' sql/views/request_counts.sql);"
[ -n "$TOKEN_DATA" ] && PARQUET_VIEW="$PARQUET_VIEW
$(parquet_view tokens tokens)"
COUNTS_FILES_VIEW=$(parquet_view request_counts request_counts)
# The per-token columns of `requests` computed from the token rows, as a
# reader without them does (bench/jobs.py times jitter, jitter_requests and
# eos_logprob over it beside the stored columns).
TOKEN_VIEW="$(parquet_view requests_files requests)
$(parquet_view tokens tokens)
CREATE VIEW requests AS $(grep -v '^--' bench/duckdb/requests_from_tokens.sql);"
# Times one DuckDB run of SQL file $2 after setup $1; prints seconds (section c).
duck() {
  python3 - "$1" "$2" "$THREADS" <<'PY'
import duckdb, sys, time
setup, sql_file, threads = sys.argv[1], sys.argv[2], sys.argv[3]
con = duckdb.connect()
con.execute(f"SET threads TO {threads}")
con.execute("SET enable_progress_bar = false")
for stmt in [s for s in setup.split(";\n") if s.strip()]:
    con.execute(stmt)
sql = open(sql_file).read()
t = time.perf_counter()
rows = con.execute(sql).fetchall()
print(f"{time.perf_counter() - t:.3f}")
PY
}

# The DuckDB setups bench/jobs.py reads: the same files tokscope reads (every
# table as stored), request_counts rebuilt from the requests rows, the
# per-token columns rebuilt from the token rows, and the raw NDJSON.
printf '%s' "$DUCK_MACROS$(parquet_view requests requests)
$COUNTS_FILES_VIEW${TOKEN_DATA:+
$(parquet_view tokens tokens)}" > "$WORK/setup-files.sql"
printf '%s' "$DUCK_MACROS$PARQUET_VIEW" > "$WORK/setup-rows.sql"
printf '%s' "$DUCK_MACROS$TOKEN_VIEW" > "$WORK/setup-tokens.sql"
printf '%s' "$DUCK_MACROS$RAW_VIEW" > "$WORK/setup-raw.sql"

PY_SECTIONS=$(for s in a b; do if section $s; then printf '%s ' $s; fi; done)
if [ -n "$PY_SECTIONS" ]; then
  BIN=$BIN DS=$DS LOG=$LOG WORK=$WORK THREADS=$THREADS ROUNDS=$REPEAT PRICING=$PRICING \
    SECTIONS=$PY_SECTIONS TOKEN_DATA=$TOKEN_DATA JOBS=${JOBS:-} python3 bench/jobs.py
fi

if section c; then
  echo "== (c) fixed cost per query (limit 5 ms), best of $REPEAT: a fresh process (opening the dataset + the query) and the same query again in a warm session"
  fixed() { # "cold warm" seconds for SQL $1: opening + first run, and the best of 3 more runs in the same session
    "$BIN" query --data "$DS" --pricing "$PRICING" --format csv --timing --repeat 4 "$1" 2>&1 >/dev/null | python3 -c '
import re, sys
lines = sys.stdin.read().splitlines()
first = re.match(r"elapsed: ([0-9.]+) s.*before it: ([0-9.]+) s", lines[0])
warm = [float(re.match(r"elapsed: ([0-9.]+)", l).group(1)) for l in lines[1:]]
plan = [float(re.search(r"planning ([0-9.]+) s", l).group(1)) for l in lines[1:]]
print(f"{float(first.group(1)) + float(first.group(2)):.5f} {min(warm):.5f} {min(plan):.5f}")'
  }
  best_pair() { # per-column minimum of $REPEAT runs of fixed "$1": fresh, warm, warm planning
    for _ in $(seq "$REPEAT"); do fixed "$1"; done | sort -n -k1,1 \
      | awk 'NR==1{c=$1} {if(w==""||$2<w)w=$2; if(p==""||$3<p)p=$3} END{print c, w, p}'
  }
  verdict() { python3 -c "print('met' if $1 < 0.005 else 'not met')"; }
  duck_sql() { # DuckDB: seconds for SQL text $1 over the Parquet view (fresh connection)
    printf '%s' "$1" > "$WORK/fixed.sql"
    duck "$DUCK_MACROS$PARQUET_VIEW" "$WORK/fixed.sql"
  }
  read -r C W _ <<<"$(best_pair "SELECT count(*) FROM requests")"
  T_DC=$(best duck_sql "SELECT count(*) FROM requests")
  python3 -c "print(f'SELECT count(*): fresh process {1000*$C:.1f} ms ($(verdict "$C")), warm session {1000*$W:.1f} ms ($(verdict "$W"))  duckdb fresh connection {1000*$T_DC:.1f} ms')"
  for f in eos latency report; do
    read -r C W _ <<<"$(best_pair "EXPLAIN $(cat "$WORK/$f.sql")")"
    python3 -c "print(f'EXPLAIN job $f: fresh process {1000*$C:.1f} ms ($(verdict "$C")), warm session {1000*$W:.1f} ms ($(verdict "$W"))')"
  done
  # EXPLAIN also formats both plans as text (long for the report); the job's own
  # planning (parse, optimise, physical plan), as `query --timing` reports it:
  for f in $PLAN_JOBS; do
    read -r _ _ P <<<"$(best_pair "$(cat "$WORK/$f.sql")")"
    python3 -c "print(f'planning job $f (no EXPLAIN text): warm session {1000*$P:.1f} ms ($(verdict "$P"))')"
  done
fi
