//! The floor of a held QUIC connection, to set soakd's memory per held
//! HTTP/3 connection beside: quinn-proto on the rustls and aws-lc soakd
//! builds with, with soakd's transport settings (`src/plan/h3.rs`), and
//! nothing of soakd's. It opens N connections from one UDP socket to an
//! HTTP/3 server (ALPN `h3`), opens each one's HTTP/3 control stream with
//! an empty SETTINGS (as any HTTP/3 client must), reads nothing else,
//! lets quinn send the keep-alive PINGs, holds them for HOLD seconds and
//! prints its resident memory before and after.
//!
//! Usage: quic_floor ADDR CACERT N HOLD_SECS
//!
//! A floor, not a client: every connection is visited on every turn of
//! its loop (`O(N)`), which costs CPU and no memory.

use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quinn_proto::crypto::rustls::QuicClientConfig;
use quinn_proto::{
    ClientConfig, Connection, ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig, Event, TransportConfig,
    VarInt,
};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// Handshakes under way at once, so a large N does not flood the server.
const HANDSHAKING: usize = 100;

/// The process's resident set, bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in /proc/self/status");
    kb * 1024
}

fn client_config(cacert: &str) -> ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(cacert).expect("CACERT: a PEM file") {
        roots
            .add(cert.expect("CACERT: a certificate"))
            .expect("CACERT: a usable root");
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let crypto = QuicClientConfig::try_from(Arc::new(tls)).expect("a QUIC TLS configuration");
    let mut config = ClientConfig::new(Arc::new(crypto));
    let mut t = TransportConfig::default();
    // soakd's settings, with quinn's keep-alive for soakd's own PING (both
    // send one after 15 s of silence against a 30 s idle timeout).
    t.max_concurrent_bidi_streams(VarInt::from_u32(0))
        .max_concurrent_uni_streams(VarInt::from_u32(8))
        .stream_receive_window(VarInt::from_u32(64 * 1024))
        .receive_window(VarInt::from_u32(256 * 1024))
        .send_window(256 * 1024)
        .keep_alive_interval(Some(Duration::from_secs(15)))
        .datagram_receive_buffer_size(None)
        .max_idle_timeout(Some(Duration::from_secs(30).try_into().expect("a valid idle timeout")));
    config.transport_config(Arc::new(t));
    config
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: quic_floor ADDR CACERT N HOLD_SECS");
        std::process::exit(2);
    }
    let addr: SocketAddr = args[1].parse().expect("ADDR: ip:port");
    let n: usize = args[3].parse().expect("N: a count");
    let hold = Duration::from_secs(args[4].parse().expect("HOLD_SECS: seconds"));
    let config = client_config(&args[2]);
    let socket = UdpSocket::bind(SocketAddr::new(addr.ip(), 0)).expect("a UDP socket");
    socket.set_nonblocking(true).expect("non-blocking");
    let mut endpoint = Endpoint::new(Arc::new(EndpointConfig::default()), None, false, None);
    let mut conns: Vec<Option<Connection>> = Vec::new();
    let (mut opened, mut connected, mut lost) = (0usize, 0usize, 0usize);
    let mut tx = Vec::new();
    let mut rx = vec![0u8; 64 * 1024];
    let before = rss();
    let started = Instant::now();
    let mut held_from: Option<Instant> = None;
    loop {
        let now = Instant::now();
        while opened < n && opened - connected - lost < HANDSHAKING {
            let (ch, conn) = endpoint
                .connect(now, config.clone(), addr, "localhost")
                .expect("a connection");
            if conns.len() <= ch.0 {
                conns.resize_with(ch.0 + 1, || None);
            }
            conns[ch.0] = Some(conn);
            opened += 1;
        }
        let mut read = false;
        loop {
            match socket.recv_from(&mut rx) {
                Ok((len, from)) => {
                    read = true;
                    tx.clear();
                    match endpoint.handle(now, from, None, None, BytesMut::from(&rx[..len]), &mut tx) {
                        Some(DatagramEvent::ConnectionEvent(ch, ev)) => {
                            if let Some(c) = conns.get_mut(ch.0).and_then(Option::as_mut) {
                                c.handle_event(ev);
                            }
                        }
                        Some(DatagramEvent::Response(t)) => {
                            let _ = socket.send_to(&tx[..t.size], t.destination);
                        }
                        _ => {}
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("receiving: {e}"),
            }
        }
        for (i, slot) in conns.iter_mut().enumerate() {
            let Some(c) = slot.as_mut() else { continue };
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
            while let Some(ev) = c.poll_endpoint_events() {
                if let Some(back) = endpoint.handle_event(ConnectionHandle(i), ev) {
                    c.handle_event(back);
                }
            }
            while let Some(ev) = c.poll() {
                match ev {
                    Event::Connected => {
                        connected += 1;
                        // The control stream: its type (0x00), then an
                        // empty SETTINGS frame (type 0x04, length 0).
                        if let Some(id) = c.streams().open(Dir::Uni) {
                            let _ = c.send_stream(id).write(&[0x00, 0x04, 0x00]);
                        }
                    }
                    Event::ConnectionLost { reason } => {
                        lost += 1;
                        eprintln!("quic_floor: connection lost: {reason}");
                    }
                    _ => {}
                }
            }
            loop {
                tx.clear();
                let Some(t) = c.poll_transmit(now, 1, &mut tx) else {
                    break;
                };
                let _ = socket.send_to(&tx[..t.size], t.destination);
            }
            if c.is_drained() {
                *slot = None;
            }
        }
        if held_from.is_none() && connected + lost == n {
            held_from = Some(now);
            eprintln!(
                "quic_floor: {connected} connected, {lost} lost in {:.1} s; holding {} s",
                started.elapsed().as_secs_f64(),
                hold.as_secs()
            );
        }
        if held_from.is_some_and(|h| now >= h + hold) {
            break;
        }
        if !read {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let after = rss();
    let held = conns.iter().flatten().filter(|c| !c.is_closed()).count();
    println!(
        "held {held} lost {lost} rss_before {before} rss_after {after} per_connection_whole {} per_connection_added {}",
        after / held.max(1) as u64,
        after.saturating_sub(before) / held.max(1) as u64
    );
}
