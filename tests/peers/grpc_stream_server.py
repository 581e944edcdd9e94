"""grpcio's asyncio server (grpc.aio, PyPI; no one here wrote it) serving
soakd.test.v1.Echo's streaming methods (Subscribe, Collect, Chat) from
tests/proto/echo.proto, for held streams: each call is a coroutine, not a thread, so one process holds
thousands of streams (the thread-pool server of grpc_server.py holds as
many as it has threads).

Usage: grpc_stream_server.py PROTO_DIR STATS_FILE [HOST]

Subscribe sends `count` replies (0: without end), one every
`interval_ms`, then ends the call with OK. Listens on HOST (127.0.0.1) port
0, prints "port N" once serving, and rewrites STATS_FILE (JSON) 5 times a
second: streams started, streams open now, replies sent, calls that ended
by the server (OK), calls cancelled by the client or by the connection
going away; Chat's requests received and replies sent; Collect's requests
received and calls answered.

Chat answers each request with its echo; Collect counts the requests of
the stream and answers when the client half-closes.

SOAKD_GRPC_OPTIONS (environment): the server's channel arguments as JSON,
as for grpc_server.py (e.g. max_connection_age_ms).
"""
import asyncio
import json
import os
import sys
import tempfile

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from grpc_tools import protoc

proto_dir, stats_file = sys.argv[1], sys.argv[2]
host = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"

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
cls = lambda name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
EchoReply = cls("soakd.test.v1.EchoReply")
EchoRequest = cls("soakd.test.v1.EchoRequest")
Summary = cls("soakd.test.v1.Summary")
SubscribeRequest = cls("soakd.test.v1.SubscribeRequest")

stats = {"started": 0, "open": 0, "sent": 0, "ended_ok": 0, "cancelled": 0,
         "chat_received": 0, "chat_sent": 0, "collect_received": 0, "collect_answered": 0}


async def subscribe(request, context):
    stats["started"] += 1
    stats["open"] += 1
    try:
        i = 0
        while request.count == 0 or i < request.count:
            if i:
                await asyncio.sleep(request.interval_ms / 1000)
            await context.write(EchoReply(echo=request.template, seq=i + 1))
            stats["sent"] += 1
            i += 1
        stats["ended_ok"] += 1
    except asyncio.CancelledError:
        stats["cancelled"] += 1
        raise
    finally:
        stats["open"] -= 1


async def chat(requests, context):
    i = 0
    async for r in requests:
        stats["chat_received"] += 1
        i += 1
        await context.write(EchoReply(echo=r, seq=i))
        stats["chat_sent"] += 1


async def collect(requests, context):
    n, last = 0, None
    async for r in requests:
        n, last = n + 1, r
        stats["collect_received"] += 1
    stats["collect_answered"] += 1
    return Summary(received=n, last=last)


async def saver():
    while True:
        tmp = stats_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(stats, f)
        os.replace(tmp, stats_file)
        await asyncio.sleep(0.2)


async def main():
    options = [tuple(o) for o in json.loads(os.environ.get("SOAKD_GRPC_OPTIONS", "[]"))]
    server = grpc.aio.server(options=options)
    handler = grpc.unary_stream_rpc_method_handler(
        subscribe,
        request_deserializer=SubscribeRequest.FromString,
        response_serializer=lambda m: m.SerializeToString(),
    )
    serialize = lambda m: m.SerializeToString()
    handlers = {
        "Subscribe": handler,
        "Chat": grpc.stream_stream_rpc_method_handler(chat, request_deserializer=EchoRequest.FromString, response_serializer=serialize),
        "Collect": grpc.stream_unary_rpc_method_handler(collect, request_deserializer=EchoRequest.FromString, response_serializer=serialize),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("soakd.test.v1.Echo", handlers),))
    port = server.add_insecure_port(f"{host}:0")
    await server.start()
    asyncio.get_running_loop().create_task(saver())
    print(f"port {port}", flush=True)
    await server.wait_for_termination()


asyncio.run(main())
