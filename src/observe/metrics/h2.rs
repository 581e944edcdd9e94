//! The HTTP/2 metric families (`soakd_h2_*`, `soakd_http_version_info`),
//! declared like the rest in [`super`]'s table and rendered from the same
//! snapshot, for every target from the first scrape (zero until the first
//! HTTP/2 event). A file of their own, as the WebSocket ones are, so the
//! table's file stays under the 800 lines a file may have.

use prometheus::proto::MetricType;

use super::{Family, Fill, value};
use crate::stats::H2Code;

/// The HTTP/2 families, after [`super`]'s (and before the WebSocket ones,
/// where they were when they were in its table).
pub(super) const FAMILIES: &[Family] = &[
    Family {
        name: "soakd_h2_goaways_total",
        help: "HTTP/2 GOAWAY frames received, by error code (NO_ERROR is a graceful one, not an error).",
        kind: MetricType::COUNTER,
        labels: &["target", "code"],
        fill: Fill::Target(|x, out| {
            for c in H2Code::ALL {
                let v = x.w.h2.goaways[c as usize] as f64;
                out.push(value(x.kind, &[("target", x.t), ("code", c.name())], v));
            }
        }),
    },
    Family {
        name: "soakd_h2_stream_resets_total",
        help: "HTTP/2 streams the server reset, by error code (REFUSED_STREAM ones are sent again).",
        kind: MetricType::COUNTER,
        labels: &["target", "code"],
        fill: Fill::Target(|x, out| {
            for c in H2Code::ALL {
                let v = x.w.h2.resets[c as usize] as f64;
                out.push(value(x.kind, &[("target", x.t), ("code", c.name())], v));
            }
        }),
    },
    Family {
        name: "soakd_h2_streams_open",
        help: "HTTP/2 streams open: requests in flight while the target speaks HTTP/2.",
        kind: MetricType::GAUGE,
        labels: &["target"],
        fill: Fill::Target(|x, out| {
            out.push(x.one(if x.w.gauges.http_version == 20 {
                x.w.gauges.in_flight
            } else {
                0
            }));
        }),
    },
    Family {
        name: "soakd_http_version_info",
        help: "The HTTP version the target's connections speak: 1 for the one negotiated last, 0 for the other.",
        kind: MetricType::GAUGE,
        labels: &["target", "version"],
        fill: Fill::Target(|x, out| {
            for (v, name) in [(11, "1.1"), (20, "2")] {
                let on = f64::from(u8::from(x.w.gauges.http_version == v));
                out.push(value(x.kind, &[("target", x.t), ("version", name)], on));
            }
        }),
    },
    Family {
        name: "soakd_http_connections_open",
        help: "Established connections by the HTTP version they speak (WebSocket counts as 1.1).",
        kind: MetricType::GAUGE,
        labels: &["target", "version"],
        fill: Fill::Target(|x, out| {
            for (i, name) in ["1.1", "2"].into_iter().enumerate() {
                let n = x.w.gauges.http_open[i] as f64;
                out.push(value(x.kind, &[("target", x.t), ("version", name)], n));
            }
        }),
    },
];
