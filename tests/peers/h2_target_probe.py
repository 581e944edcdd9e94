"""An HTTP/2 client no one here wrote (PyPI's h2) probing soakd's built-in
target: tests/h2_target.rs runs it with the python tests/util::test_python
finds, against `soakd target --h2 [--fault ...]`, and asserts on the JSON it
prints: what the target sent, frame by frame, as h2 understood it.

    python h2_target_probe.py ADDR SCENARIO [ARG]

Scenarios (each bounded in time, at most a few seconds):
  basic            SETTINGS, a PING, 20 streams at once on 5 routes
  concurrent N     N streams opened at once, all answered or refused
  concurrent-early N  the same, sent before the target's SETTINGS arrive
  sequential N     N requests one after the other (each answered first)
  post BYTES       a POST with a body of BYTES, sent as the windows allow
  flood SECONDS    counts the SETTINGS frames that arrive in SECONDS
"""

import json
import socket
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
from hyperframe.frame import Frame


class Probe:
    def __init__(self, addr):
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        )
        self.conn.initiate_connection()
        self.flush()
        self.out = {
            "settings": {},
            "settings_frames": 0,
            "responses": {},
            "bodies": {},
            "trailers": {},
            "resets": {},
            "goaway": None,
            "ping_acked": False,
            "window_updates": 0,
            "closed": False,
            # Every frame as it came off the wire, decoded by hyperframe
            # alone: [type, stream, END_STREAM, detail]. h2's own state
            # machine stops at a GOAWAY (it takes no frame after one), so
            # what follows a GOAWAY is only here.
            "frames": [],
        }
        self.raw = b""
        self.h2_stopped = False

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            try:
                self.sock.sendall(data)
            except OSError:
                pass

    def request(self, path, method="GET", end=True):
        sid = self.conn.get_next_available_stream_id()
        self.conn.send_headers(
            sid,
            [(":method", method), (":path", path), (":scheme", "http"), (":authority", "t")],
            end_stream=end,
        )
        self.flush()
        return sid

    def read(self, until, seconds):
        """Handles events until until() is true, the connection closes or
        seconds pass; returns whether until() became true."""
        deadline = time.monotonic() + seconds
        while not until():
            left = deadline - time.monotonic()
            if left <= 0 or self.out["closed"]:
                return until()
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return until()
            except ConnectionResetError:
                data = b""
            if not data:
                self.out["closed"] = True
                return until()
            self.log_frames(data)
            if self.h2_stopped:
                continue
            try:
                events = self.conn.receive_data(data)
            except h2.exceptions.ProtocolError as e:
                self.out["h2_stopped"] = str(e)
                self.h2_stopped = True
                continue
            for ev in events:
                self.event(ev)
            self.flush()
        return True

    def log_frames(self, data):
        self.raw += data
        while len(self.raw) >= 9:
            frame, length = Frame.parse_frame_header(memoryview(self.raw[:9]))
            if len(self.raw) < 9 + length:
                return
            frame.parse_body(memoryview(self.raw[9 : 9 + length]))
            self.raw = self.raw[9 + length :]
            detail = None
            if frame.type == 0x7:
                detail = {"last_stream_id": frame.last_stream_id, "error_code": frame.error_code}
            elif frame.type == 0x3:
                detail = frame.error_code
            elif frame.type == 0x0:
                detail = len(frame.data)
            if frame.type == 0x4 and len(self.out["frames"]) > 100:
                continue  # a flood is counted, not logged
            self.out["frames"].append([frame.type, frame.stream_id, "END_STREAM" in frame.flags, detail])

    def event(self, ev):
        o = self.out
        if isinstance(ev, h2.events.RemoteSettingsChanged):
            o["settings_frames"] += 1
            for k, v in ev.changed_settings.items():
                o["settings"][h2.settings.SettingCodes(k).name] = v.new_value
        elif isinstance(ev, h2.events.ResponseReceived):
            o["responses"][ev.stream_id] = dict(ev.headers)[":status"]
        elif isinstance(ev, h2.events.InformationalResponseReceived):
            o.setdefault("informational", {})[ev.stream_id] = dict(ev.headers)[":status"]
        elif isinstance(ev, h2.events.DataReceived):
            o["bodies"][ev.stream_id] = o["bodies"].get(ev.stream_id, 0) + len(ev.data)
            self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.TrailersReceived):
            o["trailers"][ev.stream_id] = dict(ev.headers)
        elif isinstance(ev, h2.events.StreamReset):
            o["resets"][ev.stream_id] = int(ev.error_code)
        elif isinstance(ev, h2.events.ConnectionTerminated):
            o["goaway"] = {"last_stream_id": ev.last_stream_id, "error_code": int(ev.error_code)}
        elif isinstance(ev, h2.events.PingAckReceived):
            o["ping_acked"] = True
        elif isinstance(ev, h2.events.WindowUpdated):
            o["window_updates"] += 1

    def answered(self, sids):
        o = self.out
        return lambda: all(s in o["resets"] or (s in o["responses"] and self.ended(s)) for s in sids)

    def ended(self, sid):
        try:
            return self.conn._get_stream_by_id(sid).closed
        except Exception:
            return True

    def wait_eof(self, seconds):
        self.read(lambda: False, seconds)


def main():
    addr, scenario = sys.argv[1], sys.argv[2]
    arg = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] else 0
    p = Probe(addr)
    o = p.out
    if scenario == "concurrent-early":
        # Opened before the target's SETTINGS are taken in, so h2 does not
        # hold them back for the target's stream limit.
        sids = [p.request("/") for _ in range(arg)]
        p.read(lambda: o["settings_frames"] > 0 and p.answered(sids)(), 5)
        o["sent"] = sids
        print(json.dumps(o))
        return
    p.read(lambda: o["settings_frames"] > 0, 5)
    if scenario == "basic":
        p.conn.ping(b"soakd-pg")
        p.flush()
        paths = ["/", "/status/201", "/big", "/chunked", "/continue"]
        sids = {p.request(paths[i % len(paths)]): paths[i % len(paths)] for i in range(20)}
        p.read(lambda: o["ping_acked"] and p.answered(list(sids))(), 10)
        o["paths"] = sids
    elif scenario == "concurrent":
        sids = [p.request("/") for _ in range(arg)]
        p.read(p.answered(sids), 5)
        # After a GOAWAY the target finishes and shuts down; see it close.
        if o["goaway"] is not None:
            p.wait_eof(5)
        o["sent"] = sids
    elif scenario == "sequential":
        sids = []
        for _ in range(arg):
            if o["closed"] or o["goaway"] is not None:
                break
            sid = p.request("/")
            sids.append(sid)
            p.read(p.answered([sid]), 5)
        if o["goaway"] is not None:
            p.wait_eof(5)
        o["sent"] = sids
    elif scenario == "post":
        sid = p.request("/status/201", method="POST", end=False)
        body = b"b" * arg
        sent = 0
        # Send what the windows allow, then wait for them to open.
        deadline = time.monotonic() + 1.5
        while sent < len(body) and time.monotonic() < deadline:
            room = min(p.conn.local_flow_control_window(sid), p.conn.max_outbound_frame_size, len(body) - sent)
            if room > 0:
                p.conn.send_data(sid, body[sent : sent + room], end_stream=sent + room == len(body))
                p.flush()
                sent += room
            else:
                p.read(lambda: p.conn.local_flow_control_window(sid) > 0, deadline - time.monotonic())
        p.read(p.answered([sid]), 1.0 if sent < len(body) else 5)
        o["body_sent"] = sent
        # The connection still answers a request without a body.
        get = p.request("/")
        p.read(p.answered([get]), 5)
        o["get"] = get
    elif scenario == "flood":
        p.read(lambda: False, arg)
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    # JSON keys are strings: stream ids become "1", "3", ...
    print(json.dumps(o))


if __name__ == "__main__":
    main()
