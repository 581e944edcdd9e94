//! One-second slices of a workload's drained deltas, and the drains
//! (control ticks) they are made of: what the outage watch judges.

use std::time::Duration;

use hdrhistogram::Histogram;

use super::records::Figures;
use crate::stats::sparse::Sparse;

/// Most drains a slice keeps for the boundaries (four a second normally).
pub(super) const MAX_DRAINS: usize = 32;

/// What a slice or a drain says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Errors over the limit, or connections lost.
    Bad,
    /// Attempts within the limit, connections up.
    Good,
    /// No attempt, connections up: no evidence either way.
    Silent,
}

/// One drain (control tick) of a slice.
#[derive(Clone, Copy, Debug)]
pub(super) struct Drain {
    pub(super) from: Duration,
    pub(super) to: Duration,
    pub(super) bad: bool,
    /// Every desired connection open at its end.
    pub(super) full: bool,
}

/// The slice being filled.
#[derive(Debug)]
pub(super) struct Slice {
    pub(super) start: Duration,
    pub(super) figures: Figures,
    pub(super) completed: u64,
    pub(super) errors: u64,
    pub(super) open_min: Option<u64>,
    pub(super) cause: u8,
    pub(super) latency: Histogram<u64>,
    pub(super) lag: Histogram<u64>,
    pub(super) drains: Vec<Drain>,
}

/// A second's histogram: 2 significant digits, as a timeline point's,
/// growing like [`crate::stats::histogram`]'s.
pub(super) fn second_histogram() -> Histogram<u64> {
    crate::stats::sized(2)
}

impl Slice {
    pub(super) fn new(start: Duration) -> Slice {
        Slice {
            start,
            figures: Figures::default(),
            completed: 0,
            errors: 0,
            open_min: None,
            cause: 0,
            latency: second_histogram(),
            lag: second_histogram(),
            drains: Vec::new(),
        }
    }

    pub(super) fn restart(&mut self, start: Duration) {
        self.start = start;
        self.figures = Figures::default();
        (self.completed, self.errors, self.open_min, self.cause) = (0, 0, None, 0);
        for h in [&mut self.latency, &mut self.lag] {
            if !h.is_empty() {
                h.reset();
            }
        }
        self.drains.clear();
    }
}

/// A slice once closed, as the state machine reads it.
#[derive(Debug)]
pub(super) struct Closed {
    pub(super) start: Duration,
    pub(super) end: Duration,
    pub(super) verdict: Verdict,
    pub(super) cause: u8,
    pub(super) figures: Figures,
    pub(super) completed: u64,
    pub(super) open_min: u64,
    pub(super) latency: Sparse,
    pub(super) lag_p50: Option<u64>,
    pub(super) drains: Vec<Drain>,
}

impl Closed {
    /// Where the slice's first bad drain began.
    pub(super) fn first_bad(&self) -> Option<Duration> {
        self.drains.iter().find(|d| d.bad).map(|d| d.from)
    }

    /// Where the slice's last bad drain ended.
    pub(super) fn last_bad_end(&self) -> Option<Duration> {
        self.drains.iter().rev().find(|d| d.bad).map(|d| d.to)
    }
}
