"""bench/objects.sh's body: a bucket of OBJECTS small objects, one LiteLLM
payload each, read through a latency relay by tokscope ingest and by a boto3
client fetching 32 objects at a time, through bench/fair.py (pinned cores,
rotated order, paired per-round ratios, every output checked).

The payload is the first call of tests/data/real/litellm_gcs.ndjson (LiteLLM's
own `StandardLoggingPayload`) without its `model_map_information` (4.4 KB),
each object with its own `id` and a start one second after the one before,
written as LiteLLM's S3 logger writes a payload (`json.dumps`, one object per
request). The objects are uploaded straight to the server; both clients read
them through the relay.

boto3's peer lists the prefix (pages of 1,000) and GETs every object with 32
threads, parsing each body as JSON, as a script fetching a bucket would; it
prints its own clock (after its imports) and a digest of what it read.
"""

import hashlib
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(__file__))
import fair  # noqa: E402

BIN = os.environ["BIN"]
WORK = os.environ["WORK"]
OBJECTS = int(os.environ.get("OBJECTS", "1500"))
ROUNDS = int(os.environ.get("ROUNDS", "5"))
THREADS = int(os.environ.get("THREADS", "2"))
S3 = f"http://127.0.0.1:{os.environ['S3_PORT']}"
RELAY = f"http://127.0.0.1:{os.environ['PROXY_PORT']}"
IO_CONCURRENCY = os.environ.get("IO_CONCURRENCY", "")
BUCKET = "objects"
PREFIX = "litellm/2026/12/04/"
PAYLOADS = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "real", "litellm_gcs.ndjson")

PEER = r"""
import hashlib, json, sys, time
from concurrent.futures import ThreadPoolExecutor
import boto3, botocore.config
start = time.perf_counter()
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1",
                  config=botocore.config.Config(max_pool_connections=32))
keys = []
for page in s3.get_paginator("list_objects_v2").paginate(Bucket=sys.argv[2], Prefix=sys.argv[3]):
    keys += [o["Key"] for o in page.get("Contents", [])]
def fetch(key):
    p = json.loads(s3.get_object(Bucket=sys.argv[2], Key=key)["Body"].read())
    return f"{key} {p['id']} {p['prompt_tokens']} {p['completion_tokens']}\n"
with ThreadPoolExecutor(32) as pool:
    lines = list(pool.map(fetch, sorted(keys)))
elapsed = time.perf_counter() - start
print(len(lines), hashlib.sha256("".join(lines).encode()).hexdigest())
print(f"own {elapsed:.4f}")
"""


def payloads() -> list:
    """(key, id, prompt tokens, completion tokens, body) of every object."""
    with open(PAYLOADS) as f:
        payload = json.loads(f.readline())
    payload.pop("model_map_information", None)
    out = []
    for i in range(OBJECTS):
        p = dict(payload, id=f"chatcmpl-{i:07d}")
        for key in ("startTime", "endTime", "completionStartTime"):
            p[key] = payload[key] + i
        out.append((f"{PREFIX}{i:07d}.json", p["id"], p["prompt_tokens"], p["completion_tokens"], json.dumps(p)))
    return out


def upload(objects: list) -> None:
    import boto3
    from concurrent.futures import ThreadPoolExecutor

    s3 = boto3.client("s3", endpoint_url=S3, region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda o: s3.put_object(Bucket=BUCKET, Key=o[0], Body=o[4].encode()), objects))


def main() -> None:
    objects = payloads()
    upload(objects)
    size = sum(len(o[4]) for o in objects) / len(objects)
    digest_lines = "".join(f"{key} {id_} {p} {c}\n" for key, id_, p, c, _ in objects)
    want_digest = f"{len(objects)} {hashlib.sha256(digest_lines.encode()).hexdigest()}"
    want_rows = [(f"s3://{BUCKET}/{key}", id_, p, c) for key, id_, p, c, _ in objects]
    out = os.path.join(WORK, "ds")

    def check_dataset(_stdout: str) -> list:
        import pyarrow.parquet as pq

        files = sorted(
            os.path.join(d, f) for d, _, fs in os.walk(os.path.join(out, "requests")) for f in fs if f.endswith(".parquet")
        )
        cols = ["source_file", "request_id", "prompt_tokens", "completion_tokens"]
        rows = []
        for f in files:
            t = pq.read_table(f, columns=cols).to_pydict()
            rows += list(zip(*(t[c] for c in cols)))
        if rows != want_rows:
            wrong = next((i for i, (a, b) in enumerate(zip(rows, want_rows)) if a != b), min(len(rows), len(want_rows)))
            return [f"{len(rows)} rows, {len(want_rows)} objects; first difference at {wrong}"]
        return []

    def check_peer(stdout: str) -> list:
        got = stdout.splitlines()[0] if stdout else ""
        return [] if got == want_digest else [f"digest {got!r}, want {want_digest!r}"]

    def own(stdout: str, _stderr: str):
        line = next((l for l in stdout.splitlines() if l.startswith("own ")), None)
        return float(line.split()[1]) if line else None

    ingest = [BIN, "--threads", str(THREADS), "ingest", "--quiet", "--out", out, f"s3://{BUCKET}/{PREFIX}"]
    if IO_CONCURRENCY:
        ingest[5:5] = ["--io-concurrency", IO_CONCURRENCY]
    relay_env = {
        "AWS_ENDPOINT_URL": RELAY,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    engines = [
        fair.Engine(
            "tokscope",
            ingest,
            env=relay_env,
            before=lambda: shutil.rmtree(out, ignore_errors=True),
            check=check_dataset,
        ),
        fair.Engine(
            "boto3 (32 at a time)",
            [sys.executable, "-c", PEER, RELAY, BUCKET, PREFIX],
            env=relay_env,
            inproc=own,
            check=check_peer,
        ),
    ]
    delay = os.environ.get("DELAY_MS", "?")
    print(
        f"{OBJECTS} objects of {size:.0f} bytes, {delay} ms each way, {THREADS} threads (cores {fair.first_cores(THREADS)}), "
        f"{ROUNDS} rounds"
    )
    runs = fair.rounds(engines, ROUNDS, fair.first_cores(THREADS))
    result = fair.summary(runs, engines, "tokscope")
    for e in engines:
        walls = result[e.name]["whole_s"]
        rates = sorted(OBJECTS / w for w in walls)
        print(f"  {e.name}: objects/s {fair.spread(rates, 0)} (whole process)")
    ratio = result["boto3 (32 at a time)"]["ratio_whole"]
    print(f"tokscope's objects/s over boto3's (boto3 time over tokscope's, paired): {fair.spread(ratio)}")
    fair.write_json(os.path.join(WORK, f"objects-{OBJECTS}.json"), result)


if __name__ == "__main__":
    main()
