#!/usr/bin/env python3
"""A TCP relay on loopback that delays every chunk it forwards by DELAY_MS in
each direction (order kept, chunks overlap in flight), so a local S3 server
answers with the round-trip time of a remote one. Used by
bench/remote_ingest.sh.

Usage: python3 bench/latency_proxy.py LISTEN_PORT UPSTREAM_PORT DELAY_MS
"""
import asyncio, sys, time
LP, UP, D = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) / 1000
async def pipe(reader, writer):
    q = asyncio.Queue()
    async def rd():
        while True:
            data = await reader.read(65536)
            await q.put((time.monotonic() + D, data))
            if not data: return
    async def wr():
        while True:
            due, data = await q.get()
            dt = due - time.monotonic()
            if dt > 0: await asyncio.sleep(dt)
            if not data:
                try: writer.write_eof()
                except Exception: pass
                return
            writer.write(data); await writer.drain()
    await asyncio.gather(rd(), wr(), return_exceptions=True)
async def handle(cr, cw):
    ur, uw = await asyncio.open_connection('127.0.0.1', UP)
    await asyncio.gather(pipe(cr, uw), pipe(ur, cw), return_exceptions=True)
    cw.close(); uw.close()
async def main():
    srv = await asyncio.start_server(handle, '127.0.0.1', LP)
    async with srv: await srv.serve_forever()
asyncio.run(main())
