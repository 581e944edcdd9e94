//! One connection of the built-in target: its stream, what it keeps
//! between reads, and the fault it may be acting out.
//!
//! Kept apart from the responder so that its size stays in view: tens of
//! thousands of these sit idle at once.

use std::io;

use mio::Token;

use super::MAX_IN_FLIGHT;
use super::h2_conn::H2Conn;
use super::ws_socket::WsConn;
use crate::netio::{Pending, Slot, Stream};

/// Why consuming a connection's input stopped (the HTTP parser's and the
/// WebSocket frames' answer alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    /// All input used; the rest, if any, is an incomplete request head
    /// (or frame head, or control frame).
    NeedMore,
    /// Output is blocked; the rest waits until it drains.
    Blocked,
    /// The connection is closing; the rest is dropped.
    Discard,
    /// A request switched the connection to another protocol (a WebSocket
    /// upgrade): the rest is that protocol's.
    Switched,
}

/// A fault acted out on one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ConnFault {
    /// None: the normal case.
    None,
    /// `never-answer`: input is read and dropped, nothing is sent.
    Muted,
    /// `trickle`: this many bytes of the trickle response are out; reading
    /// waits until all are.
    Trickle { sent: u32 },
    /// `handshake-stall`: nothing is read, so the TLS handshake never
    /// finishes; the connection ends when the client closes it.
    Stalled,
    /// `close-no-notify`: the connection closes after its response without
    /// a TLS close_notify.
    NoNotify,
}

/// What a target connection speaks; what depends on it is `proto.rs`'s.
pub(super) enum Proto {
    /// Not known yet (with `--h2`): its first bytes are compared with the
    /// HTTP/2 client preface.
    Sniff,
    /// HTTP/1.1.
    Http1,
    /// HTTP/2, its state boxed so that HTTP/1 connections stay small.
    H2(Box<H2Conn>),
    /// Upgraded to WebSocket (boxed likewise).
    Ws(Box<WsConn>),
}

/// One client connection. Kept small on purpose: an idle plain connection
/// owns no heap memory (a TLS one its session and rustls's receive buffer).
pub(super) struct Conn {
    pub(super) stream: Stream,
    pub(super) token: Token,
    /// Request body bytes still to be skipped.
    pub(super) body_left: u64,
    /// Output the socket would not take yet; written on WRITABLE.
    out: Pending,
    /// Received bytes not handled yet: an incomplete request head, or input
    /// set aside while our output is blocked.
    pub(super) input: Vec<u8>,
    /// Responses of this connection waiting in the delay queue.
    pub(super) in_flight: u32,
    /// A response that ends the connection has been produced; later input
    /// is discarded.
    pub(super) closing: bool,
    /// The peer has shut down its sending side.
    pub(super) eof: bool,
    /// A fault being acted out; [`ConnFault::None`] normally.
    pub(super) fault: ConnFault,
    /// Reading stopped because output was blocked. No new edge will come
    /// for data already in the socket, so reading is resumed by hand.
    pub(super) paused: bool,
    /// What it speaks (see `proto.rs`).
    pub(super) proto: Proto,
}

impl Slot for Conn {
    fn token(&self) -> Token {
        self.token
    }
}

impl Conn {
    pub(super) fn new(stream: Stream, token: Token, proto: Proto) -> Conn {
        Conn {
            stream,
            token,
            body_left: 0,
            out: Pending::default(),
            input: Vec::new(),
            in_flight: 0,
            closing: false,
            eof: false,
            fault: ConnFault::None,
            paused: false,
            proto,
        }
    }

    /// Whether to stop taking requests until output drains: the peer is
    /// not reading what it asked for (or a trickled response is still
    /// going out, and later responses must wait for it).
    pub(super) fn blocked(&self) -> bool {
        !self.out.is_empty() || self.in_flight >= MAX_IN_FLIGHT || matches!(self.fault, ConnFault::Trickle { .. })
    }

    /// Whether input is dropped unread: the connection is closing, or
    /// muted by the `never-answer` fault.
    pub(super) fn discarding(&self) -> bool {
        self.closing || self.fault == ConnFault::Muted
    }

    /// Whether the connection has nothing left to do and can be closed.
    pub(super) fn finished(&self) -> bool {
        (self.closing || self.eof) && self.out.is_empty() && self.in_flight == 0 && !self.stream.wants_write()
    }

    /// Ends a finished connection: a TLS one says close_notify first,
    /// unless the `close-no-notify` fault wants it cut.
    pub(super) fn end(mut self) {
        if self.fault != ConnFault::NoNotify
            && let Stream::Tls(t) = &mut self.stream
        {
            t.close_notify();
        }
    }

    /// Writes `bytes` now, keeping whatever the socket does not take.
    pub(super) fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.send(&mut self.stream, bytes)
    }

    /// Writes as much of the kept output as the socket takes.
    pub(super) fn write_out(&mut self) -> io::Result<()> {
        self.out.flush(&mut self.stream).map(drop)
    }

    /// True when output waits for the socket.
    pub(super) fn has_output(&self) -> bool {
        !self.out.is_empty()
    }
}
