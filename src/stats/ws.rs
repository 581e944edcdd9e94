//! What a WebSocket workload counts beyond requests: messages each way,
//! pings and their round trips, the server's closes by code, and the
//! silences of pushed streams. Plain fields per worker, merged like the
//! rest of [`super::WorkloadStats`]. A reply's latency is the workload's
//! request latency (a message is the request, its reply the response).

use hdrhistogram::Histogram;

use crate::wire::ws::CloseName;

/// WebSocket counters and histograms of one workload.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct WsStats {
    /// Data messages sent (request and subscribe messages).
    pub sent: u64,
    /// Data messages received (replies and pushes).
    pub received: u64,
    /// Replies that completed a request message.
    pub replies: u64,
    /// Pings sent. An HTTP/2 workload's PINGs of `--h2-ping` count here
    /// too, as do their ACKs in `pongs` and their round trips in
    /// `ping_rtt`: a workload speaks one of the two, and the `ping_p99`
    /// threshold reads either.
    pub pings: u64,
    /// Pongs received for them.
    pub pongs: u64,
    /// Server pings answered.
    pub server_pings: u64,
    /// Upgrades completed.
    pub upgrades: u64,
    /// Close frames received from the server, by code.
    pub closes: [u64; CloseName::COUNT],
    /// Ping → pong round trip, µs.
    #[serde(with = "super::saved::hist")]
    pub ping_rtt: Histogram<u64>,
    /// Subscribe mode: the longest silence of each connection between
    /// two pushes (or since the subscription) per flush interval, µs.
    #[serde(with = "super::saved::hist")]
    pub silence: Histogram<u64>,
}

impl Default for WsStats {
    fn default() -> Self {
        WsStats {
            sent: 0,
            received: 0,
            replies: 0,
            pings: 0,
            pongs: 0,
            server_pings: 0,
            upgrades: 0,
            closes: [0; CloseName::COUNT],
            ping_rtt: super::histogram(),
            silence: super::request_histogram(),
        }
    }
}

impl WsStats {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &WsStats) {
        self.sent += o.sent;
        self.received += o.received;
        self.replies += o.replies;
        self.pings += o.pings;
        self.pongs += o.pongs;
        self.server_pings += o.server_pings;
        self.upgrades += o.upgrades;
        for (a, b) in self.closes.iter_mut().zip(o.closes) {
            *a += b;
        }
        for (a, b) in [(&mut self.ping_rtt, &o.ping_rtt), (&mut self.silence, &o.silence)] {
            if !b.is_empty() {
                // Same bounds on both sides.
                a.add(b).expect("histograms share bounds");
            }
        }
    }

    /// Clears everything (empty histograms are not walked).
    pub fn clear(&mut self) {
        self.sent = 0;
        self.received = 0;
        self.replies = 0;
        self.pings = 0;
        self.pongs = 0;
        self.server_pings = 0;
        self.upgrades = 0;
        self.closes = [0; CloseName::COUNT];
        for h in [&mut self.ping_rtt, &mut self.silence] {
            if !h.is_empty() {
                h.reset();
            }
        }
    }

    /// Closes received in all.
    pub fn total_closes(&self) -> u64 {
        self.closes.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_and_clears() {
        let mut a = WsStats::default();
        let mut b = WsStats {
            sent: 3,
            ..WsStats::default()
        };
        b.closes[CloseName::Normal as usize] = 2;
        super::super::record_ns(&mut b.ping_rtt, 2_000_000);
        a.add(&b);
        a.add(&b);
        assert_eq!((a.sent, a.total_closes(), a.ping_rtt.len()), (6, 4, 2));
        a.clear();
        assert_eq!((a.sent, a.total_closes(), a.ping_rtt.len()), (0, 0, 0));
        // Still the real histogram's bounds after a clear.
        a.add(&b);
        assert_eq!(a.ping_rtt.len(), 1);
    }
}
