"""A WebSocket server on Python's `websockets` package, for tests/ws.rs:
a real peer that soakd's authors did not write.

Routes: `/echo` answers every message with itself; `/push` sends a text
message every `--push-every` seconds until the client goes (with
`--quiet SECONDS`, the first connection instead gets one message, then
silence for that long, then a close 1000: a stream that went quiet and
ended); `/sink` reads
every message and answers none, printing `msg text` or `msg binary` for
each (what frames the client sent); anything else is refused with 404. Pings every second and drops a client whose pong is
more than a second late (`ping_interval=1, ping_timeout=1`), so a client
that does not answer pings loses its sockets.

Prints `port N` once listening, `open` for every connection upgraded,
and for every connection that ends `closed CODE` (the close code the client sent; 1006 when it sent none),
flushed at once, so the test can wait for lines rather than sleep.
"""

import argparse
import asyncio
import ssl
import sys

from websockets.asyncio.server import serve
from websockets.http11 import Response
from websockets.datastructures import Headers


def out(line):
    print(line, flush=True)


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--push-every", type=float, default=0.05)
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--subprotocol")
    p.add_argument("--max-size", type=int, default=2**20)
    p.add_argument("--no-ping", action="store_true")
    p.add_argument("--quiet", type=float)
    a = p.parse_args()
    quiet = [a.quiet]

    async def handler(ws):
        out("open")
        try:
            if ws.request.path.startswith("/push") and quiet[0] is not None:
                silence, quiet[0] = quiet[0], None
                await ws.send("push 0")
                await asyncio.sleep(silence)
                await ws.close(1000)
            elif ws.request.path.startswith("/push"):
                n = 0
                while True:
                    await ws.send(f"push {n}")
                    n += 1
                    await asyncio.sleep(a.push_every)
            elif ws.request.path.startswith("/sink"):
                async for msg in ws:
                    out("msg binary" if isinstance(msg, bytes) else "msg text")
            else:
                async for msg in ws:
                    await ws.send(msg)
        except Exception:
            pass
        finally:
            await ws.wait_closed()
            out(f"closed {ws.close_code}")

    def route(conn, request):
        if not request.path.startswith(("/echo", "/push", "/sink")):
            return Response(404, "Not Found", Headers([("Content-Length", "0")]), b"")
        return None

    tls = None
    if a.cert:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(a.cert, a.key)
    async with serve(
        handler,
        "127.0.0.1",
        0,
        ping_interval=None if a.no_ping else 1,
        ping_timeout=None if a.no_ping else 1,
        ssl=tls,
        process_request=route,
        subprotocols=[a.subprotocol] if a.subprotocol else None,
        max_size=a.max_size,
        compression=None,
        backlog=4096,
    ) as server:
        port = server.sockets[0].getsockname()[1]
        out(f"port {port}")
        await asyncio.Future()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
