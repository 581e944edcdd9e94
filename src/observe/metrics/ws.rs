//! The WebSocket metric families (`soakd_ws_*`), declared like the rest in
//! [`super`]'s table and rendered from the same snapshot. Every ws:// and
//! wss:// target has them from the first scrape (zero until something
//! happens), so alerts on WebSocket closes work from the start; HTTP
//! targets have none (15 close codes each would be noise).

use prometheus::proto::MetricType;

use super::{Buckets, Family, Fill};
use super::{histogram, value};
use crate::stats::WsStats;
use crate::wire::ws::CloseName;

/// One workload's WebSocket figures as of the last update.
#[derive(Clone, Debug, Default)]
pub struct WsSnapshot {
    /// Data messages sent.
    pub sent: u64,
    /// Data messages received (replies and pushes).
    pub received: u64,
    /// Pings sent.
    pub pings: u64,
    /// Pongs received.
    pub pongs: u64,
    /// Server close frames by code ([`CloseName`] order).
    pub closes: Vec<u64>,
    /// Ping → pong round trips.
    pub ping_rtt: Buckets,
    /// Subscribe mode: each socket's longest silence per interval.
    pub silence: Buckets,
    /// The workload is ws:// or wss://: these series are rendered
    /// ([`shown`]); kept across updates.
    pub target: bool,
}

impl WsSnapshot {
    /// The snapshot of `s`.
    pub fn of(s: &WsStats) -> WsSnapshot {
        WsSnapshot {
            sent: s.sent,
            received: s.received,
            pings: s.pings,
            pongs: s.pongs,
            closes: s.closes.to_vec(),
            ping_rtt: Buckets::from_hdr(&s.ping_rtt),
            silence: Buckets::from_hdr(&s.silence),
            target: false,
        }
    }

    /// The figures of `s`, keeping whether this is a WebSocket target.
    pub fn update(&mut self, s: &WsStats) {
        let target = self.target;
        *self = WsSnapshot::of(s);
        self.target = target;
    }
}

/// Whether family `f` has series for workload `w`: the `soakd_ws_*`
/// families only for WebSocket targets.
pub(super) fn shown(f: &Family, w: &super::WorkloadSnapshot) -> bool {
    w.ws.target || !f.name.starts_with("soakd_ws_")
}

impl super::Metrics {
    /// WebSocket: whether workload `i` is ws:// or wss:// (at the start,
    /// or since a reload added it or changed its URL). `None`: the
    /// workload added last (by a reload).
    ///
    /// A WebSocket workload's `soakd_ws_*` series are rendered from now
    /// on (zero until something happens, or where its counters stand: a
    /// workload switched back to ws continues them, never a reset).
    /// One switched to http:// loses them at once rather than keep
    /// exporting frozen values: a series that is still scraped looks
    /// live, and an alert on it (closes, sockets lost) would judge a
    /// target that no longer has WebSockets. A series that disappears is
    /// what Prometheus expects of a target that went away: it marks it
    /// stale, and `rate()` over the gap is empty, not zero.
    pub fn mark_ws(&mut self, i: Option<usize>, ws: bool) {
        let mut snap = self.snapshot.lock().unwrap_or_else(|p| p.into_inner());
        let w = match i {
            Some(i) => snap.workloads.get_mut(i),
            None => snap.workloads.last_mut(),
        };
        if let Some(w) = w {
            w.ws.target = ws;
        }
    }
}

pub(super) const FAMILIES: &[Family] = &[
    Family {
        name: "soakd_ws_messages_sent_total",
        help: "WebSocket data messages sent (request and subscribe messages).",
        kind: MetricType::COUNTER,
        labels: &["target"],
        fill: Fill::Target(|x, out| out.push(x.one(x.w.ws.sent))),
    },
    Family {
        name: "soakd_ws_messages_received_total",
        help: "WebSocket data messages received (replies and pushes).",
        kind: MetricType::COUNTER,
        labels: &["target"],
        fill: Fill::Target(|x, out| out.push(x.one(x.w.ws.received))),
    },
    Family {
        name: "soakd_ws_message_duration_seconds",
        help: "WebSocket request/response: from the message's due time (paced, open loop) or its write (closed loop) to the next data message received.",
        kind: MetricType::HISTOGRAM,
        labels: &["target"],
        fill: Fill::Target(|x, out| {
            // A message is the workload's request: its latency histogram.
            let empty = Buckets::from_hdr(&crate::stats::histogram());
            let h = if x.w.ws.sent > 0 { &x.w.latency } else { &empty };
            out.push(histogram(&[("target", x.t)], h));
        }),
    },
    Family {
        name: "soakd_ws_pings_total",
        help: "WebSocket pings sent (--ws-ping).",
        kind: MetricType::COUNTER,
        labels: &["target"],
        fill: Fill::Target(|x, out| out.push(x.one(x.w.ws.pings))),
    },
    Family {
        name: "soakd_ws_pongs_total",
        help: "Pongs received for soakd's pings.",
        kind: MetricType::COUNTER,
        labels: &["target"],
        fill: Fill::Target(|x, out| out.push(x.one(x.w.ws.pongs))),
    },
    Family {
        name: "soakd_ws_ping_rtt_seconds",
        help: "Ping to pong round trip of held WebSockets: the transport latency, even when idle.",
        kind: MetricType::HISTOGRAM,
        labels: &["target"],
        fill: Fill::Target(|x, out| out.push(histogram(&[("target", x.t)], &x.w.ws.ping_rtt))),
    },
    Family {
        name: "soakd_ws_silence_seconds",
        help: "Subscribe mode: each connection's longest silence between the server's pushes per 1 s interval (a silence still running at the interval's end counts).",
        kind: MetricType::HISTOGRAM,
        labels: &["target"],
        fill: Fill::Target(|x, out| out.push(histogram(&[("target", x.t)], &x.w.ws.silence))),
    },
    Family {
        name: "soakd_ws_closes_total",
        help: "WebSocket closes by the server, by close code (abnormal: the TCP connection ended without a close frame).",
        kind: MetricType::COUNTER,
        labels: &["target", "code"],
        fill: Fill::Target(|x, out| {
            for c in CloseName::ALL {
                let n = x.w.ws.closes.get(c as usize).copied().unwrap_or(0);
                out.push(value(x.kind, &[("target", x.t), ("code", c.name())], n as f64));
            }
        }),
    },
];

#[cfg(test)]
mod tests {
    use super::super::{Metrics, render};

    /// A workload's `soakd_ws_*` series follow its URL: none while it is
    /// http://, all of them once a reload makes it ws://, none again
    /// after a reload back to http://.
    #[test]
    fn ws_series_follow_the_workload_url() {
        let mut m = Metrics::new(
            &["s".to_string()],
            &[Vec::new()],
            vec![Vec::new()],
            crate::plan::Shard::WHOLE,
        );
        let sent = "soakd_ws_messages_sent_total{target=\"s\"} 0";
        let shown = |m: &Metrics| {
            let text = String::from_utf8(render(m.registry())).unwrap();
            (text.contains(sent), text.matches("soakd_ws_closes_total{").count())
        };
        assert_eq!(shown(&m), (false, 0));
        m.mark_ws(Some(0), true);
        assert_eq!(shown(&m), (true, super::CloseName::ALL.len()));
        m.mark_ws(Some(0), false);
        assert_eq!(shown(&m), (false, 0));
    }
}
