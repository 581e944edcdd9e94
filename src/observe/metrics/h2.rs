//! The HTTP/2 metric families (`soakd_h2_*`, `soakd_http_version_info`),
//! declared like the rest in [`super`]'s table and rendered from the same
//! snapshot, for every target from the first scrape (zero until the first
//! HTTP/2 event). A file of their own, as the WebSocket ones are, so the
//! table's file stays under the 800 lines a file may have.

use prometheus::proto::MetricType;

use super::{Family, Fill, value};
use crate::stats::H2Code;
use crate::wire::grpc::Code;
use crate::wire::h3::ErrorCode as H3Code;

impl super::Metrics {
    /// Marks workload `i` (the last one when `None`) as a gRPC target
    /// whose requests call `methods` (one each): its
    /// `soakd_grpc_calls_total` series exist from now on, every method's
    /// every code at 0.
    pub fn mark_grpc(&mut self, i: Option<usize>, methods: Option<(String, Vec<String>)>) {
        self.mark(i, |w| match methods {
            Some((name, each)) => {
                w.grpc_method = Some(name);
                w.grpc_request_methods = each;
            }
            None => {
                w.grpc_method = None;
                w.grpc_request_methods.clear();
            }
        });
    }

    /// Marks workload `i` (the last one when `None`) as pinging its HTTP/2
    /// connections (`--h2-ping`): its `soakd_h2_ping*` series exist from
    /// now on.
    pub fn mark_h2_ping(&mut self, i: Option<usize>, ping: bool) {
        self.mark(i, |w| w.h2_ping = ping);
    }

    /// Applies `f` to workload `i`'s snapshot (the last one when `None`).
    fn mark(&mut self, i: Option<usize>, f: impl FnOnce(&mut super::WorkloadSnapshot)) {
        let mut snap = self.snapshot.lock().unwrap_or_else(|p| p.into_inner());
        let w = match i {
            Some(i) => snap.workloads.get_mut(i),
            None => snap.workloads.last_mut(),
        };
        if let Some(w) = w {
            f(w);
        }
    }
}

/// The HTTP/2 families (and gRPC's, whose calls ride HTTP/2 streams), after [`super`]'s (and before the WebSocket ones,
/// where they were when they were in its table).
pub(super) const FAMILIES: &[Family] = &[
    Family {
        name: "soakd_grpc_calls_total",
        help: "gRPC calls that ended, by method and status code (every code other than ok is also a grpc_status error).",
        kind: MetricType::COUNTER,
        labels: &["target", "method", "code"],
        fill: Fill::Target(|x, out| {
            if x.w.grpc_method.is_none() {
                return;
            }
            let each = &x.w.grpc_request_methods;
            // A mix: each method's calls summed over its requests (two
            // requests may call one method with different messages).
            let mix = each.len() > 1 && x.w.requests.len() == each.len();
            for (i, method) in each.iter().enumerate() {
                if each[..i].contains(method) {
                    continue;
                }
                for c in Code::ALL {
                    let v: u64 = match mix {
                        true => (i..each.len())
                            .filter(|&j| each[j] == *method)
                            .map(|j| x.w.requests[j].grpc_calls[c as usize])
                            .sum(),
                        false => x.w.h2.grpc_calls[c as usize],
                    };
                    out.push(value(
                        x.kind,
                        &[("target", x.t), ("method", method), ("code", c.label())],
                        v as f64,
                    ));
                }
            }
        }),
    },
    Family {
        name: "soakd_h2_pings_total",
        help: "HTTP/2 PINGs soakd sent (--h2-ping, gRPC's keepalive).",
        kind: MetricType::COUNTER,
        labels: &["target"],
        fill: Fill::Target(|x, out| {
            if x.w.h2_ping {
                out.push(x.one(x.w.ws.pings));
            }
        }),
    },
    Family {
        name: "soakd_h2_ping_rtt_seconds",
        help: "HTTP/2 PING to ACK round trip (--h2-ping): the transport latency of each connection, even when idle.",
        kind: MetricType::HISTOGRAM,
        labels: &["target"],
        fill: Fill::Target(|x, out| {
            if x.w.h2_ping {
                out.push(super::histogram(&[("target", x.t)], &x.w.ws.ping_rtt));
            }
        }),
    },
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
        name: "soakd_h3_goaways_total",
        help: "HTTP/3 GOAWAY frames received (graceful: the requests above it are sent again on a new connection).",
        kind: MetricType::COUNTER,
        labels: &["target"],
        fill: Fill::Target(|x, out| out.push(x.one(x.w.h2.h3_goaways))),
    },
    Family {
        name: "soakd_h3_stream_resets_total",
        help: "HTTP/3 request streams the server reset (a RESET_STREAM read), by error code; H3_REQUEST_REJECTED ones are sent again, as are those a GOAWAY hands back (counted in retried, not here).",
        kind: MetricType::COUNTER,
        labels: &["target", "code"],
        fill: Fill::Target(|x, out| {
            for c in H3Code::ALL {
                let v = x.w.h2.h3_resets[c as usize] as f64;
                out.push(value(x.kind, &[("target", x.t), ("code", c.name())], v));
            }
        }),
    },
    Family {
        name: "soakd_h3_zero_rtt_total",
        help: "HTTP/3 handshakes that carried 0-RTT requests (--h3-0rtt), by whether the server accepted them (rejected ones are sent again).",
        kind: MetricType::COUNTER,
        labels: &["target", "result"],
        fill: Fill::Target(|x, out| {
            for (i, result) in ["accepted", "rejected"].into_iter().enumerate() {
                let v = x.w.h2.h3_0rtt[i] as f64;
                out.push(value(x.kind, &[("target", x.t), ("result", result)], v));
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
        help: "The HTTP version the target's connections speak: 1 for the one negotiated last, 0 for the others.",
        kind: MetricType::GAUGE,
        labels: &["target", "version"],
        fill: Fill::Target(|x, out| {
            for (v, name) in crate::stats::Gauges::HTTP_VERSIONS {
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
            for (i, (_, name)) in crate::stats::Gauges::HTTP_VERSIONS.into_iter().enumerate() {
                let n = x.w.gauges.http_open[i] as f64;
                out.push(value(x.kind, &[("target", x.t), ("version", name)], n));
            }
        }),
    },
];
