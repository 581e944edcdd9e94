//! What a gRPC workload's held streams count (`--stream subscribe`):
//! streams opened, messages received, the gaps between messages and each
//! stream's longest silence per interval (the shape of WebSocket
//! subscribe's figures, see [`super::WsStats`]), streams ended by their
//! lifetime, and the restarts of streams whose connection went away.
//! How each stream ended by the server's status is `H2Stats::grpc_calls`
//! (a held stream is a call like any other).
//!
//! Boxed and optional in [`super::WorkloadStats`], as the HTTP/2 counters
//! are: a workload that holds no stream carries one null pointer.

use hdrhistogram::Histogram;

/// Held-stream figures of one workload.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct GrpcStreamStats {
    /// Streams opened (each held call's HEADERS sent).
    pub opened: u64,
    /// Messages received on them (counted, never decoded).
    pub messages: u64,
    /// Messages sent on client and bidirectional streams.
    #[serde(default)]
    pub sent: u64,
    /// Streams soakd cancelled at the end of their `--stream-lifetime`
    /// (each opened anew at once).
    pub lifetime_ends: u64,
    /// Streams whose connection went away under them (a GOAWAY above
    /// them, the server's close after its grace, any connection loss),
    /// opened again on the slot's next connection: not errors.
    pub restarts: u64,
    /// The time between two messages of a stream, µs.
    #[serde(with = "super::saved::hist")]
    pub gap: Histogram<u64>,
    /// Each stream's longest silence per flush interval (one a message
    /// ended, or one still running), µs.
    #[serde(with = "super::saved::hist")]
    pub silence: Histogram<u64>,
}

impl Default for GrpcStreamStats {
    fn default() -> Self {
        GrpcStreamStats {
            opened: 0,
            messages: 0,
            sent: 0,
            lifetime_ends: 0,
            restarts: 0,
            gap: super::request_histogram(),
            silence: super::request_histogram(),
        }
    }
}

impl GrpcStreamStats {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &GrpcStreamStats) {
        self.opened += o.opened;
        self.messages += o.messages;
        self.sent += o.sent;
        self.lifetime_ends += o.lifetime_ends;
        self.restarts += o.restarts;
        for (a, b) in [(&mut self.gap, &o.gap), (&mut self.silence, &o.silence)] {
            if !b.is_empty() {
                a.add(b).expect("histograms share bounds");
            }
        }
    }

    /// Zeroes everything in place (the histograms keep their storage).
    pub fn clear(&mut self) {
        self.opened = 0;
        self.messages = 0;
        self.sent = 0;
        self.lifetime_ends = 0;
        self.restarts = 0;
        for h in [&mut self.gap, &mut self.silence] {
            if !h.is_empty() {
                h.reset();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_and_clears_in_place() {
        let mut a = GrpcStreamStats::default();
        let mut b = GrpcStreamStats {
            opened: 2,
            messages: 5,
            restarts: 1,
            ..GrpcStreamStats::default()
        };
        super::super::record_ns(&mut b.gap, 100_000_000);
        a.add(&b);
        a.add(&b);
        assert_eq!((a.opened, a.messages, a.restarts, a.gap.len()), (4, 10, 2, 2));
        a.clear();
        assert_eq!((a.opened, a.messages, a.gap.len()), (0, 0, 0));
        a.add(&b);
        assert_eq!(a.gap.len(), 1);
    }
}
