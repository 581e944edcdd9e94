//! Disruptions on a schedule, for tests and demos of soakd's outage
//! detection: `--restart-every DUR --down-for DUR` (the target closes its
//! listener and every connection, as a process that stops does, and comes
//! back) and `--brownout-every DUR --brownout-for DUR --brownout-delay
//! DUR` (every HTTP/1.1 and HTTP/2 response waits the extra delay, in
//! order; WebSocket messages are not delayed; nothing fails).
//!
//! The schedule is pure: [`Schedule::at`] says what the target is doing a
//! given time after it started and [`Schedule::next_change`] when that
//! changes, so the server threads (each with its own listener) act alike
//! without talking to each other, and the schedule is tested on its own.
//! Each thread keeps its next change as one id of its deadlines
//! (`worker.rs`: the restarts), and each protocol's responder reads the
//! extra delay as it makes a response (`proto.rs` hands the schedule to
//! them).
//! The first restart (brownout) is one period after the start, so a soak
//! ramps up first; a brownout that falls into a restart's down time is
//! down.

use std::time::{Duration, Instant};

/// What the target does at a moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Serving.
    Up,
    /// Not listening; every connection closed.
    Down,
    /// Serving, every HTTP/1.1 and HTTP/2 response delayed by this much more.
    Brownout(Duration),
}

/// The disruption schedule (none by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Schedule {
    /// Stop every this long (`--restart-every`)...
    pub restart_every: Option<Duration>,
    /// ... for this long (`--down-for`).
    pub down_for: Duration,
    /// Slow down every this long (`--brownout-every`)...
    pub brownout_every: Option<Duration>,
    /// ... for this long (`--brownout-for`)...
    pub brownout_for: Duration,
    /// ... by this much per response (`--brownout-delay`).
    pub brownout_delay: Duration,
    /// When the target started (set by `spawn`).
    pub epoch: Option<Instant>,
}

/// Within a period `every`, the window `[every·k, every·k + len)`, k ≥ 1.
fn in_window(t: Duration, every: Duration, len: Duration) -> bool {
    t >= every && (t.as_nanos() % every.as_nanos()) < len.as_nanos()
}

/// The next boundary of those windows after `t`.
fn next_edge(t: Duration, every: Duration, len: Duration) -> Duration {
    let period = every.as_nanos();
    let k = t.as_nanos() / period;
    let start = Duration::from_nanos((k * period) as u64);
    let candidates = [start + len, start + every, start + every + len];
    candidates
        .into_iter()
        .filter(|c| *c > t && *c >= every)
        .min()
        .unwrap_or(start + every)
}

impl Schedule {
    /// Whether anything is scheduled.
    pub fn active(&self) -> bool {
        self.restart_every.is_some() || self.brownout_every.is_some()
    }

    /// Checks the flags go together; the message names them.
    pub fn validate(&self) -> Result<(), String> {
        match self.restart_every {
            Some(every) if self.down_for.is_zero() || self.down_for >= every => {
                return Err(format!(
                    "--restart-every {} needs --down-for shorter than it and above 0 (e.g. --down-for 3s)",
                    humantime::format_duration(every)
                ));
            }
            None if !self.down_for.is_zero() => {
                return Err("--down-for says how long each restart lasts: give --restart-every too".into());
            }
            _ => {}
        }
        match self.brownout_every {
            Some(every)
                if self.brownout_for.is_zero() || self.brownout_for >= every || self.brownout_delay.is_zero() =>
            {
                Err(format!(
                    "--brownout-every {} needs --brownout-for shorter than it and --brownout-delay, both above 0 (e.g. --brownout-for 5s --brownout-delay 200ms)",
                    humantime::format_duration(every)
                ))
            }
            None if !self.brownout_for.is_zero() || !self.brownout_delay.is_zero() => {
                Err("--brownout-for and --brownout-delay shape each brownout: give --brownout-every too".into())
            }
            _ => Ok(()),
        }
    }

    /// What the target does `t` after it started.
    pub fn at(&self, t: Duration) -> Phase {
        if let Some(every) = self.restart_every
            && in_window(t, every, self.down_for)
        {
            return Phase::Down;
        }
        match self.brownout_every {
            Some(every) if in_window(t, every, self.brownout_for) => Phase::Brownout(self.brownout_delay),
            _ => Phase::Up,
        }
    }

    /// What the target does now.
    pub fn now(&self, now: Instant) -> Phase {
        match self.epoch {
            Some(e) if self.active() => self.at(now.saturating_duration_since(e)),
            _ => Phase::Up,
        }
    }

    /// When what it does may next change (`None`: never).
    pub fn next_change(&self, now: Instant) -> Option<Instant> {
        let epoch = self.epoch.filter(|_| self.active())?;
        let t = now.saturating_duration_since(epoch);
        let restart = self.restart_every.map(|e| next_edge(t, e, self.down_for));
        let brownout = self.brownout_every.map(|e| next_edge(t, e, self.brownout_for));
        [restart, brownout].into_iter().flatten().min().map(|d| epoch + d)
    }

    /// The extra delay of a response sent now.
    pub fn extra_delay(&self, now: Instant) -> Duration {
        match self.now(now) {
            Phase::Brownout(d) => d,
            _ => Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn restarts_and_brownouts_on_their_schedule() {
        let sched = Schedule {
            restart_every: Some(s(10)),
            down_for: s(3),
            brownout_every: Some(s(7)),
            brownout_for: s(2),
            brownout_delay: Duration::from_millis(200),
            epoch: None,
        };
        assert_eq!(sched.validate(), Ok(()));
        let at = |ms: u64| sched.at(Duration::from_millis(ms));
        assert_eq!(at(0), Phase::Up);
        assert_eq!(at(6_999), Phase::Up);
        assert_eq!(at(7_000), Phase::Brownout(Duration::from_millis(200)));
        assert_eq!(at(9_000), Phase::Up);
        assert_eq!(at(10_000), Phase::Down);
        assert_eq!(at(12_999), Phase::Down);
        assert_eq!(at(13_000), Phase::Up);
        assert_eq!(at(14_500), Phase::Brownout(Duration::from_millis(200)));
        assert_eq!(at(20_500), Phase::Down, "down wins over a brownout");
        let t0 = Instant::now();
        let timed = Schedule {
            epoch: Some(t0),
            ..sched
        };
        assert_eq!(timed.next_change(t0), Some(t0 + s(7)));
        assert_eq!(timed.next_change(t0 + s(7)), Some(t0 + s(9)));
        assert_eq!(timed.next_change(t0 + s(9)), Some(t0 + s(10)));
        assert_eq!(timed.next_change(t0 + s(11)), Some(t0 + s(13)));
        assert_eq!(
            timed.extra_delay(t0 + Duration::from_millis(7_500)),
            Duration::from_millis(200)
        );
        assert_eq!(Schedule::default().next_change(t0), None);
        assert_eq!(Schedule::default().now(t0), Phase::Up);
    }

    #[test]
    fn flags_that_do_not_go_together() {
        let bad = [
            Schedule {
                restart_every: Some(s(5)),
                ..Schedule::default()
            },
            Schedule {
                restart_every: Some(s(5)),
                down_for: s(5),
                ..Schedule::default()
            },
            Schedule {
                down_for: s(1),
                ..Schedule::default()
            },
            Schedule {
                brownout_every: Some(s(5)),
                brownout_for: s(1),
                ..Schedule::default()
            },
            Schedule {
                brownout_delay: s(1),
                ..Schedule::default()
            },
        ];
        for b in bad {
            assert!(b.validate().is_err(), "{b:?}");
        }
        assert_eq!(Schedule::default().validate(), Ok(()));
    }
}
