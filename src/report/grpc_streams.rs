//! A gRPC workload's held streams in the report (`http.grpc.streams`,
//! `--stream subscribe`): streams opened, messages received and their
//! rate, the gaps between messages, each stream's longest silence per
//! interval (the shape of the WebSocket subscribe figures), streams ended
//! by their lifetime, and restarts: streams whose connection went away
//! under them (a GOAWAY, the close at the end of its grace) and that were
//! opened again on the next connection. How streams ended by the server's
//! status is the section's `calls` by code.

use serde::{Deserialize, Serialize};

use super::Percentiles;
use crate::stats::GrpcStreamStats;

/// What a workload's held streams saw.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct GrpcStreamFigures {
    /// `subscribe` (server streams), `client` or `bidi`.
    pub mode: String,
    /// Messages sent on client and bidirectional streams.
    pub messages_sent: u64,
    /// Streams opened.
    pub opened: u64,
    /// Messages received (counted, not decoded).
    pub messages_received: u64,
    /// Messages received per second over the run.
    pub messages_per_second: f64,
    /// Streams ended by `--stream-lifetime` (cancelled, opened anew).
    pub lifetime_ends: u64,
    /// Streams whose connection went away (GOAWAY, the close after its
    /// grace, a lost connection), opened again on the next one.
    pub restarts: u64,
    /// Time between two messages of a stream.
    pub gap_seconds: Percentiles,
    /// Each stream's longest silence per 1 s interval; `max` is the
    /// longest.
    pub silence_seconds: Percentiles,
    /// The gap and silence HdrHistograms (base64), for `soakd merge`.
    pub histograms: GrpcStreamHistograms,
}

/// The held streams' histograms, encoded (see [`super::encode`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct GrpcStreamHistograms {
    /// Gaps between messages.
    pub gap: String,
    /// Longest silence per stream and interval.
    pub silence: String,
}

impl GrpcStreamFigures {
    /// The figures of a workload's held streams over `secs` seconds.
    pub fn of(mode: &str, s: Option<&GrpcStreamStats>, secs: f64) -> GrpcStreamFigures {
        let d = GrpcStreamStats::default();
        let s = s.unwrap_or(&d);
        GrpcStreamFigures {
            mode: mode.into(),
            messages_sent: s.sent,
            opened: s.opened,
            messages_received: s.messages,
            messages_per_second: if secs > 0.0 { s.messages as f64 / secs } else { 0.0 },
            lifetime_ends: s.lifetime_ends,
            restarts: s.restarts,
            gap_seconds: Percentiles::of(&s.gap),
            silence_seconds: Percentiles::of(&s.silence),
            histograms: GrpcStreamHistograms {
                gap: super::encode(&s.gap),
                silence: super::encode(&s.silence),
            },
        }
    }

    /// The text report's line for workload `name`.
    pub fn summary(&self, name: &str) -> String {
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |s| format!("{:.1}ms", s * 1e3));
        format!(
            "  grpc streams  {name} ({})  opened {}  restarts {}  lifetime ends {}  sent {}  received {} ({:.1}/s)  gap p50 {} p99 {}  silence p99 {} max {}\n",
            self.mode,
            self.opened,
            self.restarts,
            self.lifetime_ends,
            self.messages_sent,
            self.messages_received,
            self.messages_per_second,
            ms(self.gap_seconds.p50),
            ms(self.gap_seconds.p99),
            ms(self.silence_seconds.p99),
            ms(self.silence_seconds.max),
        )
    }

    /// Two shards' figures as one: counts and rates add, the histograms
    /// merge and their percentiles are recomputed (a shard without them
    /// leaves the worse shard's percentiles: an upper bound).
    pub fn plus(&self, o: &GrpcStreamFigures) -> GrpcStreamFigures {
        let merged = |a: &str, b: &str, pa: &Percentiles, pb: &Percentiles| {
            if let (Some(mut x), Some(y)) = (super::decode(a), super::decode(b))
                && x.add(&y).is_ok()
            {
                return (Percentiles::of(&x), super::encode(&x));
            }
            let worse = if pa.max >= pb.max { pa } else { pb };
            (worse.clone(), String::new())
        };
        let (gap_seconds, gap) = merged(
            &self.histograms.gap,
            &o.histograms.gap,
            &self.gap_seconds,
            &o.gap_seconds,
        );
        let (silence_seconds, silence) = merged(
            &self.histograms.silence,
            &o.histograms.silence,
            &self.silence_seconds,
            &o.silence_seconds,
        );
        GrpcStreamFigures {
            mode: self.mode.clone(),
            opened: self.opened + o.opened,
            messages_sent: self.messages_sent + o.messages_sent,
            messages_received: self.messages_received + o.messages_received,
            messages_per_second: self.messages_per_second + o.messages_per_second,
            lifetime_ends: self.lifetime_ends + o.lifetime_ends,
            restarts: self.restarts + o.restarts,
            gap_seconds,
            silence_seconds,
            histograms: GrpcStreamHistograms { gap, silence },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_add_and_their_histograms_merge() {
        let mut a = GrpcStreamStats {
            opened: 3,
            messages: 10,
            restarts: 2,
            ..GrpcStreamStats::default()
        };
        crate::stats::record_ns(&mut a.silence, 2_000_000_000);
        let mut b = a.clone();
        crate::stats::record_ns(&mut b.silence, 5_000_000_000);
        let (fa, fb) = (
            GrpcStreamFigures::of("subscribe", Some(&a), 10.0),
            GrpcStreamFigures::of("subscribe", Some(&b), 10.0),
        );
        assert_eq!(fa.messages_per_second, 1.0);
        let m = fa.plus(&fb);
        assert_eq!((m.opened, m.messages_received, m.restarts), (6, 20, 4));
        assert!(
            (m.silence_seconds.max.unwrap() - 5.0).abs() < 0.05,
            "{:?}",
            m.silence_seconds
        );
        let back: GrpcStreamFigures = serde_json::from_value(serde_json::to_value(&m).unwrap()).unwrap();
        assert_eq!(back, m);
    }
}
