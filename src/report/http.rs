//! The report's `http` section of a workload: what HTTP/2 did (version
//! negotiated, the server's stream limit, GOAWAYs and resets by code,
//! requests sent again). A file of its own so the report's main file
//! stays the table of what a report holds.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::stats::{Gauges, H2Code, H2Stats};
use crate::wire::grpc::Code;

/// A workload's HTTP figures.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct HttpFigures {
    /// The version asked for (`--http`: `"1.1"`, `"2"` or `"auto"`;
    /// `null` in a report from an older soakd).
    #[serde(default)]
    pub requested: Option<String>,
    /// Concurrent streams per HTTP/2 connection asked for (`--streams`).
    #[serde(default)]
    pub streams: u16,
    /// The version negotiated last: `"1.1"` or `"2"` (`null` before any
    /// connection).
    pub version: Option<String>,
    /// The lowest SETTINGS_MAX_CONCURRENT_STREAMS the server announced
    /// (`null`: none seen).
    pub streams_limit: Option<u32>,
    /// GOAWAYs received, by error code (codes seen only).
    pub goaways: BTreeMap<String, u64>,
    /// Streams the server reset, by error code (codes seen only).
    pub resets: BTreeMap<String, u64>,
    /// Requests sent again on a new connection (GOAWAY, REFUSED_STREAM).
    pub retried: u64,
    /// A gRPC workload's calls (`null` for other workloads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<GrpcFigures>,
}

/// A gRPC workload's figures: its method and its calls by status code.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct GrpcFigures {
    /// `package.Service/Method`.
    pub method: String,
    /// Calls that ended, by status code label (every code, 0 included).
    pub calls: BTreeMap<String, u64>,
    /// Held server streams (`--stream subscribe`; `null` for unary calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<super::GrpcStreamFigures>,
}

impl GrpcFigures {
    /// The figures of `method` from a workload's HTTP/2 counters.
    pub fn of(method: &str, h2: Option<&H2Stats>) -> GrpcFigures {
        let h2 = h2.copied().unwrap_or_default();
        GrpcFigures {
            method: method.to_string(),
            calls: Code::ALL
                .iter()
                .map(|c| (c.label().to_string(), h2.grpc_calls[*c as usize]))
                .collect(),
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
            version: match g.http_version {
                11 => Some("1.1".into()),
                20 => Some("2".into()),
                _ => None,
            },
            streams_limit: (g.h2_streams_limit != 0).then_some(g.h2_streams_limit),
            goaways: by_code(&h2.goaways),
            resets: by_code(&h2.resets),
            retried: h2.retried,
            grpc: None,
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
            grpc: match (&self.grpc, &o.grpc) {
                (Some(a), Some(b)) => Some(GrpcFigures {
                    method: a.method.clone(),
                    calls: add(&a.calls, &b.calls),
                    streams: match (&a.streams, &b.streams) {
                        (Some(x), Some(y)) => Some(x.plus(y)),
                        (x, y) => x.clone().or_else(|| y.clone()),
                    },
                }),
                (a, b) => a.clone().or_else(|| b.clone()),
            },
        }
    }
}
