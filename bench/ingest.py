"""bench/ingest.sh's body: ingest of one log by tokscope and its peers at
matched settings, through bench/fair.py (pinned cores, rotated order, paired
per-round ratios, every output checked). See bench/ingest.sh for the usage.

The peers write what an analyst would ask of them with tokscope's settings:
zstd at level 1 (tokscope's default codec), row groups of 131,072 rows
(tokscope's), no bloom filters (tokscope writes none), insertion order not
kept where the engine may reorder for speed (DuckDB's
`preserve_insertion_order`, polars' `maintain_order`), a file per writing
thread where the engine offers it (DuckDB's `PER_THREAD_OUTPUT`; tokscope
writes a file per writer thread and day), the same thread count on the same
cores.
tokscope does more than they do (its derived columns, `request_counts`, the
commit), which the ratio includes.

The floors are the two parts of any ingest measured alone
(examples/ingest_floors.rs): the log read and parsed into a null sink, and
tokscope's `requests` columns written alone from memory. The zstd reference
(`zstd -1` over the plain column bytes as one stream) is kept as a reference
only: it is not a lower bound of a Parquet writer's work.
"""

import json
import os
import random
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import fair  # noqa: E402

import pyarrow.compute as pc  # noqa: E402
import pyarrow.dataset as pads  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

# Set by bench/ingest.sh (the --rich mode needs none of them).
BIN = os.environ.get("BIN", "")
FLOORS = os.environ.get("FLOORS_BIN", "")
WORK = os.environ.get("WORK", "")
THREADS = int(os.environ.get("THREADS", "2"))
ROUNDS = int(os.environ.get("ROUNDS", "5"))
ROW_GROUP = 131072  # tokscope's row group (ingest::budget::ROW_GROUP_ROWS)
HAVE_POLARS = subprocess.run([sys.executable, "-c", "import polars"], capture_output=True).returncode == 0


def rich_copy(src: str, dst: str) -> None:
    """The generated log with what real logs carry: chat messages nested in
    the prompt, JSON escapes (quotes, backslashes, newlines, tabs, \\uXXXX
    with surrogate pairs) and Unicode (accents, CJK, emoji) in the texts; half
    the lines written with \\u escapes, half as raw UTF-8."""
    rng = random.Random(7)
    extras = ["é", "—", "日本語", "🙂", "ü", "\n", "\t", '"', "\\", "Ω", "𝔘"]
    with open(src, encoding="utf-8") as f, open(dst + ".tmp", "w", encoding="utf-8") as out:
        for i, line in enumerate(f):
            rec = json.loads(line)
            words = rec["model_output"].split(" ")
            for _ in range(4):
                words.insert(rng.randrange(max(len(words) - 1, 1)), rng.choice(extras))
            rec["model_output"] = " ".join(words)
            rec["prompt"] = [
                {"role": "system", "content": 'You are "helpful".\n\tAnswer in français or 日本語 \\ as asked 🙂'},
                {"role": "user", "content": rec["prompt"] + " " + rng.choice(extras) + " ¿qué?"},
            ]
            out.write(json.dumps(rec, ensure_ascii=(i % 2 == 0)) + "\n")
    os.replace(dst + ".tmp", dst)


def samples(log: str) -> tuple:
    """(line count, {request_id: record}) for lines spread over the log."""
    with open(log, "rb") as f:
        n = sum(1 for _ in f)
    want = sorted({0, n // 7, n // 3, n // 2, (2 * n) // 3, (6 * n) // 7, n - 1})
    out = {}
    with open(log, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i in want:
                rec = json.loads(line)
                out[rec["request_id"]] = rec
    return n, out


def same_prompt(stored, expected) -> bool:
    if isinstance(expected, str):
        return stored == expected
    if isinstance(stored, str):  # tokscope keeps chat messages as their JSON text
        stored = json.loads(stored)
    return [{k: m.get(k) for k in ("role", "content")} for m in stored] == expected


def checker(lines: int, expect: dict, read):
    """A check: `read(ids)` gives (row count, pyarrow table of the sample rows)."""

    def check(_stdout: str) -> list:
        rows, table = read(list(expect))
        problems = [] if rows == lines else [f"{rows} rows written, {lines} lines in the log"]
        got = {r["request_id"]: r for r in table.to_pylist()}
        for rid, rec in expect.items():
            row = got.get(rid)
            if row is None:
                problems.append(f"request {rid} missing")
                continue
            for col in ("prompt_tokens", "completion_tokens", "model_output"):
                if row[col] != rec[col]:
                    problems.append(f"request {rid}: {col} is {str(row[col])[:60]!r}, the log says {str(rec[col])[:60]!r}")
            if not same_prompt(row["prompt"], rec["prompt"]):
                problems.append(f"request {rid}: prompt differs: {str(row['prompt'])[:80]!r}")
        return problems

    return check


COLUMNS = ["request_id", "prompt_tokens", "completion_tokens", "model_output", "prompt"]


def read_dataset(path: str):
    def read(ids):
        d = pads.dataset(os.path.join(path, "requests"), format="parquet", partitioning="hive")
        rejects = os.path.join(path, "rejects")
        if os.path.isdir(rejects) and pads.dataset(rejects, format="parquet", partitioning="hive").count_rows():
            raise SystemExit(f"tokscope rejected lines of a log every line of which is valid ({rejects})")
        return d.count_rows(), d.to_table(columns=COLUMNS, filter=pc.field("request_id").isin(ids))

    return read


def read_file(path: str):
    """A peer's output: one Parquet file, or a folder of them."""

    def read(ids):
        d = pads.dataset(path, format="parquet")
        return d.count_rows(), d.to_table(columns=COLUMNS, filter=pc.field("request_id").isin(ids))

    return read


def own_clock_json(stdout: str, _stderr: str):
    return float(json.loads(stdout.strip().splitlines()[-1])["seconds"])


def tokscope_clock(out: str):
    def clock(_stdout, _stderr):
        with open(os.path.join(out, "_ingest_summary.json")) as f:
            return float(json.load(f)["elapsed_s"])

    return clock


def remover(*paths):
    def remove():
        for p in paths:
            if os.path.isdir(p):
                shutil.rmtree(p)
            elif os.path.exists(p):
                os.remove(p)

    return remove


DUCKDB = """
import duckdb, json, sys, time
log, out, threads, row_group = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
con = duckdb.connect()
con.execute(f"SET threads TO {threads}")
con.execute("SET enable_progress_bar = false")
con.execute("SET preserve_insertion_order = false")
t = time.perf_counter()
con.execute(f"COPY (SELECT * FROM read_ndjson('{log}')) TO '{out}' "
            f"(FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1, ROW_GROUP_SIZE {row_group}, WRITE_BLOOM_FILTER false, "
            f"PER_THREAD_OUTPUT true)")
print(json.dumps({"seconds": time.perf_counter() - t}))
"""

POLARS = """
import json, sys, time
import polars as pl
log, out, row_group = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = time.perf_counter()
pl.scan_ndjson(log).sink_parquet(out, compression="zstd", compression_level=1, row_group_size=row_group, maintain_order=False)
print(json.dumps({"seconds": time.perf_counter() - t}))
"""


def engines_for(log: str, tag: str) -> list:
    lines, expect = samples(log)
    work = os.path.join(WORK, tag)
    os.makedirs(work, exist_ok=True)
    t = str(THREADS)
    tok_out, duck_out, pol_out = f"{work}/ds", f"{work}/duck", f"{work}/polars.parquet"
    # The floors' inputs, untimed: tokscope's requests table of this log, and
    # the same columns rewritten plain (no codec, no dictionary) for zstd.
    # Made afresh by the binary measured, whose columns they must be.
    ref = f"{work}/ref"
    remover(ref)()
    subprocess.run([BIN, "--threads", t, "ingest", "--quiet", "--out", ref, log], check=True)
    plain = f"{work}/plain.parquet"
    table = pads.dataset(f"{ref}/requests", format="parquet", partitioning="hive").to_table()
    pq.write_table(table, plain, compression="none", use_dictionary=False)
    env = {"TOKSCOPE_THREADS": t, "RAYON_NUM_THREADS": t}
    engines = [
        fair.Engine(
            "tokscope ingest",
            [BIN, "--threads", t, "ingest", "--quiet", "--out", tok_out, log],
            env=env,
            before=remover(tok_out),
            inproc=tokscope_clock(tok_out),
            check=checker(lines, expect, read_dataset(tok_out)),
        ),
    ]
    # A Python peer: its script writes `out` and prints its own clock; the
    # interpreter's start with the peer's module is an engine of its own.
    peers = [("duckdb COPY", "duckdb", DUCKDB, duck_out, [t], {})]
    if HAVE_POLARS:
        peers.append(("polars sink_parquet", "polars", POLARS, pol_out, [], {"POLARS_MAX_THREADS": t}))
    for name, module, script, out, args, peer_env in peers:
        engines += [
            fair.Engine(
                name,
                [sys.executable, "-c", script, log, out, *args, str(ROW_GROUP)],
                env=peer_env,
                before=remover(out),
                inproc=own_clock_json,
                check=checker(lines, expect, read_file(out)),
            ),
            fair.Engine(f"python start + import {module}", [sys.executable, "-c", f"import {module}"], role="interpreter start"),
        ]
    engines += [
        fair.Engine(
            "floor: read + parse (serde_json)",
            [FLOORS, "parse", log, t],
            inproc=own_clock_json,
            check=lambda out: [] if json.loads(out)["lines"] == lines else [f"parsed {json.loads(out)['lines']} lines of {lines}"],
            role="floor",
        ),
        fair.Engine(
            "floor: write requests columns",
            [FLOORS, "write", f"{ref}/requests", f"{work}/floor-write", t],
            before=remover(f"{work}/floor-write"),
            inproc=own_clock_json,
            check=lambda out: [] if json.loads(out)["rows"] == lines else [f"wrote {json.loads(out)['rows']} rows of {lines}"],
            role="floor",
        ),
        fair.Engine(
            "reference: zstd -1 over plain columns",
            ["sh", "-c", f"zstd -q -1 -T{t} -c {plain} > /dev/null"],
            role="reference",
        ),
    ]
    return engines


def main() -> None:
    if sys.argv[1:2] == ["--rich"]:
        rich_copy(sys.argv[2], sys.argv[3])
        return
    logs = sys.argv[1:]
    cores = fair.first_cores(THREADS)
    results = {}
    for log in logs:
        tag = os.path.basename(log).removesuffix(".jsonl")
        mb = os.path.getsize(log) / 1e6
        print(f"\n== {log} ({mb:.0f} MB), {THREADS} threads on cores {cores}, {ROUNDS} rounds, order rotated each round")
        engines = engines_for(log, tag)
        runs = fair.rounds(engines, ROUNDS, cores)
        print()
        results[tag] = fair.summary(runs, engines, "tokscope ingest")
        tok = results[tag]["tokscope ingest"]
        duck = results[tag]["duckdb COPY"]
        print(
            f"tokscope's speed over DuckDB's at matched settings: whole process {fair.spread(duck['ratio_whole'])}, "
            f"own clocks {fair.spread(duck['ratio_own'])} (target >= 1.0, stretch 1.3); "
            f"tokscope {mb / min(tok['whole_s']):.0f} MB/s at best"
        )
        for floor in ("floor: read + parse (serde_json)", "floor: write requests columns"):
            own = fair.paired(runs, "tokscope ingest", floor, "inproc_s")
            print(f"tokscope's own clock over the {floor[7:]} floor's: {fair.spread(own)}")
        both = [
            t.inproc_s / (p.inproc_s + w.inproc_s)
            for t, p, w in zip(
                fair.per_engine(runs, "tokscope ingest"),
                fair.per_engine(runs, "floor: read + parse (serde_json)"),
                fair.per_engine(runs, "floor: write requests columns"),
            )
        ]
        print(f"tokscope's own clock over the two floors' sum: {fair.spread(both)}")
    fair.write_json(os.path.join(WORK, "ingest.json"), results)
    print(f"\nevery run: {os.path.join(WORK, 'ingest.json')}")


if __name__ == "__main__":
    main()
