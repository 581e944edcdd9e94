//! Deliberate misbehaviour: the fault modes `soakd target --fault` knows,
//! declared once with their command-line names.

/// A deliberate misbehaviour of the target, for testing clients.
///
/// Written `MODE` or `MODE@N` on the command line (parsed by its `FromStr`).
/// Without `@N` (`every == 1`) the fault hits every request; with `@N` only
/// every N-th request, counted per target thread, so good and broken
/// responses mix. `close-after-accept` counts accepted connections instead
/// of requests, and `stop-accepting` concerns the listener, so it takes no
/// `@N`. Of the HTTP/2 modes, `goaway@N` and `goaway-error@N` count the
/// streams of each connection (`rst-stream@N` counts per thread, as the
/// HTTP/1 modes do); `window-stall` and `settings-flood` act on every
/// HTTP/2 connection; `max-streams=K` takes the stream limit instead of
/// `@N` (kept in `every`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// What goes wrong.
    pub mode: FaultMode,
    /// Hit every `every`-th request (or accepted connection); 1 is all of
    /// them. Must be at least 1. For `max-streams=K` it is K.
    pub every: u32,
}

/// Counts what a fault's `@N` counts (requests, connections, sockets,
/// streams) on one thread: the one place a fault decides it hits.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Every {
    /// Counted since the fault last hit.
    count: u32,
}

impl Every {
    /// Counts one more; true when it is the `every`-th since the last hit.
    pub(super) fn hit(&mut self, every: u32) -> bool {
        self.count += 1;
        if self.count < every {
            return false;
        }
        self.count = 0;
        true
    }
}

name_table! {
    /// The ways [`Fault`] makes the target misbehave, each with its
    /// command-line spelling. Fault responses ignore the request's path, and
    /// all but `continue` and `http10-no-length` its `Connection` header.
    pub enum FaultMode {
        /// `close-after-accept`: Close each connection right after accepting
        /// it, before reading anything.
        CloseAfterAccept = "close-after-accept",
        /// `close-mid-head`: Send the first half of a response head, then
        /// close.
        CloseMidHead = "close-mid-head",
        /// `close-mid-body`: Send a head with `Content-Length: 100` and 10 body
        /// bytes, then close.
        CloseMidBody = "close-mid-body",
        /// `reset`: Reset the connection (`SO_LINGER` 0, then close: an RST)
        /// instead of answering.
        Reset = "reset",
        /// `never-answer`: Take the request and never answer it, nor anything
        /// after it on that connection; the connection stays open until the
        /// client closes it.
        NeverAnswer = "never-answer",
        /// `trickle`: Send the response one byte every 100 ms. Later requests
        /// on the connection wait until it is out. Cannot be combined with a
        /// delay.
        Trickle = "trickle",
        /// `huge-head`: A complete response whose head is 1 MiB of header
        /// lines; the connection stays open.
        HugeHead = "huge-head",
        /// `bad-status`: A response with an invalid status line, then close.
        BadStatus = "bad-status",
        /// `bad-chunk`: A chunked response with an invalid chunk size, then
        /// close.
        BadChunk = "bad-chunk",
        /// `short-body`: A head with `Content-Length: 100` and only 50 body
        /// bytes, then close.
        ShortBody = "short-body",
        /// `extra-bytes`: A valid response followed by garbage bytes nobody
        /// asked for; the connection stays open.
        ExtraBytes = "extra-bytes",
        /// `continue`: Answer as the `/continue` route does: `100 Continue`,
        /// then `pong`.
        Continue = "continue",
        /// `http10-no-length`: Answer as the `/http10` route does: an HTTP/1.0
        /// response without a length, ended by closing the connection.
        Http10NoLength = "http10-no-length",
        /// `stop-accepting`: Never accept: the listener gets a backlog of 1
        /// and is never polled, so the backlog fills and further connects hang
        /// in the handshake until the client gives up.
        StopAccepting = "stop-accepting",
        /// `handshake-stall` (with `--tls`): Accept, then never read, so
        /// the client's TLS handshake never finishes.
        HandshakeStall = "handshake-stall",
        /// `close-no-notify` (with `--tls`): Answer `pong` with
        /// `Connection: close`, then close the TCP connection without a TLS
        /// close_notify.
        CloseNoNotify = "close-no-notify",
        // WebSocket: these act on upgraded sockets only (HTTP requests are
        // answered as usual). `@N` counts data messages per socket for the
        // message faults, upgraded sockets per thread for the others.
        /// `ws-no-pong`: Never answer a client's ping (every N-th socket);
        /// echoes and pushes go on.
        WsNoPong = "ws-no-pong",
        /// `ws-close`: Close with code 1011 (internal error) instead of
        /// answering the N-th message of each socket (of the N-th push on
        /// `/ws/push`).
        WsClose = "ws-close",
        /// `ws-bad-frame`: Answer the N-th message of each socket with a
        /// frame of a reserved opcode, which the client must fail with
        /// 1002; nothing more is echoed on it.
        WsBadFrame = "ws-bad-frame",
        /// `ws-oversize`: Answer the N-th message of each socket with a
        /// 1 MiB + 1 byte binary message, over a client's default limit.
        WsOversize = "ws-oversize",
        /// `ws-ping-flood`: Flood every N-th socket with pings (100 every
        /// 100 ms, paused while the client does not read them).
        WsPingFlood = "ws-ping-flood",
        // HTTP/2 (with --h2; they act on HTTP/2 connections only)
        /// `goaway` (with --h2): after a connection's N-th stream
        /// (`goaway@N`, counted per connection, as a load balancer does), a
        /// graceful GOAWAY (NO_ERROR) whose last_stream_id is that stream;
        /// the streams up to it are answered, later ones never (the client
        /// must send them again), then the connection closes.
        Goaway = "goaway",
        /// `goaway-error` (with --h2): on a connection's N-th stream,
        /// GOAWAY with INTERNAL_ERROR naming the last stream answered, then
        /// close; streams in progress are dropped.
        GoawayError = "goaway-error",
        /// `rst-stream` (with --h2): answer the stream with RST_STREAM
        /// (INTERNAL_ERROR) instead of a response.
        RstStream = "rst-stream",
        /// `max-streams=K` (with --h2): advertise
        /// SETTINGS_MAX_CONCURRENT_STREAMS K and refuse (RST_STREAM
        /// REFUSED_STREAM) every stream opened beyond K at once.
        MaxStreams = "max-streams",
        /// `window-stall` (with --h2): advertise a stream window of 1,024
        /// bytes and never send WINDOW_UPDATE, so a longer request body
        /// never arrives whole and its request is never answered.
        WindowStall = "window-stall",
        /// `settings-flood` (with --h2): send SETTINGS frames without end,
        /// as fast as the client reads them.
        SettingsFlood = "settings-flood",
    }
}

/// The `--fault` help text, with the mode names from the one table.
pub fn fault_help() -> String {
    let names: Vec<String> = FaultMode::ALL.iter().map(|m| m.spelling()).collect();
    format!(
        "Misbehave on purpose, for testing clients: on every request, or with @N on every N-th (per thread). MODE is one of {}.",
        names.join(", ")
    )
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.mode == FaultMode::MaxStreams {
            return write!(f, "max-streams={}", self.every);
        }
        f.write_str(self.mode.name())?;
        if self.every != 1 {
            write!(f, "@{}", self.every)?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Fault {
    type Err = String;

    /// Parses `MODE` or `MODE@N` (N ≥ 1); the error lists the modes.
    fn from_str(text: &str) -> Result<Fault, String> {
        let names = || {
            FaultMode::ALL
                .iter()
                .map(|m| m.spelling())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if let Some(k) = text.strip_prefix("max-streams=") {
            return match k.parse::<u32>() {
                Ok(k) if k >= 1 => Ok(Fault {
                    mode: FaultMode::MaxStreams,
                    every: k,
                }),
                _ => Err(format!(
                    "{k:?} after max-streams= is not a whole number of at least 1; e.g. max-streams=1"
                )),
            };
        }
        let (name, every) = match text.split_once('@') {
            Some((name, n)) => match n.parse::<u32>() {
                Ok(n) if n >= 1 => (name, n),
                _ => {
                    return Err(format!(
                        "{n:?} after @ is not a whole number of at least 1; expected MODE or MODE@N, e.g. reset@10"
                    ));
                }
            },
            None => (text, 1),
        };
        let Some(mode) = FaultMode::from_name(name) else {
            return Err(format!("unknown fault mode {name:?}; expected one of: {}", names()));
        };
        if mode == FaultMode::MaxStreams {
            return Err(
                "max-streams takes the stream limit as max-streams=K (K at least 1), e.g. max-streams=1".to_string(),
            );
        }
        let fault = Fault { mode, every };
        fault.validate()?;
        Ok(fault)
    }
}

/// Where a fault mode acts: see [`FaultMode::layer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FaultLayer {
    /// Before any protocol is spoken (accepting, the TLS handshake): on
    /// every connection alike.
    Socket,
    /// HTTP/1 responses.
    Http1,
    /// Upgraded WebSocket connections (HTTP requests are left alone).
    Ws,
    /// HTTP/2 connections (`--h2`, `--grpc`).
    H2,
}

impl Fault {
    pub(super) fn validate(&self) -> Result<(), String> {
        if self.every == 0 {
            return Err("a fault's @N must be at least 1".to_string());
        }
        if self.mode == FaultMode::StopAccepting && self.every != 1 {
            return Err("stop-accepting concerns the listener and takes no @N".to_string());
        }
        if matches!(self.mode, FaultMode::WindowStall | FaultMode::SettingsFlood) && self.every != 1 {
            return Err(format!(
                "{} acts on every HTTP/2 connection and takes no @N",
                self.mode.name()
            ));
        }
        Ok(())
    }
}

impl FaultMode {
    /// How the mode is written on the command line: its name, or
    /// `max-streams=K` for the one mode that takes a value instead of @N.
    pub fn spelling(self) -> String {
        match self {
            FaultMode::MaxStreams => "max-streams=K".to_string(),
            _ => self.name().to_string(),
        }
    }

    /// Where the mode acts. The one place that sorts the modes by
    /// protocol: each protocol's state keeps only the faults of its layer
    /// (`fault.filter(|f| f.mode.layer() == ...)`), and `spawn` checks a
    /// fault against the protocols the target serves. Exhaustive on
    /// purpose: a new mode must say where it acts.
    pub(super) fn layer(self) -> FaultLayer {
        match self {
            FaultMode::CloseAfterAccept | FaultMode::StopAccepting | FaultMode::HandshakeStall => FaultLayer::Socket,
            FaultMode::CloseMidHead
            | FaultMode::CloseMidBody
            | FaultMode::Reset
            | FaultMode::NeverAnswer
            | FaultMode::Trickle
            | FaultMode::HugeHead
            | FaultMode::BadStatus
            | FaultMode::BadChunk
            | FaultMode::ShortBody
            | FaultMode::ExtraBytes
            | FaultMode::Continue
            | FaultMode::Http10NoLength
            | FaultMode::CloseNoNotify => FaultLayer::Http1,
            FaultMode::WsNoPong
            | FaultMode::WsClose
            | FaultMode::WsBadFrame
            | FaultMode::WsOversize
            | FaultMode::WsPingFlood => FaultLayer::Ws,
            FaultMode::Goaway
            | FaultMode::GoawayError
            | FaultMode::RstStream
            | FaultMode::MaxStreams
            | FaultMode::WindowStall
            | FaultMode::SettingsFlood => FaultLayer::H2,
        }
    }
}
