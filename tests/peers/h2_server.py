"""A hostile (or merely strict) HTTP/2 server for tests/h2.rs, built on
PyPI's h2 (the same library many Python servers use), so soakd's client is
tested against an implementation it did not write.

Usage: h2_server.py STATS_FILE MODE [ARG] [ARG2]

Listens on 127.0.0.1, port 0, prints "port N" once listening, answers
every request with 200 "ok" unless MODE says otherwise, and rewrites
STATS_FILE (JSON) after each change: requests answered, streams refused or
reset, the most streams ever open at once on one connection, GOAWAYs sent.

Modes:
  plain               answer everything
  goaway N            graceful GOAWAY after every N streams of a connection
                      (the streams at or below last_stream_id are answered,
                      then the connection is closed)
  refuse N            RST_STREAM REFUSED_STREAM on every Nth stream
  reset N             RST_STREAM INTERNAL_ERROR on every Nth stream
  max-streams K       SETTINGS_MAX_CONCURRENT_STREAMS K; answers after a short
                      delay so streams overlap if the client lets them
  stall               initial stream window 0, never a WINDOW_UPDATE
  delay-once SECS     from the first request of the run on, the server
                      stalls SECS: every response due in that time waits
                      until its end (once), then all are answered at once
  continuation-flood  answers every request with HEADERS followed by
                      CONTINUATION frames without end
  big-header          answers with a 1 MB header block
  ping-flood          sends PINGs without end and never reads
  settings-flood      sends SETTINGS frames without end and never reads
  close-first         reads the client's preface and closes without a word
                      (as an HTTP/1.1-only server does on h2c)
  max-header-list N   SETTINGS_MAX_HEADER_LIST_SIZE N; answers everything
                      (counts every request it receives as "requests")
  goaway-hold S K     each of the first K connections waits for S requests
                      (and for all K to be accepted), answers none and
                      sends a graceful GOAWAY naming stream
                      0 (none processed: the client must send all S again),
                      then closes; later connections send nothing, not even
                      SETTINGS, until the file STATS_FILE.release exists,
                      then answer everything (counted as "released"), so
                      the handed-back requests wait as long as the test
                      wants (a reload while they wait)
"""

import json
import socket
import struct
import sys
import threading
import time

import h2.config
import h2.connection
import h2.events
import h2.settings

STATS_FILE = sys.argv[1]
MODE = sys.argv[2]
ARG = float(sys.argv[3]) if len(sys.argv) > 3 else 0
ARG2 = float(sys.argv[4]) if len(sys.argv) > 4 else 0
LOCK = threading.Lock()
STATS = {
    "answered": 0,
    "refused": 0,
    "reset": 0,
    "max_open": 0,
    "goaways": 0,
    "connections": 0,
    "requests": 0,
    "released": 0,
}
STALL_UNTIL = [None]


def bump(key, value=1, maximum=False):
    with LOCK:
        if maximum:
            STATS[key] = max(STATS[key], value)
        else:
            STATS[key] += value
        with open(STATS_FILE + ".tmp", "w") as f:
            json.dump(STATS, f)
        import os

        os.replace(STATS_FILE + ".tmp", STATS_FILE)
        return STATS[key]


def frame(kind, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def flood(sock, make):
    """Writes frames without end (until the peer goes), reading nothing."""
    try:
        while True:
            sock.sendall(make() * 64)
    except OSError:
        pass


def serve(sock):
    nth = bump("connections")
    # goaway-hold: the first K connections send every request back.
    sends_back = MODE == "goaway-hold" and nth <= int(ARG2)
    held = 0
    if MODE == "close-first":
        try:
            sock.recv(65536)
        except OSError:
            pass
        return
    config = h2.config.H2Configuration(client_side=False, header_encoding=None)
    conn = h2.connection.H2Connection(config=config)
    conn.initiate_connection()
    settings = {}
    if MODE == "max-streams":
        settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = int(ARG)
    if MODE == "stall":
        settings[h2.settings.SettingCodes.INITIAL_WINDOW_SIZE] = 0
    if MODE == "max-header-list":
        settings[h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE] = int(ARG)
    if settings:
        conn.update_settings(settings)
    if MODE == "goaway-hold" and not sends_back:
        import os

        while not os.path.exists(STATS_FILE + ".release"):
            time.sleep(0.01)
        bump("released")
    sock.sendall(conn.data_to_send())
    if MODE == "ping-flood":
        return flood(sock, lambda: frame(6, 0, 0, b"12345678"))
    if MODE == "settings-flood":
        return flood(sock, lambda: frame(4, 0, 0, struct.pack(">HI", 3, 100)))
    streams = 0
    open_now = set()
    pending = []  # (due time, stream id) answered later (max-streams)
    going = False
    last = 0
    sock.settimeout(0.01)
    while True:
        try:
            data = sock.recv(65536)
            if not data:
                return
        except socket.timeout:
            data = b""
        except OSError:
            return
        events = conn.receive_data(data) if data else []
        for ev in events:
            if isinstance(ev, h2.events.RequestReceived):
                sid = ev.stream_id
                bump("requests")
                if going:
                    continue
                if sends_back:
                    held += 1
                    if held < int(ARG):
                        continue
                    # Not before all K are here: a client's new connection
                    # must not be taken for one of the first K.
                    while STATS["connections"] < int(ARG2):
                        time.sleep(0.01)
                    conn.close_connection(error_code=0, last_stream_id=0)
                    bump("goaways")
                    try:
                        sock.sendall(conn.data_to_send())
                        time.sleep(0.05)
                    except OSError:
                        pass
                    return
                streams += 1
                if MODE == "refuse" and streams % int(ARG) == 0:
                    conn.reset_stream(sid, error_code=7)
                    bump("refused")
                    continue
                if MODE == "reset" and streams % int(ARG) == 0:
                    conn.reset_stream(sid, error_code=2)
                    bump("reset")
                    continue
                if MODE == "stall":
                    continue  # the body never comes: nothing to answer
                if MODE == "continuation-flood":
                    sock.sendall(frame(1, 0, sid, b"\x88"))
                    return flood(sock, lambda: frame(9, 0, sid, b"\x00\x01a\x01b"))
                if MODE == "big-header":
                    block = b"\x88" + (b"\x00\x01a\x7f\x80\x80\x01" + b"x" * 16384) * 64
                    out = frame(1, 0, sid, block[:16384])
                    for i in range(16384, len(block), 16384):
                        end = 4 if i + 16384 >= len(block) else 0
                        out += frame(9, end, sid, block[i : i + 16384])
                    try:
                        sock.sendall(out)
                    except OSError:
                        pass
                    return
                open_now.add(sid)
                bump("max_open", len(open_now), maximum=True)
                delay = 0.0
                if MODE == "max-streams":
                    delay = 0.005
                now = time.monotonic()
                if MODE == "delay-once":
                    with LOCK:
                        if STALL_UNTIL[0] is None:
                            STALL_UNTIL[0] = now + ARG
                        delay = max(0.0, STALL_UNTIL[0] - now)
                pending.append((now + delay, sid))
                if MODE == "goaway" and streams % int(ARG) == 0:
                    last = sid
                    going = True
            elif isinstance(ev, h2.events.StreamEnded):
                pass
            elif isinstance(ev, h2.events.ConnectionTerminated):
                return
        now = time.monotonic()
        ready = [p for p in pending if p[0] <= now]
        pending = [p for p in pending if p[0] > now]
        for _, sid in ready:
            conn.send_headers(sid, [(b":status", b"200"), (b"content-length", b"2")])
            conn.send_data(sid, b"ok", end_stream=True)
            open_now.discard(sid)
            bump("answered")
        if going and not pending:
            conn.close_connection(error_code=0, last_stream_id=last)
            bump("goaways")
            try:
                sock.sendall(conn.data_to_send())
                # Let the client read the GOAWAY before the close.
                time.sleep(0.05)
            except OSError:
                pass
            return
        out = conn.data_to_send()
        if out:
            try:
                sock.sendall(out)
            except OSError:
                return


def main():
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    bump("connections", 0)
    print("port", listener.getsockname()[1], flush=True)
    while True:
        sock, _ = listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=lambda s=sock: (serve(s), s.close()), daemon=True).start()


main()
