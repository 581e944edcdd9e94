//! gRPC schemas, requests and reflection against a server no one here
//! wrote: grpcio (Python, tests/peers/grpc_server.py) serving
//! tests/proto/echo.proto.
//!
//! Shown here: a method resolves the same from `--proto`, from a protoset
//! (made by grpcio-tools' protoc in the test) and from the server's
//! reflection (v1 when served, else v1alpha, which is all grpcio serves);
//! a message soakd encodes from JSON reaches the Python server as the same
//! values, metadata included; and every kind of bad input gets its
//! message.

mod util;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use soakd::plan::grpc::{MessageData, MethodKind, Schema, SchemaError, prepare_call};
use soakd::plan::tls::{self, TlsSpec};
use soakd::reflection::{self, CallEnd, Conn, Endpoint, Next, ReflectionError};
use soakd::wire::grpc::{Code, StatusSource, encode_message};
use util::{TempDir, grpc_python};

const SERVICE: &str = "soakd.test.v1.Echo";
const METHODS: [(&str, MethodKind, &str, &str); 5] = [
    (
        "soakd.test.v1.Echo/Chat",
        MethodKind::Bidi,
        "soakd.test.v1.EchoRequest",
        "soakd.test.v1.EchoReply",
    ),
    (
        "soakd.test.v1.Echo/Collect",
        MethodKind::ClientStreaming,
        "soakd.test.v1.EchoRequest",
        "soakd.test.v1.Summary",
    ),
    (
        "soakd.test.v1.Echo/Lookup",
        MethodKind::Unary,
        "soakd.test.v1.EchoRequest",
        "soakd.test.v1.EchoReply",
    ),
    (
        "soakd.test.v1.Echo/Subscribe",
        MethodKind::ServerStreaming,
        "soakd.test.v1.SubscribeRequest",
        "soakd.test.v1.EchoReply",
    ),
    (
        "soakd.test.v1.Echo/Unary",
        MethodKind::Unary,
        "soakd.test.v1.EchoRequest",
        "soakd.test.v1.EchoReply",
    ),
];

fn proto_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/proto")
}

fn from_proto() -> Schema {
    Schema::from_protos(&[PathBuf::from("echo.proto")], &[proto_dir()]).expect("echo.proto compiles")
}

/// grpcio serving the test service; killed when dropped.
struct GrpcServer {
    child: Child,
    addr: SocketAddr,
    stats: PathBuf,
    _dir: TempDir,
}

impl GrpcServer {
    /// Starts the server with `reflection` (v1alpha, both, none); None
    /// when the venv lacks grpcio (a failure in CI).
    fn start(reflection: &str) -> Option<GrpcServer> {
        GrpcServer::start_with(&[reflection])
    }

    /// Starts the server with these arguments after the stats file.
    fn start_with(args: &[&str]) -> Option<GrpcServer> {
        let python = grpc_python()?;
        let dir = TempDir::new("grpc-server");
        let stats = dir.path().join("stats.json");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/grpc_server.py");
        let mut child = Command::new(python)
            .arg(script)
            .arg(proto_dir())
            .arg(&stats)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the grpcio server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("read the server's port");
        let port: u16 = line
            .trim()
            .strip_prefix("port ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the server printed {line:?}, not its port"));
        Some(GrpcServer {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            stats,
            _dir: dir,
        })
    }

    fn endpoint(&self) -> Endpoint {
        Endpoint {
            addr: self.addr,
            authority: self.addr.to_string(),
            tls: None,
            source: Some("127.0.31.1".parse().unwrap()),
        }
    }

    fn stats(&self) -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(&self.stats).expect("stats file")).expect("stats JSON")
    }
}

impl Drop for GrpcServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The protoset grpcio-tools' protoc makes of echo.proto.
fn protoset(dir: &TempDir) -> Option<PathBuf> {
    let out = dir.path().join("echo.protoset");
    let status = Command::new(grpc_python()?)
        .args(["-m", "grpc_tools.protoc", "--include_imports"])
        .arg(format!("-I{}", proto_dir().display()))
        .arg(format!("--descriptor_set_out={}", out.display()))
        .arg("echo.proto")
        .status()
        .expect("run grpc_tools.protoc");
    assert!(status.success(), "protoc failed");
    Some(out)
}

fn resolved(schema: &Schema) -> Vec<(String, String, MethodKind, String, String)> {
    METHODS
        .iter()
        .map(|(name, ..)| {
            let m = schema.method(name).expect("method resolves");
            (m.name.clone(), m.path.clone(), m.kind, m.input_type(), m.output_type())
        })
        .collect()
}

#[test]
fn a_method_resolves_the_same_from_proto_protoset_and_reflection() {
    let Some(server) = GrpcServer::start("v1alpha") else {
        return;
    };
    let dir = TempDir::new("grpc-protoset");
    let Some(set) = protoset(&dir) else { return };

    let proto = from_proto();
    let want: Vec<_> = METHODS
        .iter()
        .map(|(name, kind, input, output)| {
            (
                name.to_string(),
                format!("/{name}"),
                *kind,
                input.to_string(),
                output.to_string(),
            )
        })
        .collect();
    assert_eq!(resolved(&proto), want);
    assert_eq!(proto.methods(), METHODS.map(|m| m.0.to_string()));
    for file in ["echo.proto", "types/items.proto", "google/protobuf/timestamp.proto"] {
        assert!(
            proto.files().contains(&file.to_string()),
            "{file} in {:?}",
            proto.files()
        );
    }

    let from_set = Schema::from_protoset(&set).expect("the protoset loads");
    assert_eq!(resolved(&from_set), want);

    let fetched = reflection::fetch_schema(&server.endpoint(), &[SERVICE], Duration::from_secs(10))
        .expect("reflection gives the schema");
    assert_eq!(resolved(&fetched.schema), want);
    assert_eq!(fetched.schema.methods(), proto.methods());
    // The service's file, its import and the well-known type: all three.
    assert_eq!(fetched.files, 3, "{:?}", fetched.schema.files());
    // grpcio serves only v1alpha: soakd asked v1 first and fell back.
    assert_eq!(
        fetched.served_by,
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
    );
    assert_eq!(server.stats()["reflection"]["v1alpha"], 1);

    // The same message encodes to the same bytes from all three.
    let json = r#"{"text":"x","items":[{"name":"a","color":"RED"}],"at":"2024-01-02T03:04:05Z"}"#;
    let data = MessageData::Json(json.into());
    let bytes = |s: &Schema| prepare_call(s, "soakd.test.v1.Echo/Unary", &data, &[]).unwrap().framed;
    assert_eq!(bytes(&proto), bytes(&from_set));
    assert_eq!(bytes(&proto), bytes(&fetched.schema));
}

#[test]
fn reflection_prefers_v1_when_the_server_has_it() {
    let Some(server) = GrpcServer::start("both") else {
        return;
    };
    let fetched = reflection::fetch_schema(&server.endpoint(), &[SERVICE], Duration::from_secs(10)).unwrap();
    assert_eq!(
        fetched.served_by,
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
    );
    let stats = server.stats();
    assert_eq!(
        (
            stats["reflection"]["v1"].as_u64(),
            stats["reflection"]["v1alpha"].as_u64()
        ),
        (Some(1), Some(0))
    );
    assert_eq!(resolved(&fetched.schema), resolved(&from_proto()));
    let services = reflection::list_services(&server.endpoint(), Duration::from_secs(10)).unwrap();
    assert_eq!(services, ["grpc.reflection.v1alpha.ServerReflection", SERVICE]);
}

#[test]
fn reflection_errors_say_what_to_do() {
    let Some(server) = GrpcServer::start("none") else {
        return;
    };
    let e = reflection::fetch_schema(&server.endpoint(), &[SERVICE], Duration::from_secs(10)).unwrap_err();
    assert!(matches!(e, ReflectionError::NotServed { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "{} does not serve reflection (grpc.reflection.v1 or v1alpha: UNIMPLEMENTED Method not found!); give \
             --proto or --protoset",
            server.addr
        )
    );
    drop(server);

    let Some(server) = GrpcServer::start("v1alpha") else {
        return;
    };
    let e = reflection::fetch_schema(&server.endpoint(), &["soakd.test.v1.Nope"], Duration::from_secs(10)).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{} has no service soakd.test.v1.Nope (its reflection lists: grpc.reflection.v1alpha.ServerReflection, \
             soakd.test.v1.Echo); check the method's service name",
            server.addr
        )
    );
    let closed = util::free_port();
    let mut ep = server.endpoint();
    ep.addr = SocketAddr::from(([127, 0, 0, 1], closed));
    let e = reflection::fetch_schema(&ep, &[SERVICE], Duration::from_secs(5)).unwrap_err();
    assert!(matches!(e, ReflectionError::Unreachable { .. }), "{e:?}");
    assert!(e.to_string().contains("Connection refused"), "{e}");
    // As a soakd error: exit 2, before anything opens.
    assert_eq!(soakd::Error::from(e).exit_code(), 2);
}

#[test]
fn reflection_over_tls_verifies_the_server_and_speaks_h2() {
    let dir = TempDir::new("grpc-tls");
    // A self-signed CA:TRUE certificate, as `openssl req -x509` makes,
    // given with --cacert (soakd accepts it as the server's own).
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key).unwrap();
    let cert_path = write(&dir, "cert.pem", &cert.pem());
    let key_path = write(&dir, "key.pem", &key.serialize_pem());
    let (c, k) = (cert_path.to_str().unwrap(), key_path.to_str().unwrap());
    let Some(server) = GrpcServer::start_with(&["v1alpha", c, k]) else {
        return;
    };

    let tls_for = |cacert: Vec<PathBuf>| {
        let spec = TlsSpec {
            cacert,
            ..Default::default()
        };
        tls::build(&spec, "localhost", &|k: &str| format!("--{k}")).unwrap()
    };
    let mut ep = server.endpoint();
    ep.authority = format!("localhost:{}", server.addr.port());
    ep.tls = Some(tls_for(vec![cert_path.clone()]));
    let fetched = reflection::fetch_schema(&ep, &[SERVICE], Duration::from_secs(10)).expect("reflection over TLS");
    assert_eq!(resolved(&fetched.schema), resolved(&from_proto()));

    // Another CA: the certificate is refused, and said so.
    let other_key = rcgen::KeyPair::generate().unwrap();
    let mut other = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    other.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let other_path = write(&dir, "other.pem", &other.self_signed(&other_key).unwrap().pem());
    ep.tls = Some(tls_for(vec![other_path]));
    let e = reflection::fetch_schema(&ep, &[SERVICE], Duration::from_secs(10)).unwrap_err();
    assert!(
        matches!(
            &e,
            ReflectionError::Unreachable {
                source: reflection::ConnError::Tls(_),
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("certificate"), "{e}");
}

/// One unary call through soakd's client: the reply message and the end.
fn unary(
    conn: &mut Conn,
    path: &str,
    framed: &[u8],
    metadata: &[soakd::plan::grpc::MetadataEntry],
) -> (Vec<Vec<u8>>, CallEnd) {
    conn.start(path, metadata).unwrap();
    conn.send(framed, true).unwrap();
    let mut messages = Vec::new();
    loop {
        match conn.recv().unwrap() {
            Next::Message(m) => messages.push(m),
            Next::End(end) => return (messages, end),
        }
    }
}

fn ok(end: &CallEnd) -> bool {
    matches!(end, CallEnd::Status { status, .. } if status.code == Code::Ok && status.source == StatusSource::Trailers)
}

#[test]
fn a_json_message_reaches_grpcio_as_the_same_values() {
    let Some(server) = GrpcServer::start("v1alpha") else {
        return;
    };
    let schema = from_proto();
    // Every shape of the mapping: 64-bit integers as strings, bytes in
    // base64, enums by name, nested and repeated messages, maps (one with
    // integer keys), a oneof, a Timestamp, camelCase and proto names.
    let json = r#"{
        "text": "h\u00e9llo",
        "number": -7,
        "big": "-9007199254740993",
        "ratio": 0.25,
        "flag": true,
        "blob": "AAEC/w==",
        "color": "GREEN",
        "items": [{"name": "a", "qty": 2, "labels": {"k": "v"}}, {}, {"name": "c", "color": 3}],
        "counts": {"x": 1, "y": -2},
        "inner": {"note": "n", "children": [{"note": "deep"}]},
        "id": 42,
        "at": "2024-02-29T12:00:00.5Z",
        "tags": ["t1", "t2"],
        "by_id": {"18446744073709551615": {"name": "max"}},
        "delta": "-5",
        "crc": 4294967295,
        "score": 1.5
    }"#;
    let metadata = ["X-Trace: abc 123".to_string(), "trace-bin: AAEC/w".to_string()];
    let call = prepare_call(
        &schema,
        "soakd.test.v1.Echo/Unary",
        &MessageData::Json(json.into()),
        &metadata,
    )
    .unwrap();
    let mut conn = Conn::open(&server.endpoint(), Instant::now() + Duration::from_secs(10)).unwrap();
    let (replies, end) = unary(&mut conn, &call.method.path, &call.framed, &call.metadata);
    assert!(ok(&end), "{end:?}");
    assert_eq!(replies.len(), 1);

    // What grpcio decoded, in protobuf's own JSON (proto field names).
    let got = server.stats()["last_request"]["Unary"].clone();
    let want = serde_json::json!({
        "text": "h\u{e9}llo",
        "number": -7,
        "big": "-9007199254740993",
        "ratio": 0.25,
        "flag": true,
        "blob": "AAEC/w==",
        "color": "GREEN",
        "items": [{"name": "a", "qty": 2, "labels": {"k": "v"}}, {}, {"name": "c", "color": "BLUE"}],
        "counts": {"x": 1, "y": -2},
        "inner": {"note": "n", "children": [{"note": "deep"}]},
        "id": 42,
        "at": "2024-02-29T12:00:00.500Z",
        "tags": ["t1", "t2"],
        "by_id": {"18446744073709551615": {"name": "max"}},
        "delta": "-5",
        "crc": 4294967295u64,
        "score": 1.5
    });
    assert_eq!(got, want);
    let md = &server.stats()["last_metadata"];
    assert_eq!(md["x-trace"], "abc 123");
    assert_eq!(md["trace-bin"], "000102ff", "the -bin entry's bytes, decoded by grpcio");

    // The reply echoes the request: soakd decodes it back to the same
    // message it encoded.
    let reply: serde_json::Value = serde_json::from_str(&call.method.output_to_json(&replies[0]).unwrap()).unwrap();
    let sent: serde_json::Value = serde_json::from_str(&call.method.input_to_json(call.message()).unwrap()).unwrap();
    assert_eq!(reply["echo"], sent);
    assert_eq!(reply["seq"], "1");
}

#[test]
fn each_kind_of_call_runs_against_grpcio() {
    let Some(server) = GrpcServer::start("v1alpha") else {
        return;
    };
    let schema = from_proto();
    let mut conn = Conn::open(&server.endpoint(), Instant::now() + Duration::from_secs(20)).unwrap();
    let msg = |method: &str, json: &str| prepare_call(&schema, method, &MessageData::Json(json.into()), &[]).unwrap();

    // Server streaming: three replies, then OK.
    let sub = msg(
        "soakd.test.v1.Echo/Subscribe",
        r#"{"count": 3, "intervalMs": 10, "template": {"text": "s"}}"#,
    );
    assert_eq!(sub.method.kind, MethodKind::ServerStreaming);
    let (replies, end) = unary(&mut conn, &sub.method.path, &sub.framed, &[]);
    assert!(ok(&end), "{end:?}");
    assert_eq!(replies.len(), 3);

    // Client streaming: five requests in one DATA run, one summary.
    let one = msg("soakd.test.v1.Echo/Collect", r#"{"text": "c"}"#);
    let five = one.framed.repeat(5);
    let (replies, end) = unary(&mut conn, &one.method.path, &five, &[]);
    assert!(ok(&end), "{end:?}");
    let summary: serde_json::Value = serde_json::from_str(&one.method.output_to_json(&replies[0]).unwrap()).unwrap();
    assert_eq!(summary["received"], 5);

    // Bidirectional: each request answered before the next is sent.
    let chat = msg("soakd.test.v1.Echo/Chat", r#"{"number": 9}"#);
    conn.start(&chat.method.path, &[]).unwrap();
    for i in 1..=3 {
        conn.send(&chat.framed, false).unwrap();
        let Next::Message(m) = conn.recv().unwrap() else {
            panic!("no echo")
        };
        let reply: serde_json::Value = serde_json::from_str(&chat.method.output_to_json(&m).unwrap()).unwrap();
        assert_eq!(
            (reply["seq"].as_str(), reply["echo"]["number"].as_i64()),
            (Some(&*i.to_string()), Some(9))
        );
    }
    conn.send(&[], true).unwrap();
    assert!(ok(&match conn.recv().unwrap() {
        Next::End(e) => e,
        other => panic!("{other:?}"),
    }));

    // A method grpcio does not have: UNIMPLEMENTED, trailers-only.
    let mut framed = Vec::new();
    encode_message(&mut framed, false, b"");
    let (_, end) = unary(&mut conn, "/soakd.test.v1.Echo/Nope", &framed, &[]);
    match end {
        CallEnd::Status { status, .. } => {
            assert_eq!(
                (status.code, status.source),
                (Code::Unimplemented, StatusSource::TrailersOnly)
            )
        }
        other => panic!("{other:?}"),
    }
    let stats = server.stats();
    assert_eq!(
        (
            stats["calls"]["Subscribe"].as_u64(),
            stats["calls"]["Collect"].as_u64(),
            stats["calls"]["Chat"].as_u64()
        ),
        (Some(1), Some(1), Some(1))
    );
}

fn error_text(r: Result<impl std::fmt::Debug, SchemaError>) -> String {
    r.expect_err("bad input is refused").to_string()
}

fn write(dir: &TempDir, name: &str, text: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn bad_protos_and_protosets_are_refused_with_where_and_why() {
    let dir = TempDir::new("grpc-bad");
    // (file, text, the error after "FILE:")
    let cases = [
        (
            "bad.proto",
            "syntax = \"proto3\";\npackage x;\nmessage A {\n  string a = 1\n  int32 b = 2;\n}\n",
            "5:3: expected ';' or '[', but found 'int32'",
        ),
        (
            "undef.proto",
            "syntax = \"proto3\";\npackage x;\nmessage A {\n  Missing m = 1;\n}\n",
            "4:3: name 'Missing' is not defined",
        ),
        (
            "dup.proto",
            "syntax = \"proto3\";\npackage x;\nmessage A {\n  int32 a = 1;\n  int32 b = 1;\n}\n",
            "5:13: field number '1' is already used",
        ),
    ];
    for (name, text, want) in cases {
        let file = write(&dir, name, text);
        assert_eq!(
            error_text(Schema::from_protos(std::slice::from_ref(&file), &[])),
            format!("{}:{want}", file.display())
        );
    }

    let importer = write(
        &dir,
        "imp.proto",
        "syntax = \"proto3\";\nimport \"deps/missing.proto\";\npackage x;\n",
    );
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    assert_eq!(
        error_text(Schema::from_protos(
            &[PathBuf::from("imp.proto")],
            &[dir.path().to_path_buf(), other.clone()]
        )),
        format!(
            "{}:2:1: import \"deps/missing.proto\" not found (searched {}, {}); add the directory that holds it with \
             --import-path",
            importer.display(),
            dir.path().display(),
            other.display()
        )
    );
    // A file outside every import path given.
    let echo = proto_dir().join("echo.proto");
    assert_eq!(
        error_text(Schema::from_protos(
            std::slice::from_ref(&echo),
            &[proto_dir().join("types")]
        )),
        format!(
            "--proto {}: not under any import path ({}); add the directory its imports are relative to with \
             --import-path",
            echo.display(),
            proto_dir().join("types").display()
        )
    );

    let nowhere = dir.path().join("nowhere.proto");
    let msg = error_text(Schema::from_protos(std::slice::from_ref(&nowhere), &[]));
    assert!(
        msg.starts_with(&format!("--proto {}: no such file", nowhere.display())),
        "{msg}"
    );

    let garbage = write(&dir, "garbage.protoset", "this is not protobuf");
    let msg = error_text(Schema::from_protoset(&garbage));
    assert!(
        msg.starts_with(&format!(
            "--protoset {}: does not parse as a FileDescriptorSet",
            garbage.display()
        )),
        "{msg}"
    );
    assert!(
        msg.ends_with("(protoc --include_imports --descriptor_set_out=FILE)"),
        "{msg}"
    );
    let missing = dir.path().join("missing.protoset");
    assert!(error_text(Schema::from_protoset(&missing)).contains("cannot read it"));
}

#[test]
fn bad_methods_messages_and_metadata_are_refused_with_the_fix() {
    let schema = from_proto();
    let call =
        |method: &str, json: &str| error_text(prepare_call(&schema, method, &MessageData::Json(json.into()), &[]));
    assert_eq!(
        call("soakd.test.v1.Echo/Unray", "{}"),
        "method soakd.test.v1.Echo/Unray is not in the schema (did you mean soakd.test.v1.Echo/Unary?); it has: \
         soakd.test.v1.Echo/Chat, soakd.test.v1.Echo/Collect, soakd.test.v1.Echo/Lookup, \
         soakd.test.v1.Echo/Subscribe, soakd.test.v1.Echo/Unary"
    );
    assert!(call("Echo/Subscribe", "{}").contains("(did you mean soakd.test.v1.Echo/Subscribe?)"));
    assert!(!call("other.Service/Frobnicate", "{}").contains("did you mean"));
    assert_eq!(
        call("Unary", "{}"),
        "--call \"Unary\": give the method as package.Service/Method"
    );

    let unary = "soakd.test.v1.Echo/Unary";
    assert_eq!(
        call(unary, r#"{"items": [{}, {}, {"name": 5}]}"#),
        "--data: items[2].name: invalid type: integer `5`, expected a string (line 1, column 29) (for \
         soakd.test.v1.EchoRequest)"
    );
    assert_eq!(
        call(unary, r#"{"inner": {"children": [{"nope": 1}]}}"#),
        "--data: inner.children[0]: unrecognized field name 'nope' (line 1, column 31) (for \
         soakd.test.v1.EchoRequest)"
    );
    let msg = call(unary, r#"{"color": "PURPLE"}"#);
    assert!(msg.starts_with("--data: color: "), "{msg}");
    assert!(msg.contains("PURPLE"), "{msg}");
    let msg = call(unary, r#"{"big": "12x"}"#);
    assert!(msg.starts_with("--data: big: "), "{msg}");
    let msg = call(unary, "{");
    assert!(msg.starts_with("--data: EOF while parsing"), "{msg}");
    let msg = call(unary, "{} extra");
    assert!(msg.starts_with("--data: trailing characters"), "{msg}");

    let dir = TempDir::new("grpc-data");
    let file = write(&dir, "req.json", r#"{"number": "not a number"}"#);
    let msg = error_text(prepare_call(&schema, unary, &MessageData::JsonFile(file.clone()), &[]));
    assert!(
        msg.starts_with(&format!("--data-file {}: number: ", file.display())),
        "{msg}"
    );
    let bin = write(&dir, "req.bin", "\u{ff}\u{ff}\u{ff}");
    let msg = error_text(prepare_call(&schema, unary, &MessageData::Binary(bin.clone()), &[]));
    assert!(
        msg.starts_with(&format!(
            "--data-bin {}: not an encoded soakd.test.v1.EchoRequest (",
            bin.display()
        )),
        "{msg}"
    );
    let msg = error_text(prepare_call(
        &schema,
        unary,
        &MessageData::JsonFile(dir.path().join("none.json")),
        &[],
    ));
    assert!(
        msg.starts_with("--data-file ") && msg.contains("cannot read it"),
        "{msg}"
    );

    // Already-encoded bytes are sent as they are, framed.
    let good = prepare_call(&schema, unary, &MessageData::Json(r#"{"text": "b"}"#.into()), &[]).unwrap();
    let bin = dir.path().join("good.bin");
    std::fs::write(&bin, good.message()).unwrap();
    let from_bin = prepare_call(&schema, unary, &MessageData::Binary(bin), &[]).unwrap();
    assert_eq!(from_bin.framed, good.framed);
    assert_eq!(&good.framed[..5], &[0, 0, 0, 0, 3]);
    // No data: the empty message, a bare prefix.
    let empty = prepare_call(&schema, unary, &MessageData::Empty, &[]).unwrap();
    assert_eq!(empty.framed, [0, 0, 0, 0, 0]);

    let md = |h: &str| error_text(prepare_call(&schema, unary, &MessageData::Empty, &[h.to_string()]));
    assert!(md("grpc-timeout: 5S").contains("reserved"));
    assert!(md("token-bin: ***").contains("is base64"));
    assert!(md("no colon").contains("'name: value'"));
}
