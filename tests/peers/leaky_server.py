#!/usr/bin/env python3
"""A keep-alive HTTP/1.1 server that leaks on purpose, with its own
Prometheus metrics (prometheus_client's process collector:
process_resident_memory_bytes, process_open_fds,
process_start_time_seconds), for the server-watch tests and benches.

--leak-bytes N keeps N bytes (written, so resident) per request answered;
--fd-leak-every N opens /dev/null and keeps it every N requests. Each
request is answered `ok`. Prints `port P metrics M pid X` once both listen
(ports from --port and --metrics-port, 0 for free ones, so a restarted
server can take its old ports again). A name for process-exporter's
matching goes in the command line: --tag NAME (unused otherwise).
"""

import argparse
import http.server
import os
import socketserver
import sys
import threading

from prometheus_client import Counter, start_http_server

KEPT = []
FDS = []
LOCK = threading.Lock()
SERVED = Counter("leaky_requests", "Requests answered.")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        with LOCK:
            n = int(SERVED._value.get()) + 1
            if ARGS.leak_bytes:
                KEPT.append(b"x" * ARGS.leak_bytes)
            if ARGS.fd_leak_every and n % ARGS.fd_leak_every == 0:
                FDS.append(os.open("/dev/null", os.O_RDONLY))
        SERVED.inc()
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--metrics-port", type=int, default=0)
    p.add_argument("--leak-bytes", type=int, default=0)
    p.add_argument("--fd-leak-every", type=int, default=0)
    p.add_argument("--tag", default="leaky")
    ARGS = p.parse_args()
    server = Server(("127.0.0.1", ARGS.port), Handler)
    metrics, _ = start_http_server(ARGS.metrics_port, addr="127.0.0.1")
    print(
        f"port {server.server_address[1]} metrics {metrics.server_address[1]} pid {os.getpid()}",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
