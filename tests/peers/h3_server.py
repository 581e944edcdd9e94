"""An HTTP/3 server on PyPI's aioquic for tests/h3.rs, so soakd's QUIC and
HTTP/3 client is tested against an implementation it did not write.

Usage: h3_server.py DIR MODE [ARG]

Makes a self-signed certificate for 127.0.0.1 and localhost in DIR
(DIR/cert.pem is the CA a client verifies with), listens on UDP
127.0.0.1, port 0, prints "port N" once listening, answers every request
with 200 "ok" and a `content-type: text/plain` unless MODE says otherwise,
and rewrites DIR/stats.json after each change: handshakes completed
("connections"), of them resumed and with 0-RTT data accepted, requests
answered, GOAWAYs sent, connections the server timed out idle. It keeps
session tickets, so a client may resume and send 0-RTT requests.

Modes:
  plain           answer everything
  idle SECS       the server's idle timeout is SECS (aioquic's default is
                  60 s): a client that does not keep the connection alive
                  loses it after SECS of silence
  goaway N        after every N requests of a connection, a GOAWAY naming
                  the next stream (nothing above it is processed), then the
                  connection is closed with H3_NO_ERROR once the streams
                  below it are answered
  reset N         every Nth request's stream is reset with
                  H3_INTERNAL_ERROR instead of answered
  silent          completes handshakes and acknowledges packets, never
                  answers a request
  v2-only         speaks QUIC version 2 only (RFC 9369): a client that
                  offers version 1 gets a Version Negotiation packet
  forget-tickets  issues session tickets that allow early data but never
                  finds them again: a client that resumes and sends 0-RTT
                  requests gets a full handshake, its 0-RTT data rejected
"""

import asyncio
import datetime
import ipaddress
import json
import os
import sys

from aioquic.asyncio import serve
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.buffer import encode_uint_var
from aioquic.h3.connection import H3_ALPN, ErrorCode, FrameType, H3Connection, encode_frame
from aioquic.h3.events import HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, HandshakeCompleted, ProtocolNegotiated
from aioquic.quic.packet import QuicProtocolVersion
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

DIR = sys.argv[1]
MODE = sys.argv[2]
ARG = float(sys.argv[3]) if len(sys.argv) > 3 else 0

STATS = {
    "connections": 0,
    "requests": 0,
    "goaways": 0,
    "idle_closed": 0,
    "resets": 0,
    "resumed": 0,
    "early_data": 0,
}


def write_stats():
    tmp = os.path.join(DIR, "stats.json.tmp")
    with open(tmp, "w") as f:
        json.dump(STATS, f)
    os.replace(tmp, os.path.join(DIR, "stats.json"))


def make_cert():
    """A self-signed leaf for 127.0.0.1 and localhost, not a CA (rustls
    refuses a CA certificate as the server's own)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "soakd h3 test peer")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path = os.path.join(DIR, "cert.pem")
    key_path = os.path.join(DIR, "key.pem")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    return cert_path, key_path


class Server(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = None
        self.requests = 0
        self.goaway_at = None
        self.open_streams = set()

    def quic_event_received(self, event):
        if isinstance(event, ProtocolNegotiated):
            self.h3 = H3Connection(self._quic)
        elif isinstance(event, HandshakeCompleted):
            STATS["connections"] += 1
            STATS["resumed"] += int(event.session_resumed)
            STATS["early_data"] += int(event.early_data_accepted)
            write_stats()
        elif isinstance(event, ConnectionTerminated):
            if "idle" in (event.reason_phrase or "").lower():
                STATS["idle_closed"] += 1
                write_stats()
        if self.h3 is None:
            return
        for ev in self.h3.handle_event(event):
            if isinstance(ev, HeadersReceived):
                self.on_request(ev.stream_id)
        self.transmit()

    def on_request(self, stream_id):
        if self.goaway_at is not None and stream_id >= self.goaway_at:
            # Above the GOAWAY: not processed (the client sends it again).
            self._quic.reset_stream(stream_id, ErrorCode.H3_REQUEST_REJECTED)
            return
        if MODE == "silent":
            return
        self.requests += 1
        if MODE == "reset" and self.requests % int(ARG) == 0:
            STATS["resets"] += 1
            write_stats()
            self._quic.reset_stream(stream_id, ErrorCode.H3_INTERNAL_ERROR)
            return
        self.h3.send_headers(stream_id, [(b":status", b"200"), (b"content-type", b"text/plain")])
        self.h3.send_data(stream_id, b"ok", end_stream=True)
        STATS["requests"] += 1
        write_stats()
        if MODE == "goaway" and self.goaway_at is None and self.requests >= int(ARG):
            # aioquic has no call for it: the frame goes on the server's
            # control stream as H3Connection writes its own.
            self.goaway_at = stream_id + 4
            control = self.h3._local_control_stream_id
            self._quic.send_stream_data(control, encode_frame(FrameType.GOAWAY, encode_uint_var(self.goaway_at)))
            STATS["goaways"] += 1
            write_stats()
            # Everything below the GOAWAY is answered (requests are answered
            # as they arrive): close once the client has had a moment to
            # read the answers.
            asyncio.get_event_loop().call_later(0.2, self.close_graceful)

    def close_graceful(self):
        self._quic.close(error_code=ErrorCode.H3_NO_ERROR, reason_phrase="goaway")
        self.transmit()


async def main():
    cert, key = make_cert()
    idle = ARG if MODE == "idle" else 60.0
    cfg = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN, idle_timeout=idle)
    if MODE == "v2-only":
        cfg.supported_versions = [QuicProtocolVersion.VERSION_2]
    cfg.load_cert_chain(cert, key)
    # Session tickets, so a client may resume (and send 0-RTT requests).
    tickets = {}
    server = await serve(
        "127.0.0.1",
        0,
        configuration=cfg,
        create_protocol=Server,
        session_ticket_fetcher=(lambda label: None)
        if MODE == "forget-tickets"
        else (lambda label: tickets.pop(label, None)),
        session_ticket_handler=lambda t: tickets.__setitem__(t.ticket, t),
    )
    port = server._transport.get_extra_info("sockname")[1]
    write_stats()
    print(f"port {port}", flush=True)
    await asyncio.Event().wait()


asyncio.run(main())
