//! The built-in target's gRPC calls on one HTTP/2 connection (a child of
//! `h2_conn.rs`, which hands them a call's request DATA and its end): a
//! unary call answered with its echo or a status, `Subscribe`'s pushes
//! on the thread's interval timers, `Chat`'s echo of each message as it
//! arrives. What a reply holds is `grpc.rs`'s.

use std::time::Instant;

use super::super::grpc::{self, Answer};
use super::{Cx, H2Conn, Phase};
use crate::netio::pool;
use crate::wire::grpc::Code;
use crate::wire::h2::{encode_data, encode_headers};

impl H2Conn {
    /// Keeps DATA of gRPC call `stream`'s request (one byte over
    /// [`grpc::MAX_MESSAGE`] is enough to refuse it).
    pub(super) fn keep_request(&mut self, stream: u32, data: &[u8]) {
        let at = match self.grpc_in.iter().position(|(id, _)| *id == stream) {
            Some(at) => at,
            None => {
                self.grpc_in.push((stream, pool::take()));
                self.grpc_in.len() - 1
            }
        };
        let body = &mut self.grpc_in[at].1;
        let room = (grpc::MAX_MESSAGE + 6).saturating_sub(body.len());
        body.extend_from_slice(&data[..room.min(data.len())]);
    }

    /// Answers gRPC call `i` (its request whole, its delay over): a
    /// trailers-only status, or the head, the echoed reply and OK.
    pub(super) fn start_call(&mut self, cx: &mut Cx<'_>, i: usize) {
        let id = self.streams[i].id;
        let body = self
            .grpc_in
            .iter()
            .position(|(s, _)| *s == id)
            .map(|at| self.grpc_in.swap_remove(at).1)
            .unwrap_or_else(pool::take);
        self.answer_call(cx, i, &body);
        pool::give(body);
    }

    /// [`H2Conn::start_call`] with the call's request body.
    fn answer_call(&mut self, cx: &mut Cx<'_>, i: usize, body: &[u8]) {
        let s = self.streams[i];
        let Some(g) = cx.th.grpc.as_mut() else { return };
        match g.answer(s.grpc, body) {
            Answer::Status(code) => {
                encode_headers(cx.out, s.id, g.trailers_only(code), true, self.core.peer.max_frame);
                self.finish(cx, i);
            }
            Answer::Echo => {
                encode_headers(cx.out, s.id, &g.head, false, self.core.peer.max_frame);
                let mut reply = pool::take();
                g.reply(body, &mut reply);
                self.grpc_out.push((s.id, reply));
                self.streams[i].phase = Phase::Sending(0);
                self.pump(cx, i);
            }
            Answer::Subscribe(count, every) => {
                if !cx.th.pushes.has_room(every) {
                    let only = g.trailers_only(Code::ResourceExhausted);
                    encode_headers(cx.out, s.id, only, true, self.core.peer.max_frame);
                    return self.finish(cx, i);
                }
                encode_headers(cx.out, s.id, &g.head, false, self.core.peer.max_frame);
                let template = grpc::request_message(body)
                    .and_then(grpc::subscribe_of)
                    .map_or_else(Vec::new, |(_, _, t)| t.to_vec());
                self.subs.push((s.id, count, 1, template));
                self.streams[i].phase = Phase::Streaming;
                self.streams[i].opened = true;
                cx.th
                    .pushes
                    .schedule(every, cx.now + every, cx.token, (s.id, self.born));
            }
        }
    }

    /// `Subscribe` stream `stream`'s push is due (the connection born at
    /// `born`): one reply, or the last one and OK. True while it goes on
    /// (the caller schedules the next).
    pub(in crate::server) fn push(&mut self, cx: &mut Cx<'_>, stream: u32, born: Instant) -> bool {
        if born != self.born || self.done {
            return false;
        }
        let (Some(i), Some(at)) = (self.find(stream), self.subs.iter().position(|x| x.0 == stream)) else {
            return false;
        };
        let (_, left, seq, template) = &mut self.subs[at];
        let mut reply = pool::take();
        grpc::frame_reply(template, *seq, &mut reply);
        *seq += 1;
        let last = *left == 1;
        *left = left.saturating_sub(1);
        self.send_message(cx, i, &reply);
        pool::give(reply);
        if last {
            self.end_call_with(cx, i, Code::Ok);
            return false;
        }
        true
    }

    /// `Chat` stream `i` got DATA: every whole message kept so far is
    /// echoed now (the head first, once).
    pub(super) fn chat(&mut self, cx: &mut Cx<'_>, i: usize) {
        let id = self.streams[i].id;
        let Some(at) = self.grpc_in.iter().position(|x| x.0 == id) else {
            return;
        };
        let mut buf = std::mem::take(&mut self.grpc_in[at].1);
        let mut used = 0;
        while let Some(found) = grpc::next_message(&buf[used..]) {
            let Ok(range) = found else {
                // Compressed: nothing offered it.
                return self.end_call_with(cx, i, Code::Internal);
            };
            let Some(g) = cx.th.grpc.as_mut() else { return };
            if !self.streams[i].opened {
                encode_headers(cx.out, id, &g.head, false, self.core.peer.max_frame);
                self.streams[i].opened = true;
            }
            let seq = g.next_seq();
            let mut reply = pool::take();
            grpc::frame_reply(&buf[used + range.start..used + range.end], seq, &mut reply);
            self.send_message(cx, i, &reply);
            pool::give(reply);
            used += range.end;
        }
        buf.drain(..used);
        if let Some(at) = self.grpc_in.iter().position(|x| x.0 == id) {
            self.grpc_in[at].1 = buf;
        }
    }

    /// `Chat` stream `i`'s client ended its side: OK.
    pub(super) fn end_chat(&mut self, cx: &mut Cx<'_>, i: usize) {
        self.end_call_with(cx, i, Code::Ok);
    }

    /// Ends gRPC stream `i` with `code`: trailers after its head, or a
    /// trailers-only response.
    fn end_call_with(&mut self, cx: &mut Cx<'_>, i: usize, code: Code) {
        let Some(g) = cx.th.grpc.as_ref() else { return };
        let s = self.streams[i];
        let block = match (s.opened, code) {
            (true, Code::Ok) => &g.ok_trailers[..],
            _ => g.trailers_only(code),
        };
        encode_headers(cx.out, s.id, block, true, self.core.peer.max_frame);
        self.finish(cx, i);
    }

    /// One message on stream `i` as a DATA frame, if both windows have
    /// room for it whole (a client that stops reading loses pushes rather
    /// than growing the target).
    fn send_message(&mut self, cx: &mut Cx<'_>, i: usize, message: &[u8]) {
        let s = &mut self.streams[i];
        let n = message.len() as u32;
        if s.send.room() < n || self.core.send.room() < n {
            return;
        }
        encode_data(cx.out, s.id, message, false, self.core.peer.max_frame);
        s.send.spend(n);
        self.core.send.spend(n);
    }

    /// Drops what a gRPC call on `stream` kept.
    pub(super) fn forget_call(&mut self, stream: u32) {
        for list in [&mut self.grpc_in, &mut self.grpc_out] {
            if let Some(at) = list.iter().position(|(id, _)| *id == stream) {
                pool::give(list.swap_remove(at).1);
            }
        }
        self.subs.retain(|x| x.0 != stream);
    }
}
