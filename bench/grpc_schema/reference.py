"""Judges a schema crate's JSON mapping against protobuf's own (Python's
json_format, the reference implementation), case by case.

Usage: reference.py CASES.json RESULTS.txt

RESULTS.txt has one line per case, in order: `ok HEX JSON` (the crate
encoded the case to HEX, and decoding HEX back gave JSON) or `err MESSAGE`
(the crate refused the case). A case passes when both refuse it, or both
accept it and the crate's bytes and its JSON both mean the same message as
the reference's.
"""
import json
import os
import subprocess
import sys
import tempfile

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
import grpc_tools
from grpc_tools import protoc

here = os.path.dirname(os.path.abspath(__file__))
wkt = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
with tempfile.TemporaryDirectory() as d:
    out = os.path.join(d, "set.pb")
    rc = protoc.main(["protoc", f"-I{here}", f"-I{wkt}", "--include_imports", f"--descriptor_set_out={out}", "wkt.proto"])
    assert rc == 0, rc
    fds = descriptor_pb2.FileDescriptorSet.FromString(open(out, "rb").read())
pool = descriptor_pool.DescriptorPool()
for f in fds.file:
    pool.Add(f)
All = message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.All"))

cases = json.load(open(sys.argv[1]))
results = open(sys.argv[2]).read().splitlines()
assert len(results) == len(cases), (len(results), len(cases))
passed = 0
for (name, value), line in zip(cases, results):
    try:
        want = json_format.Parse(json.dumps(value), All(), descriptor_pool=pool)
    except Exception as e:  # the reference refuses the case
        want = None
        why = str(e).splitlines()[0]
    kind, _, rest = line.partition(" ")
    if want is None:
        ok = kind == "err"
        verdict = "pass" if ok else f"FAIL: accepted what the reference refuses ({why})"
    elif kind == "err":
        ok = False
        verdict = f"FAIL: refused ({rest})"
    else:
        hexbytes, _, text = rest.partition(" ")
        got = All.FromString(bytes.fromhex(hexbytes))
        try:
            back = json_format.Parse(text, All(), descriptor_pool=pool)
        except Exception as e:
            back = None
        if got != want:
            ok, verdict = False, "FAIL: encoded a different message"
        elif back != want:
            ok, verdict = False, f"FAIL: its JSON output means another message: {text}"
        else:
            ok, verdict = True, "pass"
    passed += ok
    print(f"{verdict:>6}  {name}")
print(f"{passed}/{len(cases)} cases agree with the reference")
