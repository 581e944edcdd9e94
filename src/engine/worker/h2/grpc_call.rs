//! A gRPC call's end on the HTTP/2 client: its status read from the
//! trailers (or a trailers-only response), counted by code, and judged by
//! `expect_grpc_status`. A child of `h2.rs`, which hands it the header
//! blocks and DATA ends of streams that carry gRPC calls; held streams'
//! ends go on to `h2_hold.rs`.
//!
//! `expect_grpc_message` needs the reply's bytes, and only a call whose
//! request has that check keeps them ([`Replies`]): in a pooled buffer per
//! stream entry, borrowed at its first DATA and given back when the call
//! ends, capped at [`MAX_CHECKED_REPLY`] (a longer reply fails the check),
//! decoded once at the end. Without the check nothing is kept or decoded,
//! and a connection pays one empty `Vec`.

use super::H2;
use crate::engine::worker::exchange::{Cx, Output, Response, Tally};
use crate::netio::pool;
use crate::plan::grpc::MAX_CHECKED_REPLY;
use crate::stats::{CheckKind, ErrorKind};
use crate::wire::grpc::{Block, BlockFields, Code};

impl H2 {
    /// A whole header block of a gRPC call: the response's headers, its
    /// trailers, or a trailers-only response (`wire::grpc::ResponseHeads`
    /// says which); the status is kept until the stream ends.
    pub(super) fn on_grpc_block(
        &mut self,
        cx: &Cx<'_>,
        t: &mut Tally<'_>,
        stream: u32,
        end_stream: bool,
        block: &[u8],
    ) -> Option<Output> {
        let mut fields = BlockFields::default();
        if self.hpack.decode(block, |n, v| fields.field(n, v)).is_err() {
            return Some(Output::Error(ErrorKind::H2Protocol));
        }
        let e = self.streams.entry_of(stream)?;
        let s = &mut self.streams[e];
        match s.grpc.on_block(&fields, end_stream) {
            // A block out of place: this call is broken, the others are not.
            Err(_) => {
                self.streams.close(e);
                return Some(Output::Failed {
                    entry: e as u16,
                    kind: ErrorKind::H2Protocol,
                });
            }
            Ok(Block::Informational) => return None,
            Ok(Block::Headers) => {
                s.status = fields.http_status.unwrap_or(0);
                if !end_stream && self.held(e) && !std::mem::replace(&mut self.answered, true) {
                    // The first held stream answered: the connection works.
                    return Some(Output::Opened);
                }
            }
            Ok(Block::End(call)) => {
                if s.status == 0 {
                    s.status = fields.http_status.unwrap_or(0);
                }
                s.grpc_status = Some(call.code);
            }
        }
        end_stream.then(|| self.end_call(cx, t, e))
    }

    /// A gRPC call's stream ended: counted by its status; OK (or a code
    /// `expect_grpc_status` lists) is a response, any other code fails the
    /// call (`grpc_status`), the connection stays. An OK reply that does
    /// not hold what `expect_grpc_message` asks fails the `body` check.
    pub(super) fn end_call(&mut self, cx: &Cx<'_>, t: &mut Tally<'_>, e: usize) -> Output {
        let s = &mut self.streams[e];
        let code = match s.grpc_status {
            Some(c) => c,
            // DATA ended the stream without trailers: no status (UNKNOWN).
            None => s.grpc.on_end_without_trailers().map_or(Code::Unknown, |c| c.code),
        };
        let status = s.status;
        if self.held(e) {
            return self.end_held_call(t, e, code);
        }
        t.st.h2_mut().grpc_calls[code as usize] += 1;
        self.streams.close(e);
        let req = cx.entries[e].req as usize;
        // A mix of methods: by call too (one call's are the workload's).
        if t.st.requests.len() > 1 {
            t.st.requests[req].grpc_calls[code as usize] += 1;
        }
        let checks = cx.w.requests[req].checks.as_deref();
        let reply = self.replies.take(e);
        let accepted = checks.map_or(code == Code::Ok, |c| c.grpc_accepts(code));
        let mut failed_checks = 0;
        if let Some(m) = checks.and_then(|c| c.grpc_message.as_ref())
            && accepted
            && code == Code::Ok
            && !m.matches(reply.as_deref().map_or(&[][..], |b| &b[..]))
        {
            failed_checks |= 1 << CheckKind::Body as u8;
        }
        if let Some(b) = reply {
            pool::give(b);
        }
        if !accepted {
            return Output::Failed {
                entry: e as u16,
                kind: ErrorKind::GrpcStatus,
            };
        }
        Output::Response(Response {
            entry: e as u16,
            status,
            keep_alive: true,
            failed_checks,
        })
    }
}

/// The replies kept for `expect_grpc_message`, by stream entry (see the
/// module doc).
#[derive(Debug, Default)]
pub(super) struct Replies {
    bodies: Vec<Option<pool::Buf>>,
}

impl Replies {
    /// Keeps DATA `data` of entry `e`'s reply (its call checks the
    /// message).
    pub(super) fn keep(&mut self, e: usize, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        if self.bodies.len() <= e {
            self.bodies.resize_with(e + 1, || None);
        }
        let body = pool::get(&mut self.bodies[e]);
        // One byte over the cap is enough for the check to fail.
        let room = (MAX_CHECKED_REPLY + 1).saturating_sub(body.len());
        body.extend_from_slice(&data[..room.min(data.len())]);
    }

    /// Entry `e`'s reply, if one was kept (the caller gives it back).
    #[inline]
    fn take(&mut self, e: usize) -> Option<pool::Buf> {
        self.bodies.get_mut(e).and_then(Option::take)
    }

    /// Forgets entry `e`'s reply (a call that did not end normally left
    /// it behind).
    #[inline]
    pub(super) fn clear(&mut self, e: usize) {
        if let Some(b) = self.bodies.get_mut(e) {
            pool::release(b);
        }
    }

    /// Forgets every reply (the connection is gone).
    pub(super) fn reset(&mut self) {
        self.bodies.iter_mut().for_each(pool::release);
    }
}
