//! A blocking HTTP/1 test client for the servers built on this core (the
//! metrics exporter, the built-in target): their unit tests connect and
//! read responses the same way, and wait the same way for an ephemeral
//! port when a load test elsewhere on the machine holds them all.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

/// How long a test read or write may block before the test fails.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// How long to wait for a free ephemeral port. Binding port 0 and
/// connecting fail while other tests on the machine hold every
/// ephemeral port (a big soak, then its TIME_WAIT sockets for 60 s).
pub const PORT_WAIT: Duration = Duration::from_secs(90);

/// One response as read.
#[derive(Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Header fields in order, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body (empty for a response to HEAD).
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Runs `f` until it does not fail for want of an ephemeral port.
pub fn with_port<T>(what: &str, mut f: impl FnMut() -> io::Result<T>) -> T {
    let deadline = Instant::now() + PORT_WAIT;
    loop {
        match f() {
            Ok(value) => return value,
            Err(err)
                if matches!(err.kind(), io::ErrorKind::AddrNotAvailable | io::ErrorKind::AddrInUse)
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(200))
            }
            Err(err) => panic!("{what}: {err}"),
        }
    }
}

/// Connects to `addr`, waiting for a free ephemeral port if needed.
pub fn connect(addr: SocketAddr) -> TcpStream {
    with_port("connect", || TcpStream::connect(addr))
}

/// A blocking HTTP/1.1 client that reads whole responses.
pub struct Client {
    /// The connection, buffered for reading.
    pub reader: BufReader<TcpStream>,
}

impl Client {
    /// Connects (see [`connect`]) with ten-second read and write timeouts.
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = connect(addr);
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(TIMEOUT)).unwrap();
        Client {
            reader: BufReader::new(stream),
        }
    }

    /// Writes all of `bytes`.
    pub fn send(&mut self, bytes: &[u8]) {
        self.reader.get_mut().write_all(bytes).unwrap();
    }

    /// Reads one response; `head_only` for a response to HEAD.
    pub fn response(&mut self, head_only: bool) -> io::Result<Response> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let mut parts = line.trim_end().splitn(3, ' ');
        assert_eq!(parts.next(), Some("HTTP/1.1"), "status line {line:?}");
        let status = parts.next().unwrap().parse().unwrap();
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            if self.reader.read_line(&mut line)? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').unwrap();
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
        let mut response = Response {
            status,
            headers,
            body: Vec::new(),
        };
        let len: usize = response.header("content-length").unwrap().parse().unwrap();
        if !head_only {
            response.body = vec![0; len];
            self.reader.read_exact(&mut response.body)?;
        }
        Ok(response)
    }

    /// True once the server has closed: EOF or a reset.
    pub fn closed(&mut self) -> bool {
        let mut buf = [0u8; 1024];
        loop {
            match self.reader.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(err) if matches!(err.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    return false;
                }
                Err(_) => return true,
            }
        }
    }
}

/// Serves one canned response per connection, in order, on
/// 127.0.0.1:0; returns the metrics URL and a handle yielding the
/// request heads received.
pub fn serve(responses: Vec<Vec<u8>>) -> (String, thread::JoinHandle<Vec<String>>) {
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
