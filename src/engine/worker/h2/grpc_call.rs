//! A gRPC call's end on the HTTP/2 client: its status read from the
//! trailers (or a trailers-only response), counted by code, and judged by
//! `expect_grpc_status`. A child of `h2.rs`, which hands it the header
//! blocks and DATA ends of streams that carry gRPC calls; held streams'
//! ends go on to `h2_hold.rs`.

use super::H2;
use crate::engine::worker::exchange::{Cx, Output, Response, Tally};
use crate::stats::ErrorKind;
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
    /// call (`grpc_status`), the connection stays.
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
        let accepted = match cx.w.requests[cx.entries[e].req as usize].checks.as_deref() {
            Some(checks) => checks.grpc_accepts(code),
            None => code == Code::Ok,
        };
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
            failed_checks: 0,
        })
    }
}
