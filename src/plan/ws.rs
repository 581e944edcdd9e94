//! A WebSocket workload (`ws://`, `wss://`): what each connection does once
//! upgraded, checked once here so the engine only reads settled values.
//!
//! Three modes, chosen by what is given: **hold** (no message: the socket
//! is kept open and pinged), **request** (`--ws-message` or
//! `--ws-message-file`: a message on each connection's schedule, timed to
//! the next data message received), **subscribe** (`--ws-subscribe`: one
//! message after the handshake, then the server's pushes are counted).

use std::sync::Arc;
use std::time::Duration;

use super::{LoadModel, ParsedUrl, defaults};
use crate::Error;
use crate::wire::RequestSpec;
use crate::wire::ws::Upgrade;

/// The WebSocket settings as given (flags or `[[workload]]` keys).
#[derive(Clone, Debug, Default)]
pub struct WsSpec {
    /// The message sent on each connection's schedule.
    pub message: Option<String>,
    /// The message read from a file.
    pub message_file: Option<std::path::PathBuf>,
    /// Send the message as a binary frame.
    pub binary: bool,
    /// `none`: the server does not answer messages.
    pub reply: Option<String>,
    /// The message sent once after the handshake (subscribe mode).
    pub subscribe: Option<String>,
    /// Ping interval (`Some(None)`: off); `None` is the default.
    pub ping: Option<Option<Duration>>,
    /// Largest message accepted, bytes.
    pub max_message: u32,
    /// The subprotocol offered (and required).
    pub subprotocol: Option<String>,
    /// Text each reply must contain.
    pub expect_message_contains: Option<String>,
    /// How long a ping may wait for its pong (`Some(None)`: for ever);
    /// `None` is the default.
    pub ping_timeout: Option<Option<Duration>>,
}

impl WsSpec {
    /// The settings given, by key (for "only with ws://" messages).
    fn given(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut add = |yes: bool, k: &'static str| {
            if yes {
                out.push(k);
            }
        };
        add(self.message.is_some(), "ws_message");
        add(self.message_file.is_some(), "ws_message_file");
        add(self.binary, "ws_binary");
        add(self.reply.is_some(), "ws_reply");
        add(self.subscribe.is_some(), "ws_subscribe");
        add(self.ping.is_some(), "ws_ping");
        add(self.subprotocol.is_some(), "ws_subprotocol");
        add(self.expect_message_contains.is_some(), "expect_message_contains");
        add(self.ping_timeout.is_some(), "ws_ping_timeout");
        out
    }
}

/// What a WebSocket connection does once upgraded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WsMode {
    /// Keep the socket open; ping; count what the server pushes.
    Hold,
    /// Send the message on the schedule; time the reply.
    Request,
    /// Send the message once; count the server's pushes and the silences.
    Subscribe,
}

impl WsMode {
    /// The mode's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            WsMode::Hold => "hold",
            WsMode::Request => "request",
            WsMode::Subscribe => "subscribe",
        }
    }
}

/// A WebSocket workload, settled.
#[derive(Clone, Debug, PartialEq)]
pub struct WsPlan {
    /// The upgrade request, rendered up to the key.
    pub upgrade: Upgrade,
    /// The subprotocol offered and required.
    pub subprotocol: Option<String>,
    /// What each connection does.
    pub mode: WsMode,
    /// The request or subscribe message (empty in hold mode).
    pub message: Arc<[u8]>,
    /// The message goes as a binary frame (else text).
    pub binary: bool,
    /// The server answers each message (request mode).
    pub reply: bool,
    /// Ping interval; `None`: no pings.
    pub ping: Option<Duration>,
    /// How long a ping may wait for its pong; `None`: for ever (or no
    /// pings).
    pub ping_timeout: Option<Duration>,
    /// Largest message accepted, bytes.
    pub max_message: u32,
    /// Bytes each reply must contain.
    pub expect_contains: Option<Arc<[u8]>>,
}

/// Checks the WebSocket settings against the URL and the load model: the
/// plan for a `ws://`/`wss://` URL, `None` for HTTP (where any WebSocket
/// setting is refused).
pub fn build(
    spec: &WsSpec,
    url: &ParsedUrl,
    headers: &[(String, String)],
    model: LoadModel,
    key: &dyn Fn(&str) -> String,
) -> Result<Option<WsPlan>, Error> {
    let given = spec.given();
    if !url.ws {
        return match given.first() {
            Some(k) => Err(Error::Usage(format!(
                "{} is a WebSocket setting, but the URL is not ws:// or wss://; use a ws:// URL or drop it",
                key(k)
            ))),
            None => Ok(None),
        };
    }
    let message: Option<Vec<u8>> = match (&spec.message, &spec.message_file) {
        (Some(_), Some(_)) => {
            return Err(Error::Usage(format!(
                "{} and {} both give the message; keep one",
                key("ws_message"),
                key("ws_message_file")
            )));
        }
        (Some(m), None) => Some(m.clone().into_bytes()),
        (None, Some(path)) => Some(std::fs::read(path).map_err(|e| {
            Error::Usage(format!(
                "{}: cannot read {}: {e}; check the path",
                key("ws_message_file"),
                path.display()
            ))
        })?),
        (None, None) => None,
    };
    let (mode, payload) = match (message, &spec.subscribe) {
        (Some(_), Some(_)) => {
            return Err(Error::Usage(format!(
                "{} and a message to send on a schedule cannot go together: a workload holds, requests or subscribes; split it in two workloads",
                key("ws_subscribe")
            )));
        }
        (Some(m), None) => (WsMode::Request, m),
        (None, Some(s)) => (WsMode::Subscribe, s.clone().into_bytes()),
        (None, None) => (WsMode::Hold, Vec::new()),
    };
    if payload.len() as u64 > spec.max_message as u64 {
        return Err(Error::Usage(format!(
            "{}: the message is {} bytes, over {} {}; raise the limit or shorten the message",
            key("ws_message"),
            payload.len(),
            key("ws_max_message"),
            spec.max_message
        )));
    }
    if !spec.binary && std::str::from_utf8(&payload).is_err() {
        return Err(Error::Usage(format!(
            "{}: the message is not UTF-8, so it cannot go as a text frame; add {}",
            key("ws_message_file"),
            key("ws_binary")
        )));
    }
    let reply = match spec.reply.as_deref() {
        None | Some("any") => true,
        Some("none") => false,
        Some(other) => {
            return Err(Error::Usage(format!(
                "{} {other:?}: expected `any` (each message is answered) or `none`",
                key("ws_reply")
            )));
        }
    };
    if mode != WsMode::Request && (spec.binary || !reply || spec.expect_message_contains.is_some()) {
        let k = if spec.binary {
            "ws_binary"
        } else if !reply {
            "ws_reply"
        } else {
            "expect_message_contains"
        };
        return Err(Error::Usage(format!(
            "{} applies to messages sent on a schedule; give --ws-message (or drop it)",
            key(k)
        )));
    }
    if !reply && spec.expect_message_contains.is_some() {
        return Err(Error::Usage(format!(
            "{} checks replies, and {} none says there are none; drop one",
            key("expect_message_contains"),
            key("ws_reply")
        )));
    }
    if !reply && model == LoadModel::Closed {
        // Closed loop sends the next message when the last is answered;
        // with no answer that is either one message per socket or a
        // flood as fast as the socket takes them, neither a soak.
        return Err(Error::Usage(format!(
            "{} none needs a schedule: closed loop waits for each reply, and none comes; give {} (paced) or {} (open loop)",
            key("ws_reply"),
            key("interval"),
            key("rate")
        )));
    }
    if mode != WsMode::Request && model != LoadModel::Closed {
        return Err(Error::Usage(format!(
            "{} / {}: a {} WebSocket sends no messages on a schedule; drop the pace or give --ws-message",
            key("interval"),
            key("rate"),
            mode.name()
        )));
    }
    // Each value was checked by its kind (a duration of at least 10 ms, or
    // off); what is left is how the two go together.
    let ping = spec.ping.unwrap_or(defaults::WS_PING);
    let ping_timeout = match (ping, spec.ping_timeout) {
        (_, Some(None)) | (None, None) => None,
        (None, Some(Some(_))) => {
            return Err(Error::Usage(format!(
                "{} applies to soakd's pings, and {} is off; give a ping interval or drop it",
                key("ws_ping_timeout"),
                key("ws_ping")
            )));
        }
        (Some(_), given) => given.unwrap_or(defaults::WS_PING_TIMEOUT),
    };
    if let Some(p) = &spec.subprotocol {
        crate::wire::check_header("Sec-WebSocket-Protocol", p)
            .map_err(|e| Error::Usage(format!("{}: {e}", key("ws_subprotocol"))))?;
        if p.is_empty() || p.contains([',', ' ']) {
            return Err(Error::Usage(format!(
                "{} {p:?}: give one subprotocol name (a token, no commas or spaces)",
                key("ws_subprotocol")
            )));
        }
    }
    let upgrade = Upgrade::new(
        &RequestSpec {
            method: "GET".into(),
            target: url.target.clone(),
            host: url.host_header.clone(),
            headers: headers.to_vec(),
            body: Vec::new(),
            close: false,
        },
        spec.subprotocol.as_deref(),
    );
    Ok(Some(WsPlan {
        upgrade,
        subprotocol: spec.subprotocol.clone(),
        mode,
        message: payload.into(),
        binary: spec.binary,
        reply,
        ping,
        ping_timeout,
        max_message: spec.max_message,
        expect_contains: spec.expect_message_contains.as_ref().map(|s| s.as_bytes().into()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::parse_url;

    fn build_with(url: &str, spec: WsSpec, model: LoadModel) -> Result<Option<WsPlan>, Error> {
        build(&spec, &parse_url(url).unwrap(), &[], model, &|k| {
            format!("--{}", k.replace('_', "-"))
        })
    }

    fn spec() -> WsSpec {
        WsSpec {
            max_message: defaults::WS_MAX_MESSAGE,
            ..WsSpec::default()
        }
    }

    #[test]
    fn modes_follow_what_is_given() {
        let hold = build_with("ws://127.0.0.1:1/x", spec(), LoadModel::Closed)
            .unwrap()
            .unwrap();
        assert_eq!((hold.mode, hold.ping), (WsMode::Hold, Some(Duration::from_secs(30))));
        let req = build_with(
            "wss://127.0.0.1:1/x",
            WsSpec {
                message: Some("hi".into()),
                ping: Some(None),
                ..spec()
            },
            LoadModel::Interval(Duration::from_secs(1)),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (req.mode, &req.message[..], req.ping),
            (WsMode::Request, &b"hi"[..], None)
        );
        let sub = WsSpec {
            subscribe: Some("{\"sub\":1}".into()),
            ..spec()
        };
        assert_eq!(
            build_with("ws://h:1/", sub, LoadModel::Closed).unwrap().unwrap().mode,
            WsMode::Subscribe
        );
        assert!(
            build_with("http://127.0.0.1:1/", spec(), LoadModel::Closed)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn bad_combinations_are_refused_by_name() {
        let err = |url: &str, s: WsSpec, m: LoadModel| match build_with(url, s, m) {
            Err(Error::Usage(m)) => m,
            other => panic!("{other:?}"),
        };
        let m = err(
            "http://h:1/",
            WsSpec {
                message: Some("x".into()),
                ..spec()
            },
            LoadModel::Closed,
        );
        assert!(m.contains("--ws-message") && m.contains("ws://"), "{m}");
        let both = WsSpec {
            message: Some("x".into()),
            subscribe: Some("y".into()),
            ..spec()
        };
        assert!(err("ws://h:1/", both, LoadModel::Closed).contains("--ws-subscribe"));
        let paced_hold = err("ws://h:1/", spec(), LoadModel::Rate(5.0));
        assert!(paced_hold.contains("hold"), "{paced_hold}");
        let timeout_alone = WsSpec {
            ping: Some(None),
            ping_timeout: Some(Some(Duration::from_secs(1))),
            ..spec()
        };
        assert!(err("ws://h:1/", timeout_alone, LoadModel::Closed).contains("--ws-ping-timeout"));
        let big = WsSpec {
            message: Some("x".repeat(11)),
            max_message: 10,
            ..spec()
        };
        assert!(err("ws://h:1/", big, LoadModel::Closed).contains("--ws-max-message"));
        let proto = WsSpec {
            subprotocol: Some("a, b".into()),
            ..spec()
        };
        assert!(err("ws://h:1/", proto, LoadModel::Closed).contains("--ws-subprotocol"));
    }
}
