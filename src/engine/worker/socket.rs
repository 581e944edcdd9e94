//! Socket setup and error classification.
//!
//! Connections are created with socket2 so every option is set before the
//! connect: non-blocking from birth (one syscall), `TCP_NODELAY` (requests
//! are small and must not wait for Nagle), and, with `--source-addr`,
//! `IP_BIND_ADDRESS_NO_PORT` before binding, so the kernel picks the local
//! port at connect time per 4-tuple instead of reserving one port per socket
//! at bind time. That is what lets several source addresses go past the
//! ephemeral-port limit of one address.
//!
//! **The local port is always the kernel's choice, in a window soakd
//! picks** ([`PortPicker`]). Left to itself, every connect searches the
//! whole ephemeral range for a port whose 4-tuple is free, and that search
//! grows with the connections already held to the same target: at 15,000
//! connections it was 60% of soakd's CPU and tripled the ramp time. So
//! before each connect soakd narrows the search to a window of
//! [`WINDOW`] ports with `IP_LOCAL_PORT_RANGE` (Linux 6.3+): the kernel
//! checks at most 64 ports, and the windows rotate, so the next one is
//! mostly free.
//!
//! Why not bind an explicit port, which is one hash lookup? soakd did that
//! until issue 17: a port bound with `bind(ip, port)` is skipped by every
//! other socket's port choice *on any address* (the kernel's connect-time
//! search passes over ports whose bind bucket was made by `bind()`), and
//! so are its TIME_WAIT remnants. Three shards holding 45,000 connections
//! from 127.0.0.11–13 left the host no ephemeral port: a plain `connect()`
//! from 127.0.0.1 failed with EADDRNOTAVAIL 300 times of 300, Prometheus
//! could not scrape the shards, and for 60 s after the run another run
//! opened 276 of 2,000 connections. A port the kernel chose at connect time
//! belongs to its 4-tuple only: anyone else may use it towards another
//! address or port.
//!
//! A window with no free port for this 4-tuple fails at once with
//! EADDRNOTAVAIL; the picker jumps to a random other window (full windows
//! come in runs: connections opened together during a ramp) and retries on
//! the same socket, [`WINDOW_TRIES`] times. Then the whole range is left to
//! the kernel. When every port is taken the kernel's search is at its
//! worst: it walks the whole range for each connect that finds nothing.
//! With 15,000 connections held and 13,000 ports in TIME_WAIT, 1,700 slots
//! retrying with backoff (330 connects a second) kept soakd's worker at 99%
//! of a core, 77% of it in `__inet_hash_connect`. So once the kernel too
//! found no port it is kept out for a moment ([`KERNEL_PAUSE`]): an attempt
//! on a range that stays full costs a few failed windows, not a walk.
//!
//! **Older kernels** (before 6.3) refuse `IP_LOCAL_PORT_RANGE` with
//! ENOPROTOOPT. The picker then turns itself off for the rest of the run
//! and every connect is plain `IP_BIND_ADDRESS_NO_PORT` (or no bind at
//! all): the kernel searches the whole range. The host stays usable; the
//! ramp is slower past about 10,000 connections to one target (the search
//! cost above). soakd never falls back to explicit binds.
//!
//! The kernel's own search skips `net.ipv4.ip_local_reserved_ports` and
//! clips a window to `ip_local_port_range`, so neither needs handling
//! here beyond not offering windows that are wholly reserved.
//!
//! Each OS error is mapped to exactly one [`ErrorKind`] here, so the
//! taxonomy lives in one place.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, TcpKeepalive, Type};

use crate::netio::set_int;
use crate::plan::defaults;
use crate::stats::ErrorKind;

/// A socket whose non-blocking connect has been started.
pub enum Connecting {
    /// Still in progress: wait for WRITABLE.
    InProgress(mio::net::TcpStream),
    /// Connected at once (can happen on loopback).
    Done(mio::net::TcpStream),
}

/// Ports per window. The kernel checks each port of a window it is given
/// (a bind-bucket and an established-table lookup, well under a
/// microsecond), so 64 bounds a connect's search to tens of microseconds
/// even in a full window, while a window is still wide enough that the
/// ramp rarely meets a full one before the range itself fills.
pub const WINDOW: u32 = 64;

/// Windows tried per connect before leaving the choice to the kernel's
/// search of the whole range.
const WINDOW_TRIES: usize = 8;

/// How long the kernel's search is skipped after it found no port. Short:
/// a range that is full for a moment (a wave of closes whose TIME_WAITs
/// are about to expire) has free ports again soon, and the kernel finds
/// them cheaply when some exist; the pause only has to stop a range that
/// stays full from costing a full walk per connect. At most 10 failing
/// walks a second (~3 ms each at 28,000 ports here) is ~3% of a core.
const KERNEL_PAUSE: Duration = Duration::from_millis(100);

/// `IP_LOCAL_PORT_RANGE` from `<linux/in.h>` (Linux 6.3); the libc crate
/// does not define it yet.
const IP_LOCAL_PORT_RANGE: libc::c_int = 51;

/// Hands out windows of the ephemeral range for the kernel to pick a port
/// from, round-robin over this worker's share of them (the range is cut
/// into windows of [`WINDOW`] ports, and worker `w` of `n` takes every
/// `n`th window, so workers rarely search the same ports).
///
/// Round-robin is least-recently-used order: the window handed out next is
/// the one whose ports' TIME_WAITs (from the previous lap) are oldest.
/// After a window turns out full, the cursor jumps to a random place
/// instead of trying the neighbour, because full windows come in runs.
#[derive(Debug)]
pub struct PortPicker {
    /// First port of the range.
    lo: u32,
    /// Last port of the range.
    hi: u32,
    /// Global indexes of this worker's windows.
    windows: Vec<u32>,
    cursor: usize,
    rng: fastrand::Rng,
    /// The kernel refused `IP_LOCAL_PORT_RANGE` (before Linux 6.3): leave
    /// every choice to its whole-range search.
    unsupported: bool,
    /// The kernel's own search found no port either: skip it until then.
    kernel_exhausted_until: Option<Instant>,
}

impl PortPicker {
    /// A picker for worker `worker` of `workers` over the range `lo..=hi`,
    /// starting at `start` within its share (a random start keeps a new run
    /// away from the ports an earlier run left in TIME_WAIT).
    pub fn new(lo: u32, hi: u32, worker: usize, workers: usize, start: u32) -> Option<PortPicker> {
        if lo == 0 || lo > hi || hi > u16::MAX as u32 {
            return None;
        }
        let total = (hi - lo) / WINDOW + 1;
        let workers = workers.max(1) as u32;
        let worker = worker as u32;
        // A range of fewer windows than workers: workers share windows
        // (harmless, the kernel still picks each port; only the search
        // overlaps).
        let windows: Vec<u32> = if total < workers {
            vec![worker % total]
        } else {
            (worker..total).step_by(workers as usize).collect()
        };
        let cursor = start as usize % windows.len();
        Some(PortPicker {
            lo,
            hi,
            windows,
            cursor,
            rng: fastrand::Rng::with_seed(u64::from(start)),
            unsupported: false,
            kernel_exhausted_until: None,
        })
    }

    /// Leaves out windows that `net.ipv4.ip_local_reserved_ports` covers
    /// wholly (the kernel skips reserved ports inside a window itself, so
    /// such a window could only fail). Keeps at least one window.
    pub fn reserve(&mut self, reserved: Vec<(u32, u32)>) {
        let (lo, hi) = (self.lo, self.hi);
        let window = |w: u32| (lo + w * WINDOW, (lo + w * WINDOW + WINDOW - 1).min(hi));
        let open: Vec<u32> = self
            .windows
            .iter()
            .copied()
            .filter(|&w| {
                let (a, b) = window(w);
                !reserved.iter().any(|&(ra, rb)| ra <= a && b <= rb)
            })
            .collect();
        if !open.is_empty() {
            self.cursor %= open.len();
            self.windows = open;
        }
    }

    /// The next window, as `(first, last)` port.
    fn next(&mut self) -> (u16, u16) {
        let w = self.windows[self.cursor];
        self.cursor = (self.cursor + 1) % self.windows.len();
        let first = self.lo + w * WINDOW;
        let last = (first + WINDOW - 1).min(self.hi);
        (first as u16, last as u16)
    }

    /// The last window was full: continue somewhere else.
    fn jump(&mut self) {
        self.cursor = self.rng.usize(..self.windows.len());
    }

    /// Whether a connect may fall back to the kernel's search at `now`.
    fn kernel_allowed(&self, now: Instant) -> bool {
        self.kernel_exhausted_until.is_none_or(|t| now >= t)
    }

    /// The kernel's search found no port at `now`.
    fn kernel_exhausted(&mut self, now: Instant) {
        self.kernel_exhausted_until = Some(now + KERNEL_PAUSE);
    }
}

/// Starts a non-blocking connect to `addr`, bound to `source` when given,
/// from a port the kernel picks in the windows `ports` hands out when
/// given, with TCP keepalive after `keepalive` idle when given.
pub fn connect(
    addr: SocketAddr,
    source: Option<IpAddr>,
    keepalive: Option<Duration>,
    ports: Option<&mut PortPicker>,
) -> Result<Connecting, ErrorKind> {
    let domain = Domain::for_address(addr);
    let socket = Socket::new(domain, Type::STREAM.nonblocking().cloexec(), Some(Protocol::TCP))
        .map_err(|e| classify_connect(&e))?;
    socket.set_tcp_nodelay(true).map_err(|e| classify_connect(&e))?;
    if let Some(idle) = keepalive {
        socket
            .set_tcp_keepalive(&keepalive_of(idle))
            .map_err(|e| classify_connect(&e))?;
    }
    if let Some(ip) = source {
        set_int(&socket, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT, 1).map_err(|e| classify_connect(&e))?;
        socket
            .bind(&SockAddr::from(SocketAddr::new(ip, 0)))
            .map_err(|e| classify_connect(&e))?;
    }
    let target = SockAddr::from(addr);
    let done = match ports {
        None => start_connect(&socket, &target),
        Some(ports) => connect_in_windows(&socket, &target, ports),
    }
    .map_err(|e| classify_connect(&e))?;
    let stream = mio::net::TcpStream::from_std(std::net::TcpStream::from(socket));
    Ok(if done {
        Connecting::Done(stream)
    } else {
        Connecting::InProgress(stream)
    })
}

/// The kernel's keepalive for an idle time: probes every third of it (at
/// least a second), given up after [`defaults::TCP_KEEPALIVE_PROBES`].
fn keepalive_of(idle: Duration) -> TcpKeepalive {
    TcpKeepalive::new()
        .with_time(idle)
        .with_interval((idle / 3).max(Duration::from_secs(1)))
        .with_retries(defaults::TCP_KEEPALIVE_PROBES)
}

/// Tries the picker's windows, then the whole range (see the module doc).
/// A failed connect leaves the socket unconnected and unbound to a port, so
/// the next try reuses it.
fn connect_in_windows(socket: &Socket, target: &SockAddr, ports: &mut PortPicker) -> io::Result<bool> {
    if !ports.unsupported {
        for _ in 0..WINDOW_TRIES {
            let (first, last) = ports.next();
            match set_port_range(socket, first, last) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => {
                    ports.unsupported = true;
                    break;
                }
                Err(e) => return Err(e),
            }
            match start_connect(socket, target) {
                Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => ports.jump(),
                other => return other,
            }
        }
    }
    // Every window tried was full: the kernel's search of the whole range
    // may still find a port, unless it just failed too.
    if !ports.kernel_allowed(Instant::now()) {
        return Err(io::Error::from_raw_os_error(libc::EADDRNOTAVAIL));
    }
    if !ports.unsupported {
        set_port_range(socket, 0, 0)?;
    }
    let result = start_connect(socket, target);
    if result
        .as_ref()
        .is_err_and(|e| e.raw_os_error() == Some(libc::EADDRNOTAVAIL))
    {
        ports.kernel_exhausted(Instant::now());
    }
    result
}

/// Starts the connect. `Ok(true)`: connected at once.
fn start_connect(socket: &Socket, target: &SockAddr) -> io::Result<bool> {
    match socket.connect(target) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Narrows the kernel's port choice for this socket to `first..=last`
/// (`IP_LOCAL_PORT_RANGE`; `0, 0` restores the whole range). IPv4 level,
/// and it applies to IPv6 sockets too.
fn set_port_range(socket: &Socket, first: u16, last: u16) -> io::Result<()> {
    let range = u32::from(first) | (u32::from(last) << 16);
    set_int(socket, libc::IPPROTO_IP, IP_LOCAL_PORT_RANGE, range as libc::c_int)
}

/// Checks whether a connect that reported WRITABLE finished.
/// `Ok(true)`: connected; `Ok(false)`: not yet (a spurious event).
pub fn finish_connect(stream: &mio::net::TcpStream) -> Result<bool, ErrorKind> {
    match stream.take_error() {
        Ok(Some(e)) | Err(e) => return Err(classify_connect(&e)),
        Ok(None) => {}
    }
    match stream.peer_addr() {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotConnected || e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(false),
        Err(e) => Err(classify_connect(&e)),
    }
}

/// The kind of a failure while establishing a connection.
pub fn classify_connect(e: &io::Error) -> ErrorKind {
    match e.raw_os_error() {
        Some(libc::ECONNREFUSED) => ErrorKind::ConnectRefused,
        Some(libc::ETIMEDOUT) => ErrorKind::ConnectTimeout,
        // Without IP_BIND_ADDRESS_NO_PORT an exhausted source address shows
        // up as EADDRINUSE at bind time; with it, as EADDRNOTAVAIL at connect.
        Some(libc::EADDRNOTAVAIL) | Some(libc::EADDRINUSE) => ErrorKind::AddrUnavailable,
        Some(libc::EMFILE) | Some(libc::ENFILE) => ErrorKind::FdLimit,
        _ => ErrorKind::ConnectOther,
    }
}

/// The kind of a failure on an established connection. Anything that is not
/// a timeout breaks the connection under the request, which is what `reset`
/// means to the operator.
pub fn classify_established(e: &io::Error) -> ErrorKind {
    match (e.raw_os_error(), e.kind()) {
        (Some(libc::ETIMEDOUT), _) => ErrorKind::Timeout,
        // TLS after the handshake: a record that fails to decrypt or parse,
        // or an alert, is the peer speaking nonsense.
        (None, io::ErrorKind::InvalidData) => ErrorKind::Protocol,
        (None, io::ErrorKind::UnexpectedEof) => ErrorKind::Eof,
        _ => ErrorKind::Reset,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_picker_covers_its_share_only() {
        // 10 windows of 64 over 1000..=1639, the last one cut at 1630.
        let mut a = PortPicker::new(1000, 1630, 0, 2, 0).unwrap();
        let mut b = PortPicker::new(1000, 1630, 1, 2, 4).unwrap();
        let pa: Vec<(u16, u16)> = (0..6).map(|_| a.next()).collect();
        let pb: Vec<(u16, u16)> = (0..2).map(|_| b.next()).collect();
        assert_eq!(
            pa,
            [
                (1000, 1063),
                (1128, 1191),
                (1256, 1319),
                (1384, 1447),
                (1512, 1575),
                (1000, 1063)
            ]
        );
        assert_eq!(pb, [(1576, 1630), (1064, 1127)], "start wraps within the share");
        // Fewer windows than workers: they share.
        let mut c = PortPicker::new(100, 130, 3, 4, 0).unwrap();
        assert_eq!(c.next(), (100, 130));
        assert!(PortPicker::new(0, 100, 0, 1, 0).is_none());
        assert!(PortPicker::new(200, 100, 0, 1, 0).is_none());
        // Wholly reserved windows are left out, partly reserved ones kept.
        let mut d = PortPicker::new(1000, 1255, 0, 1, 0).unwrap();
        d.reserve(vec![(900, 1010), (1128, 1191)]);
        let pd: Vec<(u16, u16)> = (0..3).map(|_| d.next()).collect();
        assert_eq!(pd, [(1000, 1063), (1064, 1127), (1192, 1255)]);
        d.reserve(vec![(0, 65535)]);
        assert_eq!(d.next().0 % 64, 1000 % 64, "one window is always kept");
    }

    #[test]
    fn jumps_stay_in_the_share() {
        let mut p = PortPicker::new(10_000, 29_999, 1, 3, 42).unwrap();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..2000 {
            p.jump();
            let (first, last) = p.next();
            let w = u32::from(first - 10_000) / WINDOW;
            assert!(w % 3 == 1 && first <= last && last <= 29_999, "{first}-{last}");
            seen.insert(w);
        }
        // Random, not stuck: most of the 104 windows of the share show up.
        assert!(seen.len() > 95, "{}", seen.len());
    }

    /// The point of the windows (issue 17): a port soakd connected from is
    /// still free for another 4-tuple, so a plain connect from another
    /// address finds it. With an explicit `bind(ip, port)` the kernel's
    /// choice skipped it on every address. Runs on the host's loopback: a
    /// window inside the ephemeral range, one connection.
    #[test]
    fn a_port_soakd_connected_from_stays_free_for_other_tuples() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (lo, hi) = crate::preflight::local_port_range().expect("linux has the port range");
        let mut ports = PortPicker::new(lo, hi, 0, 1, fastrand::u32(..)).unwrap();
        let source: IpAddr = "127.0.0.2".parse().unwrap();
        let s = match connect(addr, Some(source), None, Some(&mut ports)).expect("connects") {
            Connecting::Done(s) | Connecting::InProgress(s) => s,
        };
        let (peer, _) = listener.accept().unwrap();
        let local = s.local_addr().unwrap();
        assert_eq!(local.ip(), source);
        assert!((lo..=hi).contains(&u32::from(local.port())), "{local}");
        assert!(!ports.unsupported, "this kernel (6.3+) has IP_LOCAL_PORT_RANGE");
        // Another socket may bind the same port on another address and
        // connect from it to the same listener (another 4-tuple).
        let other = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        other.set_reuse_address(true).unwrap();
        other
            .bind(&SockAddr::from(SocketAddr::new([127, 0, 0, 3].into(), local.port())))
            .unwrap();
        other.connect(&SockAddr::from(addr)).unwrap();
        drop((peer, s));
    }

    #[test]
    fn full_windows_fall_back_to_the_whole_range() {
        // A picker over 4 ports: four connects from 127.0.0.4 to one
        // listener fill it, and the fifth finds no window with a free port.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (lo, hi) = crate::preflight::local_port_range().unwrap();
        let first = lo + fastrand::u32(..(hi - lo - 4));
        let mut ports = PortPicker::new(first, first + 3, 0, 1, 0).unwrap();
        let source: IpAddr = "127.0.0.4".parse().unwrap();
        let mut held = Vec::new();
        for _ in 0..4 {
            match connect(addr, Some(source), None, Some(&mut ports)) {
                Ok(Connecting::Done(s) | Connecting::InProgress(s)) => held.push(s),
                // Another test or process took one of the four ports.
                Err(ErrorKind::AddrUnavailable) => {}
                Err(e) => panic!("{e:?}"),
            }
        }
        let used: std::collections::HashSet<u16> = held.iter().map(|s| s.local_addr().unwrap().port()).collect();
        assert!(
            used.iter().all(|p| (first..=first + 3).contains(&u32::from(*p))),
            "{used:?}"
        );
        assert_eq!(used.len(), held.len());
        // The kernel's whole-range search would find a port, but the picker
        // only falls back to it after its windows; here it does, and
        // succeeds: the range itself is not full.
        match connect(addr, Some(source), None, Some(&mut ports)) {
            Ok(Connecting::Done(s) | Connecting::InProgress(s)) => {
                let port = u32::from(s.local_addr().unwrap().port());
                assert!(!(first..=first + 3).contains(&port), "{port}");
            }
            Err(e) => panic!("the whole-range fallback failed: {e:?}"),
        }
    }

    #[test]
    fn the_kernel_search_pauses_after_it_found_nothing() {
        let mut p = PortPicker::new(1000, 1999, 0, 1, 0).unwrap();
        let t0 = Instant::now();
        assert!(p.kernel_allowed(t0));
        p.kernel_exhausted(t0);
        assert!(!p.kernel_allowed(t0));
        assert!(!p.kernel_allowed(t0 + KERNEL_PAUSE / 2));
        assert!(p.kernel_allowed(t0 + KERNEL_PAUSE));
    }

    #[test]
    fn classification() {
        let e = |n| io::Error::from_raw_os_error(n);
        assert_eq!(classify_connect(&e(libc::ECONNREFUSED)), ErrorKind::ConnectRefused);
        assert_eq!(classify_connect(&e(libc::ETIMEDOUT)), ErrorKind::ConnectTimeout);
        assert_eq!(classify_connect(&e(libc::EADDRNOTAVAIL)), ErrorKind::AddrUnavailable);
        assert_eq!(classify_connect(&e(libc::EMFILE)), ErrorKind::FdLimit);
        assert_eq!(classify_connect(&e(libc::ENFILE)), ErrorKind::FdLimit);
        assert_eq!(classify_connect(&e(libc::ENETUNREACH)), ErrorKind::ConnectOther);
        assert_eq!(classify_established(&e(libc::ECONNRESET)), ErrorKind::Reset);
        assert_eq!(classify_established(&e(libc::EPIPE)), ErrorKind::Reset);
    }

    #[test]
    fn refused_connect_is_classified() {
        // A port that was just free: bind, read the port, close.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let mut poll = mio::Poll::new().unwrap();
        let mut events = mio::Events::with_capacity(4);
        let (lo, hi) = crate::preflight::local_port_range().unwrap();
        let mut ports = PortPicker::new(lo, hi, 1, 2, 7);
        match connect(addr, Some("127.0.0.1".parse().unwrap()), None, ports.as_mut()) {
            Err(kind) => assert_eq!(kind, ErrorKind::ConnectRefused),
            Ok(Connecting::Done(_)) => panic!("connected to a closed port"),
            Ok(Connecting::InProgress(mut s)) => {
                poll.registry()
                    .register(&mut s, mio::Token(0), mio::Interest::WRITABLE)
                    .unwrap();
                poll.poll(&mut events, Some(std::time::Duration::from_secs(5))).unwrap();
                assert_eq!(finish_connect(&s), Err(ErrorKind::ConnectRefused));
            }
        }
    }

    /// `--tcp-keepalive 9s`: the kernel holds keepalive on, 9 s idle, a
    /// probe every 3 s, given up after three; without it, keepalive is off.
    #[test]
    fn keepalive_reaches_the_kernel() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let socket_of = |keepalive| match connect(addr, None, keepalive, None).expect("connects") {
            Connecting::Done(s) | Connecting::InProgress(s) => s,
        };
        let on = socket_of(Some(Duration::from_secs(9)));
        let s = socket2::SockRef::from(&on);
        assert!(s.keepalive().unwrap());
        assert_eq!(s.tcp_keepalive_time().unwrap(), Duration::from_secs(9));
        assert_eq!(s.tcp_keepalive_interval().unwrap(), Duration::from_secs(3));
        assert_eq!(s.tcp_keepalive_retries().unwrap(), defaults::TCP_KEEPALIVE_PROBES);
        let off = socket_of(None);
        assert!(!socket2::SockRef::from(&off).keepalive().unwrap());
    }
}
