"""Copies recorded provider responses out of OpenLLMetry's test cassettes.

Usage: python3 from_openllmetry.py CHECKOUT COMMIT

CHECKOUT is a clone of https://github.com/traceloop/openllmetry (Apache-2.0);
each response body of the cassettes named below, as the provider returned it
to the instrumentation's tests (a gzip body unpacked), is parsed and written
compact, keys in their order, one per line: nothing else is changed.
A streamed body (Ollama's newline-delimited chunks, Groq's server-sent
events) is written as received.
"""
import gzip
import json
import subprocess
import sys

import yaml

CHECKOUT, COMMIT = sys.argv[1], sys.argv[2]
P = "packages/opentelemetry-instrumentation-"

FILES = {
    "bedrock_converse.jsonl": [
        P + "bedrock/tests/traces/cassettes/test_meta/test_meta_converse.yaml",
        P + "bedrock/tests/traces/cassettes/test_anthropic/test_anthropic_cross_region.yaml",
        P + "bedrock/tests/traces/cassettes/test_titan/test_titan_converse.yaml",
        P + "bedrock/tests/traces/cassettes/test_guardrails/test_guardrail_converse.yaml",
    ],
    "gemini_generate_content.jsonl": [
        P + "google-generativeai/tests/cassettes/test_generate_content/test_client_spans.yaml",
        P + "google-generativeai/tests/cassettes/test_generate_content/test_generate_metrics.yaml",
    ],
    "ollama_responses.jsonl": [
        P + "ollama/tests/cassettes/test_chat/test_ollama_chat_legacy.yaml",
        P + "ollama/tests/cassettes/test_generation/test_ollama_generation_legacy.yaml",
        P + "ollama/tests/cassettes/test_chat/test_ollama_chat_tool_calls_legacy.yaml",
    ],
    "cohere_chat.jsonl": [
        P + "cohere/tests/cassettes/test_chat/test_cohere_chat_legacy.yaml",
        P + "cohere/tests/cassettes/test_chat/test_cohere_v2_chat_legacy.yaml",
        P + "cohere/tests/cassettes/test_chat/test_cohere_v2_chat_legacy_with_tool_calls_and_history.yaml",
    ],
}
STREAMS = {
    "ollama_chat_stream.ndjson": P + "ollama/tests/cassettes/test_chat/test_ollama_streaming_chat_legacy.yaml",
    "groq_stream_x_groq.sse": P + "groq/tests/traces/cassettes/test_chat_tracing/test_chat_streaming_legacy.yaml",
}


def bodies(path):
    text = subprocess.run(["git", "-C", CHECKOUT, "show", f"{COMMIT}:{path}"], capture_output=True, check=True).stdout
    for interaction in yaml.safe_load(text)["interactions"]:
        body = interaction["response"]["body"]["string"]
        if isinstance(body, bytes):
            body = gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body
            body = body.decode("utf-8")
        yield body


for name, paths in FILES.items():
    with open(name, "w", encoding="utf-8") as out:
        for path in paths:
            for body in bodies(path):
                out.write(json.dumps(json.loads(body), separators=(",", ":"), ensure_ascii=False) + "\n")
for name, path in STREAMS.items():
    with open(name, "w", encoding="utf-8") as out:
        for body in bodies(path):
            out.write(body if body.endswith("\n") else body + "\n")
