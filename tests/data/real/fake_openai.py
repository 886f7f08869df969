"""A loopback stand-in for an OpenAI-compatible server, for generate.py: it
answers /v1/chat/completions with fixed completions (and, when asked to
stream, server-sent events of chat.completion.chunk objects), so that the real
client libraries, loggers and instrumentations below run unchanged and write
their own files. It listens on 127.0.0.1 only."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Fixed answers, keyed by the last user message, so each generated record is known.
ANSWERS = {
    "What is the capital of France?": {
        "id": "chatcmpl-real-1",
        "content": "Paris.",
        "finish_reason": "stop",
        "usage": {"prompt_tokens": 14, "completion_tokens": 2, "total_tokens": 16,
                  "prompt_tokens_details": {"cached_tokens": 0},
                  "completion_tokens_details": {"reasoning_tokens": 0}},
        # What a stream sends: three tokens with their logprobs, and its own usage.
        "stream_tokens": [("Par", -0.0123), ("is", -0.0001), (".", -0.25)],
        "stream_usage": {"prompt_tokens": 14, "completion_tokens": 3, "total_tokens": 17},
    },
    "Tell me a long story.": {
        "id": "chatcmpl-real-2",
        "content": "Once upon a time",
        "finish_reason": "length",
        "usage": {"prompt_tokens": 1041, "completion_tokens": 4, "total_tokens": 1045,
                  "prompt_tokens_details": {"cached_tokens": 1024},
                  "completion_tokens_details": {"reasoning_tokens": 0}},
        "stream_tokens": [("Once", -0.0031), (" upon", -0.0002), (" a", -0.0), (" time", -0.0457)],
        "stream_usage": {"prompt_tokens": 1041, "completion_tokens": 4, "total_tokens": 1045,
                         "prompt_tokens_details": {"cached_tokens": 1024},
                         "completion_tokens_details": {"reasoning_tokens": 0}},
    },
    "What is the weather in Paris?": {
        "id": "chatcmpl-real-3",
        "content": None,
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}],
        "finish_reason": "tool_calls",
        "usage": {"prompt_tokens": 61, "completion_tokens": 15, "total_tokens": 76},
    },
}
CREATED = 1737710446
MODEL = "gpt-4o-mini-2024-07-18"


def completion(answer):
    message = {"role": "assistant", "content": answer["content"]}
    if "tool_calls" in answer:
        message["tool_calls"] = answer["tool_calls"]
    return {
        "id": answer["id"], "object": "chat.completion", "created": CREATED, "model": MODEL,
        "system_fingerprint": "fp_real",
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": answer["finish_reason"]}],
        "usage": answer["usage"],
    }


def chunks(answer, logprobs, include_usage):
    """The chunks of a streamed answer, as OpenAI sends them: logprobs only
    when asked for, the usage in a last chunk without choices only when
    `stream_options.include_usage` asks for it."""
    base = {"id": answer["id"], "object": "chat.completion.chunk", "created": CREATED,
            "model": MODEL, "system_fingerprint": "fp_real"}
    yield {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                "logprobs": None, "finish_reason": None}]}
    for text, lp in answer["stream_tokens"]:
        entry = {"content": [{"token": text, "logprob": lp, "bytes": list(text.encode()), "top_logprobs": []}]}
        yield {**base, "choices": [{"index": 0, "delta": {"content": text},
                                    "logprobs": entry if logprobs else None, "finish_reason": None}]}
    yield {**base, "choices": [{"index": 0, "delta": {}, "logprobs": None,
                                "finish_reason": answer["finish_reason"]}]}
    if include_usage:
        yield {**base, "choices": [], "usage": answer["stream_usage"]}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answer = ANSWERS[body["messages"][-1]["content"]]
        if body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            include_usage = (body.get("stream_options") or {}).get("include_usage", False)
            for c in chunks(answer, body.get("logprobs", False), include_usage):
                self.wfile.write(b"data: " + json.dumps(c).encode() + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            return
        out = json.dumps(completion(answer)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


def start():
    """Serves on a free loopback port; returns the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1"
