"""Copies recorded provider responses out of the Vercel AI SDK's test fixtures.

Usage: python3 from_vercel_ai.py CHECKOUT COMMIT

CHECKOUT is a clone of https://github.com/vercel/ai (Apache-2.0). Its
`__fixtures__/*.json` are responses the providers returned, pretty-printed:
each is parsed and written compact, keys in their order, one per line. Its
`*.chunks.txt` are the `data:` payloads of a recorded stream, one per line:
copied as they are, or (`.sse`) each written back as the event it came in
(`data: <payload>` and a blank line), `data: [DONE]` last for the
OpenAI-compatible providers (Gemini sends none), or (`_array.json`) as the JSON array of chunks
that Gemini's REST `streamGenerateContent` returns without `alt=sse`.
"""
import json
import subprocess
import sys

CHECKOUT, COMMIT = sys.argv[1], sys.argv[2]
F = "packages/{}/src/__fixtures__/{}"


def show(path):
    return subprocess.run(["git", "-C", CHECKOUT, "show", f"{COMMIT}:{path}"], capture_output=True, check=True).stdout.decode()


RESPONSES = {
    "gemini_vercel.jsonl": [F.format("google", "google-text.json"), F.format("google", "google-reasoning.json")],
    "cohere_vercel.jsonl": [F.format("cohere", n) for n in ("cohere-text.json", "cohere-max-tokens.json", "cohere-tool-call.json")],
    "groq_chat.jsonl": [F.format("groq", "groq-text.json"), F.format("groq", "groq-tool-call.json")],
    "mistral_chat.jsonl": [F.format("mistral", "mistral-text.json"), F.format("mistral", "mistral-tool-call.json")],
}
CHUNKS = {
    "gemini_stream_chunks.jsonl": F.format("google", "google-text.chunks.txt"),
    "cohere_stream_chunks.jsonl": F.format("cohere", "cohere-text.chunks.txt"),
}
SSE = {
    "groq_stream.sse": F.format("groq", "groq-text.chunks.txt"),
    "gemini_stream.sse": F.format("google", "google-tool-call.chunks.txt"),
}
DONE = {"groq_stream.sse"}
ARRAYS = {"gemini_stream_array.json": F.format("google", "google-reasoning.chunks.txt")}

for name, paths in RESPONSES.items():
    with open(name, "w", encoding="utf-8") as out:
        for path in paths:
            out.write(json.dumps(json.loads(show(path)), separators=(",", ":"), ensure_ascii=False) + "\n")
for name, path in CHUNKS.items():
    text = show(path)
    with open(name, "w", encoding="utf-8") as out:
        out.write(text if text.endswith("\n") else text + "\n")
for name, path in SSE.items():
    with open(name, "w", encoding="utf-8") as out:
        for line in show(path).splitlines():
            if line.strip():
                out.write(f"data: {line}\n\n")
        if name in DONE:
            out.write("data: [DONE]\n\n")
for name, path in ARRAYS.items():
    chunks = [json.loads(line) for line in show(path).splitlines() if line.strip()]
    with open(name, "w", encoding="utf-8") as out:
        out.write(json.dumps(chunks, separators=(",", ":"), ensure_ascii=False) + "\n")
