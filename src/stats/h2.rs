//! What an HTTP/2 or HTTP/3 workload counts beyond requests: GOAWAYs and
//! stream resets by error code, the requests sent again because the
//! server said it had not processed them, and gRPC calls by status code.
//!
//! These live beside the [`Counters`](super::Counters), not in them: the
//! counters are summed into every timeline point, and two arrays of 15
//! codes were 240 bytes of each point (they cost the points 32 of their
//! 256 latency buckets) though no point, trend or chart reads them per
//! interval. The run's totals, `/metrics`, the report's `http` section
//! and a `--state` checkpoint read them per workload, so that is where
//! they are kept ([`super::WorkloadStats::h2`]).
//!
//! Boxed and optional, so an HTTP/1.1 workload carries one null pointer:
//! the box is made the first time a worker counts an HTTP/2 event for the
//! workload (a GOAWAY or RST_STREAM frame, never per request), and kept
//! across flushes (a clear zeroes it in place), so counting is an array
//! index increment after that.

use serde::{Deserialize, Serialize};

use super::H2Code;
use crate::wire::grpc::Code as GrpcCode;
use crate::wire::h3::ErrorCode as H3Code;

/// HTTP/2 counters of one workload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct H2Stats {
    /// GOAWAYs received, by error code.
    pub goaways: [u64; H2Code::COUNT],
    /// Streams the server reset (REFUSED_STREAM included), by error code.
    pub resets: [u64; H2Code::COUNT],
    /// Requests sent again on a new connection after a GOAWAY or
    /// REFUSED_STREAM said they were not processed.
    pub retried: u64,
    /// gRPC calls that ended, by status code (a gRPC workload's calls ride
    /// HTTP/2 streams; see `engine::worker::h2`).
    pub grpc_calls: [u64; GrpcCode::COUNT],
    /// HTTP/3: GOAWAYs received (an HTTP/3 GOAWAY carries no code).
    pub h3_goaways: u64,
    /// HTTP/3: request streams the server reset, by code
    /// (H3_REQUEST_REJECTED ones are sent again, counted in `retried`).
    pub h3_resets: [u64; H3Code::COUNT],
    /// HTTP/3: handshakes that carried 0-RTT requests (`--h3-0rtt`), the
    /// server accepting them, or rejecting them (sent again).
    pub h3_0rtt: [u64; 2],
}

impl H2Stats {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &H2Stats) {
        for (a, b) in self.goaways.iter_mut().zip(o.goaways) {
            *a += b;
        }
        for (a, b) in self.resets.iter_mut().zip(o.resets) {
            *a += b;
        }
        self.retried += o.retried;
        self.h3_goaways += o.h3_goaways;
        for (a, b) in self.h3_resets.iter_mut().zip(o.h3_resets) {
            *a += b;
        }
        for (a, b) in self.h3_0rtt.iter_mut().zip(o.h3_0rtt) {
            *a += b;
        }
        for (a, b) in self.grpc_calls.iter_mut().zip(o.grpc_calls) {
            *a += b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::WorkloadStats;
    use super::*;

    #[test]
    fn made_on_first_use_added_and_cleared_in_place() {
        let mut a = WorkloadStats::default();
        let mut b = WorkloadStats::default();
        assert!(a.h2.is_none() && b.h2.is_none(), "HTTP/1.1 pays nothing");
        // Adding a workload without HTTP/2 events makes nothing.
        a.add(&b);
        assert!(a.h2.is_none());
        b.h2_mut().goaways[H2Code::NoError as usize] += 2;
        b.h2_mut().resets[H2Code::RefusedStream as usize] += 1;
        b.h2_mut().retried += 3;
        a.add(&b);
        a.add(&b);
        let h = a.h2.as_deref().expect("made by the first add");
        assert_eq!(h.goaways[H2Code::NoError as usize], 4);
        assert_eq!(h.resets[H2Code::RefusedStream as usize], 2);
        assert_eq!(h.retried, 6);
        // A clear keeps the box (no allocation at the next event), zeroed.
        let before: *const H2Stats = a.h2.as_deref().unwrap();
        a.clear();
        assert_eq!(a.h2.as_deref(), Some(&H2Stats::default()));
        a.h2_mut().retried += 1;
        assert!(std::ptr::eq(before, a.h2.as_deref().unwrap()));
    }

    #[test]
    fn a_checkpoint_carries_them_and_omits_them_for_http1() {
        let mut s = WorkloadStats::default();
        let v = serde_json::to_value(&s).unwrap();
        assert!(v.get("h2").is_none(), "{v}");
        s.h2_mut().goaways[H2Code::EnhanceYourCalm as usize] = 7;
        let back: WorkloadStats = serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
        assert_eq!(back.h2, s.h2);
        assert!(serde_json::from_value::<WorkloadStats>(v).unwrap().h2.is_none());
    }
}
