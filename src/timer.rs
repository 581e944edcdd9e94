//! A hierarchical timer wheel with one timer per id.
//!
//! Every connection has deadlines (next send, connect or request timeout,
//! backoff end, planned churn), and a worker holds up to tens of thousands of
//! connections. A binary heap would cost `O(log n)` per re-arm and leave
//! cancelled entries behind; scanning connections per tick would make idle
//! connections cost CPU. Instead each id (a connection's slab key) owns at
//! most one node in an intrusive doubly linked list hanging off a wheel slot:
//! arming, re-arming and cancelling are `O(1)` and allocation free once the
//! node table has grown to the slab's size.
//!
//! Layout (the same idea as the Linux kernel's and tokio's wheels): six
//! levels of 64 slots; a slot on level `l` spans `64^l` ticks, so the wheel
//! covers 2^36 ticks (79 days of the engine's 100 µs ticks; later deadlines
//! are clamped and their owner re-arms when the clamped timer fires). An entry sits on the level given by the
//! highest bit in which its deadline differs from the wheel's current time;
//! as time advances, entries cascade down to finer levels. A 64-bit occupancy
//! mask per level finds the next non-empty slot with one `trailing_zeros`, so
//! the nearest deadline (the poll timeout) costs at most six mask lookups and
//! a wheel with only far-away timers sleeps until they are near.
//!
//! Callers keep their own precise deadlines; the wheel only promises never to
//! fire before the tick it was given, so an owner that re-arms lazily (leaves
//! an early timer in place and re-checks when it fires) stays correct.

const LEVELS: usize = 6;
const SLOT_BITS: u32 = 6;
const SLOTS: usize = 1 << SLOT_BITS;
const NIL: u32 = u32::MAX;
const MAX_SPAN: u64 = (1 << (SLOT_BITS as usize * LEVELS)) - 1;

/// Where a node currently lives.
#[derive(Clone, Copy, Debug)]
struct Node {
    prev: u32,
    next: u32,
    deadline: u64,
    /// `level * SLOTS + slot`, or `NIL` when the node is not armed.
    home: u32,
}

impl Node {
    const UNARMED: Node = Node {
        prev: NIL,
        next: NIL,
        deadline: 0,
        home: NIL,
    };
}

/// A hierarchical timer wheel over abstract ticks, keyed by `u32` ids.
#[derive(Debug)]
pub struct Wheel {
    /// Ticks up to and including `elapsed` have been processed.
    elapsed: u64,
    nodes: Vec<Node>,
    heads: Vec<u32>,
    occupied: [u64; LEVELS],
    armed: usize,
}

impl Default for Wheel {
    fn default() -> Self {
        Wheel::new()
    }
}

impl Wheel {
    /// An empty wheel whose current tick is 0.
    pub fn new() -> Wheel {
        Wheel {
            elapsed: 0,
            nodes: Vec::new(),
            heads: vec![NIL; LEVELS * SLOTS],
            occupied: [0; LEVELS],
            armed: 0,
        }
    }

    #[cfg(test)]
    /// Number of armed timers.
    pub fn len(&self) -> usize {
        self.armed
    }

    #[cfg(test)]
    /// True when no timer is armed.
    pub fn is_empty(&self) -> bool {
        self.armed == 0
    }

    /// The deadline `id` is armed for, if it is armed.
    pub fn deadline(&self, id: u32) -> Option<u64> {
        self.nodes
            .get(id as usize)
            .filter(|n| n.home != NIL)
            .map(|n| n.deadline)
    }

    /// Arms (or re-arms) `id` to fire at tick `deadline`. A deadline in the
    /// past fires on the next [`Wheel::poll`].
    pub fn schedule(&mut self, id: u32, deadline: u64) {
        let idx = id as usize;
        if idx >= self.nodes.len() {
            self.nodes.resize(idx + 1, Node::UNARMED);
        }
        if self.nodes[idx].home != NIL {
            self.unlink(id);
        } else {
            self.armed += 1;
        }
        // Clamp into the wheel's span so the top level's
        // slot index cannot wrap onto the present.
        let deadline = deadline.clamp(self.elapsed, self.elapsed + MAX_SPAN);
        self.nodes[idx].deadline = deadline;
        self.link(id);
    }

    /// Disarms `id`; a no-op when it is not armed.
    pub fn cancel(&mut self, id: u32) {
        if self.nodes.get(id as usize).is_some_and(|n| n.home != NIL) {
            self.unlink(id);
            self.armed -= 1;
        }
    }

    #[cfg(test)]
    /// The earliest tick at which some timer fires, if any is armed. It may
    /// be a slot boundary earlier than the entry's own deadline when the entry
    /// sits on a coarse level: polling then only cascades it, which is the
    /// price of `O(1)` arming.
    pub fn next_expiration(&self) -> Option<u64> {
        (0..LEVELS).find_map(|level| self.next_in_level(level).map(|(_, t)| t))
    }

    /// The earliest deadline of any armed timer. Unlike
    /// [`Wheel::next_expiration`] this is a real deadline, never a coarse
    /// slot boundary, so a loop that sleeps until it wakes only when a timer
    /// is actually due (cascading happens then, on the way). Costs a walk of
    /// one slot's list when the nearest timers sit on a coarse level.
    pub fn next_deadline(&self) -> Option<u64> {
        // Every entry on a finer level is due before every entry on a
        // coarser one, and within a level slots are in time order, so the
        // minimum is in the first occupied slot of the finest occupied level.
        let (level, slot, at) = self.next_slot()?;
        if level == 0 {
            return Some(at);
        }
        let mut cur = self.heads[level * SLOTS + slot];
        let mut min = u64::MAX;
        while cur != NIL {
            let node = &self.nodes[cur as usize];
            min = min.min(node.deadline);
            cur = node.next;
        }
        Some(min)
    }

    /// Advances the wheel to tick `now`, appending every id whose deadline is
    /// at or before `now` to `fired` (disarmed). Ids fire in deadline order
    /// up to slot granularity.
    pub fn poll(&mut self, now: u64, fired: &mut Vec<u32>) {
        while let Some((level, slot, at)) = self.next_slot() {
            if at > now {
                break;
            }
            // Entries already due fire; the rest (from a coarse slot) are
            // re-filed relative to the new time and land on a finer level.
            self.elapsed = at;
            let home = level * SLOTS + slot;
            let mut cur = self.heads[home];
            self.heads[home] = NIL;
            self.occupied[level] &= !(1u64 << slot);
            while cur != NIL {
                let next = self.nodes[cur as usize].next;
                let node = &mut self.nodes[cur as usize];
                node.home = NIL;
                node.prev = NIL;
                node.next = NIL;
                if node.deadline <= now {
                    self.armed -= 1;
                    fired.push(cur);
                } else {
                    self.link(cur);
                }
                cur = next;
            }
        }
        if now > self.elapsed {
            self.elapsed = now;
        }
    }

    fn next_slot(&self) -> Option<(usize, usize, u64)> {
        (0..LEVELS).find_map(|level| self.next_in_level(level).map(|(s, t)| (level, s, t)))
    }

    /// The next occupied slot of `level` at or after the current time, and
    /// the tick at which that slot starts.
    fn next_in_level(&self, level: usize) -> Option<(usize, u64)> {
        let occupied = self.occupied[level];
        if occupied == 0 {
            return None;
        }
        let shift = SLOT_BITS * level as u32;
        let slot_span = 1u64 << shift;
        let level_span = slot_span << SLOT_BITS;
        let now_slot = ((self.elapsed >> shift) as usize) % SLOTS;
        let distance = occupied.rotate_right(now_slot as u32).trailing_zeros() as usize;
        let slot = (now_slot + distance) % SLOTS;
        let level_start = self.elapsed & !(level_span - 1);
        let mut at = level_start + slot as u64 * slot_span;
        if at < self.elapsed & !(slot_span - 1) {
            at += level_span;
        }
        Some((slot, at.max(self.elapsed)))
    }

    fn link(&mut self, id: u32) {
        let deadline = self.nodes[id as usize].deadline;
        // The level is chosen by the highest bit in which the deadline and the
        // current tick differ; `| (SLOTS - 1)` keeps near deadlines on level 0.
        let differing = (self.elapsed ^ deadline) | (SLOTS as u64 - 1);
        let significant = 63 - differing.leading_zeros();
        let level = ((significant / SLOT_BITS) as usize).min(LEVELS - 1);
        let slot = ((deadline >> (SLOT_BITS * level as u32)) as usize) % SLOTS;
        let home = level * SLOTS + slot;
        let head = self.heads[home];
        {
            let node = &mut self.nodes[id as usize];
            node.home = home as u32;
            node.prev = NIL;
            node.next = head;
        }
        if head != NIL {
            self.nodes[head as usize].prev = id;
        }
        self.heads[home] = id;
        self.occupied[level] |= 1u64 << slot;
    }

    fn unlink(&mut self, id: u32) {
        let Node { prev, next, home, .. } = self.nodes[id as usize];
        if prev != NIL {
            self.nodes[prev as usize].next = next;
        } else {
            self.heads[home as usize] = next;
            if next == NIL {
                let level = home as usize / SLOTS;
                let slot = home as usize % SLOTS;
                self.occupied[level] &= !(1u64 << slot);
            }
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        }
        let node = &mut self.nodes[id as usize];
        node.home = NIL;
        node.prev = NIL;
        node.next = NIL;
    }
}

/// Deadlines in [`Instant`]s over a [`Wheel`]: the one timer scheme of the
/// servers' event loops (the built-in target and the metrics exporter), as
/// the wheel itself is the engine's. Each id (a connection's slab key, or a
/// small number a loop keeps for a queue of its own: ids index a table) has
/// at most one deadline;
/// setting, moving and clearing one is `O(1)`, and the poll timeout is the
/// nearest deadline, so a loop with nothing due sleeps.
///
/// Ticks are [`Deadlines::TICK`] long from when the deadlines were made; a
/// deadline never fires before its instant (it is rounded up to a tick).
#[derive(Debug)]
pub struct Deadlines {
    wheel: Wheel,
    origin: std::time::Instant,
    fired: Vec<u32>,
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines::new()
    }
}

impl Deadlines {
    /// The length of a tick: fine enough for a response delay of a
    /// millisecond to be kept to a tenth of it.
    pub const TICK: std::time::Duration = std::time::Duration::from_micros(100);

    /// No deadline set; ticks count from now.
    pub fn new() -> Deadlines {
        Deadlines {
            wheel: Wheel::new(),
            origin: std::time::Instant::now(),
            fired: Vec::new(),
        }
    }

    fn tick_of(&self, at: std::time::Instant) -> u64 {
        let ns = at.saturating_duration_since(self.origin).as_nanos() as u64;
        ns.div_ceil(Self::TICK.as_nanos() as u64)
    }

    fn instant_of(&self, tick: u64) -> std::time::Instant {
        self.origin + std::time::Duration::from_nanos(tick.saturating_mul(Self::TICK.as_nanos() as u64))
    }

    /// Sets `id`'s deadline to `at` (replacing the one it had); `None`
    /// clears it. A no-op when it is already set to that tick.
    pub fn set(&mut self, id: u32, at: Option<std::time::Instant>) {
        match at {
            None => self.wheel.cancel(id),
            Some(at) => {
                let tick = self.tick_of(at);
                if self.wheel.deadline(id) != Some(tick) {
                    self.wheel.schedule(id, tick);
                }
            }
        }
    }

    /// How long the loop may sleep from `now`: until the nearest deadline
    /// (zero when one is due), or `None` (for ever) when none is set.
    pub fn timeout(&self, now: std::time::Instant) -> Option<std::time::Duration> {
        let tick = self.wheel.next_deadline()?;
        Some(self.instant_of(tick).saturating_duration_since(now))
    }

    /// The ids whose deadline is at or before `now` (cleared), in
    /// deadline order up to a tick.
    pub fn expired(&mut self, now: std::time::Instant) -> std::vec::Drain<'_, u32> {
        self.fired.clear();
        // `now` rounded down: a deadline fires once its tick has begun.
        let ns = now.saturating_duration_since(self.origin).as_nanos() as u64;
        self.wheel.poll(ns / Self::TICK.as_nanos() as u64, &mut self.fired);
        self.fired.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn drain(w: &mut Wheel, now: u64) -> Vec<u32> {
        let mut v = Vec::new();
        w.poll(now, &mut v);
        v.sort_unstable();
        v
    }

    #[test]
    fn fires_at_deadline_not_before() {
        let mut w = Wheel::new();
        w.schedule(1, 10);
        w.schedule(2, 70);
        w.schedule(3, 5_000);
        assert_eq!(drain(&mut w, 9), Vec::<u32>::new());
        assert_eq!(drain(&mut w, 10), vec![1]);
        assert_eq!(drain(&mut w, 69), Vec::<u32>::new());
        assert_eq!(drain(&mut w, 70), vec![2]);
        assert_eq!(drain(&mut w, 4_999), Vec::<u32>::new());
        assert_eq!(drain(&mut w, 5_000), vec![3]);
        assert!(w.is_empty());
    }

    #[test]
    fn rearm_and_cancel() {
        let mut w = Wheel::new();
        w.schedule(7, 100);
        w.schedule(7, 50);
        assert_eq!(w.len(), 1);
        assert_eq!(w.deadline(7), Some(50));
        assert_eq!(drain(&mut w, 60), vec![7]);
        w.schedule(8, 200);
        w.cancel(8);
        w.cancel(8);
        assert!(w.is_empty());
        assert_eq!(drain(&mut w, 1_000), Vec::<u32>::new());
    }

    #[test]
    fn past_deadline_fires_on_next_poll() {
        let mut w = Wheel::new();
        assert_eq!(drain(&mut w, 1_000), Vec::<u32>::new());
        w.schedule(1, 3);
        assert_eq!(w.next_expiration(), Some(1_000));
        assert_eq!(drain(&mut w, 1_000), vec![1]);
    }

    #[test]
    fn next_expiration_is_never_after_the_real_deadline() {
        let mut w = Wheel::new();
        w.poll(123_456, &mut Vec::new());
        for (i, d) in [123_500u64, 130_000, 10_000_000, 123_457].iter().enumerate() {
            w.schedule(i as u32, *d);
        }
        let next = w.next_expiration().unwrap();
        assert!(next <= 123_457, "{next}");
    }

    /// The wheel against a simple model: random arms, re-arms, cancels and
    /// polls with jumps of every size; each id fires exactly when the model
    /// says, never early, never twice.
    #[test]
    fn matches_a_sorted_map_model() {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut w = Wheel::new();
        let mut model: BTreeMap<u32, u64> = BTreeMap::new();
        let mut now = 0u64;
        for _ in 0..200_000 {
            match rng.u8(0..10) {
                0..=5 => {
                    let id = rng.u32(0..512);
                    let span = match rng.u8(0..4) {
                        0 => 64,
                        1 => 5_000,
                        2 => 300_000,
                        _ => 20_000_000,
                    };
                    let d = now + rng.u64(0..span);
                    w.schedule(id, d);
                    model.insert(id, d);
                }
                6 => {
                    let id = rng.u32(0..512);
                    w.cancel(id);
                    model.remove(&id);
                }
                _ => {
                    now += match rng.u8(0..4) {
                        0 => rng.u64(0..3),
                        1 => rng.u64(0..100),
                        2 => rng.u64(0..10_000),
                        _ => rng.u64(0..5_000_000),
                    };
                    let got = drain(&mut w, now);
                    let mut want: Vec<u32> = model.iter().filter(|(_, d)| **d <= now).map(|(id, _)| *id).collect();
                    want.sort_unstable();
                    for id in &want {
                        model.remove(id);
                    }
                    assert_eq!(got, want, "at tick {now}");
                    if let (Some(next), Some(min)) = (w.next_expiration(), model.values().min()) {
                        assert!(next <= *min, "next {next} after real deadline {min}");
                        assert!(next > now);
                    }
                    assert_eq!(w.next_deadline(), model.values().min().copied(), "at tick {now}");
                }
            }
            assert_eq!(w.len(), model.len());
        }
    }

    /// Instants round up to a tick and never fire early; the timeout is
    /// the nearest deadline; a cleared or moved deadline does not fire.
    #[test]
    fn deadlines_in_instants() {
        use std::time::{Duration, Instant};
        let mut d = Deadlines::new();
        let t0 = Instant::now();
        assert_eq!(d.timeout(t0), None, "nothing set: sleep for ever");
        d.set(1, Some(t0 + Duration::from_millis(5)));
        d.set(2, Some(t0 + Duration::from_millis(2)));
        d.set(3, Some(t0 + Duration::from_millis(1)));
        d.set(3, None);
        let wait = d.timeout(t0).unwrap();
        assert!(
            wait >= Duration::from_millis(2) && wait <= Duration::from_millis(2) + Deadlines::TICK,
            "{wait:?}"
        );
        assert_eq!(d.expired(t0 + Duration::from_millis(1)).count(), 0);
        assert_eq!(d.expired(t0 + Duration::from_millis(3)).collect::<Vec<_>>(), [2]);
        d.set(1, Some(t0 + Duration::from_millis(10)));
        assert_eq!(d.expired(t0 + Duration::from_millis(6)).count(), 0, "moved later");
        assert_eq!(d.expired(t0 + Duration::from_millis(11)).collect::<Vec<_>>(), [1]);
        assert_eq!(d.timeout(t0), None);
    }
}
