//! One blocking `GET` of a URL, plain or over TLS: how `soakd status`
//! reads soakd's own `/metrics`, and how the server watch
//! (`observe::watch`) reads a target's exposition or asks a Prometheus
//! server (`--target-metrics`, `--prometheus`).
//!
//! Built from the crate's own pieces: the request is rendered by
//! [`render_request`], the response framed incrementally by the engine's
//! [`Framer`] (chunked or not; only an incomplete head is kept between
//! reads), TLS is the engine's [`ClientTls`] over a blocking socket. It
//! runs on a thread of its own (never a worker's), so blocking is fine,
//! but nothing a server does can hold it longer than its deadline (every
//! read's timeout is what is left of it, so a server that trickles a byte
//! a second still ends at the deadline) or make it keep more than its body
//! cap: a runaway endpoint is a classified failure ([`Failure`]), not a
//! stall or an unbounded buffer.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::ClientConfig;
use rustls::pki_types::ServerName;

use super::ClientTls;
use crate::wire::{AtEof, Framed, Framer, ProtocolError, RequestSpec, render_request};

/// Bytes asked for per read.
const READ_SIZE: usize = 64 * 1024;

/// A checked `http[s]://host[:port]/path` URL, ready to connect to.
#[derive(Clone, Debug)]
pub struct FetchUrl {
    url: url::Url,
    /// Origin-form request target: path and query, at least `/`.
    target: String,
    /// The Host header: the host as parsed (IPv6 in brackets) and the port
    /// when it is not the scheme's.
    host: String,
}

impl FetchUrl {
    /// Parses `input`, an absolute `http://` (or, with `https`, also
    /// `https://`) URL with a host and without user info. A fragment is
    /// dropped; blanks and control characters are refused rather than
    /// silently removed or encoded. The error is a cause for the caller's
    /// message.
    pub fn parse(input: &str, https: bool) -> Result<FetchUrl, String> {
        let expected = if https {
            "expected http://host:port/path or https://host:port/path"
        } else {
            "expected http://host:port/path"
        };
        let bad = |why: &str| format!("invalid URL ({why}; {expected})");
        if input.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("it contains a blank or control character"));
        }
        let url = url::Url::parse(input).map_err(|e| match e {
            url::ParseError::RelativeUrlWithoutBase => bad("no scheme"),
            e => bad(&e.to_string()),
        })?;
        match url.scheme() {
            "http" => {}
            "https" if https => {}
            _ if https => return Err(bad("only http:// and https:// are supported")),
            _ => return Err(bad("only http:// is supported")),
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(bad("user info is not supported"));
        }
        let host = match url.host_str() {
            Some(h) if !h.is_empty() => h,
            _ => return Err(bad("no host")),
        };
        let host = match url.port() {
            Some(0) => return Err(bad("port 0")),
            Some(port) => format!("{host}:{port}"),
            None => host.to_string(),
        };
        let mut target = url.path().to_string();
        if let Some(query) = url.query() {
            target.push('?');
            target.push_str(query);
        }
        Ok(FetchUrl { url, target, host })
    }

    /// `https://`.
    pub fn is_https(&self) -> bool {
        self.url.scheme() == "https"
    }

    /// The host as written (no port, IPv6 without brackets).
    pub fn host(&self) -> &str {
        self.url.host_str().unwrap_or_default()
    }

    /// The URL as given, without its fragment.
    pub fn as_str(&self) -> &str {
        self.url.as_str()
    }

    /// The same endpoint with another path and query (`/api/v1/query?...`
    /// of a Prometheus server).
    pub fn with_target(&self, path_and_query: &str) -> FetchUrl {
        let mut url = self.url.clone();
        let (path, query) = path_and_query.split_once('?').unwrap_or((path_and_query, ""));
        url.set_path(path);
        url.set_query((!query.is_empty()).then_some(query));
        FetchUrl {
            target: path_and_query.to_string(),
            host: self.host.clone(),
            url,
        }
    }
}

/// What went wrong with a fetch, as a closed set (a metric label).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Failure {
    /// Nothing listens (or the host is unknown).
    Refused,
    /// The connect, or the whole exchange, took longer than allowed.
    Timeout,
    /// The TLS handshake failed (certificate, protocol).
    Tls,
    /// A status other than 200.
    Status,
    /// The body was over the cap.
    TooLarge,
    /// Not an HTTP/1.x response, or cut short.
    Malformed,
    /// Any other socket error.
    Io,
}

impl Failure {
    /// Its label value.
    pub fn name(self) -> &'static str {
        match self {
            Failure::Refused => "refused",
            Failure::Timeout => "timeout",
            Failure::Tls => "tls",
            Failure::Status => "status",
            Failure::TooLarge => "too_large",
            Failure::Malformed => "malformed",
            Failure::Io => "io",
        }
    }
}

/// A failed fetch: its kind and the cause in words ("connect to
/// 127.0.0.1:9469: Connection refused").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchError {
    /// What kind of failure.
    pub kind: Failure,
    /// The cause, for a message.
    pub detail: String,
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

fn fail(kind: Failure, detail: impl Into<String>) -> FetchError {
    FetchError {
        kind,
        detail: detail.into(),
    }
}

/// How one endpoint is fetched: its URL, its TLS client (for `https://`),
/// extra request headers (an `Authorization` among them, which nothing
/// here ever prints), and the limits.
#[derive(Clone)]
pub struct Fetcher {
    /// Where.
    pub url: FetchUrl,
    /// The TLS client configuration and the name verified, for https.
    pub tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    /// Extra headers, sent as given.
    pub headers: Vec<(String, String)>,
    /// The longest the connect may take.
    pub connect_timeout: Duration,
    /// The longest the whole exchange may take.
    pub timeout: Duration,
    /// The largest body taken.
    pub max_body: usize,
}

impl std::fmt::Debug for Fetcher {
    /// The URL and the header names only: never a header's value.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("Fetcher")
            .field("url", &self.url.as_str())
            .field("headers", &names)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Fetcher {
    /// A plain fetcher of `url` with the given limits and no headers.
    pub fn new(url: FetchUrl, timeout: Duration, max_body: usize) -> Fetcher {
        Fetcher {
            url,
            tls: None,
            headers: Vec::new(),
            connect_timeout: timeout.min(Duration::from_secs(2)),
            timeout,
            max_body,
        }
    }

    /// GETs the URL and puts the body of its 200 response into `body`
    /// (cleared first; its room is kept from call to call). After a
    /// [`Failure::Status`], `body` holds what the server sent with it (a
    /// Prometheus server says why a query is bad there).
    pub fn get_into(&self, accept: &str, body: &mut Vec<u8>) -> Result<(), FetchError> {
        body.clear();
        let deadline = Instant::now() + self.timeout;
        let mut conn = self.connect(deadline)?;
        let mut headers = vec![("Accept".to_string(), accept.to_string())];
        headers.extend(self.headers.iter().cloned());
        let request = render_request(&RequestSpec {
            method: "GET".to_string(),
            target: self.url.target.clone(),
            host: self.url.host.clone(),
            headers,
            body: Vec::new(),
            close: true,
        });
        conn.send(&request, deadline)?;
        read_response(&mut conn, self.max_body, deadline, body)
    }

    /// [`Fetcher::get_into`] returning the body as text.
    pub fn get_text(&self, accept: &str) -> Result<String, FetchError> {
        let mut body = Vec::new();
        self.get_into(accept, &mut body)?;
        String::from_utf8(body).map_err(|_| fail(Failure::Malformed, "response body is not UTF-8 text"))
    }

    /// Connects to the first address of the URL's host that accepts, and
    /// makes the TLS handshake for https.
    fn connect(&self, deadline: Instant) -> Result<Conn, FetchError> {
        let host = self.url.host();
        let addrs: Vec<SocketAddr> = self
            .url
            .url
            .socket_addrs(|| None)
            .map_err(|e| fail(Failure::Refused, format!("cannot resolve {host}: {e}")))?;
        let mut last = fail(Failure::Refused, format!("{host} resolves to no address"));
        let mut tcp = None;
        for addr in addrs {
            let left = left(deadline)?.min(self.connect_timeout);
            match TcpStream::connect_timeout(&addr, left) {
                Ok(s) => {
                    tcp = Some(s);
                    break;
                }
                Err(e) if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) => {
                    last = fail(Failure::Timeout, format!("connect to {addr} timed out"));
                }
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                    last = fail(Failure::Refused, format!("connect to {addr}: {e}"));
                }
                Err(e) => last = fail(Failure::Io, format!("connect to {addr}: {e}")),
            }
        }
        let tcp = tcp.ok_or(last)?;
        let _ = tcp.set_nodelay(true);
        let Some((config, name)) = &self.tls else {
            return Ok(Conn::Plain(tcp));
        };
        let mut t = ClientTls::new(tcp, config.clone(), name.clone())
            .map_err(|e| fail(Failure::Tls, format!("TLS setup: {e}")))?;
        loop {
            t.sock()
                .set_read_timeout(Some(left(deadline)?))
                .map_err(|e| io_fail("setting timeouts", &e))?;
            match t.handshake() {
                Ok(Some(_)) => return Ok(Conn::Tls(Box::new(t))),
                Ok(None) => {}
                Err(e) if e.kind() == ErrorKind::InvalidData => {
                    return Err(fail(Failure::Tls, format!("TLS handshake with {host}: {e}")));
                }
                Err(e) => return Err(io_fail("the TLS handshake", &e)),
            }
        }
    }
}

/// Time left before `deadline`, or the timeout failure.
fn left(deadline: Instant) -> Result<Duration, FetchError> {
    let now = Instant::now();
    if now >= deadline {
        return Err(fail(Failure::Timeout, "no complete answer in time"));
    }
    Ok(deadline - now)
}

/// The failure of a socket call: timeouts say so plainly.
fn io_fail(what: &str, e: &std::io::Error) -> FetchError {
    if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
        fail(Failure::Timeout, format!("{what} timed out"))
    } else if matches!(e.kind(), ErrorKind::ConnectionRefused | ErrorKind::ConnectionReset) {
        fail(Failure::Refused, format!("{what}: {e}"))
    } else {
        fail(Failure::Io, format!("{what}: {e}"))
    }
}

/// A connected socket, plain or TLS.
enum Conn {
    Plain(TcpStream),
    Tls(Box<ClientTls<TcpStream>>),
}

impl Conn {
    fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(t) => t.sock(),
        }
    }

    /// Sends `bytes` whole before `deadline`.
    fn send(&mut self, bytes: &[u8], deadline: Instant) -> Result<(), FetchError> {
        let sending = |e: std::io::Error| io_fail("sending the request", &e);
        self.tcp().set_write_timeout(Some(left(deadline)?)).map_err(sending)?;
        match self {
            Conn::Plain(s) => s.write_all(bytes).map_err(sending),
            Conn::Tls(t) => {
                let mut at = 0;
                while at < bytes.len() {
                    at += t.write(&bytes[at..]).map_err(sending)?;
                }
                loop {
                    match t.flush() {
                        Ok(()) => return Ok(()),
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(e) => return Err(sending(e)),
                    }
                }
            }
        }
    }
}

/// Reads with each read's timeout the time left before the deadline.
struct Timed<'a> {
    conn: &'a mut Conn,
    deadline: Instant,
}

impl Read for Timed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ErrorKind::TimedOut.into());
        }
        self.conn.tcp().set_read_timeout(Some(left))?;
        match self.conn {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(t) => t.read(buf),
        }
    }
}

/// Reads one response and puts its body into `body` when the status is
/// 200. The body may be at most `max_body` bytes.
fn read_response(conn: &mut Conn, max_body: usize, deadline: Instant, body: &mut Vec<u8>) -> Result<(), FetchError> {
    read_framed(&mut Timed { conn, deadline }, max_body, body)
}

/// [`read_response`] over any reader (the unit tests split streams).
fn read_framed(stream: &mut impl Read, max_body: usize, body: &mut Vec<u8>) -> Result<(), FetchError> {
    let mut framer = Framer::new(false);
    let mut buf = vec![0u8; READ_SIZE];
    // Head bytes the framer could not use yet (at most its 64 KiB head limit).
    let mut pending: Vec<u8> = Vec::new();
    let mut too_large = false;
    loop {
        let n = match stream.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_fail("reading the response", &e)),
        };
        if n == 0 {
            return match framer.eof(pending.len()) {
                AtEof::Complete { status } => ok_status(status),
                AtEof::Idle => Err(fail(Failure::Malformed, "connection closed before a response arrived")),
                AtEof::Truncated if body.is_empty() => Err(fail(
                    Failure::Malformed,
                    "connection closed in the middle of the response head",
                )),
                AtEof::Truncated => Err(fail(
                    Failure::Malformed,
                    format!(
                        "connection closed in the middle of the response body, after {} bytes",
                        body.len()
                    ),
                )),
            };
        }
        let carried = !pending.is_empty();
        if carried {
            pending.extend_from_slice(&buf[..n]);
        }
        let data = if carried { &pending[..] } else { &buf[..n] };
        let framed = framer
            .feed_body(data, |part| {
                if body.len() + part.len() > max_body {
                    too_large = true;
                } else {
                    body.extend_from_slice(part);
                }
            })
            .map_err(protocol_fail)?;
        if too_large {
            // Its memory goes back too: a runaway answer is not kept as
            // the next read's buffer.
            *body = Vec::new();
            return Err(fail(
                Failure::TooLarge,
                format!("response body larger than {}", size_words(max_body)),
            ));
        }
        match framed {
            // Anything after the response is ignored: the request asked
            // the server to close.
            Framed::Complete { status, .. } => return ok_status(status),
            Framed::Partial { consumed } if carried => {
                pending.drain(..consumed);
            }
            Framed::Partial { consumed } => pending.extend_from_slice(&buf[consumed..n]),
        }
    }
}

/// A byte count in words (`16 MiB`, `4096 bytes`).
fn size_words(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else {
        format!("{n} bytes")
    }
}

/// A complete response: fine when 200, else the status as the cause.
fn ok_status(status: u16) -> Result<(), FetchError> {
    if status == 200 {
        Ok(())
    } else {
        Err(fail(Failure::Status, format!("HTTP status {status}")))
    }
}

/// The failure for a response the framer refused.
fn protocol_fail(e: ProtocolError) -> FetchError {
    match e {
        ProtocolError::BadHead(_) => fail(
            Failure::Malformed,
            format!("the server did not answer with HTTP/1.x ({e})"),
        ),
        e => fail(Failure::Malformed, format!("bad HTTP response: {e}")),
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::netio::testing::serve;
    use std::net::TcpListener;
    use std::thread;

    #[test]
    fn url_forms() {
        // (input, resolved port, Host header, request target)
        let cases: &[(&str, u16, &str, &str)] = &[
            ("http://127.0.0.1:9469/metrics", 9469, "127.0.0.1:9469", "/metrics"),
            ("HTTP://localhost", 80, "localhost", "/"),
            ("http://LocalHost:80/m", 80, "localhost", "/m"),
            ("http://[::1]:9469/a/b?x=1#frag", 9469, "[::1]:9469", "/a/b?x=1"),
            ("http://[::1]/", 80, "[::1]", "/"),
            ("http://h:1?q", 1, "h:1", "/?q"),
            ("http://h:8080/a%20b", 8080, "h:8080", "/a%20b"),
        ];
        for (input, port, host, target) in cases {
            let u = FetchUrl::parse(input, false).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(u.url.port_or_known_default(), Some(*port), "{input}");
            assert_eq!(u.host, *host, "{input}");
            assert_eq!(u.target, *target, "{input}");
        }
    }

    #[test]
    fn url_refusals() {
        let cases: &[(&str, &str)] = &[
            ("127.0.0.1:9469", "no scheme"),
            ("/metrics", "no scheme"),
            ("localhost:9469", "only http://"),
            ("https://127.0.0.1/metrics", "only http://"),
            ("ftp://127.0.0.1/metrics", "only http://"),
            ("http://:80/", "empty host"),
            ("http://h:0/", "port 0"),
            ("http://h:99999/", "invalid port"),
            ("http://h:x/", "invalid port"),
            ("http://u@h/", "user info"),
            ("http://u:p@h/", "user info"),
            ("http://[::1/", "invalid IPv6"),
            ("http://h/a b", "blank"),
            ("http://h/a\tb", "blank"),
            (" http://h/", "blank"),
            ("http://h/\n", "blank"),
        ];
        for (input, want) in cases {
            let err = FetchUrl::parse(input, false).unwrap_err();
            assert!(err.contains(want), "{input:?}: {err}");
            assert!(err.contains("expected http://host:port/path"), "{input:?}: {err}");
        }
    }

    const TEST_MAX_BODY: usize = 64 << 20;

    /// A reader that returns `data` in reads of at most `step` bytes.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.step.min(self.data.len()).min(out.len());
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    /// `read_response` over `stream` for every read size from 1 to 9 and one
    /// larger than the stream: all must agree, and that result is returned.
    fn read_all_ways(stream: &[u8], max_body: usize) -> Result<Vec<u8>, String> {
        let read = |step: usize| {
            let mut body = Vec::new();
            read_framed(&mut Trickle { data: stream, step }, max_body, &mut body).map(|()| body)
        };
        let whole = read(stream.len() + 1);
        for step in 1..10 {
            assert_eq!(
                read(step),
                whole,
                "read size {step}: {:?}",
                String::from_utf8_lossy(stream)
            );
        }
        whole.map_err(|e| e.detail)
    }

    #[test]
    fn response_bodies_table() {
        let cases: &[(&str, &[u8], &[u8])] = &[
            (
                "content-length, extra bytes ignored",
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello world",
                b"hello",
            ),
            (
                "chunked with extension and trailer",
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n4;x=y\r\nwiki\r\n5\r\npedia\r\n0\r\nX-T: 1\r\n\r\n",
                b"wikipedia",
            ),
            (
                "close delimited",
                b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nbody",
                b"body",
            ),
            (
                "interim 100 first",
                b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                b"ok",
            ),
            ("empty", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", b""),
        ];
        for (name, stream, want) in cases {
            let got = read_all_ways(stream, TEST_MAX_BODY).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(got, *want, "{name}");
        }
    }

    #[test]
    fn response_errors_table() {
        let cases: &[(&str, &[u8], &str)] = &[
            (
                "short content-length body",
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
                "middle of the response body, after 3 bytes",
            ),
            (
                "unfinished chunked body",
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nwiki\r\n0\r\nX-T: 1\r\n",
                "middle of the response body",
            ),
            (
                "unfinished head",
                b"HTTP/1.1 200 OK\r\nContent-Le",
                "middle of the response head",
            ),
            ("nothing", b"", "before a response arrived"),
            (
                "404",
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nno!",
                "HTTP status 404",
            ),
            (
                "close-delimited 500",
                b"HTTP/1.0 500 Oops\r\n\r\nbroken",
                "HTTP status 500",
            ),
            ("ssh", b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "did not answer with HTTP/1.x"),
            (
                "bad chunk",
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                "bad HTTP response: invalid chunked encoding",
            ),
        ];
        for (name, stream, want) in cases {
            let err = read_all_ways(stream, TEST_MAX_BODY).unwrap_err();
            assert!(err.contains(want), "{name}: {err}");
        }
    }

    #[test]
    fn body_cap() {
        let cap = 1 << 20;
        let fits = "x".repeat(cap);
        let exact = format!("HTTP/1.1 200 OK\r\nContent-Length: {cap}\r\n\r\n{fits}");
        assert_eq!(read_all_ways(exact.as_bytes(), cap).unwrap().len(), cap);
        let over = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{fits}y", cap + 1);
        let err = read_all_ways(over.as_bytes(), cap).unwrap_err();
        assert_eq!(err, "response body larger than 1 MiB");
        let chunked =
            format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{cap:x}\r\n{fits}\r\n1\r\ny\r\n0\r\n\r\n");
        let err = read_all_ways(chunked.as_bytes(), cap).unwrap_err();
        assert_eq!(err, "response body larger than 1 MiB");
        let closed = format!("HTTP/1.0 200 OK\r\n\r\n{fits}y");
        let err = read_all_ways(closed.as_bytes(), cap).unwrap_err();
        assert_eq!(err, "response body larger than 1 MiB");
    }

    /// Feeding each read once: 64 MiB-scale bodies in small reads stay
    /// linear (the old client re-framed the whole buffer after every read).
    #[test]
    fn large_body_in_small_reads() {
        let body = "soakd_up 1\n".repeat(1 << 20);
        let chunked: String = body
            .as_bytes()
            .chunks(4000)
            .map(|c| format!("{:x}\r\n{}\r\n", c.len(), std::str::from_utf8(c).unwrap()))
            .chain(["0\r\n\r\n".to_string()])
            .collect();
        let stream = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{chunked}");
        let started = std::time::Instant::now();
        let mut got = Vec::new();
        read_framed(
            &mut Trickle {
                data: stream.as_bytes(),
                step: 1500,
            },
            TEST_MAX_BODY,
            &mut got,
        )
        .unwrap();
        assert_eq!(got, body.as_bytes());
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    }

    /// A reader that fails with `kind` after handing out `data`.
    struct Failing<'a> {
        data: &'a [u8],
        kind: ErrorKind,
    }

    impl Read for Failing<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            if self.data.is_empty() {
                return Err(self.kind.into());
            }
            let n = self.data.len().min(out.len());
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[test]
    fn read_errors() {
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc";
        for (kind, want, failure) in [
            (
                ErrorKind::WouldBlock,
                "reading the response timed out",
                Failure::Timeout,
            ),
            (ErrorKind::TimedOut, "reading the response timed out", Failure::Timeout),
            (ErrorKind::ConnectionReset, "reading the response: ", Failure::Refused),
            (ErrorKind::BrokenPipe, "reading the response: ", Failure::Io),
        ] {
            let err = read_framed(&mut Failing { data: head, kind }, TEST_MAX_BODY, &mut Vec::new()).unwrap_err();
            assert!(err.detail.starts_with(want), "{kind:?}: {err}");
            assert_eq!(err.kind, failure, "{kind:?}");
        }
    }

    #[test]
    fn get_over_tcp() {
        let (url, server) = serve(vec![
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nup 1\n".to_vec(),
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n\xff\xfe".to_vec(),
        ]);
        let f = Fetcher::new(
            FetchUrl::parse(&url, false).unwrap(),
            Duration::from_secs(5),
            TEST_MAX_BODY,
        );
        assert_eq!(f.get_text("text/plain").unwrap(), "up 1\n");
        assert_eq!(
            f.get_text("text/plain").unwrap_err().detail,
            "response body is not UTF-8 text"
        );
        let requests = server.join().unwrap();
        let authority = &url["http://".len()..url.len() - "/metrics".len()];
        for req in &requests {
            assert!(req.starts_with("GET /metrics HTTP/1.1\r\n"), "{req}");
            assert!(req.contains(&format!("Host: {authority}\r\n")), "{req}");
            assert!(req.contains("Accept: text/plain\r\n"), "{req}");
            assert!(req.contains("Connection: close\r\n"), "{req}");
        }
    }

    #[test]
    fn get_refused() {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let url = FetchUrl::parse(&format!("http://127.0.0.1:{port}/metrics"), false).unwrap();
        let err = Fetcher::new(url, Duration::from_secs(5), TEST_MAX_BODY)
            .get_text("text/plain")
            .unwrap_err();
        assert!(
            err.detail.starts_with(&format!("connect to 127.0.0.1:{port}: ")),
            "{err}"
        );
        assert_eq!(err.kind, Failure::Refused);
    }

    #[test]
    fn https_urls_when_allowed() {
        let u = FetchUrl::parse("https://example.test/metrics", true).unwrap();
        assert!(u.is_https());
        let err = FetchUrl::parse("ftp://h/", true).unwrap_err();
        assert!(err.contains("only http:// and https://"), "{err}");
        let q = FetchUrl::parse("http://127.0.0.1:9090/", false)
            .unwrap()
            .with_target("/api/v1/query?query=up");
        assert_eq!(q.target, "/api/v1/query?query=up");
        assert_eq!(q.as_str(), "http://127.0.0.1:9090/api/v1/query?query=up");
    }

    /// A server that answers one byte at a time, slower than the deadline
    /// allows: the fetch ends at the deadline, whatever each read's pace.
    #[test]
    fn a_trickling_server_ends_at_the_deadline() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/metrics", listener.local_addr().unwrap());
        let server = thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let head = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n";
            let _ = conn.write_all(head);
            for _ in 0..100 {
                if conn.write_all(b"x").is_err() {
                    break;
                }
                thread::sleep(Duration::from_millis(100));
            }
        });
        let f = Fetcher::new(
            FetchUrl::parse(&url, false).unwrap(),
            Duration::from_millis(500),
            1 << 20,
        );
        let started = Instant::now();
        let err = f.get_text("text/plain").unwrap_err();
        let took = started.elapsed();
        assert_eq!(err.kind, Failure::Timeout, "{err}");
        assert!(took < Duration::from_secs(2), "took {took:?}");
        drop(server);
    }

    #[test]
    fn headers_are_sent_and_never_debug_printed() {
        let (url, server) = serve(vec![b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_vec()]);
        let mut f = Fetcher::new(FetchUrl::parse(&url, false).unwrap(), Duration::from_secs(5), 1024);
        f.headers.push(("Authorization".into(), "Bearer s3cr3t".into()));
        assert_eq!(f.get_text("text/plain").unwrap(), "");
        let requests = server.join().unwrap();
        assert!(
            requests[0].contains("Authorization: Bearer s3cr3t\r\n"),
            "{}",
            requests[0]
        );
        let shown = format!("{f:?}");
        assert!(shown.contains("Authorization") && !shown.contains("s3cr3t"), "{shown}");
    }
}
