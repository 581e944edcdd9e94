//! The built-in target's timers for things that repeat at an interval
//! (WebSocket pushes and ping floods, gRPC server-stream pushes): one FIFO
//! per interval. Every entry of a queue was scheduled one interval after
//! an earlier tick of that queue, or after the start, so each queue is in
//! due order: scheduling and taking the next tick are O(1) (and a look at
//! each queue's front, of which there are at most [`MAX_INTERVALS`]),
//! whatever the number of sockets or streams ticking.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use mio::Token;

/// Distinct intervals one thread keeps a queue for; a socket or stream
/// asking for one more is refused, so the timer stays a handful of FIFOs.
pub(super) const MAX_INTERVALS: usize = 32;

/// The ticks due, by interval, the earliest front first; `T` says what a
/// tick is for.
pub(super) struct Ticks<T> {
    queues: Vec<(Duration, VecDeque<Due<T>>)>,
}

/// A tick in a queue: when, for which socket, what.
type Due<T> = (Instant, Token, T);

impl<T> Default for Ticks<T> {
    fn default() -> Self {
        Ticks { queues: Vec::new() }
    }
}

impl<T: Copy> Ticks<T> {
    /// Whether something ticking every `every` can be taken.
    pub(super) fn has_room(&self, every: Duration) -> bool {
        self.queues.len() < MAX_INTERVALS || self.queues.iter().any(|(d, _)| *d == every)
    }

    /// Schedules `tick` of `token` at `due`, one `every` after its last.
    pub(super) fn schedule(&mut self, every: Duration, due: Instant, token: Token, tick: T) {
        let queue = match self.queues.iter().position(|(d, _)| *d == every) {
            Some(i) => &mut self.queues[i].1,
            None => {
                self.queues.push((every, VecDeque::new()));
                &mut self.queues.last_mut().expect("just pushed").1
            }
        };
        queue.push_back((due, token, tick));
    }

    /// When the next tick is due, if any.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.queues.iter().filter_map(|(_, q)| q.front().map(|e| e.0)).min()
    }

    /// Takes the earliest tick due by `now`: its token, what it is for,
    /// its interval and its due time.
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<(Token, T, Duration, Instant)> {
        let (every, queue) = self
            .queues
            .iter_mut()
            .filter(|(_, q)| q.front().is_some_and(|e| e.0 <= now))
            .min_by_key(|(_, q)| q.front().map(|e| e.0))?;
        let (due, token, tick) = queue.pop_front().expect("a front");
        Some((token, tick, *every, due))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_come_out_in_due_order_across_intervals() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut ticks = Ticks::default();
        ticks.schedule(ms(30), t0 + ms(30), Token(1), 1u8);
        ticks.schedule(ms(10), t0 + ms(10), Token(2), 1u8);
        ticks.schedule(ms(30), t0 + ms(31), Token(3), 2u8);
        ticks.schedule(ms(10), t0 + ms(12), Token(4), 1u8);
        assert_eq!(ticks.next_due(), Some(t0 + ms(10)));
        assert_eq!(ticks.pop_due(t0 + ms(5)), None, "nothing due yet");
        let order: Vec<usize> = std::iter::from_fn(|| ticks.pop_due(t0 + ms(40)).map(|e| e.0.0)).collect();
        assert_eq!(order, [2, 4, 1, 3]);
        assert_eq!(ticks.next_due(), None);
        for i in 0..MAX_INTERVALS as u64 {
            ticks.schedule(ms(100 + i), t0, Token(9), 1u8);
        }
        assert!(!ticks.has_room(ms(99)));
        assert!(ticks.has_room(ms(100)), "a known interval always fits");
    }
}
