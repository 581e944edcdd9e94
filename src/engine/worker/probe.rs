//! Probing through an outage, so soakd's own backoff does not hide when
//! the server came back.
//!
//! A slot that keeps failing backs off (100 ms doubling to 10 s): after an
//! 8 s stop the slots retry at about 6.3 s and 12.7 s, so the connections
//! would be seen back 4.7 s after the server was. While the control thread
//! says an outage is on (its mask, read once per loop iteration like the
//! phase), the first [`PROBES`] slots of each worker and workload retry
//! every [`PROBE_MS`] (half jittered) instead; the others keep their
//! backoff and their ramp tokens, so a dead server sees a few connects a
//! second, not a storm. When a probe's connection opens, the server
//! answers again: that worker's slots of the workload still waiting out a
//! backoff go to the ramp queue at once (ramp tokens pace them, their
//! backoff level is kept for the next failure), and the reconnect time
//! the report gives is how long they took.
//!
//! The rule is [`retry_ms`] and [`is_probe`], kept apart from the loop so
//! it can be tested (and carried over) on its own.

use super::Worker;
use super::conn::{State, tick_ceil};

/// Slots per worker and workload that probe during an outage.
pub(super) const PROBES: u32 = 2;
/// A probe's wait between tries during an outage, ms (before the jitter:
/// half fixed, half random, as the backoff's).
pub(super) const PROBE_MS: u32 = 200;

/// Whether the slot that is `rank`-th among its worker's slots of its
/// workload probes during an outage.
pub(super) fn is_probe(rank: u32) -> bool {
    rank < PROBES
}

/// A failed slot's wait before it retries, ms (before the jitter), given
/// its backoff step `backoff_ms` and whether it probes now (a probe slot
/// while its workload is in an outage): a probe never waits longer than a
/// probe's wait, every other slot waits its backoff.
pub(super) fn retry_ms(backoff_ms: u32, probing: bool) -> u32 {
    if probing { backoff_ms.min(PROBE_MS) } else { backoff_ms }
}

/// Workload `wi`'s bit in an outage mask (the last bit stands for every
/// workload from the 64th on).
pub(super) fn bit(wi: usize) -> u64 {
    1 << wi.min(63)
}

impl Worker {
    /// The slot's place among this worker's slots of its workload (slots
    /// are dealt round-robin by their place in the shard).
    fn rank(&self, key: usize) -> u32 {
        self.shard.local(self.conns[key].slot) / self.threads.max(1) as u32
    }

    /// Slot `key` probes now: its workload is in an outage and it is one
    /// of the first few.
    pub(super) fn probing(&self, key: usize) -> bool {
        self.outage & bit(self.conns[key].workload as usize) != 0 && is_probe(self.rank(key))
    }

    /// The control thread's outage mask changed. Probe slots of a workload
    /// whose outage just began, waiting out a longer backoff, retry after
    /// a probe's wait instead.
    pub(super) fn on_outage(&mut self, mask: u64, now: u64) {
        let began = mask & !self.outage;
        self.outage = mask;
        self.probe_woken &= mask;
        if began == 0 {
            return;
        }
        let keys: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| c.state == State::Backoff && began & bit(c.workload as usize) != 0)
            .map(|(k, _)| k)
            .filter(|k| is_probe(self.rank(*k)))
            .collect();
        for key in keys {
            let delay = (f64::from(PROBE_MS) * (0.5 + 0.5 * self.rng.f64()) * 1e6) as u64;
            self.wheel.cancel(key as u32);
            self.wheel.schedule(key as u32, tick_ceil(now + delay));
        }
    }

    /// A connection of workload `wi` opened while it is in an outage: the
    /// server answers again, so this worker's slots of it waiting out a
    /// backoff go to the ramp queue now (once, until a connect fails
    /// again).
    pub(super) fn opened_in_outage(&mut self, wi: usize) {
        let b = bit(wi);
        if self.outage & b == 0 || self.probe_woken & b != 0 {
            return;
        }
        self.probe_woken |= b;
        let keys: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| c.state == State::Backoff && c.workload as usize == wi)
            .map(|(k, _)| k)
            .collect();
        for key in keys {
            self.wheel.cancel(key as u32);
            self.set_state(key, State::Waiting);
            self.ramp[wi].queue.push_back(key as u32);
        }
    }

    /// A connect of workload `wi` failed during its outage: the next one
    /// that opens wakes the waiting slots again.
    pub(super) fn failed_in_outage(&mut self, wi: usize) {
        self.probe_woken &= !bit(wi);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After an 8 s stop, a slot's retries under the plain backoff and as
    /// a probe: the probe tries again within its short wait, however far
    /// the backoff has grown; the others keep their backoff.
    #[test]
    fn probes_retry_soon_the_rest_keep_their_backoff() {
        assert!(is_probe(0) && is_probe(PROBES - 1) && !is_probe(PROBES));
        let mut backoff = 0u32;
        let (mut plain, mut probe) = (0u32, 0u32);
        for _ in 0..8 {
            backoff = if backoff == 0 { 100 } else { (backoff * 2).min(10_000) };
            plain += retry_ms(backoff, false);
            probe += retry_ms(backoff, true);
        }
        // 100+200+…+6,400+10,000: the eighth try of a plain slot is
        // 22.7 s after the first failure, a probe's 1.5 s.
        assert_eq!(plain, 22_700);
        assert_eq!(probe, 100 + 7 * PROBE_MS);
        assert_eq!(retry_ms(50, true), 50, "never longer than its own backoff");
        assert_eq!(bit(0), 1);
        assert_eq!(bit(3), 8);
        assert_eq!(bit(200), 1 << 63);
    }
}
