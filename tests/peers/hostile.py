"""Servers that write and never read, for tests/hostile.rs and
bench/hostile.sh: each holds soakd to its bound on what it owes a peer.

Usage: hostile.py MODE

Listens on 127.0.0.1, port 0, prints "port N" once listening, then serves
every connection in a thread of its own until the client goes away:

  ws-ping-flood   completes the WebSocket upgrade, then sends 125-byte
                  pings as fast as the socket takes them and never reads
                  another byte (RFC 6455 lets the client answer only the
                  latest ping)
  h2-flood        sends its SETTINGS, then SETTINGS and PINGs as fast as
                  the socket takes them and never reads (each asks for an
                  acknowledgement)
  http1-silent    accepts and never reads nor answers: a pipelining
                  client's requests pile up in its own buffers

Written with the standard library only (sockets and struct): what it sends
is a few fixed frames, and the point is that nothing here reads.
"""

import base64
import hashlib
import socket
import struct
import sys
import threading

MODE = sys.argv[1]
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def ws_ping_flood(conn):
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = conn.recv(4096)
        if not chunk:
            return
        head += chunk
    key = b""
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"sec-websocket-key:"):
            key = line.split(b":", 1)[1].strip()
    accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
    conn.sendall(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
        b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n"
    )
    ping = bytes([0x89, 125]) + b"p" * 125
    burst = ping * 64
    while True:
        conn.sendall(burst)


def h2_flood(conn):
    def frame(kind, flags, stream, payload):
        return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload

    # SETTINGS (type 4) with one parameter, and PING (type 6) with 8 bytes.
    settings = frame(4, 0, 0, struct.pack(">HI", 0x3, 100))
    ping = frame(6, 0, 0, b"hostile!")
    conn.sendall(frame(4, 0, 0, b""))
    burst = (settings + ping) * 256
    while True:
        conn.sendall(burst)


def http1_silent(conn):
    threading.Event().wait()


SERVE = {"ws-ping-flood": ws_ping_flood, "h2-flood": h2_flood, "http1-silent": http1_silent}


def serve(conn):
    try:
        SERVE[MODE](conn)
    except OSError:
        pass
    finally:
        conn.close()


def main():
    if MODE not in SERVE:
        sys.exit(f"unknown mode {MODE!r}; want one of {', '.join(SERVE)}")
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1024)
    print(f"port {srv.getsockname()[1]}", flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
