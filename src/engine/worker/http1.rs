//! HTTP/1.1 behind the protocol seam: requests pipelined in order,
//! responses framed in the same order.
//!
//! The in-flight entries are a FIFO ring in the slot's stretch of the
//! worker's storage: a request takes the entry after the newest, a response
//! completes the oldest. The index wraps by comparison, not `%`: one
//! request is one add and one branch. Bytes owed are counted in whole
//! requests plus an offset into the first, so a write takes one
//! contiguous run of the workload's pre-rendered copies.
//!
//! Only a split response head is ever kept (the framer needs a head whole).
//! When one is carried, the next read is appended only as far as the head
//! can end (its blank line), and what follows is framed straight from the
//! read buffer: a head split across reads costs a copy of the head, never
//! of the 64 KiB read behind it.

use super::exchange::{AtClose, Cx, Inflight, Output, Response};
use crate::netio::pool;
use crate::plan::{CheckState, Judge};
use crate::stats::ErrorKind;
use crate::wire::{AtEof, Framed, Framer};

/// One connection's HTTP/1.1 state.
#[derive(Debug)]
pub(super) struct Http1 {
    framer: Framer,
    /// The current response against its request's checks.
    check: CheckState,
    /// Requests in flight; the oldest is at `head`.
    inflight: u16,
    head: u16,
    /// Issued requests not yet written out whole (at most the pipeline
    /// depth); counting requests rather than bytes keeps this small and
    /// cannot overflow whatever the body size.
    unsent: u16,
    /// Offset of the next byte to write within the first unsent request.
    write_off: u32,
    /// An incomplete response head carried over to the next read, in a
    /// buffer borrowed from the thread's pool (`netio::pool`); `None`
    /// otherwise, so the slot pays 8 bytes for it and a split head costs
    /// no allocation.
    partial: Option<pool::Buf>,
}

/// `i` wrapped into a ring of `depth` entries, for `i < 2 * depth`.
#[inline]
fn wrap(i: usize, depth: usize) -> usize {
    if i >= depth { i - depth } else { i }
}

impl Http1 {
    pub(super) fn new(head_request: bool) -> Http1 {
        Http1 {
            framer: Framer::new(head_request),
            check: CheckState::default(),
            inflight: 0,
            head: 0,
            unsent: 0,
            write_off: 0,
            partial: None,
        }
    }

    pub(super) fn reset(&mut self) {
        self.framer.reset();
        self.check = CheckState::default();
        self.inflight = 0;
        self.head = 0;
        self.unsent = 0;
        self.write_off = 0;
        pool::release(&mut self.partial);
    }

    #[inline]
    pub(super) fn in_flight(&self) -> u16 {
        self.inflight
    }

    #[inline]
    pub(super) fn oldest(&self) -> Option<u16> {
        (self.inflight > 0).then_some(self.head)
    }

    #[inline]
    pub(super) fn issue(&mut self, depth: usize) -> u16 {
        let at = wrap(self.head as usize + self.inflight as usize, depth);
        self.inflight += 1;
        self.unsent += 1;
        at as u16
    }

    #[inline]
    pub(super) fn has_output(&self) -> bool {
        self.unsent > 0
    }

    /// The request owed first, and how many whole requests from its start
    /// one write may cover.
    #[inline]
    fn first_unsent<'a>(&self, cx: &Cx<'a>) -> (&'a [u8], usize, usize) {
        match &cx.w.cycle {
            // With one request, `wire` holds whole copies of it, so from
            // the offset in the first copy up to its end is one contiguous
            // run of the requests still owed.
            None => (&cx.w.wire, cx.w.req_len, self.unsent as usize),
            // A mix writes the first request owed from its own bytes, one
            // at a time.
            Some(_) => {
                let first = (self.inflight - self.unsent) as usize;
                let at = wrap(self.head as usize + first, cx.entries.len());
                let bytes = &cx.w.requests[cx.entries[at].req as usize].bytes;
                (bytes, bytes.len(), 1)
            }
        }
    }

    #[inline]
    pub(super) fn outgoing<'a>(&'a self, cx: &Cx<'a>) -> &'a [u8] {
        if self.unsent == 0 {
            return &[];
        }
        let (buf, len, units) = self.first_unsent(cx);
        let end = (units * len).min(buf.len());
        &buf[self.write_off as usize..end]
    }

    #[inline]
    pub(super) fn sent(&mut self, cx: &Cx<'_>, n: usize) {
        let (_, len, _) = self.first_unsent(cx);
        let pos = self.write_off as usize + n;
        self.unsent -= (pos / len) as u16;
        self.write_off = (pos % len) as u32;
    }

    pub(super) fn receive(&mut self, cx: &Cx<'_>, fresh: &[u8]) -> (usize, Output) {
        let Some(mut carried) = self.partial.take() else {
            let (used, out) = self.frame(cx, fresh);
            if out == Output::Taken && used < fresh.len() {
                // An incomplete head: the one thing ever carried (capped by
                // the framer at 64 KiB).
                pool::get(&mut self.partial).extend_from_slice(&fresh[used..]);
                return (fresh.len(), Output::Taken);
            }
            return (used, out);
        };
        // A head split across reads: add bytes only up to where it can end.
        // An interim (1xx) head or leading blank lines can end earlier than
        // the final head; after one such miss the rest is added whole, so a
        // read is parsed at most twice.
        let mut taken = 0;
        let mut precise = true;
        loop {
            let rest = &fresh[taken..];
            let take = if precise {
                head_end(&carried, rest).unwrap_or(rest.len())
            } else {
                rest.len()
            };
            precise = false;
            carried.extend_from_slice(&rest[..take]);
            taken += take;
            let (used, out) = self.frame(cx, &carried);
            match out {
                Output::Taken if used < carried.len() => {
                    // Still incomplete (the framer consumes nothing of a
                    // head it cannot parse yet).
                    carried.drain(..used);
                    if taken == fresh.len() {
                        self.partial = Some(carried);
                        return (taken, Output::Taken);
                    }
                }
                // The head is complete; the rest is framed from `fresh`.
                // What the framer left of the carried bytes (only after the
                // second pass, which added the read whole) came from the
                // end of `fresh`: it is given back, not carried.
                Output::Taken if taken < fresh.len() => {
                    // The head is in and its body goes on in `fresh`.
                    pool::give(carried);
                    let (more, out) = self.receive(cx, &fresh[taken..]);
                    return (taken + more, out);
                }
                out => {
                    let left = (carried.len() - used).min(take);
                    pool::give(carried);
                    return (taken - left, out);
                }
            }
        }
    }

    /// One pass of the framer over `data` for the oldest request in flight.
    #[inline]
    fn frame(&mut self, cx: &Cx<'_>, data: &[u8]) -> (usize, Output) {
        if data.is_empty() {
            return (0, Output::Taken);
        }
        if self.inflight == 0 {
            // Bytes nobody asked for: the stream is out of step.
            return (0, Output::Error(ErrorKind::Protocol));
        }
        let req = &cx.w.requests[cx.entries[self.head as usize].req as usize];
        if cx.w.cycle.is_some() && self.framer.is_idle() {
            self.framer.set_head(req.head);
        }
        let framed = match req.checks.as_deref() {
            None => self.framer.feed(data),
            Some(checks) => self.framer.feed_inspect(
                data,
                &mut Judge {
                    checks,
                    state: &mut self.check,
                },
            ),
        };
        match framed {
            Err(_) => (0, Output::Error(ErrorKind::Protocol)),
            Ok(Framed::Partial { consumed }) => (consumed, Output::Taken),
            Ok(Framed::Complete {
                consumed,
                status,
                keep_alive,
            }) => (consumed, Output::Response(self.complete(cx, status, keep_alive))),
        }
    }

    /// The oldest request's response is complete: judge it, free its entry.
    #[inline]
    fn complete(&mut self, cx: &Cx<'_>, status: u16, keep_alive: bool) -> Response {
        let entry = self.head;
        let req = &cx.w.requests[cx.entries[entry as usize].req as usize];
        let failed_checks = match req.checks.as_deref() {
            None => 0,
            Some(checks) => checks.finish(&mut self.check, status),
        };
        self.head = wrap(self.head as usize + 1, cx.entries.len()) as u16;
        self.inflight -= 1;
        Response {
            entry,
            status,
            keep_alive,
            failed_checks,
        }
    }

    pub(super) fn at_close(&mut self, cx: &Cx<'_>) -> AtClose {
        match self.framer.eof(self.partial.as_ref().map_or(0, |p| p.len())) {
            AtEof::Idle => AtClose::Idle,
            AtEof::Truncated => AtClose::Truncated,
            // The close ends the body: a complete response, after which
            // the connection is gone.
            AtEof::Complete { status } => AtClose::Complete(self.complete(cx, status, false)),
        }
    }

    pub(super) fn relayout(&mut self, old: &[Inflight], new: &mut [Inflight]) {
        for (i, slot) in new.iter_mut().take(self.inflight as usize).enumerate() {
            *slot = old[(self.head as usize + i) % old.len()];
        }
        self.head = 0;
    }
}

/// How many bytes of `fresh` complete a head whose start is `carried`:
/// up to and including the first blank line (`\n\n` or `\n\r\n`, as
/// httparse accepts), which may begin in the last bytes of `carried`.
fn head_end(carried: &[u8], fresh: &[u8]) -> Option<usize> {
    let before = |i: usize, back: usize| -> Option<u8> {
        // The byte `back` places before `fresh[i]`, looking into `carried`.
        if i >= back {
            Some(fresh[i - back])
        } else {
            carried.len().checked_sub(back - i).map(|j| carried[j])
        }
    };
    fresh.iter().enumerate().find_map(|(i, &b)| {
        let end = b == b'\n'
            && match before(i, 1) {
                Some(b'\n') => true,
                Some(b'\r') => before(i, 2) == Some(b'\n'),
                _ => false,
            };
        end.then_some(i + 1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::worker::{ProtoRt, WorkloadRt};

    fn workload(pipeline: u16) -> WorkloadRt {
        WorkloadRt::test(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", pipeline, ProtoRt::Http1)
    }

    /// Feeds `stream` cut at `cuts` the way the loop does, with `n`
    /// requests issued; returns (entry, status) per response and the end.
    fn drive(stream: &[u8], cuts: &[usize], n: u16) -> (Vec<(u16, u16)>, Option<ErrorKind>) {
        let w = workload(n);
        let entries = vec![Inflight::default(); n as usize];
        let cx = Cx::of(&w, &entries, 0, entries.len());
        let mut h = Http1::new(false);
        for _ in 0..n {
            h.issue(entries.len());
        }
        let mut got = Vec::new();
        let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
        bounds.extend([0, stream.len()]);
        bounds.sort_unstable();
        for pair in bounds.windows(2) {
            let read = &stream[pair[0]..pair[1]];
            let mut pos = 0;
            loop {
                let (used, out) = h.receive(&cx, &read[pos..]);
                pos += used;
                match out {
                    Output::Taken => break,
                    Output::Response(r) => got.push((r.entry, r.status)),
                    Output::Error(kind) => return (got, Some(kind)),
                    other => panic!("HTTP/1.1 gave {other:?}"),
                }
            }
            assert_eq!(pos, read.len(), "every byte of a read is taken");
        }
        (got, None)
    }

    const THREE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 No\r\nContent-Length: 0\r\n\r\nHTTP/1.1 500 E\nContent-Length: 0\n\n";

    #[test]
    fn responses_complete_their_entries_in_order() {
        let (got, err) = drive(THREE, &[], 3);
        assert_eq!(err, None);
        assert_eq!(got, vec![(0, 200), (1, 404), (2, 500)]);
        let (got, err) = drive(THREE, &[30, 60, 61, 90], 3);
        assert_eq!((got, err), (vec![(0, 200), (1, 404), (2, 500)], None));
    }

    #[test]
    fn entries_wrap_around_the_ring() {
        let one = b"HTTP/1.1 204 No Content\r\n\r\n";
        let (got, err) = drive(&one.repeat(3), &[], 3);
        assert_eq!((got, err), (vec![(0, 204), (1, 204), (2, 204)], None));
        let w = workload(2);
        let entries = vec![Inflight::default(); 2];
        let cx = Cx::of(&w, &entries, 0, entries.len());
        let mut h = Http1::new(false);
        let mut seen = Vec::new();
        for _ in 0..5 {
            seen.push(h.issue(2));
            let (_, out) = h.receive(&cx, one);
            assert!(matches!(out, Output::Response(r) if r.entry == *seen.last().unwrap()));
        }
        assert_eq!(seen, [0, 1, 0, 1, 0]);
    }

    #[test]
    fn unasked_bytes_are_a_protocol_error() {
        let (got, err) = drive(
            b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
            &[],
            1,
        );
        assert_eq!((got, err), (vec![(0, 204)], Some(ErrorKind::Protocol)));
    }

    #[test]
    fn head_end_finds_the_blank_line_across_the_cut() {
        assert_eq!(head_end(b"HTTP/1.1 200 OK\r\n", b"\r\nbody"), Some(2));
        assert_eq!(head_end(b"HTTP/1.1 200 OK\r\n\r", b"\nbody"), Some(1));
        assert_eq!(head_end(b"HTTP/1.1 200 OK\n", b"\nbody"), Some(1));
        assert_eq!(head_end(b"HTTP/1.1 200 OK", b"\r\nA: b\r\n\r\nbody"), Some(10));
        assert_eq!(head_end(b"", b"\r\n"), None);
        assert_eq!(head_end(b"HTTP/1.1 200 OK\r\n", b"A: b\r\n"), None);
    }

    #[test]
    fn a_carried_head_takes_only_its_own_bytes() {
        let w = workload(2);
        let entries = vec![Inflight::default(); 2];
        let cx = Cx::of(&w, &entries, 0, entries.len());
        let mut h = Http1::new(false);
        h.issue(2);
        h.issue(2);
        let (used, out) = h.receive(&cx, b"HTTP/1.1 200 OK\r\nContent-Le");
        assert_eq!((used, out), (27, Output::Taken));
        assert_eq!(h.partial.as_ref().map(|p| p.len()), Some(27));
        // The rest of the head, its body and the whole next response: only
        // the head's end joins the carried bytes (head_end is tested above),
        // the body is framed from the read and the next response is left.
        let next = b"ngth: 2\r\n\r\nokHTTP/1.1 204 No Content\r\n\r\n";
        let (used, out) = h.receive(&cx, next);
        assert_eq!(used, 13);
        assert!(matches!(out, Output::Response(r) if r.entry == 0 && r.status == 200));
        assert!(h.partial.is_none());
        let (_, out) = h.receive(&cx, &next[13..]);
        assert!(matches!(out, Output::Response(r) if r.entry == 1 && r.status == 204));
    }

    proptest::proptest! {
        /// Any split of a byte stream frames the same as the whole.
        #[test]
        fn any_split_frames_like_the_whole(cuts in proptest::collection::vec(0usize..200, 0..6)) {
            let stream = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 404 N\nContent-Length: 1\n\nxHTTP/1.1 100 C\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n";
            let whole = drive(stream, &[], 3);
            proptest::prop_assert_eq!(drive(stream, &cuts, 3), whole);
        }
    }
}
