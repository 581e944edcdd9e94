//! HTTP on the wire (HTTP/2's frames and HPACK in [`h2`], gRPC's messages
//! and status in [`grpc`]).
//!
//! HTTP/1.1: request bytes rendered once, responses framed
//! incrementally, request heads read for the two servers (`request_head`), and the one set of header helpers every part of soakd
//! reads heads with; WebSocket's frames and opening handshake
//! (`ws`), which both the engine and the built-in target speak; and the
//! Prometheus text exposition (`exposition`), which `soakd status`, the
//! server watch and the tests read.
//!
//! This is layer 0: it knows nothing of connections, plans or counters, so
//! the engine, the built-in target, the metrics endpoint, `soakd status`
//! and the fuzzers all frame bytes the same way.

pub mod exposition;
mod framer;
pub mod grpc;
pub mod h2;
pub mod h3;
pub mod headers;
mod request;
pub mod request_head;

pub use framer::{AtEof, Framed, Framer, Inspect, MAX_HEAD_BYTES, ProtocolError};
pub use request::{RequestSpec, check_header, check_method, render_request};
pub mod ws;
