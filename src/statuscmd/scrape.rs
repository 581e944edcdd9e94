//! One `GET` of a metrics URL over a blocking [`TcpStream`], built from the
//! crate's HTTP pieces: the URL is parsed by the `url` crate, the request
//! rendered by [`render_request`], and the response framed incrementally by
//! the engine's [`Framer`], which hands out the body payload (chunked or
//! not). Each read is fed to the framer once; only an incomplete head is
//! kept between reads, and the body is capped at [`MAX_BODY`].
//!
//! Errors are plain causes ("connect to 127.0.0.1:9469: Connection
//! refused"); the caller wraps them with the URL and a hint.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::wire::{AtEof, Framed, Framer, ProtocolError, RequestSpec, render_request};

/// How long to wait for the TCP connect to the metrics endpoint.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Read and write timeout on the metrics connection (per call, not total).
const IO_TIMEOUT: Duration = Duration::from_secs(3);
/// A metrics body larger than this is refused: a runaway or wrong endpoint.
const MAX_BODY: usize = 64 << 20;
/// Bytes asked for per read.
const READ_SIZE: usize = 64 * 1024;

/// A checked `http://host[:port]/path` URL, ready to connect to.
#[derive(Debug)]
pub(super) struct MetricsUrl {
    url: url::Url,
    /// Origin-form request target: path and query, at least `/`.
    target: String,
    /// The Host header: the host as parsed (IPv6 in brackets) and the port
    /// when it is not 80.
    host: String,
}

impl MetricsUrl {
    /// Parses `input`, which must be an absolute `http://` URL with a host
    /// and without user info. A fragment is dropped; blanks and control
    /// characters are refused rather than silently removed or encoded. The
    /// error is a cause for the caller's message.
    pub(super) fn parse(input: &str) -> Result<MetricsUrl, String> {
        let bad = |why: &str| format!("invalid URL ({why}; expected http://host:port/path)");
        if input.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("it contains a blank or control character"));
        }
        let url = url::Url::parse(input).map_err(|e| match e {
            url::ParseError::RelativeUrlWithoutBase => bad("no scheme"),
            e => bad(&e.to_string()),
        })?;
        if url.scheme() != "http" {
            return Err(bad("only http:// is supported"));
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
        Ok(MetricsUrl { url, target, host })
    }
}

/// GETs `url` and returns the body of its 200 response as text.
pub(super) fn get(url: &MetricsUrl) -> Result<String, String> {
    let mut stream = connect(url)?;
    let timeouts = |e| io_cause("setting timeouts", &e);
    stream.set_read_timeout(Some(IO_TIMEOUT)).map_err(timeouts)?;
    stream.set_write_timeout(Some(IO_TIMEOUT)).map_err(timeouts)?;

    let request = render_request(&RequestSpec {
        method: "GET".to_string(),
        target: url.target.clone(),
        host: url.host.clone(),
        headers: vec![("Accept".to_string(), "text/plain".to_string())],
        body: Vec::new(),
        close: true,
    });
    stream
        .write_all(&request)
        .map_err(|e| io_cause("sending the request", &e))?;

    let body = read_response(&mut stream, MAX_BODY)?;
    String::from_utf8(body).map_err(|_| "response body is not UTF-8 text".to_string())
}

/// Connects to the first address of the URL's host that accepts.
fn connect(url: &MetricsUrl) -> Result<TcpStream, String> {
    let host = url.url.host_str().unwrap_or_default();
    let addrs: Vec<SocketAddr> = url
        .url
        .socket_addrs(|| None)
        .map_err(|e| format!("cannot resolve {host}: {e}"))?;
    let mut last_err = format!("{host} resolves to no address");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(s) => return Ok(s),
            Err(e) if e.kind() == ErrorKind::TimedOut => last_err = format!("connect to {addr} timed out"),
            Err(e) => last_err = format!("connect to {addr}: {e}"),
        }
    }
    Err(last_err)
}

/// The cause for a failed socket call: timeouts say so plainly.
fn io_cause(what: &str, e: &std::io::Error) -> String {
    if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
        format!("{what} timed out")
    } else {
        format!("{what}: {e}")
    }
}

/// Reads one response from `stream` and returns its body when the status
/// is 200. The body may be at most `max_body` bytes.
fn read_response(stream: &mut impl Read, max_body: usize) -> Result<Vec<u8>, String> {
    let mut framer = Framer::new(false);
    let mut buf = vec![0u8; READ_SIZE];
    // Head bytes the framer could not use yet (at most its 64 KiB head limit).
    let mut pending: Vec<u8> = Vec::new();
    let mut body: Vec<u8> = Vec::new();
    let mut too_large = false;
    loop {
        let n = match stream.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_cause("reading the response", &e)),
        };
        if n == 0 {
            return match framer.eof(pending.len()) {
                AtEof::Complete { status } => ok_body(status, body),
                AtEof::Idle => Err("connection closed before a response arrived".to_string()),
                AtEof::Truncated if body.is_empty() => {
                    Err("connection closed in the middle of the response head".to_string())
                }
                AtEof::Truncated => Err(format!(
                    "connection closed in the middle of the response body, after {} bytes",
                    body.len()
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
            .map_err(protocol_cause)?;
        if too_large {
            return Err(format!("response body larger than {} MiB", max_body >> 20));
        }
        match framed {
            // Anything after the response is ignored: the request asked
            // the server to close.
            Framed::Complete { status, .. } => return ok_body(status, body),
            Framed::Partial { consumed } if carried => {
                pending.drain(..consumed);
            }
            Framed::Partial { consumed } => pending.extend_from_slice(&buf[consumed..n]),
        }
    }
}

/// The body of a complete response, or the status as the cause.
fn ok_body(status: u16, body: Vec<u8>) -> Result<Vec<u8>, String> {
    if status == 200 {
        Ok(body)
    } else {
        Err(format!("HTTP status {status}"))
    }
}

/// The cause for a response the framer refused.
fn protocol_cause(e: ProtocolError) -> String {
    match e {
        ProtocolError::BadHead(_) => format!("the server did not answer with HTTP/1.x ({e})"),
        e => format!("bad HTTP response: {e}"),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
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
            let u = MetricsUrl::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
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
            let err = MetricsUrl::parse(input).unwrap_err();
            assert!(err.contains(want), "{input:?}: {err}");
            assert!(err.contains("expected http://host:port/path"), "{input:?}: {err}");
        }
    }

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
        let whole = read_response(
            &mut Trickle {
                data: stream,
                step: stream.len() + 1,
            },
            max_body,
        );
        for step in 1..10 {
            let split = read_response(&mut Trickle { data: stream, step }, max_body);
            assert_eq!(split, whole, "read size {step}: {:?}", String::from_utf8_lossy(stream));
        }
        whole
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
            let got = read_all_ways(stream, MAX_BODY).unwrap_or_else(|e| panic!("{name}: {e}"));
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
            let err = read_all_ways(stream, MAX_BODY).unwrap_err();
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
        let got = read_response(
            &mut Trickle {
                data: stream.as_bytes(),
                step: 1500,
            },
            MAX_BODY,
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
        for (kind, want) in [
            (ErrorKind::WouldBlock, "reading the response timed out"),
            (ErrorKind::TimedOut, "reading the response timed out"),
            (ErrorKind::ConnectionReset, "reading the response: "),
        ] {
            let err = read_response(&mut Failing { data: head, kind }, MAX_BODY).unwrap_err();
            assert!(err.starts_with(want), "{kind:?}: {err}");
        }
    }

    /// Serves one canned response per connection, in order, on
    /// 127.0.0.1:0; returns the metrics URL and a handle yielding the
    /// request heads received.
    pub(in crate::statuscmd) fn serve(responses: Vec<Vec<u8>>) -> (String, thread::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/metrics", listener.local_addr().unwrap());
        let handle = thread::spawn(move || {
            let mut requests = Vec::new();
            for response in responses {
                let (mut conn, _) = listener.accept().unwrap();
                conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut req = Vec::new();
                let mut byte = [0u8; 1];
                while !req.ends_with(b"\r\n\r\n") && conn.read(&mut byte).unwrap() == 1 {
                    req.push(byte[0]);
                }
                requests.push(String::from_utf8(req).unwrap());
                conn.write_all(&response).unwrap();
            }
            requests
        });
        (url, handle)
    }

    #[test]
    fn get_over_tcp() {
        let (url, server) = serve(vec![
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nup 1\n".to_vec(),
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n\xff\xfe".to_vec(),
        ]);
        let parsed = MetricsUrl::parse(&url).unwrap();
        assert_eq!(get(&parsed).unwrap(), "up 1\n");
        assert_eq!(get(&parsed).unwrap_err(), "response body is not UTF-8 text");
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
        let parsed = MetricsUrl::parse(&format!("http://127.0.0.1:{port}/metrics")).unwrap();
        let err = get(&parsed).unwrap_err();
        assert!(err.starts_with(&format!("connect to 127.0.0.1:{port}: ")), "{err}");
    }
}
