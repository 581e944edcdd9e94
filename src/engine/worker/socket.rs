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
//! soakd also picks local ports itself ([`PortPicker`]). Left to the kernel,
//! every connect searches the ephemeral range for a port whose 4-tuple is
//! free, and that search grows with the connections already held to the
//! same target: at 15,000 connections it was 60% of soakd's CPU and tripled
//! the ramp time. Binding an explicit port is one hash lookup; a port that is
//! taken fails at once with EADDRINUSE and another one is tried.
//!
//! When every port is taken the kernel's search is at its worst: it walks
//! the whole range for each connect that finds nothing. With 15,000
//! connections held and 13,000 ports in TIME_WAIT, 1,700 slots retrying
//! with backoff (330 connects a second) kept soakd's worker at 99% of a
//! core, 77% of it in `__inet_hash_connect`. So the picker hands a connect
//! to the kernel only when its own tries failed, and once the kernel too
//! found no port it keeps it out for a moment ([`KERNEL_PAUSE`]): an
//! attempt on a range that stays full costs a few failed binds, not a walk.
//!
//! Each OS error is mapped to exactly one [`ErrorKind`] here, so the
//! taxonomy lives in one place.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::stats::ErrorKind;

/// A socket whose non-blocking connect has been started.
pub enum Connecting {
    /// Still in progress: wait for WRITABLE.
    InProgress(mio::net::TcpStream),
    /// Connected at once (can happen on loopback).
    Done(mio::net::TcpStream),
}

/// Hands out local ports from the ephemeral range, round-robin over this
/// worker's share of it (worker `w` of `n` takes every `n`th port, so
/// workers never race for the same port).
///
/// Round-robin is least-recently-used order: the port handed out next is
/// the one whose TIME_WAIT (from the previous lap) is oldest. After a port
/// turns out taken, the cursor jumps to a random place instead of trying
/// the neighbour, because taken ports come in runs (connections opened
/// together during a ramp got consecutive ports and are still held).
#[derive(Debug)]
pub struct PortPicker {
    lo: u32,
    count: u32,
    stride: u32,
    cursor: u32,
    reserved: Vec<(u32, u32)>,
    rng: fastrand::Rng,
    /// The kernel's own search found no port either: skip it until then.
    kernel_exhausted_until: Option<Instant>,
}

/// Ports tried per connect before leaving the choice to the kernel.
const PORT_TRIES: usize = 16;

/// How long the kernel's search is skipped after it found no port. Short:
/// a range that is full for a moment (a wave of closes whose TIME_WAITs
/// are about to expire) has free ports again soon, and the kernel finds
/// them cheaply when some exist; the pause only has to stop a range that
/// stays full from costing a full walk per connect. At most 10 failing
/// walks a second (~3 ms each at 28,000 ports here) is ~3% of a core.
const KERNEL_PAUSE: Duration = Duration::from_millis(100);

impl PortPicker {
    /// A picker for worker `worker` of `workers` over the range `lo..=hi`,
    /// starting at `start` within its share (a random start keeps a new run
    /// away from the ports an earlier run left in TIME_WAIT).
    pub fn new(lo: u32, hi: u32, worker: usize, workers: usize, start: u32) -> Option<PortPicker> {
        let stride = workers.max(1) as u32;
        let lo = lo.checked_add(worker as u32)?;
        if lo > hi || hi > u16::MAX as u32 {
            return None;
        }
        let count = (hi - lo) / stride + 1;
        Some(PortPicker {
            lo,
            count,
            stride,
            cursor: start % count,
            reserved: Vec::new(),
            rng: fastrand::Rng::with_seed(u64::from(start)),
            kernel_exhausted_until: None,
        })
    }

    /// Leaves out `net.ipv4.ip_local_reserved_ports`: the kernel keeps its
    /// own picks out of them, but not explicit binds.
    pub fn reserve(&mut self, reserved: Vec<(u32, u32)>) {
        self.reserved = reserved;
    }

    fn next(&mut self) -> u16 {
        let mut port = self.lo;
        // At most one lap: if reserved ranges covered the whole share, the
        // bind of a reserved port fails or succeeds as the kernel decides.
        for _ in 0..self.count {
            port = self.lo + self.cursor * self.stride;
            self.cursor = (self.cursor + 1) % self.count;
            if !self.reserved.iter().any(|(a, b)| (*a..=*b).contains(&port)) {
                break;
            }
        }
        port as u16
    }

    /// The last port was taken: continue somewhere else.
    fn jump(&mut self) {
        self.cursor = self.rng.u32(..self.count);
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
/// from a port `ports` picks when given.
pub fn connect(
    addr: SocketAddr,
    source: Option<IpAddr>,
    ports: Option<&mut PortPicker>,
) -> Result<Connecting, ErrorKind> {
    let domain = Domain::for_address(addr);
    let socket = Socket::new(domain, Type::STREAM.nonblocking().cloexec(), Some(Protocol::TCP))
        .map_err(|e| classify_connect(&e))?;
    socket.set_tcp_nodelay(true).map_err(|e| classify_connect(&e))?;
    let ip = source.unwrap_or(if addr.is_ipv4() {
        IpAddr::from([0u8; 4])
    } else {
        IpAddr::from([0u16; 8])
    });
    let mut bound = false;
    let mut ports = ports;
    if let Some(ports) = ports.as_deref_mut() {
        for _ in 0..PORT_TRIES {
            // No SO_REUSEADDR: a port held by any socket, TIME_WAIT included,
            // refuses the bind, so a port that binds is usable.
            match socket.bind(&SockAddr::from(SocketAddr::new(ip, ports.next()))) {
                Ok(()) => {
                    bound = true;
                    break;
                }
                Err(e) if e.raw_os_error() == Some(libc::EADDRINUSE) => ports.jump(),
                Err(e) => return Err(classify_connect(&e)),
            }
        }
    }
    // Our tries all failed: the kernel's search may still find a port we
    // missed, unless it just failed too (see the module doc).
    if !bound && ports.as_deref().is_some_and(|p| !p.kernel_allowed(Instant::now())) {
        return Err(ErrorKind::AddrUnavailable);
    }
    let done = match start_connect(&socket, source.filter(|_| !bound), addr) {
        Ok(done) => done,
        Err(e) => {
            let kind = classify_connect(&e);
            if kind == ErrorKind::AddrUnavailable
                && !bound
                && let Some(ports) = ports
            {
                ports.kernel_exhausted(Instant::now());
            }
            return Err(kind);
        }
    };
    let stream = mio::net::TcpStream::from_std(std::net::TcpStream::from(socket));
    Ok(if done {
        Connecting::Done(stream)
    } else {
        Connecting::InProgress(stream)
    })
}

/// Binds `source` with the port left to the connect (when given) and
/// starts the connect. `Ok(true)`: connected at once.
fn start_connect(socket: &Socket, source: Option<IpAddr>, addr: SocketAddr) -> io::Result<bool> {
    if let Some(ip) = source {
        bind_no_port(socket)?;
        socket.bind(&SockAddr::from(SocketAddr::new(ip, 0)))?;
    }
    match socket.connect(&SockAddr::from(addr)) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(false),
        Err(e) => Err(e),
    }
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

/// Sets `IP_BIND_ADDRESS_NO_PORT` (Linux 4.2+): bind the address now, pick
/// the port at connect time. socket2 does not expose this option.
#[allow(unsafe_code)]
fn bind_no_port(socket: &Socket) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let one: libc::c_int = 1;
    // SAFETY: `socket` is a valid open descriptor for the duration of the
    // call, and the option value points at a live c_int of the given size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_picker_covers_its_share_only() {
        let mut a = PortPicker::new(100, 109, 0, 2, 0).unwrap();
        let mut b = PortPicker::new(100, 109, 1, 2, 5).unwrap();
        let pa: Vec<u16> = (0..6).map(|_| a.next()).collect();
        let pb: Vec<u16> = (0..6).map(|_| b.next()).collect();
        assert_eq!(pa, [100, 102, 104, 106, 108, 100]);
        assert_eq!(pb, [101, 103, 105, 107, 109, 101], "start wraps within the share");
        assert!(PortPicker::new(100, 100, 1, 2, 0).is_none());
        let mut c = PortPicker::new(100, 109, 0, 1, 0).unwrap();
        c.reserve(vec![(101, 103), (106, 106)]);
        let pc: Vec<u16> = (0..6).map(|_| c.next()).collect();
        assert_eq!(pc, [100, 104, 105, 107, 108, 109]);
    }

    #[test]
    fn jumps_stay_in_the_share() {
        let mut p = PortPicker::new(1000, 1999, 1, 3, 42).unwrap();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..2000 {
            p.jump();
            let port = p.next();
            assert!(
                (1001..=1999).contains(&port) && (port - 1001).is_multiple_of(3),
                "{port}"
            );
            seen.insert(port);
        }
        // Random, not stuck: most of the 333 ports of the share show up.
        assert!(seen.len() > 300, "{}", seen.len());
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
        let mut ports = PortPicker::new(32768, 60999, 1, 2, 7);
        match connect(addr, Some("127.0.0.1".parse().unwrap()), ports.as_mut()) {
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
}
