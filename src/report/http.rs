//! The report's `http` section of a workload: what HTTP/2 did (version
//! negotiated, the server's stream limit, GOAWAYs and resets by code,
//! requests sent again). A file of its own so the report's main file
//! stays the table of what a report holds.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::stats::{Gauges, H2Code, H2Stats};
use crate::wire::grpc::Code;
use crate::wire::h3::ErrorCode as H3Code;

/// A workload's HTTP figures.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct HttpFigures {
    /// The version asked for (`--http`: `"1.1"`, `"2"`, `"3"` or `"auto"`;
    /// `null` in a report from an older soakd).
    #[serde(default)]
    pub requested: Option<String>,
    /// Concurrent streams per HTTP/2 connection asked for (`--streams`).
    #[serde(default)]
    pub streams: u16,
    /// The version negotiated last: `"1.1"`, `"2"` or `"3"` (`null` before any
    /// connection).
    pub version: Option<String>,
    /// The lowest SETTINGS_MAX_CONCURRENT_STREAMS the server announced
    /// (`null`: none seen).
    pub streams_limit: Option<u32>,
    /// GOAWAYs received, by error code (codes seen only); HTTP/3's, which
    /// carry no code, under `GOAWAY`.
    pub goaways: BTreeMap<String, u64>,
    /// Streams the server reset, by error code (codes seen only; HTTP/3's
    /// named `H3_...`).
    pub resets: BTreeMap<String, u64>,
    /// Requests sent again on a new connection (GOAWAY, REFUSED_STREAM,
    /// H3_REQUEST_REJECTED, 0-RTT rejected).
    pub retried: u64,
    /// HTTP/3 handshakes whose 0-RTT requests the server accepted
    /// (`--h3-0rtt`).
    #[serde(default)]
    pub zero_rtt_accepted: u64,
    /// HTTP/3 handshakes whose 0-RTT requests the server rejected (they
    /// were sent again).
    #[serde(default)]
    pub zero_rtt_rejected: u64,
    /// A gRPC workload's calls (`null` for other workloads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<GrpcFigures>,
    /// `--h2-ping`: the PINGs sent and their round trips (`null` without
    /// it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ping: Option<PingFigures>,
}

/// The PINGs of `--h2-ping` (gRPC's keepalive).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct PingFigures {
    /// PINGs sent.
    pub sent: u64,
    /// ACKs received for them.
    pub acked: u64,
    /// PING → ACK round trip. Across merged shards: the largest of the
    /// shards' quantiles (an upper bound), not a merged histogram.
    pub rtt_seconds: super::Percentiles,
}

/// A gRPC workload's figures: its method and its calls by status code.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct GrpcFigures {
    /// `package.Service/Method`.
    pub method: String,
    /// Calls that ended, by status code label (every code, 0 included).
    pub calls: BTreeMap<String, u64>,
    /// Calls that ended with a status other than OK ÷ calls that ended
    /// (`null`: none ended); the `grpc_error_rate` threshold's figure.
    pub error_rate: Option<f64>,
    /// Held server streams (`--stream subscribe`; `null` for unary calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<super::GrpcStreamFigures>,
}

/// Calls that ended with a status other than OK ÷ calls that ended, from
/// counts by code (`None`: none ended). The one definition: the report,
/// its merge, and the `grpc_error_rate` threshold (live and at the end).
pub fn grpc_error_rate(calls: &[u64; Code::COUNT]) -> Option<f64> {
    let all: u64 = calls.iter().sum();
    (all > 0).then(|| (all - calls[Code::Ok as usize]) as f64 / all as f64)
}

/// Counts by code as a report holds them: by label, every code present.
pub fn calls_by_label(calls: &[u64; Code::COUNT]) -> BTreeMap<String, u64> {
    Code::ALL
        .iter()
        .map(|c| (c.label().to_string(), calls[*c as usize]))
        .collect()
}

/// The text summary's account of calls by code: `calls N  non-OK M (R%):
/// code n  code n`.
pub fn calls_summary(calls: &BTreeMap<String, u64>) -> String {
    let all: u64 = calls.values().sum();
    let non_ok: Vec<String> = calls
        .iter()
        .filter(|(code, n)| **n > 0 && code.as_str() != "ok")
        .map(|(code, n)| format!("{code} {n}"))
        .collect();
    format!(
        "calls {}  non-OK {} ({}){}",
        all,
        all - calls.get("ok").copied().unwrap_or(0),
        error_rate_of(calls).map_or("-".into(), |r| format!("{:.3}%", r * 100.0)),
        if non_ok.is_empty() {
            String::new()
        } else {
            format!(": {}", non_ok.join("  "))
        }
    )
}

/// [`grpc_error_rate`] of the counts by label a report holds.
fn error_rate_of(calls: &BTreeMap<String, u64>) -> Option<f64> {
    let mut by_code = [0u64; Code::COUNT];
    for c in Code::ALL {
        by_code[c as usize] = calls.get(c.label()).copied().unwrap_or(0);
    }
    grpc_error_rate(&by_code)
}

impl GrpcFigures {
    /// The figures of `method` from a workload's HTTP/2 counters.
    pub fn of(method: &str, h2: Option<&H2Stats>) -> GrpcFigures {
        let h2 = h2.copied().unwrap_or_default();
        GrpcFigures {
            method: method.to_string(),
            calls: calls_by_label(&h2.grpc_calls),
            error_rate: grpc_error_rate(&h2.grpc_calls),
            streams: None,
        }
    }
}

impl HttpFigures {
    /// The section from a workload's HTTP/2 counters (`None`: it counted
    /// no HTTP/2 event) and gauges.
    pub fn of(h2: Option<&H2Stats>, g: &Gauges) -> HttpFigures {
        let h2 = h2.copied().unwrap_or_default();
        let by_code = |counts: &[u64; H2Code::COUNT]| {
            H2Code::ALL
                .iter()
                .filter(|k| counts[**k as usize] > 0)
                .map(|k| (k.name().to_string(), counts[*k as usize]))
                .collect()
        };
        HttpFigures {
            requested: None,
            streams: 0,
            version: Gauges::HTTP_VERSIONS
                .iter()
                .find(|(v, _)| *v == g.http_version)
                .map(|(_, name)| name.to_string()),
            streams_limit: (g.h2_streams_limit != 0).then_some(g.h2_streams_limit),
            goaways: {
                let mut g: BTreeMap<String, u64> = by_code(&h2.goaways);
                if h2.h3_goaways > 0 {
                    g.insert("GOAWAY".into(), h2.h3_goaways);
                }
                g
            },
            resets: {
                let mut r: BTreeMap<String, u64> = by_code(&h2.resets);
                r.extend(
                    H3Code::ALL
                        .iter()
                        .filter(|k| h2.h3_resets[**k as usize] > 0)
                        .map(|k| (k.name().to_string(), h2.h3_resets[*k as usize])),
                );
                r
            },
            retried: h2.retried,
            zero_rtt_accepted: h2.h3_0rtt[0],
            zero_rtt_rejected: h2.h3_0rtt[1],
            grpc: None,
            ping: None,
        }
    }

    /// Two shards' sections as one: counts add, the lowest stream limit
    /// and the higher version stay.
    pub fn plus(&self, o: &HttpFigures) -> HttpFigures {
        let add = |a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>| {
            let mut out = a.clone();
            for (k, v) in b {
                *out.entry(k.clone()).or_default() += v;
            }
            out
        };
        HttpFigures {
            requested: self.requested.clone().or_else(|| o.requested.clone()),
            streams: self.streams.max(o.streams),
            version: self.version.clone().max(o.version.clone()),
            streams_limit: match (self.streams_limit, o.streams_limit) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            goaways: add(&self.goaways, &o.goaways),
            resets: add(&self.resets, &o.resets),
            retried: self.retried + o.retried,
            zero_rtt_accepted: self.zero_rtt_accepted + o.zero_rtt_accepted,
            zero_rtt_rejected: self.zero_rtt_rejected + o.zero_rtt_rejected,
            grpc: match (&self.grpc, &o.grpc) {
                (Some(a), Some(b)) => {
                    let calls = add(&a.calls, &b.calls);
                    Some(GrpcFigures {
                        method: a.method.clone(),
                        error_rate: error_rate_of(&calls),
                        calls,
                        streams: match (&a.streams, &b.streams) {
                            (Some(x), Some(y)) => Some(x.plus(y)),
                            (x, y) => x.clone().or_else(|| y.clone()),
                        },
                    })
                }
                (a, b) => a.clone().or_else(|| b.clone()),
            },
            ping: match (&self.ping, &o.ping) {
                (Some(a), Some(b)) => {
                    let max = |x: Option<f64>, y: Option<f64>| match (x, y) {
                        (Some(x), Some(y)) => Some(x.max(y)),
                        (x, y) => x.or(y),
                    };
                    let (ra, rb) = (&a.rtt_seconds, &b.rtt_seconds);
                    Some(PingFigures {
                        sent: a.sent + b.sent,
                        acked: a.acked + b.acked,
                        rtt_seconds: super::Percentiles {
                            count: ra.count + rb.count,
                            min: match (ra.min, rb.min) {
                                (Some(x), Some(y)) => Some(x.min(y)),
                                (x, y) => x.or(y),
                            },
                            mean: None,
                            p50: max(ra.p50, rb.p50),
                            p90: max(ra.p90, rb.p90),
                            p99: max(ra.p99, rb.p99),
                            p999: max(ra.p999, rb.p999),
                            max: max(ra.max, rb.max),
                        },
                    })
                }
                (a, b) => a.clone().or_else(|| b.clone()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_calls_add_across_shards_and_the_rate_is_of_the_sum() {
        let mut a = H2Stats::default();
        a.grpc_calls[Code::Ok as usize] = 90;
        a.grpc_calls[Code::Unavailable as usize] = 10;
        let mut b = H2Stats::default();
        b.grpc_calls[Code::Ok as usize] = 300;
        let shard = |h: &H2Stats| HttpFigures {
            grpc: Some(GrpcFigures::of("pkg.Svc/Get", Some(h))),
            ..HttpFigures::default()
        };
        assert_eq!(shard(&a).grpc.unwrap().error_rate, Some(0.1));
        assert_eq!(shard(&b).grpc.unwrap().error_rate, Some(0.0));
        let g = shard(&a).plus(&shard(&b)).grpc.unwrap();
        assert_eq!(g.calls["ok"], 390);
        assert_eq!(g.calls["unavailable"], 10);
        assert_eq!(g.calls.len(), 17);
        // 10 of 400, not the mean of the shards' rates.
        assert_eq!(g.error_rate, Some(0.025));
        assert_eq!(grpc_error_rate(&[0; Code::COUNT]), None, "no call ended");
    }
}
