//! The counts a timeline point keeps: requests sent and completed,
//! responses by class, errors by kind — what the report's timeline, its
//! charts and the trends read per interval, and nothing else.
//!
//! A point used to carry the whole [`Counters`] (connects, closes by
//! reason, bytes, TLS handshakes, HTTP/2 codes), 560 bytes of which the
//! timeline read 216. Every byte of a point is taken from its latency
//! buckets' share of [`POINT_BYTES`](super::timeline::POINT_BYTES), so the
//! point keeps only these and the run's totals keep the rest. A counter
//! a chart needs per interval is added here (8 bytes a point each; the
//! worst point has 56 bytes to spare, `the_worst_point_fits`).

use serde::{Deserialize, Serialize};

use super::{Counters, ErrorKind, StatusClass};

/// Counts of one timeline interval (all workloads).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PointCounts {
    /// Requests issued on a connection.
    pub sent: u64,
    /// Complete final responses.
    pub completed: u64,
    /// Responses by [`StatusClass`].
    pub responses: [u64; StatusClass::COUNT],
    /// Errors by [`ErrorKind`], in [`ErrorKind::ALL`] order.
    #[serde(deserialize_with = "super::kinds::counts_from_older")]
    pub errors: [u64; ErrorKind::COUNT],
}

impl PointCounts {
    /// Adds the point's share of a drained delta's counters.
    pub fn count(&mut self, c: &Counters) {
        self.add(&PointCounts {
            sent: c.sent,
            completed: c.completed,
            responses: c.responses,
            errors: c.errors,
        });
    }

    /// Adds `o` into `self` (neighbouring points merging).
    pub fn add(&mut self, o: &PointCounts) {
        self.sent += o.sent;
        self.completed += o.completed;
        for (a, b) in self.responses.iter_mut().zip(o.responses) {
            *a += b;
        }
        for (a, b) in self.errors.iter_mut().zip(o.errors) {
            *a += b;
        }
    }

    /// Errors of `kind`.
    pub fn errors_of(&self, kind: ErrorKind) -> u64 {
        self.errors[kind as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_what_the_timeline_reads() {
        let mut c = Counters {
            sent: 3,
            completed: 2,
            opened: 9,
            ..Counters::default()
        };
        c.response(204);
        c.error(ErrorKind::Timeout, 1);
        let mut p = PointCounts::default();
        p.count(&c);
        p.count(&c);
        assert_eq!((p.sent, p.completed), (6, 4));
        assert_eq!(p.responses[StatusClass::of(204) as usize], 2);
        assert_eq!(p.errors_of(ErrorKind::Timeout), 2);
        let q = p;
        p.add(&q);
        assert_eq!((p.sent, p.errors_of(ErrorKind::Timeout)), (12, 4));
    }
}
