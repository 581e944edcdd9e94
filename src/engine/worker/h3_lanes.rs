//! The in-flight entries of one HTTP/3 connection, each a [`Lane`] (its
//! request stream and what is known of its response), found in `O(1)`
//! both ways: a free entry is a pop from a stack, and the entry of a
//! stream an event names is a look in a ring by the stream's index.
//!
//! The ring has at least twice as many places as entries; place
//! `index & mask` holds the entry whose stream has that index. quinn
//! numbers streams itself, so a new stream whose place is still held (by
//! one that lived across many others) cannot be skipped as HTTP/2 skips
//! ids (`h2_streams.rs`): it stays outside the ring, and only while some
//! entry is outside does a look that misses the ring search the entries.

use std::ops::{Index, IndexMut};

use quinn_proto::StreamId;

use super::h3_response::Lane;

/// No entry, in a ring place.
const NONE: u16 = u16::MAX;

#[derive(Debug)]
pub(super) struct Lanes {
    lanes: Vec<Lane>,
    /// The entries with no stream, a stack.
    free: Vec<u16>,
    /// Entries by stream index (see the module doc).
    places: Vec<u16>,
    /// Entries whose stream found its place held.
    outside: u16,
}

impl Lanes {
    pub(super) fn new(depth: usize) -> Lanes {
        Lanes {
            lanes: (0..depth).map(|_| Lane::default()).collect(),
            free: (0..depth as u16).rev().collect(),
            places: vec![NONE; (2 * depth).next_power_of_two()],
            outside: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.lanes.len()
    }

    /// Every entry free, every lane as new (the connection is gone).
    pub(super) fn reset(&mut self) {
        for l in &mut self.lanes {
            l.id = None;
            l.unsent = 0;
            l.reader.reset();
            l.status = 0;
            l.check = Default::default();
        }
        self.free.clear();
        self.free.extend((0..self.lanes.len() as u16).rev());
        self.places.fill(NONE);
        self.outside = 0;
    }

    #[inline]
    fn place(&self, id: StreamId) -> usize {
        id.index() as usize & (self.places.len() - 1)
    }

    /// A free entry takes stream `id`, its lane as new; `None` when every
    /// entry is in flight.
    pub(super) fn take(&mut self, id: StreamId) -> Option<u16> {
        let e = self.free.pop()?;
        let p = self.place(id);
        if self.places[p] == NONE {
            self.places[p] = e;
        } else {
            self.outside += 1;
        }
        let lane = &mut self.lanes[e as usize];
        lane.id = Some(id);
        lane.unsent = 0;
        lane.status = 0;
        lane.check = Default::default();
        Some(e)
    }

    /// Entry `e` is done with its stream (nothing, if it has none).
    pub(super) fn release(&mut self, e: u16) {
        let lane = &mut self.lanes[e as usize];
        let Some(id) = lane.id.take() else { return };
        lane.unsent = 0;
        lane.reader.reset();
        let p = self.place(id);
        if self.places[p] == e {
            self.places[p] = NONE;
        } else {
            self.outside -= 1;
        }
        self.free.push(e);
    }

    /// The entry whose request is on stream `id`.
    #[inline]
    pub(super) fn of(&self, id: StreamId) -> Option<u16> {
        let e = self.places[self.place(id)];
        if e != NONE && self.lanes[e as usize].id == Some(id) {
            return Some(e);
        }
        if self.outside == 0 {
            return None;
        }
        self.lanes.iter().position(|l| l.id == Some(id)).map(|e| e as u16)
    }
}

impl Index<usize> for Lanes {
    type Output = Lane;

    fn index(&self, e: usize) -> &Lane {
        &self.lanes[e]
    }
}

impl IndexMut<usize> for Lanes {
    fn index_mut(&mut self, e: usize) -> &mut Lane {
        &mut self.lanes[e]
    }
}

#[cfg(test)]
mod tests {
    use quinn_proto::{Dir, Side};

    use super::*;

    fn stream(index: u64) -> StreamId {
        StreamId::new(Side::Client, Dir::Bi, index)
    }

    /// Two entries, a ring of 4 places: stream 1 lives while streams 2 to
    /// 4 come and go on the other entry, so stream 5 finds its place (1)
    /// held and stays outside, found by the search, until it ends; every
    /// entry is free again at the end, in any order.
    #[test]
    fn a_long_lived_stream_keeps_its_place_and_the_next_is_found_outside() {
        let mut lanes = Lanes::new(2);
        assert_eq!(lanes.places.len(), 4);
        let first = lanes.take(stream(1)).unwrap();
        for index in 2..=4 {
            let e = lanes.take(stream(index)).unwrap();
            assert_ne!(e, first);
            assert_eq!(lanes.of(stream(index)), Some(e));
            lanes.release(e);
            assert_eq!(lanes.of(stream(index)), None, "a stream released is no entry's");
        }
        assert_eq!(lanes.outside, 0);
        let fifth = lanes.take(stream(5)).unwrap();
        assert_eq!(lanes.outside, 1, "place 1 is stream 1's");
        assert_eq!(lanes.take(stream(6)), None, "both entries in flight");
        assert_eq!(lanes.of(stream(5)), Some(fifth));
        assert_eq!(lanes.of(stream(1)), Some(first));
        assert_eq!(lanes.of(stream(9)), None);
        lanes.release(first);
        lanes.release(fifth);
        lanes.release(fifth);
        assert_eq!(lanes.outside, 0);
        assert!(lanes.places.iter().all(|&p| p == NONE));
        assert_eq!(lanes.free.len(), 2);
        lanes.take(stream(7)).unwrap();
        lanes.reset();
        assert_eq!(lanes.of(stream(7)), None);
        assert_eq!(lanes.free.len(), 2);
    }
}
