"""bench/jobs.sh's timed sections, through bench/fair.py (pinned cores,
rotated order, paired per-round ratios, every output checked). See
bench/jobs.sh for the usage; it writes the SQL and DuckDB setups this reads.

Like for like: the same SQL text over the same Parquet files, and both
clocks include opening the dataset (tokscope: its session, functions,
`_files.json` and the footers it reads; DuckDB: its views, file globbing and
the footers it binds them with, on a connection made before its clock
starts). A tokscope job over what ingest stored
(`request_counts`, the per-token columns of `requests`) is compared with
DuckDB over those same stored files; DuckDB rebuilding them from the rows,
the work a reader without them does, is printed beside as "with
`request_counts`" / "with stored per-token columns": a feature of the
format, not a faster engine.

Section (a) is end to end as well: tokscope's ingest and `job report`
against DuckDB computing the same table from the raw NDJSON.
"""

import csv
import io
import json
import math
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import fair  # noqa: E402

BIN = os.environ["BIN"]
DS = os.environ["DS"]
LOG = os.environ["LOG"]
WORK = os.environ["WORK"]
THREADS = int(os.environ["THREADS"])
ROUNDS = int(os.environ.get("ROUNDS", "5"))
PRICING = os.environ["PRICING"]
SECTIONS = os.environ.get("SECTIONS", "a b").split()
TOKEN_DATA = bool(os.environ.get("TOKEN_DATA"))
ATTRIBUTION = bool(os.environ.get("ATTRIBUTION"))
# Timed entries that run a job with parameters: the job and its --param values.
JOB_PARAMS = {"cost_by_team": ("cost", ["by=team"])}

# The DuckDB process. Its clock covers what tokscope's open and query
# cover: the views (file globbing, the footers DuckDB reads to bind them)
# and the query. The connection (an in-memory database, 14-22 ms here), the
# thread setting and the macros standing in for tokscope's SQL functions are
# made before it starts, which favours DuckDB: tokscope's clock includes
# making its session and registering its functions.
DUCK = """
import duckdb, json, sys, time
setup, sql_file, threads = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
sql = open(sql_file).read()
stmts = [s for s in setup.split(";\\n") if s.strip()]
t0 = time.perf_counter()
con = duckdb.connect()
con.execute(f"SET threads TO {threads}")
con.execute("SET enable_progress_bar = false")
for stmt in stmts:
    if stmt.lstrip().upper().startswith("CREATE MACRO"):
        con.execute(stmt)
t = time.perf_counter()
for stmt in stmts:
    if not stmt.lstrip().upper().startswith("CREATE MACRO"):
        con.execute(stmt)
cur = con.execute(sql)
rows = cur.fetchall()
seconds = time.perf_counter() - t
cols = [d[0] for d in cur.description]
print(json.dumps({"seconds": seconds, "connect_s": t - t0, "columns": cols,
                  "rows": [[str(v) if v is not None else None for v in r] for r in rows]}))
"""


def duck_result(setup: str, sql: str) -> tuple:
    """DuckDB's table for SQL file `sql` after setup file `setup`: (columns, rows of Python values)."""
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads TO {THREADS}")
    con.execute("SET enable_progress_bar = false")
    for stmt in [s for s in open(setup).read().split(";\n") if s.strip()]:
        con.execute(stmt)
    cur = con.execute(open(sql).read())
    return [d[0] for d in cur.description], cur.fetchall()


def same(t, d) -> bool:
    """One cell of tokscope's output (text) against DuckDB's (a value)."""
    if t in (None, "") or d is None:
        return t in (None, "") and d is None
    if isinstance(d, bool):
        return t.lower() == str(d).lower()
    if isinstance(d, (int, float)):
        try:
            return math.isclose(float(t), float(d), rel_tol=1e-9, abs_tol=1e-12)
        except ValueError:
            return False
    return t == str(d)


def differences(name: str, cols: list, rows: list, ref: tuple) -> list:
    """Problems of a table (columns, rows of text cells) against DuckDB's
    reference table, row by row and cell by cell."""
    want_cols, want_rows = ref
    if cols != want_cols or len(rows) != len(want_rows):
        return [f"{name}: {len(rows)} rows, columns {cols}, against DuckDB's {len(want_rows)}, {want_cols}"]
    bad = [(i, c) for i, (t, d) in enumerate(zip(rows, want_rows)) for c, tv, dv in zip(cols, t, d) if not same(tv, dv)]
    return [f"{name}: {len(bad)} cells differ from DuckDB's, first {bad[:3]}"] if bad else []


def compare(name: str, tok_text: str, ref: tuple) -> list:
    """tokscope's CSV output against the reference."""
    header, *rows = list(csv.reader(io.StringIO(tok_text)))
    return differences(name, header, rows, ref)


def duck_check(name: str, ref: tuple):
    """A check of a timed DuckDB run's output (its JSON) against the reference."""

    def check(stdout: str) -> list:
        out = json.loads(stdout)
        return differences(name, out["columns"], out["rows"], ref)

    return check


def tok_clock(_stdout: str, stderr: str):
    """`query --timing`: the query's time plus the dataset's opening before it."""
    for line in stderr.splitlines():
        if line.startswith("elapsed: "):
            q = float(line.split()[1])
            o = float(line.rsplit("before it: ", 1)[1].split()[0])
            return q + o
    return None


def json_clock(stdout: str, _stderr: str):
    return float(json.loads(stdout)["seconds"])


def tok_engine(job: str, ref: tuple) -> fair.Engine:
    sql = open(f"{WORK}/{job}.sql").read()
    return fair.Engine(
        "tokscope",
        [BIN, "--threads", str(THREADS), "query", "--data", DS, "--pricing", PRICING, "--format", "csv", "--timing", sql],
        env={"TOKSCOPE_THREADS": str(THREADS), "TOKIO_WORKER_THREADS": str(THREADS)},
        inproc=tok_clock,
        check=lambda out: compare(f"job {job}", out, ref),
    )


def duck_engine(name: str, setup: str, sql: str, ref: tuple, role: str = "engine") -> fair.Engine:
    return fair.Engine(
        name,
        [sys.executable, "-c", DUCK, setup, sql, str(THREADS)],
        inproc=json_clock,
        check=duck_check(name, ref),
        role=role,
    )


PY_START = fair.Engine("python start + import duckdb", [sys.executable, "-c", "import duckdb"], role="interpreter start")


# The jobs whose table ingest stored a part of, and DuckDB rebuilding that
# part from the rows (its setup file, the engine's name and its role).
FROM_ROWS = {
    "eos": ("setup-rows.sql", "duckdb from requests rows", "with request_counts"),
    "jitter": ("setup-tokens.sql", "duckdb from token rows", "with stored per-token columns"),
    "jitter_requests": ("setup-tokens.sql", "duckdb from token rows", "with stored per-token columns"),
    "eos_logprob": ("setup-tokens.sql", "duckdb from token rows", "with stored per-token columns"),
}


def section_b(cores: list, jobs: list) -> dict:
    print(f"== (b) the same SQL over the same files, opening counted: tokscope against DuckDB, {THREADS} threads, {ROUNDS} rounds")
    out = {}
    same_files = f"{WORK}/setup-files.sql"
    for job in jobs:
        ref = duck_result(same_files, f"{WORK}/{job}.duck.sql")
        # The reference is checked against tokscope once, untimed, before any timing.
        name, params = JOB_PARAMS.get(job, (job, []))
        first = subprocess.run(
            [BIN, "--threads", str(THREADS), "job", name, "--data", DS, "--pricing", PRICING, "--format", "csv"]
            + [arg for p in params for arg in ("--param", p)],
            capture_output=True, text=True, check=True,
        ).stdout
        problems = compare(f"job {job}", first, ref)
        if problems:
            sys.exit("MISMATCH " + "; ".join(problems))
        engines = [tok_engine(job, ref), duck_engine("duckdb, same files", same_files, f"{WORK}/{job}.duck.sql", ref), PY_START]
        if job in FROM_ROWS:
            setup, name, role = FROM_ROWS[job]
            engines.append(duck_engine(name, f"{WORK}/{setup}", f"{WORK}/{job}.duck.sql", ref, role))
        print(f"\n-- job {job} ({len(ref[1])} rows)")
        runs = fair.rounds(engines, ROUNDS, cores)
        print()
        out[job] = fair.summary(runs, engines, "tokscope")
        r = out[job]["duckdb, same files"]
        print(f"job {job}: DuckDB's time over tokscope's, same files: whole process {fair.spread(r['ratio_whole'])}, "
              f"own clocks {fair.spread(r['ratio_own'])} (target >= 1.0)")
    return out


def section_a(cores: list) -> dict:
    print(f"\n== (a) job report: DuckDB from the raw NDJSON against tokscope, end to end (ingest + query) and the query alone")
    ref = duck_result(f"{WORK}/setup-raw.sql", f"{WORK}/report.sql")
    ds2 = f"{WORK}/ds-end-to-end"
    report_sql = open(f"{WORK}/report.sql").read()

    def clean():
        shutil.rmtree(ds2, ignore_errors=True)

    def e2e_clock(_stdout, stderr):
        with open(f"{ds2}/_ingest_summary.json") as f:
            ingest = float(json.load(f)["elapsed_s"])
        q = tok_clock("", stderr)
        return None if q is None else ingest + q

    t = str(THREADS)
    engines = [
        tok_engine("report", ref),
        fair.Engine(
            "tokscope ingest + report",
            ["sh", "-c", f'"$0" --threads {t} ingest --quiet --out "$1" "$2" && "$0" --threads {t} query --data "$1" '
             f'--pricing "$3" --format csv --timing "$4"', BIN, ds2, LOG, PRICING, report_sql],
            env={"TOKSCOPE_THREADS": t, "TOKIO_WORKER_THREADS": t},
            before=clean,
            inproc=e2e_clock,
            check=lambda out: compare("ingest + report", out, ref),
            role="end to end",
        ),
        duck_engine("duckdb from raw NDJSON", f"{WORK}/setup-raw.sql", f"{WORK}/report.sql", ref),
        PY_START,
    ]
    runs = fair.rounds(engines, ROUNDS, cores)
    print()
    res = fair.summary(runs, engines, "tokscope")
    e2e = [d / e for d, e in zip(res["duckdb from raw NDJSON"]["whole_s"], res["tokscope ingest + report"]["whole_s"])]
    print(f"job report from the raw log, DuckDB's time over tokscope's: query over the dataset {fair.spread(res['duckdb from raw NDJSON']['ratio_whole'])}, "
          f"ingest + query {fair.spread(e2e)} (whole processes)")
    clean()
    return res


def main() -> None:
    cores = fair.first_cores(THREADS)
    results = {}
    if "a" in SECTIONS:
        results["a"] = section_a(cores)
    if "b" in SECTIONS:
        jobs = ["eos", "latency", "report", "cost", "daily"]
        if TOKEN_DATA:
            jobs += ["jitter", "jitter_requests", "confidence", "eos_logprob"]
        if ATTRIBUTION:
            jobs += ["cost_by_team"]
        # JOBS="cost cost_by_team" times those alone.
        jobs = os.environ.get("JOBS", "").split() or jobs
        results["b"] = section_b(cores, jobs)
    fair.write_json(f"{WORK}/jobs.json", results)
    print(f"\nevery run: {WORK}/jobs.json")


if __name__ == "__main__":
    main()
