//! The streams of one HTTP/2 client connection, found in `O(1)` whatever
//! `--streams` (up to 1024): by entry (the in-flight entry a stream is),
//! by stream id (every frame names one), and the oldest (whose request
//! timeout runs out first, asked after every response).
//!
//! - **free entries** are a stack: taking one is a pop, not a search;
//! - **by id**: a ring of at least twice as many places as streams, place
//!   `(id >> 1) & mask` holding the entry whose live stream has that id. A
//!   new id whose place is still held (a stream that lived across many
//!   others) is skipped, so lookups need no probing; with twice the
//!   places that is rare, and ids may have gaps (RFC 9113 §5.1.1 asks only
//!   that they grow);
//! - **the oldest**: a queue in issue order; entries that finished are
//!   dropped from its front as they finish, and the stale ones in the
//!   middle (behind a long-lived stream) once they outnumber the streams,
//!   so it stays bounded and its front is always the oldest live stream.
//!
//! Ids run out after 2^30 streams on one connection; past [`Streams::
//! exhausted`] no stream is opened and the connection ends once the rest
//! are answered (`h2.rs`).

use std::collections::VecDeque;
use std::ops::{Index, IndexMut};

use crate::plan::CheckState;
use crate::wire::h2::{RecvWindow, SendWindow};

/// The highest stream id a client may open (RFC 9113 §5.1.1).
const MAX_STREAM_ID: u32 = (1 << 31) - 1;
/// An entry index that is none.
const NONE: u16 = u16::MAX;

/// Where a stream is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum St {
    /// Not in use.
    Free,
    /// Issued; its HEADERS (or the rest of its body) are still owed.
    Owed,
    /// Written whole; the response is awaited.
    Open,
    /// To be handed back (not processed by the server).
    Handback,
}

/// One stream (one in-flight entry).
#[derive(Clone, Debug)]
pub(super) struct Stream {
    pub(super) st: St,
    /// Its stream id (0 when free).
    pub(super) id: u32,
    /// Its place in issue order (tells a live queue entry from a stale one).
    pub(super) seq: u32,
    /// Its HEADERS are in the output.
    pub(super) rendered: bool,
    /// The response's status (0 until its final head).
    pub(super) status: u16,
    /// Body bytes still to send.
    pub(super) body_left: u32,
    /// What soakd may still send on it.
    pub(super) send: SendWindow,
    /// What the server may still send on it.
    pub(super) recv: RecvWindow,
    /// Its response's checks.
    pub(super) check: CheckState,
}

impl Stream {
    fn free() -> Stream {
        Stream {
            st: St::Free,
            id: 0,
            seq: 0,
            rendered: false,
            status: 0,
            body_left: 0,
            send: SendWindow::new(0),
            recv: RecvWindow::new(0),
            check: CheckState::default(),
        }
    }
}

/// The size of the id ring for `depth` entries: at least twice as many
/// places, so a live stream rarely sits where a new id would go.
fn ring_len(depth: usize) -> usize {
    (depth * 2).next_power_of_two().max(2)
}

/// The first id not to open with a ring of `ring` places: one issue may
/// skip as many ids as the ring has places, and no id may pass 2^31−1.
fn id_limit(ring: usize) -> u32 {
    MAX_STREAM_ID - 2 * ring as u32 - 2
}

/// A connection's streams (see the module doc).
#[derive(Debug)]
pub(super) struct Streams {
    slots: Box<[Stream]>,
    /// Free entries (a stack).
    free: Vec<u16>,
    /// Entries by stream id (see the module doc), or [`NONE`].
    pub(super) index: Box<[u16]>,
    /// Entries in issue order, with their `seq`.
    pub(super) by_seq: VecDeque<(u16, u32)>,
    next_id: u32,
    /// Ids at or above this are not opened.
    pub(super) id_limit: u32,
    next_seq: u32,
    in_flight: u16,
}

impl Streams {
    /// `depth` free entries.
    pub(super) fn new(depth: usize) -> Streams {
        let mut s = Streams {
            slots: vec![Stream::free(); depth].into_boxed_slice(),
            free: Vec::with_capacity(depth),
            index: vec![NONE; ring_len(depth)].into_boxed_slice(),
            by_seq: VecDeque::with_capacity(depth * 2 + 2),
            next_id: 1,
            id_limit: id_limit(ring_len(depth)),
            next_seq: 0,
            in_flight: 0,
        };
        s.reset();
        s
    }

    /// Every entry free, ids from 1 again (a new connection).
    pub(super) fn reset(&mut self) {
        for s in self.slots.iter_mut() {
            *s = Stream::free();
        }
        self.free.clear();
        self.free.extend((0..self.slots.len() as u16).rev());
        self.index.fill(NONE);
        self.by_seq.clear();
        self.next_id = 1;
        self.next_seq = 0;
        self.in_flight = 0;
    }

    /// Entries in all.
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Streams in flight (not free).
    #[inline]
    pub(super) fn in_flight(&self) -> u16 {
        self.in_flight
    }

    /// No new stream may be opened on this connection: its ids ran out.
    #[inline]
    pub(super) fn exhausted(&self) -> bool {
        self.next_id >= self.id_limit
    }

    /// The entry issued first among those in flight.
    #[inline]
    pub(super) fn oldest(&self) -> Option<u16> {
        self.by_seq.front().map(|&(e, _)| e)
    }

    /// Opens a stream: takes a free entry and the next id whose place in
    /// the ring is free, with the send window `send` and the receive
    /// window `recv`; returns the entry (with its `seq` in the stream).
    /// The caller has checked there is room.
    #[inline]
    pub(super) fn open(&mut self, send: i64, recv: u32) -> u16 {
        let e = self.free.pop().expect("a stream is opened below the capacity");
        let mask = self.index.len() - 1;
        while self.index[(self.next_id as usize >> 1) & mask] != NONE {
            self.next_id += 2;
        }
        let id = self.next_id;
        self.next_id += 2;
        self.index[(id as usize >> 1) & mask] = e;
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        self.slots[e as usize] = Stream {
            st: St::Owed,
            id,
            seq,
            send: SendWindow::new(send),
            recv: RecvWindow::new(recv),
            ..Stream::free()
        };
        self.by_seq.push_back((e, seq));
        self.in_flight += 1;
        e
    }

    /// Frees entry `e` (answered, reset or handed back).
    pub(super) fn close(&mut self, e: usize) {
        let s = &mut self.slots[e];
        if s.id != 0 {
            let mask = self.index.len() - 1;
            self.index[(s.id as usize >> 1) & mask] = NONE;
        }
        *s = Stream::free();
        self.free.push(e as u16);
        self.in_flight -= 1;
        self.prune();
    }

    /// Drops finished entries from the front of the issue-order queue (so
    /// its front is the oldest live one), and the stale ones in the middle
    /// when they pile up behind a long-lived stream.
    fn prune(&mut self) {
        let slots = &self.slots;
        let live = |&(e, q): &(u16, u32)| {
            let s = &slots[e as usize];
            s.st != St::Free && s.seq == q
        };
        while self.by_seq.front().is_some_and(|x| !live(x)) {
            self.by_seq.pop_front();
        }
        if self.by_seq.len() > slots.len() * 2 {
            self.by_seq.retain(live);
        }
    }

    /// True when entry `e` is the live stream issued as `seq`.
    #[inline]
    pub(super) fn is(&self, e: u16, seq: u32) -> bool {
        let s = &self.slots[e as usize];
        s.st != St::Free && s.seq == seq
    }

    /// The entry of stream `id`, if it is one of ours in flight.
    #[inline]
    pub(super) fn entry_of(&self, id: u32) -> Option<usize> {
        let e = self.index[(id as usize >> 1) & (self.index.len() - 1)];
        (e != NONE && self.slots[e as usize].id == id).then_some(e as usize)
    }

    /// The streams, for a walk (a SETTINGS shift, a GOAWAY).
    pub(super) fn iter_mut(&mut self) -> impl DoubleEndedIterator<Item = (usize, &mut Stream)> {
        self.slots.iter_mut().enumerate()
    }

    /// `depth` entries now (a reload deepened the pipeline): the streams
    /// in flight keep their entries and ids; the ring grows with them (a
    /// multiple of its old size, so two live ids never meet in it).
    pub(super) fn grow(&mut self, depth: usize) {
        let before = self.slots.len();
        let mut slots = vec![Stream::free(); depth].into_boxed_slice();
        slots[..before].clone_from_slice(&self.slots);
        self.slots = slots;
        self.free.extend((before..depth).rev().map(|e| e as u16));
        let mut index = vec![NONE; ring_len(depth)].into_boxed_slice();
        let mask = index.len() - 1;
        for (e, s) in self.slots.iter().enumerate() {
            if s.st != St::Free {
                index[(s.id as usize >> 1) & mask] = e as u16;
            }
        }
        self.id_limit = id_limit(index.len());
        self.index = index;
    }
}

impl Index<usize> for Streams {
    type Output = Stream;

    #[inline]
    fn index(&self, e: usize) -> &Stream {
        &self.slots[e]
    }
}

impl IndexMut<usize> for Streams {
    #[inline]
    fn index_mut(&mut self, e: usize) -> &mut Stream {
        &mut self.slots[e]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids grow, skip a place a long-lived stream holds, and every live id
    /// finds its entry; the issue-order queue stays bounded and its front
    /// is the oldest live stream.
    #[test]
    fn ids_skip_held_places_and_the_oldest_stays_in_front() {
        let mut s = Streams::new(2);
        assert_eq!(s.index.len(), 4);
        let old = s.open(10, 10);
        let mut ids = vec![s[old as usize].id];
        for _ in 0..1000 {
            let e = s.open(10, 10);
            let id = s[e as usize].id;
            ids.push(id);
            assert_eq!(s.entry_of(id), Some(e as usize));
            s.close(e as usize);
            assert_eq!(s.entry_of(id), None);
            assert_eq!(s.oldest(), Some(old));
            assert!(s.by_seq.len() <= 5, "{}", s.by_seq.len());
        }
        assert_eq!(&ids[..6], [1, 3, 5, 7, 11, 13], "9 would sit where 1 lives");
        assert!(ids.windows(2).all(|p| p[1] > p[0]));
        s.close(old as usize);
        assert_eq!((s.oldest(), s.in_flight()), (None, 0));
        assert!(!s.exhausted());
        s.grow(8);
        assert_eq!((s.len(), s.index.len()), (8, 16));
    }
}
