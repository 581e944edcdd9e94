//! Every response the target can send, rendered once at start: routes by
//! path, the `Connection` variants of each, and the fault responses.

use super::FaultMode;
use crate::wire::headers;
pub(super) use crate::wire::headers::Persist;

/// What the target can answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Route {
    Pong,
    Chunked,
    Close,
    Http10,
    Continue,
    Big,
    /// `/status/NNN` for NNN in 200..=599.
    Status(u16),
}

/// Routes other than `/status/NNN`.
pub(super) const FIXED_ROUTES: usize = 6;
pub(super) const FIRST_STATUS: u16 = 200;
pub(super) const LAST_STATUS: u16 = 599;
pub(super) const ROUTES: usize = FIXED_ROUTES + (LAST_STATUS - FIRST_STATUS + 1) as usize;
/// Each route is rendered for GET and HEAD times the three [`Persist`]s.
pub(super) const VARIANTS: usize = 6;
pub(super) const BAD_REQUEST: u16 = (ROUTES * VARIANTS) as u16;
pub(super) const TOO_LARGE: u16 = BAD_REQUEST + 1;
/// The configured fault's response; only in the table when there is one.
pub(super) const FAULT: u16 = TOO_LARGE + 1;
/// Size of the `huge-head` fault's response head.
pub(super) const HUGE_HEAD: usize = 1024 * 1024;
/// Body size of `/big`.
pub(super) const BIG_BODY: usize = 64 * 1024;

impl Route {
    /// Routes by path, ignoring the query string. Anything unknown,
    /// including `/status/` with a 1xx or out-of-range code, is `pong`.
    pub(super) fn of(target: &str) -> Route {
        let path = target.split_once('?').map_or(target, |(path, _)| path);
        match path {
            "/chunked" => Route::Chunked,
            "/close" => Route::Close,
            "/http10" => Route::Http10,
            "/continue" => Route::Continue,
            "/big" => Route::Big,
            _ => path
                .strip_prefix("/status/")
                .filter(|code| code.len() == 3 && code.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|code| code.parse().ok())
                .filter(|code| (FIRST_STATUS..=LAST_STATUS).contains(code))
                .map_or(Route::Pong, Route::Status),
        }
    }

    pub(super) fn index(self) -> usize {
        match self {
            Route::Pong => 0,
            Route::Chunked => 1,
            Route::Close => 2,
            Route::Http10 => 3,
            Route::Continue => 4,
            Route::Big => 5,
            Route::Status(code) => FIXED_ROUTES + usize::from(code - FIRST_STATUS),
        }
    }

    pub(super) fn from_index(index: usize) -> Route {
        match index {
            0 => Route::Pong,
            1 => Route::Chunked,
            2 => Route::Close,
            3 => Route::Http10,
            4 => Route::Continue,
            5 => Route::Big,
            _ => Route::Status(FIRST_STATUS + (index - FIXED_ROUTES) as u16),
        }
    }
}

/// The table index of `route`'s response for a method and a [`Persist`]
/// variant (the request's keep-alive rule, `wire`'s one definition).
pub(super) fn response_id(route: Route, head: bool, persist: Persist) -> u16 {
    (route.index() * VARIANTS + usize::from(head) * 3 + persist as usize) as u16
}

/// A response rendered at startup.
pub(super) struct Response {
    pub(super) bytes: Box<[u8]>,
    /// Close the connection once this is written.
    pub(super) close: bool,
    /// Anything other than sending `bytes`; only fault responses have one.
    pub(super) action: Action,
}

/// What sending a [`Response`] means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    /// Write its bytes: every response but some faults.
    Respond,
    /// Reset the connection instead (`reset`).
    Reset,
    /// Never answer this or any later request (`never-answer`).
    Mute,
    /// Write its bytes one per [`TRICKLE_STEP`] (`trickle`).
    Trickle,
}

/// Every response the target can send, indexed by [`response_id`].
pub(super) struct Responses {
    pub(super) table: Vec<Response>,
}

impl Responses {
    /// Renders every route, the two error responses and, at [`FAULT`],
    /// the response of `fault` if there is one.
    pub(super) fn build(fault: Option<FaultMode>) -> Responses {
        let mut table = Vec::with_capacity(ROUTES * VARIANTS + 3);
        for index in 0..ROUTES {
            let route = Route::from_index(index);
            for head in [false, true] {
                for persist in [Persist::Default, Persist::KeepAlive, Persist::Close] {
                    debug_assert_eq!(table.len(), usize::from(response_id(route, head, persist)));
                    table.push(render(route, head, persist));
                }
            }
        }
        for code in [400, 431] {
            let text = format!(
                "HTTP/1.1 {code} {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                headers::reason(code)
            );
            table.push(Response {
                bytes: text.into_bytes().into_boxed_slice(),
                close: true,
                action: Action::Respond,
            });
        }
        if let Some(mode) = fault {
            debug_assert_eq!(table.len(), usize::from(FAULT));
            table.push(render_fault(mode));
        }
        Responses { table }
    }
}

/// Renders the response that acts out `mode`; only runs at startup.
pub(super) fn render_fault(mode: FaultMode) -> Response {
    const PONG_HEAD: &str = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\r\n";
    let (bytes, close, action) = match mode {
        FaultMode::CloseMidHead => (
            PONG_HEAD.as_bytes()[..PONG_HEAD.len() / 2].to_vec(),
            true,
            Action::Respond,
        ),
        FaultMode::CloseMidBody => {
            let mut bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nContent-Type: text/plain\r\n\r\n".to_vec();
            bytes.extend_from_slice(&[b'x'; 10]);
            (bytes, true, Action::Respond)
        }
        FaultMode::ShortBody => {
            let mut bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nContent-Type: text/plain\r\n\r\n".to_vec();
            bytes.extend_from_slice(&[b'x'; 50]);
            (bytes, true, Action::Respond)
        }
        FaultMode::Reset => (Vec::new(), false, Action::Reset),
        FaultMode::NeverAnswer => (Vec::new(), false, Action::Mute),
        FaultMode::Trickle => (format!("{PONG_HEAD}pong").into_bytes(), false, Action::Trickle),
        FaultMode::HugeHead => {
            let mut text = String::with_capacity(HUGE_HEAD + 128);
            text.push_str("HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n");
            let mut line = 0;
            while text.len() < HUGE_HEAD {
                text.push_str(&format!("X-Filler-{line:05}: {}\r\n", "f".repeat(100)));
                line += 1;
            }
            text.push_str("\r\npong");
            (text.into_bytes(), false, Action::Respond)
        }
        // A status code must be three digits.
        FaultMode::BadStatus => (
            b"HTTP/1.1 2x0 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\r\npong".to_vec(),
            true,
            Action::Respond,
        ),
        // `zz` is no hexadecimal chunk size.
        FaultMode::BadChunk => (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\nzz\r\npong\r\n0\r\n\r\n"
                .to_vec(),
            true,
            Action::Respond,
        ),
        FaultMode::ExtraBytes => (
            format!("{PONG_HEAD}pongGARBAGE\r\n\r\n").into_bytes(),
            false,
            Action::Respond,
        ),
        // These reuse routes or act outside responses; an entry keeps the
        // table's layout the same for every fault.
        FaultMode::CloseNoNotify => (
            b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\npong"
                .to_vec(),
            true,
            Action::Respond,
        ),
        FaultMode::Continue
        | FaultMode::Http10NoLength
        | FaultMode::CloseAfterAccept
        | FaultMode::StopAccepting
        | FaultMode::HandshakeStall => (format!("{PONG_HEAD}pong").into_bytes(), false, Action::Respond),
        // WebSocket faults act on upgraded sockets (`ws.rs`), not here.
        FaultMode::WsNoPong
        | FaultMode::WsClose
        | FaultMode::WsBadFrame
        | FaultMode::WsOversize
        | FaultMode::WsPingFlood
        // HTTP/2 faults act in server/h2.rs; HTTP/1 connections of an
        // `--h2` target are answered as usual.
        | FaultMode::Goaway
        | FaultMode::GoawayError
        | FaultMode::RstStream
        | FaultMode::MaxStreams
        | FaultMode::WindowStall
        | FaultMode::SettingsFlood => (format!("{PONG_HEAD}pong").into_bytes(), false, Action::Respond),
    };
    Response {
        bytes: bytes.into_boxed_slice(),
        close,
        action,
    }
}

/// Renders one response; only runs at startup.
pub(super) fn render(route: Route, head: bool, persist: Persist) -> Response {
    let persist = match route {
        Route::Close | Route::Http10 => Persist::Close,
        _ => persist,
    };
    let code = match route {
        Route::Status(code) => code,
        _ => 200,
    };
    let mut text = String::new();
    if route == Route::Continue {
        text.push_str("HTTP/1.1 100 Continue\r\n\r\n");
    }
    let version = if route == Route::Http10 { "HTTP/1.0" } else { "HTTP/1.1" };
    text.push_str(&format!("{version} {code} {}\r\n", headers::reason(code)));
    let body: Vec<u8> = match route {
        Route::Status(204 | 304) => Vec::new(),
        Route::Chunked => {
            text.push_str("Transfer-Encoding: chunked\r\nTrailer: X-Trailer\r\n");
            b"2\r\npo\r\n2\r\nng\r\n0\r\nX-Trailer: done\r\n\r\n".to_vec()
        }
        // Close-delimited: the end of the body is the end of the connection.
        Route::Http10 => b"pong".to_vec(),
        Route::Big => {
            text.push_str(&format!("Content-Length: {BIG_BODY}\r\n"));
            vec![b'x'; BIG_BODY]
        }
        _ => {
            text.push_str("Content-Length: 4\r\n");
            b"pong".to_vec()
        }
    };
    if !matches!(route, Route::Status(204 | 304)) {
        text.push_str("Content-Type: text/plain\r\n");
    }
    // HTTP/1.0 responses close by default; the header would be noise.
    if route != Route::Http10 {
        text.push_str(persist.header());
    }
    text.push_str("\r\n");
    let mut bytes = text.into_bytes();
    if !head {
        bytes.extend_from_slice(&body);
    }
    Response {
        bytes: bytes.into_boxed_slice(),
        close: persist == Persist::Close,
        action: Action::Respond,
    }
}
