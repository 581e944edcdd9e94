//! The held gRPC stream families (`soakd_grpc_stream*`, `--stream
//! subscribe`), declared like the rest in [`super`]'s table and rendered
//! from the same snapshot: every gRPC target has them from the first
//! scrape (zero for unary calls, which hold no stream), other targets
//! none. A file of their own so the HTTP/2 one stays the HTTP/2 table.

use prometheus::proto::MetricType;

use super::{Buckets, Family, Fill, histogram, value};
use crate::stats::GrpcStreamStats;

/// One workload's held-stream figures as of the last update.
#[derive(Clone, Debug, Default)]
pub struct GrpcStreamSnapshot {
    /// Streams opened.
    pub opened: u64,
    /// Messages received on them.
    pub messages: u64,
    /// Messages sent on client and bidirectional streams.
    pub sent: u64,
    /// Streams ended by `--stream-lifetime`.
    pub lifetime_ends: u64,
    /// Streams opened again after their connection went away.
    pub restarts: u64,
    /// Gaps between messages.
    pub gap: Buckets,
    /// Each stream's longest silence per interval.
    pub silence: Buckets,
}

impl GrpcStreamSnapshot {
    /// The snapshot of `s` (`None`: nothing held yet, every figure 0).
    pub fn of(s: Option<&GrpcStreamStats>) -> GrpcStreamSnapshot {
        // Not an empty `GrpcStreamStats` to read: its two histograms,
        // made and dropped at every update of every workload without
        // streams, were large allocations (issue 29).
        let Some(s) = s else {
            return GrpcStreamSnapshot {
                gap: Buckets::zero(),
                silence: Buckets::zero(),
                ..GrpcStreamSnapshot::default()
            };
        };
        GrpcStreamSnapshot {
            opened: s.opened,
            messages: s.messages,
            sent: s.sent,
            lifetime_ends: s.lifetime_ends,
            restarts: s.restarts,
            gap: Buckets::from_hdr(&s.gap),
            silence: Buckets::from_hdr(&s.silence),
        }
    }
}

/// A counter of a gRPC target's held streams, labelled with its method.
macro_rules! counter {
    ($name:expr, $help:expr, $field:ident) => {
        Family {
            name: $name,
            help: $help,
            kind: MetricType::COUNTER,
            labels: &["target", "method"],
            fill: Fill::Target(|x, out| {
                if let Some(m) = x.w.stream_method() {
                    let v = x.w.grpc_streams.$field as f64;
                    out.push(value(x.kind, &[("target", x.t), ("method", m)], v));
                }
            }),
        }
    };
}

/// The held-stream families, after the HTTP/2 ones.
pub(super) const FAMILIES: &[Family] = &[
    counter!(
        "soakd_grpc_streams_opened_total",
        "Held gRPC server streams opened (--stream subscribe).",
        opened
    ),
    counter!(
        "soakd_grpc_stream_messages_received_total",
        "Messages received on held gRPC server streams (counted, not decoded).",
        messages
    ),
    counter!(
        "soakd_grpc_stream_messages_sent_total",
        "Messages sent on held client and bidirectional gRPC streams (--stream-message).",
        sent
    ),
    counter!(
        "soakd_grpc_stream_lifetime_ends_total",
        "Held gRPC streams soakd cancelled at the end of their --stream-lifetime (each opened anew).",
        lifetime_ends
    ),
    counter!(
        "soakd_grpc_stream_restarts_total",
        "Held gRPC streams whose connection went away (GOAWAY, the close after its grace, a lost connection) and were opened again on the next one: not errors.",
        restarts
    ),
    Family {
        name: "soakd_grpc_streams_open",
        help: "Held gRPC server streams open now.",
        kind: MetricType::GAUGE,
        labels: &["target", "method"],
        fill: Fill::Target(|x, out| {
            if let Some(m) = x.w.stream_method() {
                let v = x.w.gauges.grpc_streams as f64;
                out.push(value(x.kind, &[("target", x.t), ("method", m)], v));
            }
        }),
    },
    Family {
        name: "soakd_grpc_stream_gap_seconds",
        help: "Time between two messages of a held gRPC stream.",
        kind: MetricType::HISTOGRAM,
        labels: &["target", "method"],
        fill: Fill::Target(|x, out| {
            if let Some(m) = x.w.stream_method() {
                out.push(histogram(&[("target", x.t), ("method", m)], &x.w.grpc_streams.gap));
            }
        }),
    },
    Family {
        name: "soakd_grpc_stream_silence_seconds",
        help: "Each held gRPC stream's longest silence per second (one a message ended, or one still running).",
        kind: MetricType::HISTOGRAM,
        labels: &["target", "method"],
        fill: Fill::Target(|x, out| {
            if let Some(m) = x.w.stream_method() {
                out.push(histogram(&[("target", x.t), ("method", m)], &x.w.grpc_streams.silence));
            }
        }),
    },
];
