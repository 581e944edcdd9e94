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
    /// `hold`, `request` or `subscribe`.
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
    /// Subscribe mode: silences between pushes; `max` is the longest.
    pub silence_seconds: Percentiles,
}

impl WsFigures {
    /// The section of a workload run with `plan`.
    pub fn of(plan: &WsPlan, s: &WorkloadStats) -> WsFigures {
        let ws = &s.ws;
        WsFigures {
            mode: plan.mode.name().to_string(),
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
        }
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
