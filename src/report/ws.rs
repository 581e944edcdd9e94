//! A WebSocket workload's section of the report (`ws`): messages each way,
//! replies and their latency, pings and the pongs' round trips, the
//! server's closes by code and the longest silence of a pushed stream.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Percentiles;
use crate::plan::WsPlan;
use crate::stats::WorkloadStats;
use crate::wire::ws::CloseName;

/// What a WebSocket workload's sockets saw.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct WsFigures {
    /// `hold`, `request` or `subscribe`; `none` for a workload that a
    /// reload switched from `ws://` back to `http://`.
    pub mode: String,
    /// Upgrades completed (101 with the right accept value).
    pub upgrades: u64,
    /// Data messages sent.
    pub messages_sent: u64,
    /// Data messages received (replies and pushes).
    pub messages_received: u64,
    /// Messages that answered one of ours (request mode).
    pub replies: u64,
    /// Reply latency: from the due time (paced, open loop) or the write
    /// (closed loop) to the next data message received.
    pub reply_seconds: Percentiles,
    /// Pings sent.
    pub pings: u64,
    /// Pongs received for them.
    pub pongs: u64,
    /// Pings from the server, answered.
    pub server_pings: u64,
    /// Ping → pong round trip.
    pub ping_rtt_seconds: Percentiles,
    /// Server closes by code name (all codes listed, zeros included).
    pub closes: BTreeMap<String, u64>,
    /// Subscribe mode: each socket's longest silence per 1 s interval
    /// (one ended by a push, or one still running); `max` is the longest.
    pub silence_seconds: Percentiles,
    /// The ping RTT and silence HdrHistograms (base64 like the
    /// workload's), so `soakd merge` recomputes their percentiles.
    pub histograms: WsHistograms,
}

/// A WebSocket section's histograms, encoded (see [`super::encode`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct WsHistograms {
    /// Ping → pong round trip.
    pub ping_rtt: String,
    /// Longest silence per socket and interval.
    pub silence: String,
}

impl WsFigures {
    /// The section of a workload whose WebSocket plan is `plan`. A
    /// workload that a reload switched back to `http://` keeps the section
    /// of what its sockets saw before, with the mode `none`; one that
    /// never completed an upgrade has none.
    pub fn of(plan: Option<&WsPlan>, s: &WorkloadStats) -> Option<WsFigures> {
        let mode = match plan {
            Some(p) => p.mode.name(),
            None if s.ws.upgrades > 0 => "none",
            None => return None,
        };
        let ws = &s.ws;
        Some(WsFigures {
            mode: mode.to_string(),
            upgrades: ws.upgrades,
            messages_sent: ws.sent,
            messages_received: ws.received,
            replies: ws.replies,
            reply_seconds: if ws.replies > 0 {
                Percentiles::of(&s.latency)
            } else {
                Percentiles::default()
            },
            pings: ws.pings,
            pongs: ws.pongs,
            server_pings: ws.server_pings,
            ping_rtt_seconds: Percentiles::of(&ws.ping_rtt),
            closes: CloseName::ALL
                .iter()
                .map(|c| (c.name().to_string(), ws.closes[*c as usize]))
                .collect(),
            silence_seconds: Percentiles::of(&ws.silence),
            histograms: WsHistograms {
                ping_rtt: super::encode(&ws.ping_rtt),
                silence: super::encode(&ws.silence),
            },
        })
    }

    /// The sections of one workload's shards combined (`soakd merge`):
    /// counts and closes by code add, the histograms merge and their
    /// percentiles are recomputed; `reply` is the merged workload's
    /// latency (a reply's latency is the request's). A shard whose report
    /// lacks the histograms (an older soakd) leaves the merged
    /// percentiles at the worst shard's: an upper bound, never an average.
    pub fn merge(parts: &[&WsFigures], reply: &Percentiles) -> WsFigures {
        let mut out = WsFigures {
            mode: parts.first().map(|p| p.mode.clone()).unwrap_or_default(),
            ..WsFigures::default()
        };
        for p in parts {
            out.upgrades += p.upgrades;
            out.messages_sent += p.messages_sent;
            out.messages_received += p.messages_received;
            out.replies += p.replies;
            out.pings += p.pings;
            out.pongs += p.pongs;
            out.server_pings += p.server_pings;
            for (code, n) in &p.closes {
                *out.closes.entry(code.clone()).or_default() += n;
            }
        }
        if out.replies > 0 {
            out.reply_seconds = reply.clone();
        }
        let merged = |pick: fn(&WsHistograms) -> &str, worst: fn(&WsFigures) -> &Percentiles| {
            // The first shard's histogram is the sum's start, so the sum
            // keeps its bounds and precision (the silence histogram's are
            // not the latency one's: a max read at another precision would
            // not be the shards' max).
            let mut all: Option<hdrhistogram::Histogram<u64>> = None;
            for p in parts {
                let added = match (super::decode(pick(&p.histograms)), all.as_mut()) {
                    (Some(h), None) => {
                        all = Some(h);
                        true
                    }
                    (Some(h), Some(a)) => a.add(&h).is_ok(),
                    (None, _) => false,
                };
                if !added {
                    let worst = parts
                        .iter()
                        .map(|p| worst(p))
                        .max_by(|a, b| a.max.unwrap_or(0.0).total_cmp(&b.max.unwrap_or(0.0)))
                        .cloned()
                        .unwrap_or_default();
                    return (worst, String::new());
                }
            }
            let all = all.unwrap_or_else(crate::stats::histogram);
            (Percentiles::of(&all), super::encode(&all))
        };
        (out.ping_rtt_seconds, out.histograms.ping_rtt) = merged(|h| &h.ping_rtt, |f| &f.ping_rtt_seconds);
        (out.silence_seconds, out.histograms.silence) = merged(|h| &h.silence, |f| &f.silence_seconds);
        out
    }

    /// Server closes in all.
    pub fn total_closes(&self) -> u64 {
        self.closes.values().sum()
    }

    /// The summary's lines for this section.
    pub fn summary(&self, name: &str) -> String {
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |s| format!("{:.2}ms", s * 1e3));
        let closes: Vec<String> = self
            .closes
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        format!(
            "  ws {name} ({})  upgrades {}  sent {}  received {}  replies {} (p50 {}, p99 {})  pings {} pongs {} (rtt p50 {}, p99 {})  server pings {}  closes {}  longest silence {}\n",
            self.mode,
            self.upgrades,
            self.messages_sent,
            self.messages_received,
            self.replies,
            ms(self.reply_seconds.p50),
            ms(self.reply_seconds.p99),
            self.pings,
            self.pongs,
            ms(self.ping_rtt_seconds.p50),
            ms(self.ping_rtt_seconds.p99),
            self.server_pings,
            if closes.is_empty() {
                "none".to_string()
            } else {
                closes.join(", ")
            },
            ms(self.silence_seconds.max),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{WorkloadStats, record_ns};

    fn shard(sent: u64, rtt_ms: &[u64], silence_s: u64, normal: u64) -> WsFigures {
        let mut s = WorkloadStats::default();
        s.ws.sent = sent;
        s.ws.pings = rtt_ms.len() as u64;
        s.ws.closes[CloseName::Normal as usize] = normal;
        for ms in rtt_ms {
            record_ns(&mut s.ws.ping_rtt, ms * 1_000_000);
        }
        record_ns(&mut s.ws.silence, silence_s * 1_000_000_000);
        let plan = crate::plan::WsPlan {
            upgrade: crate::wire::ws::Upgrade::new(
                &crate::wire::RequestSpec {
                    method: "GET".into(),
                    target: "/".into(),
                    host: "h".into(),
                    headers: Vec::new(),
                    body: Vec::new(),
                    close: false,
                },
                None,
            ),
            subprotocol: None,
            mode: crate::plan::WsMode::Subscribe,
            message: Vec::new().into(),
            binary: false,
            reply: true,
            ping: None,
            ping_timeout: None,
            max_message: 1,
            expect_contains: None,
        };
        WsFigures::of(Some(&plan), &s).unwrap()
    }

    #[test]
    fn shards_merge_counts_closes_histograms_and_the_longest_silence() {
        let a = shard(5, &[1, 2], 3, 1);
        let b = shard(7, &[100], 20, 2);
        let m = WsFigures::merge(&[&a, &b], &Percentiles::default());
        assert_eq!((m.mode.as_str(), m.messages_sent, m.pings), ("subscribe", 12, 3));
        assert_eq!(m.closes["normal"], 3);
        assert_eq!(m.total_closes(), 3);
        assert_eq!(m.ping_rtt_seconds.count, 3);
        let max_rtt = m.ping_rtt_seconds.max.unwrap();
        assert!((0.099..0.101).contains(&max_rtt), "{max_rtt}");
        let longest = m.silence_seconds.max.unwrap();
        assert!((19.9..20.1).contains(&longest), "{longest}");
        assert_eq!(m.silence_seconds.count, 2);
        // The merged section merges again (its histograms are kept).
        let again = WsFigures::merge(&[&m, &a], &Percentiles::default());
        assert_eq!(again.ping_rtt_seconds.count, 5);
        // A shard without histograms (an older report): worst shard's.
        let mut old = b.clone();
        old.histograms = WsHistograms::default();
        let m = WsFigures::merge(&[&a, &old], &Percentiles::default());
        assert_eq!(m.silence_seconds, b.silence_seconds);
        assert_eq!(m.messages_sent, 12);
    }
}
