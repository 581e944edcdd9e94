//! Every workload setting, declared once: its flag, its config key, its
//! kind of value (which holds the flag's parser and the key's check), its
//! default (from [`defaults`]), its help text and where it goes in the
//! [`WorkloadSpec`].
//!
//! Before this table a setting was written six times (the flag struct, its
//! spec literal, the list of flags refused with `--config`, the file struct,
//! its spec literal and the key→line table), and the copies drifted. The
//! [`workload_settings!`] macro generates all of them from one line each,
//! in the spirit of ripgrep's `Flag` definitions:
//!
//! - [`WorkloadSettings`]: the clap arguments of `soakd run` (flattened into
//!   its flags), which a file's `[[workload]]` also becomes;
//! - `FileWorkload`: the serde struct of a `[[workload]]` table (unknown
//!   keys refused), with the file-only keys listed after the table;
//! - [`WorkloadSettings::apply`]: the values into a [`WorkloadSpec`], each
//!   default applied once;
//! - [`WorkloadSettings::first_given`]: the flag refused next to `--config`;
//! - `FileWorkload::span_of`: where a key is written, for messages;
//! - [`declared`]: the table itself, which the tests hold docs/config.md
//!   against.
//!
//! **To add a workload setting:** add one line below (doc comment = help
//! text; kind from `kinds`, or a new kind there, which holds the value's
//! checks and ranges; `default` from `plan/defaults.rs` when the spec wants
//! a value, `shown` when the default is applied later; its place in the
//! spec: `within conn` for how each connection behaves (`plan::ConnPolicy`,
//! carried to the plan as one value), `into PATH` for a field of its own;
//! `reload recycle` when a reload that changes it must recycle the open
//! connections, else it applies to them live), add its field where it
//! goes, and use it; add its row to docs/config.md's `[[workload]]` table
//! (a unit test fails until it is there) and use it in
//! `examples/soak.toml` (tests/examples.rs checks). Nothing else: the flag,
//! the key, `--help`, the `--config` refusal, the error locations and the
//! reload's recycle rule follow.

use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

use super::Locator;
use super::kinds::{self, Count, Depth, Dur, File, FileCx, Files, Headers, Ips, Kind, Method, OnOff, Pids, Rate, Slot};
use super::kinds::{Http, KeepIdle, OrOff, PingDur, Switch, Text, Version, Window};
use super::request::FileRequest;
use super::stages::FileStage;
use crate::Error;
use crate::plan::{LoadModel, TlsVersion, WorkloadSpec, defaults};

/// A setting's default as `--help` shows it (none when not declared).
macro_rules! default_text {
    ($K:ty, [], []) => {
        None
    };
    ($K:ty, [$d:expr], []) => {
        Some(<$K as Kind>::show(&$d.into()))
    };
    ($K:ty, [], [$d:expr]) => {
        Some(<$K as Kind>::show(&$d.into()))
    };
}

/// Stores a setting in the spec: as given, or with its default applied.
/// Its place is `into PATH` (a field path of the spec), or `within GROUP`
/// (the field of the same name in the spec's `GROUP`), or none (the caller
/// reads it, as the load model's `interval` and `rate`).
macro_rules! store {
    ($spec:ident, $v:expr, [], [], $name:ident, [$($d:expr)?]) => {};
    ($spec:ident, $v:expr, [$($p:ident).+], [], $name:ident, []) => {
        $spec.$($p).+ = IntoSpec::into_spec($v);
    };
    ($spec:ident, $v:expr, [$($p:ident).+], [], $name:ident, [$d:expr]) => {
        $spec.$($p).+ = $v.unwrap_or_else(|| $d.into());
    };
    ($spec:ident, $v:expr, [], [$g:ident], $name:ident, []) => {
        $spec.$g.$name = IntoSpec::into_spec($v);
    };
    ($spec:ident, $v:expr, [], [$g:ident], $name:ident, [$d:expr]) => {
        $spec.$g.$name = $v.unwrap_or_else(|| $d.into());
    };
}

/// Adds a setting's value in the spec to the recycle key when its reload
/// class is `recycle` (see [`WorkloadSpec::recycle_key`](crate::plan::WorkloadSpec)).
macro_rules! recycle_hash {
    ($h:ident, $spec:ident, [$($p:ident).+], [], $name:ident, [recycle]) => {
        std::hash::Hash::hash(&$spec.$($p).+, &mut $h);
    };
    ($h:ident, $spec:ident, [], [$g:ident], $name:ident, [recycle]) => {
        std::hash::Hash::hash(&$spec.$g.$name, &mut $h);
    };
    ($h:ident, $spec:ident, [], [], $name:ident, [recycle]) => {
        compile_error!(concat!(stringify!($name), ": a setting that recycles connections needs a place in the spec"));
    };
    ($h:ident, $spec:ident, [$($p:ident)*], [$($g:ident)?], $name:ident, [$($class:ident)?]) => {};
}

/// Generates the flags, the file struct and their glue from the table
/// (see the module doc).
macro_rules! workload_settings {
    (
        $(
            $(#[doc = $doc:literal])+
            $name:ident: $ty:ty as $K:ty
                $(, default $default:expr)?
                $(, shown $shown:expr)?
                , flag $flag:literal
                $(, short $short:literal)?
                $(, clap($($extra:tt)*))?
                $(, into $($path:ident).+)?
                $(, within $group:ident)?
                $(, reload $class:ident)?
            ;
        )+
        file_only {
            $( $(#[$fmeta:meta])+ $fname:ident: $fty:ty, )+
        }
    ) => {
        /// The settings of one workload: `soakd run`'s flags, or what a
        /// `[[workload]]` table's keys become.
        #[derive(Clone, Debug, Default, clap::Args)]
        pub struct WorkloadSettings {
            $(
                $(#[doc = $doc])+
                #[arg(
                    long = $flag,
                    value_name = <$K as Kind>::NAME,
                    value_parser = <$K as Kind>::parser(),
                    allow_hyphen_values = <$K as Kind>::HYPHEN,
                    help = kinds::help(
                        concat!($($doc, "\n"),+),
                        default_text!($K, [$($default)?], [$($shown)?]),
                    ),
                )]
                $(#[arg(short = $short)])?
                $(#[arg($($extra)*)])?
                pub $name: $ty,
            )+
        }

        impl WorkloadSettings {
            /// The first setting given, as its flag (`--connections`).
            pub fn first_given(&self) -> Option<&'static str> {
                $(
                    if Slot::given(&self.$name) {
                        return Some(concat!("--", $flag));
                    }
                )+
                None
            }

            /// Moves the settings into `spec`, each default applied here
            /// (the load model, `interval` and `rate`, is the caller's),
            /// and sets its recycle key from the settings declared `reload
            /// recycle`: a reload that changes one of them recycles the
            /// workload's connections (`engine::reload`), one that changes
            /// only others (`live`, the default) applies to the open ones.
            pub fn apply(self, spec: &mut WorkloadSpec) {
                $( store!(spec, self.$name, [$($($path).+)?], [$($group)?], $name, [$($default)?]); )+
                let mut h = std::collections::hash_map::DefaultHasher::new();
                $( recycle_hash!(h, spec, [$($($path).+)?], [$($group)?], $name, [$($class)?]); )+
                spec.recycle_key = std::hash::Hasher::finish(&h);
            }
        }

        /// One `[[workload]]` table as written.
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(super) struct FileWorkload {
            $(
                $(#[doc = $doc])+
                pub(super) $name: Option<Spanned<<$K as Kind>::Raw>>,
            )+
            $(
                $(#[$fmeta])+
                pub(super) $fname: $fty,
            )+
        }

        impl FileWorkload {
            /// The declared keys' values, each checked by its kind; an
            /// error names the file, the line and the key.
            pub(super) fn settings(&self, loc: &Locator<'_>, cx: &FileCx<'_>) -> Result<WorkloadSettings, Error> {
                let mut out = WorkloadSettings::default();
                $(
                    if let Some(v) = &self.$name {
                        let value = <$K as Kind>::file(v.get_ref().clone(), cx)
                            .map_err(|e| loc.err(v, stringify!($name), e))?;
                        out.$name = Slot::wrap(value);
                    }
                )+
                Ok(out)
            }

            /// Where a declared key is written (`None`: not in this table).
            pub(super) fn span_of(&self, key: &str) -> Option<Range<usize>> {
                match key {
                    $( stringify!($name) => self.$name.as_ref().map(Spanned::span), )+
                    _ => None,
                }
            }
        }

        /// The declared settings, in table order.
        pub fn declared() -> Vec<Declared> {
            vec![$(
                Declared {
                    key: stringify!($name),
                    flag: $flag,
                    default: default_text!($K, [$($default)?], [$($shown)?]),
                },
            )+]
        }

        /// The keys a `[[workload]]` table takes besides the declared
        /// settings (the file has no flag for them).
        pub const FILE_ONLY: &[&str] = &[$(stringify!($fname)),+];
    };
}

/// One declared setting, as docs and tests see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Declared {
    /// The config key.
    pub key: &'static str,
    /// The long flag, without `--`.
    pub flag: &'static str,
    /// The default as `--help` shows it.
    pub default: Option<String>,
}

workload_settings! {
    /// Connections to open and hold.
    connections: Option<u32> as Count, default defaults::CONNECTIONS, flag "connections", short 'c',
        into connections;
    /// At most N new connections per second while ramping up.
    ramp: Option<u32> as Count, default defaults::RAMP, flag "ramp", into ramp;
    /// Paced: each connection sends one request every DUR (e.g. 5s, 250ms).
    interval: Option<std::time::Duration> as Dur, flag "interval", short 'i', clap(conflicts_with = "rate");
    /// Open loop: N requests/s in total, spread evenly over the connections.
    rate: Option<f64> as Rate, flag "rate", short 'r';
    /// Requests in flight per connection (HTTP/1.1 pipelining when > 1).
    pipeline: Option<u16> as Depth, default defaults::PIPELINE, flag "pipeline", within conn;
    /// One request per connection, then close (HTTP/1.0 style churn).
    close: bool as Switch, flag "close", clap(conflicts_with = "max_requests_per_conn"), within conn;
    /// Close soakd's connections with a TCP reset (SO_LINGER 0) at churn and
    /// shutdown: no TIME_WAIT is left, so back-to-back runs find their ports
    /// free; the server sees resets instead of FINs.
    close_with_reset: bool as Switch, flag "close-with-reset", within conn;
    /// Request method.
    method: Option<String> as Method, default defaults::METHOD, flag "method", short 'm', into method,
        reload recycle;
    /// Extra request header "Name: value" (repeatable).
    headers: Vec<(String, String)> as Headers, flag "header", short 'H', into headers, reload recycle;
    /// Request body.
    body: Option<String> as Text, flag "body", clap(conflicts_with = "body_file"), into body, reload recycle;
    /// Request body read from FILE.
    body_file: Option<std::path::PathBuf> as File, flag "body-file", into body_file, reload recycle;
    /// Connect timeout (and, for https, the TLS handshake's).
    connect_timeout: Option<std::time::Duration> as Dur, default defaults::CONNECT_TIMEOUT,
        flag "connect-timeout", within conn;
    /// Time a request may wait for its complete response.
    request_timeout: Option<std::time::Duration> as Dur, default defaults::REQUEST_TIMEOUT,
        flag "request-timeout", within conn;
    /// Local address to bind (repeatable); spreads connections over several
    /// addresses to go past the ephemeral-port limit per target.
    source_addrs: Vec<std::net::IpAddr> as Ips, flag "source-addr", within conn, reload recycle;
    /// Planned churn: close a connection after about N requests (±10%).
    max_requests_per_conn: Option<u32> as Count, flag "max-requests-per-conn", within conn;
    /// Planned churn: close a connection after about DUR (±10%).
    max_conn_lifetime: Option<std::time::Duration> as Dur, flag "max-conn-lifetime", within conn;
    /// TCP keepalive: probe a connection idle this long (whole seconds),
    /// then every third of it; three unanswered probes end it as `timeout`.
    /// Finds a dead path under a held idle connection, and keeps NAT and
    /// load-balancer entries alive [default: off].
    tcp_keepalive: Option<std::time::Duration> as KeepIdle, flag "tcp-keepalive", within conn, reload recycle;
    /// Leave this long after the ramp out of the trends (slopes and
    /// drifts), so a server filling its caches does not read as a leak
    /// [default: 10% of the run, at most 10m]
    warmup: Option<std::time::Duration> as Dur, flag "warmup", into warmup;
    /// PID of the server under test (repeatable, e.g. nginx master and
    /// workers): its memory, CPU and open files join the metrics.
    target_pids: Vec<u32> as Pids, flag "target-pid", into target_pids;
    /// https: the name sent (SNI) and verified instead of the URL's host
    /// (e.g. a URL with an IP address and a certificate for a name).
    servername: Option<String> as Text, flag "servername", clap(value_name = "NAME"), into tls.servername,
        reload recycle;
    /// https: trust the CAs in this PEM file instead of the system's roots
    /// (repeatable).
    cacert: Vec<std::path::PathBuf> as Files, flag "cacert", into tls.cacert, reload recycle;
    /// https: do not verify the server's certificate (the report says so).
    insecure: bool as Switch, flag "insecure", into tls.insecure, reload recycle;
    /// https: client certificate chain, PEM (mutual TLS; needs --key).
    cert: Option<std::path::PathBuf> as File, flag "cert", into tls.cert, reload recycle;
    /// https: the client certificate's private key, PEM.
    key: Option<std::path::PathBuf> as File, flag "key", into tls.key, reload recycle;
    /// https: lowest TLS version offered, 1.2 or 1.3.
    tls_min: Option<TlsVersion> as Version, shown defaults::TLS_MIN, flag "tls-min", into tls.min,
        reload recycle;
    /// https: highest TLS version offered, 1.2 or 1.3.
    tls_max: Option<TlsVersion> as Version, shown defaults::TLS_MAX, flag "tls-max", into tls.max,
        reload recycle;
    /// https: resume TLS sessions when a slot reconnects, on or off.
    tls_resumption: Option<bool> as OnOff, shown defaults::TLS_RESUMPTION, flag "tls-resumption",
        into tls.resumption, reload recycle;
    // HTTP/2
    /// HTTP version: 1.1, 2 (h2 over TLS, h2c with prior knowledge on
    /// http://) or auto (over TLS, offer h2 and http/1.1 and speak what the
    /// server picks).
    http: Option<crate::plan::HttpVersion> as Http, default defaults::HTTP, flag "http", into http,
        reload recycle;
    /// HTTP/2: concurrent streams per connection (capped by the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS); -i paces each stream slot, -c
    /// stays the TCP connections.
    streams: Option<u16> as Depth, default defaults::STREAMS, flag "streams", into streams;
    /// HTTP/2: soakd's receive window, connection and stream, in bytes.
    h2_window: Option<u32> as Window, default defaults::H2_WINDOW, flag "h2-window", into h2_window,
        reload recycle;
    /// HTTP/2: send a PING on each connection every DUR (gRPC's
    /// keepalive) and time its ACK, or `off`.
    h2_ping: Option<OrOff> as PingDur, shown defaults::H2_PING, flag "h2-ping", into h2_ping,
        reload recycle;
    // HTTP/3
    /// HTTP/3: send a QUIC PING after DUR without a packet from the
    /// server, or `off`; by default after half the idle timeout the two
    /// sides negotiated.
    h3_keepalive: Option<OrOff> as PingDur, flag "h3-keepalive", into h3_keepalive, reload recycle;
    /// HTTP/3: on a resumed connection, send requests as 0-RTT data before
    /// the handshake completes (needs --tls-resumption on; replayable, so
    /// only for requests safe to repeat).
    h3_0rtt: Option<bool> as OnOff, shown defaults::H3_0RTT, flag "h3-0rtt", into h3_0rtt, reload recycle;
    // WebSocket
    /// ws://: send TEXT on each connection's schedule (paced -i, open loop
    /// -r, or closed loop) and time it to the next message received.
    ws_message: Option<String> as Text, flag "ws-message", clap(conflicts_with = "ws_message_file"),
        into ws.message, reload recycle;
    /// ws://: the message read from FILE.
    ws_message_file: Option<std::path::PathBuf> as File, flag "ws-message-file", into ws.message_file,
        reload recycle;
    /// ws://: send the message as a binary frame (else text).
    ws_binary: bool as Switch, flag "ws-binary", into ws.binary, reload recycle;
    /// ws://: `none` when the server does not answer messages.
    ws_reply: Option<String> as Text, flag "ws-reply", into ws.reply, reload recycle;
    /// ws://: send TEXT once after the handshake, then count the server's
    /// pushes and the silences between them.
    ws_subscribe: Option<String> as Text, flag "ws-subscribe", into ws.subscribe, reload recycle;
    /// ws://: ping every DUR, or `off`.
    ws_ping: Option<OrOff> as PingDur, shown defaults::WS_PING, flag "ws-ping", into ws.ping,
        reload recycle;
    /// ws://: the largest message accepted, bytes (over it: ws_protocol, close 1009).
    ws_max_message: Option<u32> as Count, default defaults::WS_MAX_MESSAGE, flag "ws-max-message",
        into ws.max_message, reload recycle;
    /// ws://: offer this subprotocol; the server must choose it.
    ws_subprotocol: Option<String> as Text, flag "ws-subprotocol", into ws.subprotocol, reload recycle;
    /// ws://: text each reply must contain (a failed check; the socket is kept).
    expect_message_contains: Option<String> as Text, flag "expect-message-contains",
        into ws.expect_message_contains, reload recycle;
    // WebSocket: ping timeout
    /// ws://: a ping unanswered this long fails the socket (ws_ping_timeout,
    /// close 1011), or `off`.
    ws_ping_timeout: Option<OrOff> as PingDur, shown defaults::WS_PING_TIMEOUT,
        flag "ws-ping-timeout", into ws.ping_timeout, reload recycle;
    // gRPC
    /// grpc://: the method to call, package.Service/Method.
    call: Option<String> as Text, flag "call", into grpc.call, reload recycle;
    /// grpc://: a .proto file holding the method (repeatable), compiled
    /// in-process; with neither this nor --protoset, the server's
    /// reflection service is asked.
    proto: Vec<std::path::PathBuf> as Files, flag "proto", into grpc.proto, reload recycle;
    /// grpc://: where --proto files' imports are found (repeatable;
    /// default: each file's directory).
    import_path: Vec<std::path::PathBuf> as Files, flag "import-path", into grpc.import_path,
        reload recycle;
    /// grpc://: the schema as a FileDescriptorSet (protoc
    /// --include_imports --descriptor_set_out).
    protoset: Option<std::path::PathBuf> as File, flag "protoset", into grpc.protoset, reload recycle;
    /// grpc://: the request message as protobuf's canonical JSON [default:
    /// the empty message].
    data: Option<String> as Text, flag "data", into grpc.data, reload recycle;
    /// grpc://: the request message as JSON read from FILE.
    data_file: Option<std::path::PathBuf> as File, flag "data-file", into grpc.data_file, reload recycle;
    /// grpc://: the request message already encoded, read from FILE.
    data_bin: Option<std::path::PathBuf> as File, flag "data-bin", into grpc.data_bin, reload recycle;
    /// grpc://: `subscribe` holds one server-streaming call open per stream
    /// slot and counts its messages and silences.
    stream: Option<String> as Text, flag "stream", into grpc.stream, reload recycle;
    /// grpc://: each held stream is cancelled and opened anew after DUR
    /// (jittered ±10%) [default: held until the run ends].
    stream_lifetime: Option<std::time::Duration> as Dur, flag "stream-lifetime", into grpc.stream_lifetime,
        reload recycle;
    /// grpc://: a client-streaming or bidirectional method's message (JSON),
    /// sent on each held stream's schedule (-i, -r, or closed loop for
    /// bidirectional: the next after each reply).
    stream_message: Option<String> as Text, flag "stream-message", into grpc.stream_message, reload recycle;

    file_only {
        /// The `target` label; `host:port` when absent.
        name: Option<Spanned<String>>,
        /// The target URL (on the command line, the positional argument).
        url: Spanned<String>,
        /// Closed loop, stated explicitly.
        closed: Option<Spanned<bool>>,
        /// Steps of connections and pace.
        #[serde(default)]
        stages: Vec<Spanned<FileStage>>,
        /// After the last stage: "hold" or "stop".
        then: Option<Spanned<String>>,
        /// A request mix (`[[workload.request]]`).
        #[serde(default)]
        request: Vec<Spanned<FileRequest>>,
        /// This workload's thresholds.
        #[serde(default)]
        thresholds: Vec<Spanned<String>>,
        /// Accepted statuses.
        expect_status: Option<Spanned<Vec<u16>>>,
        /// Fields the response must carry.
        expect_header: Option<Spanned<std::collections::BTreeMap<String, String>>>,
        /// Text the body must contain.
        expect_body_contains: Option<Spanned<String>>,
        /// Bytes of the body searched.
        check_body_limit: Option<Spanned<u64>>,
        /// Longest body accepted.
        max_body_bytes: Option<Spanned<u64>>,
        /// gRPC: the status codes that end a call well.
        expect_grpc_status: Option<Spanned<Vec<String>>>,
        /// gRPC: a JSON object the decoded reply must contain.
        expect_grpc_message: Option<Spanned<String>>,
    }
}

impl WorkloadSettings {
    /// The load model `interval` and `rate` give (closed loop without
    /// either; the two together are refused by the caller, which knows how
    /// they were written).
    pub fn model(&self) -> LoadModel {
        match (self.interval, self.rate) {
            (Some(i), _) => LoadModel::Interval(i),
            (None, Some(r)) => LoadModel::Rate(r),
            (None, None) => LoadModel::Closed,
        }
    }
}

/// The flag (without `--`) of a setting's key, for messages about a
/// command line: declared (`source_addrs` → `source-addr`), or the key
/// with dashes.
pub fn flag_of(key: &str) -> String {
    match declared().into_iter().find(|d| d.key == key) {
        Some(d) => d.flag.to_string(),
        None => key.replace('_', "-"),
    }
}

/// A setting's value as the spec holds it: the same, or (a body) as bytes.
trait IntoSpec<T> {
    /// The spec's value.
    fn into_spec(self) -> T;
}

impl<T> IntoSpec<T> for T {
    fn into_spec(self) -> T {
        self
    }
}

impl IntoSpec<Option<Option<std::time::Duration>>> for Option<OrOff> {
    fn into_spec(self) -> Option<Option<std::time::Duration>> {
        self.map(|v| v.0)
    }
}

impl IntoSpec<Option<Vec<u8>>> for Option<String> {
    fn into_spec(self) -> Option<Vec<u8>> {
        self.map(String::into_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/config.md's `[[workload]]` table: each row's keys (`a` / `b`)
    /// with its default cell (split the same way when it has as many parts).
    fn documented() -> Vec<(String, String)> {
        let doc = include_str!("../../docs/config.md");
        let table = doc.split("## `[[workload]]`").nth(1).expect("the [[workload]] section");
        let mut out = Vec::new();
        for row in table
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2)
        {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let keys: Vec<&str> = cells[1].split(" / ").map(|k| k.trim_matches('`')).collect();
            let defaults: Vec<&str> = cells[3].split(" / ").collect();
            for (i, k) in keys.iter().enumerate() {
                let d = if defaults.len() == keys.len() {
                    defaults[i]
                } else {
                    cells[3]
                };
                out.push((k.to_string(), d.to_string()));
            }
        }
        out
    }

    /// The docs' key table and the declarations agree: the same keys, and
    /// each declared default written in its row.
    #[test]
    fn docs_table_matches_the_declarations() {
        let docs = documented();
        let declared = declared();
        for d in &declared {
            let Some((_, cell)) = docs.iter().find(|(k, _)| k == d.key) else {
                panic!("docs/config.md's [[workload]] table has no row for `{}`", d.key);
            };
            if let Some(default) = &d.default {
                let words: Vec<&str> = cell.split(|c: char| !(c.is_alphanumeric() || c == '.')).collect();
                assert!(
                    words.contains(&default.as_str()),
                    "docs/config.md: `{}` defaults to {default} (plan/defaults.rs), the table says {cell}",
                    d.key
                );
            }
        }
        for (k, _) in &docs {
            assert!(
                declared.iter().any(|d| d.key == k) || FILE_ONLY.contains(&k.as_str()),
                "docs/config.md documents `{k}`, which no [[workload]] takes"
            );
        }
        assert!(docs.len() >= declared.len() + 4, "{docs:?}");
    }

    /// Each declaration's flag parses and lands in the spec: one command
    /// line setting every value-taking setting is read back from the spec.
    #[test]
    fn flags_reach_the_spec() {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Probe {
            #[command(flatten)]
            w: WorkloadSettings,
        }
        let p = Probe::try_parse_from([
            "probe",
            "-c",
            "7",
            "--ramp",
            "9",
            "--pipeline",
            "3",
            "-m",
            "POST",
            "-H",
            "A: b",
            "--body",
            "x",
            "--connect-timeout",
            "2s",
            "--source-addr",
            "127.0.0.2",
            "--tls-min",
            "1.3",
            "--tls-resumption",
            "off",
        ])
        .unwrap();
        assert_eq!(p.w.first_given(), Some("--connections"));
        let mut spec = WorkloadSpec::default();
        p.w.apply(&mut spec);
        assert_eq!((spec.connections, spec.ramp, spec.conn.pipeline), (7, 9, 3));
        assert_eq!((spec.method.as_str(), spec.body.as_deref()), ("POST", Some(&b"x"[..])));
        assert_eq!(spec.headers, [("A".to_string(), "b".to_string())]);
        assert_eq!(spec.conn.connect_timeout, std::time::Duration::from_secs(2));
        assert_eq!(spec.conn.request_timeout, defaults::REQUEST_TIMEOUT);
        assert_eq!(spec.conn.source_addrs.len(), 1);
        assert_eq!(
            (spec.tls.min, spec.tls.max, spec.tls.resumption),
            (Some(TlsVersion::V13), None, Some(false))
        );
        let none = Probe::try_parse_from(["probe"]).unwrap();
        assert_eq!(none.w.first_given(), None);
        assert_eq!(flag_of("source_addrs"), "source-addr");
    }
}
