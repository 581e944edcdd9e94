"""A WebSocket client no one here wrote (PyPI's `websockets`) driven
against `soakd target`, for tests/ws_target.rs: each mode does one thing
on the wire and prints what it saw as one JSON object; the Rust test
asserts on it. Every wait is bounded (the test has its own timeout too).

usage: ws_target_client.py MODE ws[s]://ADDR/PATH [ARG] [--cafile PEM]
"""

import json
import socket
import ssl
import sys
import time

from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed
from websockets.frames import Opcode
from websockets.sync.client import connect
from websockets.uri import parse_uri


def closed(e):
    """What a ConnectionClosed exception says about both close frames."""
    return {
        "rcvd": e.rcvd.code if e.rcvd else None,
        "sent": e.sent.code if e.sent else None,
        "error": type(e).__name__,
    }


def open_ws(url, cafile, **kw):
    ctx = None
    if url.startswith("wss:"):
        ctx = ssl.create_default_context(cafile=cafile)
    return connect(url, ssl=ctx, open_timeout=5, close_timeout=5, ping_interval=None, **kw)


def echo(url, cafile, _arg):
    """Text, binary, fragmented, empty and large messages echoed; a ping
    answered; the closing handshake with 1000."""
    out = {"echoed": 0}
    with open_ws(url, cafile, max_size=None) as ws:
        for msg in ["hello", "h\u00e9llo \u2603", "", b"\x00\xff" * 3, b"x" * 300_000]:
            ws.send(msg)
            got = ws.recv(timeout=5)
            assert got == msg, f"sent {len(msg)} got {len(got)}: {got[:40]!r}"
            out["echoed"] += 1
        ws.send(["frag", "men", "ted \u2603"])
        assert ws.recv(timeout=5) == "fragmented \u2603"
        out["echoed"] += 1
        start = time.monotonic()
        out["pong"] = ws.ping(b"are you there").wait(5)
        out["ping_rtt_s"] = time.monotonic() - start
        ws.close(1000, "done")
        rcvd = ws.protocol.close_rcvd
        out["close_rcvd"] = rcvd.code if rcvd else None
    return out


def push(url, cafile, count):
    """Arrival times (seconds after the handshake) of `count` pushes."""
    with open_ws(url, cafile) as ws:
        ws.send("subscribe")  # read and dropped by the target
        start = time.monotonic()
        times, texts = [], set()
        for _ in range(int(count)):
            texts.add(ws.recv(timeout=10))
            times.append(time.monotonic() - start)
        return {"times": times, "texts": sorted(texts)}


def no_pong(url, cafile, _arg):
    """Our ping goes unanswered for 1 s; an echo still comes back."""
    with open_ws(url, cafile) as ws:
        pong = ws.ping(b"p").wait(1)
        ws.send("still there")
        return {"pong": pong, "echo": ws.recv(timeout=5)}


def until_closed(url, cafile, max_messages, **kw):
    """Sends messages one at a time until the connection ends."""
    echoed = 0
    with open_ws(url, cafile, **kw) as ws:
        try:
            for i in range(int(max_messages)):
                ws.send(f"m{i}")
                got = ws.recv(timeout=5)
                assert got == f"m{i}", got
                echoed += 1
        except ConnectionClosed as e:
            return {"echoed": echoed, **closed(e)}
    return {"echoed": echoed, "rcvd": None, "sent": None, "error": None}


def close_after(url, cafile, max_messages):
    return until_closed(url, cafile, max_messages)


def oversize(url, cafile, max_messages):
    # The client's limit is the 1 MiB soakd's --ws-max-message defaults to.
    return until_closed(url, cafile, max_messages, max_size=1 << 20)


def flood(url, _cafile, seconds):
    """Counts the server's pings over `seconds` on the sans-I/O protocol
    (which answers each with a pong), reading all the while."""
    uri = parse_uri(url)
    proto = ClientProtocol(uri, max_size=None)
    sock = socket.create_connection((uri.host, uri.port), timeout=5)
    proto.send_request(proto.connect())
    sock.sendall(b"".join(proto.data_to_send()))
    pings, pongs_sent = 0, 0
    first = None
    deadline = time.monotonic() + float(seconds)
    sock.settimeout(0.05)
    while time.monotonic() < deadline:
        try:
            data = sock.recv(65536)
        except socket.timeout:
            continue
        if not data:
            break
        proto.receive_data(data)
        for event in proto.events_received():
            if getattr(event, "opcode", None) == Opcode.PING:
                pings += 1
                if first is None:
                    first = time.monotonic()
        out = proto.data_to_send()
        pongs_sent += sum(1 for chunk in out if chunk)
        sock.sendall(b"".join(out))
    sock.close()
    return {"pings": pings, "pongs_sent": pongs_sent}


def echo_frames(url, cafile, _arg):
    """The frames a 300 kB message sent as one frame comes back in, read
    raw (websockets would reassemble them). Over TLS the target reads one
    16 KiB record at a time; its echo must still be one frame."""
    import struct

    host, port = url.split("/")[2].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    if url.startswith("wss:"):
        sock = ssl.create_default_context(cafile=cafile).wrap_socket(sock, server_hostname=host)
    sock.sendall(
        b"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    )
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        head += sock.recv(1)
    n = 300_000
    # Binary, FIN, masked with an all-zero key (the payload goes as is).
    sock.sendall(bytes([0x82, 0xFF]) + struct.pack(">Q", n) + b"\0\0\0\0" + b"x" * n)
    buf = b""

    def need(k):
        nonlocal buf
        while len(buf) < k:
            chunk = sock.recv(65536)
            if not chunk:
                raise EOFError("the target closed")
            buf += chunk

    frames = total = 0
    while True:
        need(2)
        b0, length, at = buf[0], buf[1] & 0x7F, 2
        if length == 126:
            need(4)
            length, at = struct.unpack(">H", buf[2:4])[0], 4
        elif length == 127:
            need(10)
            length, at = struct.unpack(">Q", buf[2:10])[0], 10
        need(at + length)
        buf = buf[at + length :]
        frames += 1
        total += length
        if b0 & 0x80:
            break
    sock.close()
    return {"frames": frames, "bytes": total}


MODES = {
    "echo-frames": echo_frames,
    "echo": echo,
    "push": push,
    "no-pong": no_pong,
    "close-after": close_after,
    "bad-frame": close_after,
    "oversize": oversize,
    "flood": flood,
}

if __name__ == "__main__":
    args = sys.argv[1:]
    cafile = None
    if "--cafile" in args:
        i = args.index("--cafile")
        cafile = args[i + 1]
        del args[i : i + 2]
    mode, url = args[0], args[1]
    arg = args[2] if len(args) > 2 else None
    print(json.dumps(MODES[mode](url, cafile, arg)))
