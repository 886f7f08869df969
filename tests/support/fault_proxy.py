#!/usr/bin/env python3
"""A fault-injecting HTTP proxy for tests, in front of an S3-compatible server.

    python3 fault_proxy.py --upstream http://127.0.0.1:PORT --port 0 \
        [--fail-first N] [--status 503] [--delay-first N --delay SECONDS] [--only-prefix /bucket/] \
        [--fault-rate P --seed N [--faults 500,503,429,delay,drop-body,drop-reply]]

Forwards every request unchanged to --upstream, except that the first N
requests get an S3-style error response with --status (503 "SlowDown" by
default), and the first N (of --delay-first) are answered only after --delay
seconds. With --fault-rate, each request after those is faulted with
probability P (a seeded generator: the same run sees the same faults), by a
kind drawn from --faults: an error status (500 InternalError, 503 SlowDown,
429 throttling), a delay of --delay seconds, a connection dropped while the
request's body is half read (`drop-body`: an upload cut off; the upstream never
sees it), or dropped after the upstream answered (`drop-reply`: the request
took effect, the client never learns it). With --only-prefix, only requests
whose path starts with it count (and are faulted); the others pass through.
It prints "listening PORT" once ready, then one line per request once
answered ("<n> <METHOD> <path> -> <status>", with "(injected KIND)" for a
fault, "(injected delay)" for a delayed answer, and "(client gone)" where the
client hung up before the answer was written), so a test can see what was
retried. Standard library only; it serves on 127.0.0.1 and stops when its
stdin closes (once the requests in flight are answered) or it is killed.
"""

import argparse
import http.client
import http.server
import random
import socket
import sys
import threading
import time
import urllib.parse

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--fail-first", type=int, default=0)
    parser.add_argument("--status", type=int, default=503)
    parser.add_argument("--delay-first", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--only-prefix", default="")
    parser.add_argument("--fault-rate", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--faults", default="500,503,429,delay,drop-body,drop-reply")
    args = parser.parse_args()
    upstream = urllib.parse.urlsplit(args.upstream)
    lock = threading.Lock()
    counter = {"n": 0}
    # Requests being handled, so that a proxy told to stop answers them first.
    in_flight = {"n": 0}
    idle = threading.Condition()
    draw = random.Random(args.seed)
    kinds = [k for k in args.faults.split(",") if k]
    errors = {"500": (500, b"InternalError"), "503": (503, b"SlowDown"), "429": (429, b"SlowDown")}

    def error_body(code):
        return (
            b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>' + code + b"</Code>"
            b"<Message>injected fault</Message></Error>"
        )

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def drop(self):
            """Closes the connection without an answer."""
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        def send_error_status(self, status, code):
            payload = error_body(code)
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def handle_any(self):
            with idle:
                in_flight["n"] += 1
            try:
                self.relay()
            finally:
                with idle:
                    in_flight["n"] -= 1
                    idle.notify_all()

        def answer(self, write):
            """Writes an answer; returns " (client gone)" if the client hung up."""
            try:
                write()
                self.wfile.flush()
                return ""
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
                return " (client gone)"

        def relay(self):
            targeted = self.path.startswith(args.only_prefix)
            with lock:
                if targeted:
                    counter["n"] += 1
                n = counter["n"] if targeted else 10**9
                random_fault = None
                if targeted and kinds and args.fault_rate > 0 and draw.random() < args.fault_rate:
                    random_fault = draw.choice(kinds)
            length = int(self.headers.get("Content-Length") or 0)
            if random_fault == "drop-body" and length > 0:
                self.rfile.read(length // 2)
                self.drop()
                print(f"{n} {self.command} {self.path} -> dropped (injected drop-body)", flush=True)
                return
            body = self.rfile.read(length) if length else b""
            delayed = ""
            if (n <= args.delay_first or random_fault == "delay") and args.delay > 0:
                time.sleep(args.delay)
                delayed = " (injected delay)"
            if random_fault in errors:
                status, code = errors[random_fault]
                gone = self.answer(lambda: self.send_error_status(status, code))
                print(f"{n} {self.command} {self.path} -> {status} (injected {random_fault}){gone}", flush=True)
                return
            if n <= args.fail_first:
                gone = self.answer(lambda: self.send_error_status(args.status, b"SlowDown"))
                print(f"{n} {self.command} {self.path} -> {args.status} (injected){delayed}{gone}", flush=True)
                return
            conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            conn.request(self.command, self.path, body=body if length else None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            if random_fault in ("drop-reply", "drop-body"):
                # (A drop-body fault on a request without a body drops the reply.)
                conn.close()
                self.drop()
                print(f"{n} {self.command} {self.path} -> dropped (injected drop-reply)", flush=True)
                return
            conn.close()

            def write():
                self.send_response(resp.status, resp.reason)
                for k, v in resp.getheaders():
                    if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                # A HEAD answer has no body but the object's length (the upstream's header).
                length = resp.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", length or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            gone = self.answer(write)
            print(f"{n} {self.command} {self.path} -> {resp.status}{delayed}{gone}", flush=True)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any

    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"listening {server.server_address[1]}", flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sys.stdin.read()
    except KeyboardInterrupt:
        pass
    server.shutdown()
    with idle:
        idle.wait_for(lambda: in_flight["n"] == 0, timeout=args.delay + 60)


if __name__ == "__main__":
    main()
