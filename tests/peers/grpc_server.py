"""A gRPC server no one here wrote (grpcio, PyPI) serving the test service
of tests/proto/echo.proto, for tests/grpc_schema.rs.

Usage: grpc_server.py PROTO_DIR STATS_FILE [REFLECTION [CERT KEY]]

The .proto files are compiled at start by grpcio-tools (no generated code
is checked in); the messages are built from the resulting descriptors.
Listens on 127.0.0.1, port 0, prints "port N" once serving, and rewrites
STATS_FILE (JSON) after every call: calls per method, the last request
each method received (as protobuf's JSON with the .proto field names),
the last call's metadata (a -bin value as hex), and the reflection calls
per version.

REFLECTION:
  v1alpha  (default) grpcio-reflection as it is: it serves only
           grpc.reflection.v1alpha
  both     also grpc.reflection.v1 (the same servicer under the v1 name:
           the two versions' messages are the same on the wire)
  none     no reflection service

CERT KEY: PEM files; the server then speaks TLS (grpcio offers ALPN h2).

SOAKD_GRPC_OPTIONS (environment): the server's channel arguments as JSON;
SOAKD_GRPC_LAZY_STATS=1: STATS_FILE rewritten 5 times a second instead.

Methods of soakd.test.v1.Echo:
  Unary      returns the request as `echo`, with `seq` the call's number
  Subscribe  sends `count` replies, one every `interval_ms`
  Collect    counts the requests of the stream, returns the last
  Chat       answers each request with its echo
  Lookup     returns the request when its text is "known", else NOT_FOUND
"""
import json
import os
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from grpc_reflection.v1alpha import reflection
from grpc_tools import protoc

proto_dir, stats_file = sys.argv[1], sys.argv[2]
mode = sys.argv[3] if len(sys.argv) > 3 else "v1alpha"
tls = sys.argv[4:6] if len(sys.argv) > 5 else None

with tempfile.TemporaryDirectory() as d:
    out = os.path.join(d, "set.pb")
    wkt = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    rc = protoc.main(["protoc", f"-I{proto_dir}", f"-I{wkt}", "--include_imports", f"--descriptor_set_out={out}", "echo.proto"])
    if rc != 0:
        sys.exit(f"protoc failed: {rc}")
    fds = descriptor_pb2.FileDescriptorSet.FromString(open(out, "rb").read())
pool = descriptor_pool.DescriptorPool()
for f in fds.file:
    pool.Add(f)
SERVICE = "soakd.test.v1.Echo"
cls = lambda name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
EchoRequest = cls("soakd.test.v1.EchoRequest")
EchoReply = cls("soakd.test.v1.EchoReply")
SubscribeRequest = cls("soakd.test.v1.SubscribeRequest")
Summary = cls("soakd.test.v1.Summary")

lock = threading.Lock()
stats = {"calls": {}, "last_request": {}, "last_metadata": {}, "reflection": {"v1": 0, "v1alpha": 0}}


def save():
    tmp = stats_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump(stats, f)
    os.replace(tmp, stats_file)


# SOAKD_GRPC_LAZY_STATS=1: the stats file is rewritten 5 times a second by a
# thread, not after every call (for thousands of calls per second).
lazy = os.environ.get("SOAKD_GRPC_LAZY_STATS") == "1"


def saver():
    while True:
        time.sleep(0.2)
        with lock:
            save()


if lazy:
    threading.Thread(target=saver, daemon=True).start()


def record(method, request, context):
    with lock:
        n = stats["calls"].get(method, 0) + 1
        stats["calls"][method] = n
        if request is not None:
            stats["last_request"][method] = json_format.MessageToDict(request, preserving_proto_field_name=True)
        stats["last_metadata"] = {
            k: (v.hex() if isinstance(v, bytes) else v) for k, v in context.invocation_metadata()
        }
        if not lazy:
            save()
        return n


def unary(request, context):
    n = record("Unary", request, context)
    # "abort-every-K": every K-th call ends UNAVAILABLE (non-OK statuses
    # for soakd's gRPC error figures).
    # "sleep-ms-N": answer N ms late (past a deadline soakd sent).
    if request.text.startswith("sleep-ms-"):
        time.sleep(int(request.text[len("sleep-ms-"):]) / 1000)
    if request.text.startswith("abort-every-") and n % int(request.text[len("abort-every-"):]) == 0:
        context.abort(grpc.StatusCode.UNAVAILABLE, "abort-every asked for it")
    return EchoReply(echo=request, seq=n)


def lookup(request, context):
    n = record("Lookup", request, context)
    if request.text != "known":
        context.abort(grpc.StatusCode.NOT_FOUND, "only \"known\" is")
    return EchoReply(echo=request, seq=n)


def subscribe(request, context):
    record("Subscribe", request, context)
    for i in range(request.count):
        if i:
            time.sleep(request.interval_ms / 1000)
        yield EchoReply(echo=request.template, seq=i + 1)


def collect(requests, context):
    n, last = 0, None
    for r in requests:
        n, last = n + 1, r
    record("Collect", last, context)
    return Summary(received=n, last=last)


def chat(requests, context):
    record("Chat", None, context)
    for i, r in enumerate(requests):
        yield EchoReply(echo=r, seq=i + 1)


def handler(kind, fn, req_cls):
    return kind(fn, request_deserializer=req_cls.FromString, response_serializer=lambda m: m.SerializeToString())


# SOAKD_GRPC_OPTIONS: a JSON list of [name, value] channel arguments for the
# server, e.g. [["grpc.max_connection_age_ms", 2000],
# ["grpc.max_connection_age_grace_ms", 1000]] (connection ageing).
options = [tuple(o) for o in json.loads(os.environ.get("SOAKD_GRPC_OPTIONS", "[]"))]
server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=options)
server.add_generic_rpc_handlers(
    (
        grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "Unary": handler(grpc.unary_unary_rpc_method_handler, unary, EchoRequest),
                "Subscribe": handler(grpc.unary_stream_rpc_method_handler, subscribe, SubscribeRequest),
                "Collect": handler(grpc.stream_unary_rpc_method_handler, collect, EchoRequest),
                "Chat": handler(grpc.stream_stream_rpc_method_handler, chat, EchoRequest),
                "Lookup": handler(grpc.unary_unary_rpc_method_handler, lookup, EchoRequest),
            },
        ),
    )
)

if mode in ("v1alpha", "both"):
    servicer = reflection.ReflectionServicer([SERVICE, reflection.SERVICE_NAME], pool=pool)
    from grpc_reflection.v1alpha import reflection_pb2

    def counted(version):
        def info(requests, context):
            with lock:
                stats["reflection"][version] += 1
                save()
            yield from servicer.ServerReflectionInfo(requests, context)

        return grpc.stream_stream_rpc_method_handler(
            info,
            request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
            response_serializer=lambda m: m.SerializeToString(),
        )

    versions = ["v1alpha"] + (["v1"] if mode == "both" else [])
    for version in versions:
        server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    f"grpc.reflection.{version}.ServerReflection", {"ServerReflectionInfo": counted(version)}
                ),
            )
        )
elif mode != "none":
    sys.exit(f"unknown reflection mode {mode}")

if tls:
    cert, key = (open(p, "rb").read() for p in tls)
    port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(key, cert)]))
else:
    port = server.add_insecure_port("127.0.0.1:0")
server.start()
save()
print(f"port {port}", flush=True)
server.wait_for_termination()
