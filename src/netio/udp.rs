//! Batched UDP: many datagrams per system call, for QUIC.
//!
//! A QUIC connection's packets are datagrams on a socket it shares with
//! every other connection of the worker, and a wakeup typically has a
//! datagram or two for each of several connections. One `recvfrom` or
//! `sendto` per datagram would be the system-call-per-request cost the
//! engine avoids over TCP, so reads take up to [`BATCH`] datagrams with
//! one `recvmmsg`, and the datagrams a wakeup makes are queued and leave
//! with one `sendmmsg` at its end ([`SendBatch::flush`]). A run of
//! datagrams quinn made for one destination (a window's worth of a large
//! body) goes as one message with `UDP_SEGMENT` (generic segmentation
//! offload) where the kernel takes it; where it does not, the run is sent
//! as separate datagrams from then on. On the way in, a socket with
//! `UDP_GRO` ([`enable_gro`]) has the kernel coalesce a sender's run into
//! one read that says its segment size, split again before QUIC sees it.
//!
//! A datagram the socket will not take (its buffer full) is dropped, as
//! the network may drop it: QUIC's loss recovery sends it again, and a
//! queue here would only hide the pressure.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;

/// Datagrams per `recvmmsg` or `sendmmsg`.
pub const BATCH: usize = 32;

/// Bytes of one received datagram's slot: QUIC's packets fit a 1,500-byte
/// path (soakd's never exceed it), with room for a peer that pads more.
pub const SLOT: usize = 2048;

/// `SOL_UDP`'s `UDP_SEGMENT` (linux/udp.h), not in every libc release.
const UDP_SEGMENT: libc::c_int = 103;

/// Bytes of one receive slot with GRO on: the kernel may coalesce a run
/// of datagrams from one sender into one read of up to 64 KiB.
const GRO_SLOT: usize = 64 * 1024;

/// Slots read per `recvmmsg` with GRO on (each is a run, not a datagram).
const GRO_BATCH: usize = 8;

/// `SOL_UDP`'s `UDP_GRO` (linux/udp.h): the socket option, and the control
/// message that gives a coalesced read's segment size.
const UDP_GRO: libc::c_int = 104;

/// Asks the kernel to coalesce runs of datagrams (generic receive
/// offload); false where it will not (an old kernel).
#[allow(unsafe_code)]
pub fn enable_gro(socket: &impl AsRawFd) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: a plain int option on a live socket.
    let r = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_UDP,
            UDP_GRO,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    r == 0
}

/// Receive buffers for one `recvmmsg`.
pub struct RecvBatch {
    /// Bytes of one slot, and slots read per call.
    slot: usize,
    count: usize,
    bufs: Box<[u8]>,
    addrs: Box<[libc::sockaddr_storage]>,
    lens: [usize; BATCH],
    addr_lens: [libc::socklen_t; BATCH],
    /// A coalesced read's segment size (0: one datagram).
    segs: [usize; BATCH],
}

impl Default for RecvBatch {
    fn default() -> RecvBatch {
        RecvBatch::new(false)
    }
}

impl RecvBatch {
    /// Room for [`BATCH`] datagrams of up to [`SLOT`] bytes, or with `gro`
    /// (a socket [`enable_gro`] succeeded on) for 8 coalesced runs of up to
    /// 64 KiB.
    pub fn new(gro: bool) -> RecvBatch {
        let (slot, count) = if gro { (GRO_SLOT, GRO_BATCH) } else { (SLOT, BATCH) };
        RecvBatch {
            slot,
            count,
            bufs: vec![0; count * slot].into_boxed_slice(),
            addrs: vec![zeroed_storage(); count].into_boxed_slice(),
            lens: [0; BATCH],
            addr_lens: [0; BATCH],
            segs: [0; BATCH],
        }
    }

    /// Slots one [`RecvBatch::recv`] fills at most: a read that filled
    /// fewer left the socket drained.
    pub fn capacity(&self) -> usize {
        self.count
    }

    /// Reads up to [`RecvBatch::capacity`] slots from `socket`
    /// (non-blocking): how many, or the error (`WouldBlock` when none
    /// waits).
    #[allow(unsafe_code)]
    pub fn recv(&mut self, socket: &impl AsRawFd) -> io::Result<usize> {
        let mut iovs: [libc::iovec; BATCH] = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; BATCH];
        // Room for one UDP_GRO control message per slot.
        let mut cmsgs = [[0u64; 4]; BATCH];
        // SAFETY: mmsghdr is plain data; every pointer in it is set below
        // before the call.
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for i in 0..self.count {
            iovs[i].iov_base = self.bufs[i * self.slot..].as_mut_ptr().cast();
            iovs[i].iov_len = self.slot;
            let h = &mut msgs[i].msg_hdr;
            h.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_storage).cast();
            h.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_iov = &mut iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = cmsgs[i].as_mut_ptr().cast();
            h.msg_controllen = std::mem::size_of_val(&cmsgs[i]) as _;
        }
        // SAFETY: `msgs[..count]` point at live iovecs, each at `slot`
        // bytes of `bufs`, at sockaddr_storage and at control buffers; all
        // outlive the call.
        let n = unsafe {
            libc::recvmmsg(
                socket.as_raw_fd(),
                msgs.as_mut_ptr(),
                self.count as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        for (i, m) in msgs[..n].iter().enumerate() {
            self.lens[i] = m.msg_len as usize;
            self.addr_lens[i] = m.msg_hdr.msg_namelen;
            self.segs[i] = gro_segment(&m.msg_hdr);
        }
        Ok(n)
    }

    /// Slot `i` of the last [`RecvBatch::recv`]: its bytes, who sent them
    /// (`None` for an address family soakd does not speak), and the size
    /// of each datagram in it when the kernel coalesced a run (0: the
    /// bytes are one datagram).
    pub fn get(&self, i: usize) -> (&[u8], Option<SocketAddr>, usize) {
        let at = i * self.slot;
        let bytes = &self.bufs[at..at + self.lens[i].min(self.slot)];
        (bytes, from_storage(&self.addrs[i], self.addr_lens[i]), self.segs[i])
    }
}

/// The segment size a UDP_GRO control message of `h` gives, or 0.
#[allow(unsafe_code)]
fn gro_segment(h: &libc::msghdr) -> usize {
    // SAFETY: the kernel wrote `msg_controllen` bytes of well-formed
    // control messages into the buffer `h` points at; the macros walk them.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == UDP_GRO {
                let v = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                return usize::try_from(v).unwrap_or(0);
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    0
}

/// Datagrams waiting for the end of a wakeup, sent together.
#[derive(Default)]
pub struct SendBatch {
    bytes: Vec<u8>,
    /// (start in `bytes`, length, destination, segment size or 0).
    items: Vec<(usize, usize, SocketAddr, u16)>,
    /// The kernel refused `UDP_SEGMENT` once: runs are split from then on.
    no_gso: bool,
}

impl SendBatch {
    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// True when a flush is due before more is queued.
    pub fn is_full(&self) -> bool {
        self.items.len() >= BATCH
    }

    /// True when runs of datagrams may go as one message.
    pub fn gso(&self) -> bool {
        !self.no_gso
    }

    /// Queues `bytes` for `to`: one datagram, or with `segment` a run of
    /// datagrams of that size (the last may be shorter).
    pub fn push(&mut self, to: SocketAddr, bytes: &[u8], segment: Option<usize>) {
        let seg = segment.filter(|&s| s < bytes.len()).unwrap_or(0);
        if seg != 0 && self.no_gso {
            for part in bytes.chunks(seg) {
                self.push(to, part, None);
            }
            return;
        }
        let at = self.bytes.len();
        self.bytes.extend_from_slice(bytes);
        self.items.push((at, bytes.len(), to, seg as u16));
    }

    /// Sends everything queued on `socket` with as few `sendmmsg` calls as
    /// it takes; what the socket will not take is dropped (see the module
    /// doc). Returns the bytes sent.
    #[allow(unsafe_code)]
    pub fn flush(&mut self, socket: &impl AsRawFd) -> u64 {
        let mut sent = 0u64;
        let mut from = 0;
        while from < self.items.len() {
            let chunk = &self.items[from..(from + BATCH).min(self.items.len())];
            let k = chunk.len();
            let mut addrs = [zeroed_storage(); BATCH];
            let mut iovs: [libc::iovec; BATCH] = [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; BATCH];
            // Room for one UDP_SEGMENT control message per datagram.
            let mut cmsgs = [[0u64; 4]; BATCH];
            // SAFETY: plain data, filled in below before the call.
            let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
            for (i, &(at, len, to, seg)) in chunk.iter().enumerate() {
                let alen = to_storage(to, &mut addrs[i]);
                iovs[i].iov_base = self.bytes[at..].as_ptr() as *mut libc::c_void;
                iovs[i].iov_len = len;
                let h = &mut msgs[i].msg_hdr;
                h.msg_name = (&mut addrs[i] as *mut libc::sockaddr_storage).cast();
                h.msg_namelen = alen;
                h.msg_iov = &mut iovs[i];
                h.msg_iovlen = 1;
                if seg != 0 {
                    // SAFETY: the buffer is 32 bytes, 8-aligned: room for
                    // CMSG_SPACE(2) (24 on 64-bit Linux); the macros
                    // compute offsets within it.
                    unsafe {
                        h.msg_control = cmsgs[i].as_mut_ptr().cast();
                        h.msg_controllen = libc::CMSG_SPACE(2) as _;
                        let c = libc::CMSG_FIRSTHDR(h);
                        (*c).cmsg_level = libc::SOL_UDP;
                        (*c).cmsg_type = UDP_SEGMENT;
                        (*c).cmsg_len = libc::CMSG_LEN(2) as _;
                        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), seg);
                    }
                }
            }
            // SAFETY: `msgs[..k]` point at live iovecs into `self.bytes`,
            // addresses and control buffers, all alive across the call.
            let n = unsafe { libc::sendmmsg(socket.as_raw_fd(), msgs.as_mut_ptr(), k as libc::c_uint, 0) };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    // GSO refused (no offload on the route): the first
                    // message was a run; split it and every later one.
                    Some(libc::EIO | libc::EINVAL) if chunk[0].3 != 0 && !self.no_gso => {
                        self.no_gso = true;
                        self.split_from(from);
                        continue;
                    }
                    // The first datagram cannot go (buffer full, an ICMP
                    // error queued for an earlier one): dropped, see above.
                    _ => {
                        from += 1;
                        continue;
                    }
                }
            }
            let n = n as usize;
            sent += chunk[..n].iter().map(|c| c.1 as u64).sum::<u64>();
            // A short count: the next one failed; it is dropped and the
            // rest tried.
            from += n.max(1);
        }
        self.items.clear();
        self.bytes.clear();
        sent
    }

    /// Replaces the runs at or after item `from` by their datagrams.
    fn split_from(&mut self, from: usize) {
        let rest: Vec<_> = self.items.drain(from..).collect();
        for (at, len, to, seg) in rest {
            if seg == 0 {
                self.items.push((at, len, to, 0));
                continue;
            }
            let mut off = 0;
            while off < len {
                let l = (seg as usize).min(len - off);
                self.items.push((at + off, l, to, 0));
                off += l;
            }
        }
    }
}

fn zeroed_storage() -> libc::sockaddr_storage {
    #[allow(unsafe_code)]
    // SAFETY: an all-zero sockaddr_storage is valid (AF_UNSPEC).
    unsafe {
        std::mem::zeroed()
    }
}

/// Writes `a` into `s` as the kernel takes it; returns its length.
#[allow(unsafe_code)]
fn to_storage(a: SocketAddr, s: &mut libc::sockaddr_storage) -> libc::socklen_t {
    match a {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(v4.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for
            // sockaddr_in.
            unsafe { std::ptr::write((s as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: as above, for sockaddr_in6.
            unsafe { std::ptr::write((s as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}

/// The address the kernel wrote into `s`, if it is IPv4 or IPv6.
#[allow(unsafe_code)]
fn from_storage(s: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    let len = len as usize;
    match s.ss_family as libc::c_int {
        libc::AF_INET if len >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let sin: libc::sockaddr_in = unsafe { std::ptr::read((s as *const libc::sockaddr_storage).cast()) };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sin.sin_port))))
        }
        libc::AF_INET6 if len >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let sin6: libc::sockaddr_in6 = unsafe { std::ptr::read((s as *const libc::sockaddr_storage).cast()) };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    #[test]
    fn addresses_round_trip() {
        for a in ["127.0.0.1:4433", "[::1]:443", "[fe80::1%2]:8443", "10.1.2.3:1"] {
            let a: SocketAddr = a.parse().unwrap();
            let mut s = zeroed_storage();
            let len = to_storage(a, &mut s);
            assert_eq!(from_storage(&s, len), Some(a));
        }
        assert_eq!(from_storage(&zeroed_storage(), 16), None);
    }

    /// A batch of datagrams, one of them a GSO run, arrives whole and in
    /// order, and one `recvmmsg` reads several.
    #[test]
    fn a_batch_goes_and_comes_in_few_calls() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = rx.local_addr().unwrap();
        let mut out = SendBatch::default();
        for i in 0..5u8 {
            out.push(to, &[i; 100], None);
        }
        // Three datagrams of 300 bytes and one of 50, as one message.
        let run: Vec<u8> = (0..950u32).map(|i| (i / 300) as u8 + 10).collect();
        out.push(to, &run, Some(300));
        let sent = out.flush(&tx);
        assert_eq!(sent, 500 + 950);
        assert!(out.is_empty());
        let mut got = Vec::new();
        let mut batch = RecvBatch::new(false);
        rx.set_nonblocking(true).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while got.len() < 9 && std::time::Instant::now() < deadline {
            match batch.recv(&rx) {
                Ok(n) => {
                    for i in 0..n {
                        let (b, from, seg) = batch.get(i);
                        assert_eq!(from, Some(tx.local_addr().unwrap()));
                        assert_eq!(seg, 0, "no GRO asked for");
                        got.push(b.to_vec());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
        let lens: Vec<usize> = got.iter().map(Vec::len).collect();
        assert_eq!(lens, [100, 100, 100, 100, 100, 300, 300, 300, 50]);
        assert_eq!(got[5], vec![10; 300]);
        assert_eq!(got[8], vec![13; 50]);
    }

    /// With GRO on, a GSO run sent over loopback arrives as one read that
    /// says its segment size; single datagrams say 0.
    #[test]
    fn a_run_arrives_coalesced_with_gro() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        if !enable_gro(&rx) {
            return;
        }
        let to = rx.local_addr().unwrap();
        let mut out = SendBatch::default();
        out.push(to, &[7; 100], None);
        let run: Vec<u8> = (0..950u32).map(|i| (i / 300) as u8).collect();
        out.push(to, &run, Some(300));
        out.flush(&tx);
        rx.set_nonblocking(true).unwrap();
        let mut batch = RecvBatch::new(true);
        let mut got = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while got.iter().map(|(b, _): &(Vec<u8>, usize)| b.len()).sum::<usize>() < 1050
            && std::time::Instant::now() < deadline
        {
            match batch.recv(&rx) {
                Ok(n) => (0..n).for_each(|i| {
                    let (b, _, seg) = batch.get(i);
                    got.push((b.to_vec(), seg));
                }),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got[0], (vec![7; 100], 0));
        // The run: whole in one read with its segment size, or (a kernel
        // that segments it on the way) as datagrams of that size.
        let rest: Vec<u8> = got[1..].iter().flat_map(|(b, _)| b.clone()).collect();
        assert_eq!(rest, run);
        if got.len() == 2 {
            assert_eq!(got[1].1, 300);
        }
    }

    #[test]
    fn runs_are_split_once_gso_is_refused() {
        let mut out = SendBatch {
            no_gso: true,
            ..SendBatch::default()
        };
        let to: SocketAddr = "127.0.0.1:9".parse().unwrap();
        out.push(to, &[1; 250], Some(100));
        let lens: Vec<usize> = out.items.iter().map(|i| i.1).collect();
        assert_eq!(lens, [100, 100, 50]);
        assert!(out.items.iter().all(|i| i.3 == 0));
    }
}
