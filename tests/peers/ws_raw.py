"""A deliberately broken WebSocket server for tests/ws.rs: it answers the
upgrade correctly, then sends the frame its path names, and prints what
the client answered (`got close CODE`, `got eof`), so each protocol oddity
can be checked for exactly how soakd classifies it and which close code it
sends back.

Paths: /reserved (RSV1 set), /opcode (opcode 3), /masked (a masked
frame), /oversize (a 2 MiB binary message), /badutf8 (text 0xff),
/ctl-long (a 126-byte ping), /ctl-frag (a ping without FIN),
/close-nocode (a close frame without a code), /close-1000, /close-1011,
/interleaved (a control frame between fragments, then a good message:
no error), /push-split (messages split in 1-byte TCP writes),
/close-bad (prints `subscribed` at the client's first message, then
nothing until its close, answered with a bad frame: opcode 3).
Prints `port N` when listening.
"""

import asyncio
import base64
import hashlib
import struct
import sys

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def out(line):
    print(line, flush=True)


def frame(op, payload, fin=True, rsv=0, mask=None, length=None):
    b0 = (0x80 if fin else 0) | (rsv << 4) | op
    n = len(payload) if length is None else length
    m = 0x80 if mask else 0
    if n < 126:
        head = bytes([b0, m | n])
    elif n < 65536:
        head = bytes([b0, m | 126]) + struct.pack(">H", n)
    else:
        head = bytes([b0, m | 127]) + struct.pack(">Q", n)
    if mask:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        head += mask
    return head + payload


FRAMES = {
    "/reserved": frame(1, b"x", rsv=4),
    "/opcode": frame(3, b""),
    "/masked": frame(1, b"hi", mask=b"\x01\x02\x03\x04"),
    "/oversize": frame(2, b"\0" * (2 * 1024 * 1024)),
    "/badutf8": frame(1, b"\xff"),
    "/ctl-long": frame(9, b"p" * 126),
    "/ctl-frag": frame(9, b"p", fin=False),
    "/close-nocode": frame(8, b""),
    "/close-1000": frame(8, struct.pack(">H", 1000)),
    "/close-1011": frame(8, struct.pack(">H", 1011) + b"bye"),
    "/interleaved": frame(1, b"He", fin=False) + frame(9, b"pp") + frame(0, b"llo"),
}


async def read_frame(reader):
    """Reads one client frame: (opcode, unmasked payload)."""
    h = await reader.readexactly(2)
    n = h[1] & 0x7F
    if n == 126:
        n = struct.unpack(">H", await reader.readexactly(2))[0]
    elif n == 127:
        n = struct.unpack(">Q", await reader.readexactly(8))[0]
    mask = await reader.readexactly(4) if h[1] & 0x80 else b"\0\0\0\0"
    data = bytes(b ^ mask[i % 4] for i, b in enumerate(await reader.readexactly(n)))
    return h[0] & 0x0F, data


async def read_frames(reader):
    """Reads client frames; returns a close code, or None at EOF."""
    while True:
        op, data = await read_frame(reader)
        if op == 8:
            return struct.unpack(">H", data[:2])[0] if len(data) >= 2 else 1005


async def handle(reader, writer):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        path = lines[0].split(" ")[1]
        key = next(l.split(":", 1)[1].strip() for l in lines if l.lower().startswith("sec-websocket-key"))
        accept = base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()
        writer.write(
            (
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Accept: {accept}\r\n\r\n"
            ).encode()
        )
        if path == "/close-bad":
            await read_frame(reader)
            out("subscribed")
            code = await asyncio.wait_for(read_frames(reader), 60)
            out(f"got close {code}")
            writer.write(frame(3, b""))
            await writer.drain()
            await asyncio.wait_for(reader.read(), 5)
            return
        if path == "/push-split":
            for i in range(20):
                for b in frame(1, f"push {i}".encode()):
                    writer.write(bytes([b]))
                    await writer.drain()
                await asyncio.sleep(0.01)
        else:
            writer.write(FRAMES[path])
        await writer.drain()
        try:
            code = await asyncio.wait_for(read_frames(reader), 5)
            out(f"got close {code}" if code is not None else "got eof")
        except (asyncio.IncompleteReadError, ConnectionError):
            out("got eof")
        except asyncio.TimeoutError:
            out("got nothing")
    except Exception as e:  # a test server: say what broke, keep serving
        out(f"error {e!r}")
    finally:
        writer.close()


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    out(f"port {server.sockets[0].getsockname()[1]}")
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
