#!/usr/bin/env python3
"""A TCP relay on loopback that delays every chunk it forwards by DELAY_MS in
each direction (order kept, chunks overlap in flight), so a local S3 server
answers with the round-trip time of a remote one. Used by
bench/remote_ingest.sh.

Usage: python3 bench/latency_proxy.py LISTEN_PORT UPSTREAM_PORT DELAY_MS
"""
import asyncio
import sys
import time

LISTEN_PORT, UPSTREAM_PORT = int(sys.argv[1]), int(sys.argv[2])
DELAY = float(sys.argv[3]) / 1000


async def pipe(reader, writer):
    """Forwards reader to writer, each chunk DELAY after it arrived."""
    queue = asyncio.Queue()

    async def read():
        while True:
            data = await reader.read(65536)
            await queue.put((time.monotonic() + DELAY, data))
            if not data:
                return

    async def write():
        while True:
            due, data = await queue.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                try:
                    writer.write_eof()
                except Exception:
                    pass
                return
            writer.write(data)
            await writer.drain()

    await asyncio.gather(read(), write(), return_exceptions=True)


async def handle(client_reader, client_writer):
    upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", UPSTREAM_PORT)
    await asyncio.gather(
        pipe(client_reader, upstream_writer), pipe(upstream_reader, client_writer), return_exceptions=True
    )
    client_writer.close()
    upstream_writer.close()


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", LISTEN_PORT)
    async with server:
        await server.serve_forever()


asyncio.run(main())
