//! Thresholds: `p99<50ms`, `error_rate <= 0.1%`, `open_min >= 9000`.
//!
//! A soak run in CI needs a yes/no answer, not a table of numbers. A
//! threshold is `METRIC OP VALUE` (spaces optional); soakd evaluates each
//! at the end of the run (and live, for the `soakd_threshold_passing`
//! gauge), and a failed one makes the exit code 3. This module is pure
//! parsing and comparison: what a metric *measures* is the report's
//! business, so the grammar can be tested (and fuzzed by proptest) without
//! a run.

use std::fmt;

use crate::Error;

name_table! {
    /// What a threshold measures.
    pub enum Metric {
        /// Request latency, median.
        P50 = "p50",
        /// Request latency, 90th percentile.
        P90 = "p90",
        /// Request latency, 99th percentile.
        P99 = "p99",
        /// Request latency, 99.9th percentile.
        P999 = "p999",
        /// Request latency, largest.
        Max = "max",
        /// Request latency, mean.
        Mean = "mean",
        /// Schedule lag (due → written), 99th percentile.
        LagP99 = "lag_p99",
        /// TLS handshake time, 99th percentile (https workloads only).
        TlsHandshakeP99 = "tls_handshake_p99",
        /// Errors ÷ (completed requests + errors), a 0–1 ratio.
        ErrorRate = "error_rate",
        /// Errors of every kind.
        Errors = "errors",
        /// Completed requests per second.
        Rps = "rps",
        /// Fewest connections open at once after the ramp completed.
        OpenMin = "open_min",
        /// Growth of the server's resident memory (`--target-pid`,
        /// summed over its processes) after the warmup: a Theil–Sen slope.
        TargetRssSlope = "target_rss_slope",
        /// Growth of the server's open descriptors after the warmup.
        TargetFdsSlope = "target_fds_slope",
        /// Growth of soakd's own resident memory after the warmup.
        SoakdRssSlope = "soakd_rss_slope",
        /// Relative change of the latency median from the first steady
        /// window to the last.
        P50Drift = "p50_drift",
        /// Relative change of the latency p99 from the first steady window
        /// to the last.
        P99Drift = "p99_drift",
        /// Relative change of the error rate from the first steady window
        /// to the last.
        ErrorRateDrift = "error_rate_drift",
        // Outages (see `stats::outage`)
        /// Outages found in the run.
        Outages = "outages",
        /// The longest outage, seconds.
        OutageMax = "outage_max",
        /// The longest time to recover after an outage, seconds (one that
        /// had not recovered when the run ended fails).
        RecoveryMax = "recovery_max",
        /// Time in an outage as a share of the run.
        Downtime = "downtime",
        // WebSocket
        /// WebSocket reply latency (request mode), 99th percentile.
        WsP99 = "ws_p99",
        /// WebSocket ping → pong round trip, 99th percentile.
        PingP99 = "ping_p99",
        /// WebSocket closes by the server (every code, abnormal included).
        Closes = "closes",
        // gRPC
        /// gRPC calls that ended with a status other than OK ÷ calls that
        /// ended, a 0–1 ratio (a call soakd gave up on before its status
        /// came is in `error_rate`, not here).
        GrpcErrorRate = "grpc_error_rate",
        /// Held gRPC streams restarted because their connection went away
        /// (`--stream subscribe` under connection ageing).
        StreamRestarts = "stream_restarts",
        // The server watch (`--target-metrics`, `--prometheus`, …), each
        // written with the watch's name: `slope(rss)<=1MiB/h`.
        /// A watched series' Theil–Sen slope after the warmup, per series.
        WatchSlope = "slope",
        /// A watched series' relative change from the first steady window
        /// to the last, per series.
        WatchDrift = "drift",
        /// A watched series' largest value after the warmup, per series.
        WatchMax = "watch_max",
    }
}

/// How a metric's value is written and read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Seconds; the value needs `us`, `ms` or `s`.
    Seconds,
    /// A 0–1 ratio; `%` or a plain fraction.
    Ratio,
    /// A plain number.
    Count,
    /// Bytes per second; written as a size per time, e.g. `10MiB/h`.
    BytesPerSecond,
    /// A count per second; written per time, e.g. `100/h`.
    PerSecond,
    /// A relative change (0.2 = +20%); `%` or a plain fraction, may pass
    /// 100%.
    Relative,
    /// A watched series' own unit (bytes, seconds, a plain number), or
    /// that per second for its slope: written with a size (`2GiB`), a
    /// time (`50ms`) or neither, and for a slope per a time (`1MiB/h`).
    Watched,
}

/// Sizes a slope may be written in, bytes each.
const SIZES: [(&str, f64); 4] = [("B", 1.0), ("KiB", 1024.0), ("MiB", 1048576.0), ("GiB", 1073741824.0)];
/// Times a slope may be written per, seconds each.
const PER: [(&str, f64); 4] = [("s", 1.0), ("min", 60.0), ("h", 3600.0), ("d", 86400.0)];

impl Metric {
    /// The unit of the metric's values.
    pub fn unit(self) -> Unit {
        match self {
            Metric::ErrorRate | Metric::Downtime | Metric::GrpcErrorRate => Unit::Ratio,
            Metric::Errors
            | Metric::Rps
            | Metric::OpenMin
            | Metric::Closes
            | Metric::Outages
            | Metric::StreamRestarts => Unit::Count,
            Metric::TargetRssSlope | Metric::SoakdRssSlope => Unit::BytesPerSecond,
            Metric::TargetFdsSlope => Unit::PerSecond,
            Metric::P50Drift | Metric::P99Drift | Metric::ErrorRateDrift | Metric::WatchDrift => Unit::Relative,
            Metric::WatchSlope | Metric::WatchMax => Unit::Watched,
            _ => Unit::Seconds,
        }
    }

    /// A trend of the run (a slope or a drift, from the timeline) rather
    /// than a figure of the totals: judged by the report's `trends`, and
    /// failed only when significant.
    pub fn is_trend(self) -> bool {
        matches!(self.unit(), Unit::BytesPerSecond | Unit::PerSecond | Unit::Relative) && !self.is_watch()
    }

    /// On a watched series of the server (`slope(NAME)`, `drift(NAME)`,
    /// `max(NAME)`): judged per series on the timeline's watched values.
    pub fn is_watch(self) -> bool {
        matches!(self, Metric::WatchSlope | Metric::WatchDrift | Metric::WatchMax)
    }

    /// How the metric is written before its watch's name in parentheses.
    pub fn watch_function(self) -> &'static str {
        match self {
            Metric::WatchSlope => "slope",
            Metric::WatchDrift => "drift",
            _ => "max",
        }
    }

    /// Measured on the run's outages (`stats::outage`), over the whole
    /// run, rather than on the totals.
    pub fn is_outage(self) -> bool {
        matches!(
            self,
            Metric::Outages | Metric::OutageMax | Metric::RecoveryMax | Metric::Downtime
        )
    }

    /// Needs `--target-pid` to be measured.
    pub fn needs_target_pid(self) -> bool {
        matches!(self, Metric::TargetRssSlope | Metric::TargetFdsSlope)
    }
}

/// A trend value in a readable unit: `2.00MiB/min`, `-35.00KiB/h`,
/// `12.0/h`, `+18.5%` (the one formatting, [`crate::stats::trends_text::show`]).
pub fn show_trend(unit: Unit, v: f64) -> String {
    let unit = match unit {
        Unit::BytesPerSecond => "bytes/s",
        Unit::PerSecond => "1/s",
        Unit::Relative => "relative",
        Unit::Seconds | Unit::Ratio | Unit::Count | Unit::Watched => return format!("{v}"),
    };
    crate::stats::trends_text::show(unit, v)
}

/// A comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl Op {
    /// Every operator, longest spelling first (so `<=` is not read as `<`).
    const ALL: [Op; 4] = [Op::Le, Op::Ge, Op::Lt, Op::Gt];

    /// How the operator is written.
    pub fn symbol(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }

    /// `measured OP limit`.
    pub fn holds(self, measured: f64, limit: f64) -> bool {
        match self {
            Op::Lt => measured < limit,
            Op::Le => measured <= limit,
            Op::Gt => measured > limit,
            Op::Ge => measured >= limit,
        }
    }
}

/// One parsed threshold.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    /// The expression as given, without spaces (`p99<50ms`): its name in
    /// the report, the summary and the metric label.
    pub text: String,
    /// What is measured.
    pub metric: Metric,
    /// How it is compared.
    pub op: Op,
    /// The limit in base units (seconds, a 0–1 ratio, a count).
    pub limit: f64,
    /// A watch's threshold: the watch it judges, and how its limit was
    /// written (checked against the watch's unit once the watches are
    /// known, [`crate::plan::Plan::check_thresholds`]).
    pub watch: Option<WatchLimit>,
}

/// The watch a `slope(NAME)`, `drift(NAME)` or `max(NAME)` threshold
/// judges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchLimit {
    /// The watch's name.
    pub name: String,
    /// The limit was written with a size (`MiB`), so the watch must be in
    /// bytes.
    pub sized: bool,
    /// The limit was written with a time (`ms`), so the watch must be in
    /// seconds.
    pub timed: bool,
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// What the grammar allows, for error messages.
pub fn grammar_help() -> String {
    let metrics: Vec<&str> = Metric::ALL.iter().filter(|m| !m.is_watch()).map(|m| m.name()).collect();
    format!(
        "expected METRIC OP VALUE, e.g. p99<50ms, error_rate<=0.1%, rps>=900, target_rss_slope<=10MiB/h, p99_drift<=20%, slope(rss)<=1MiB/h; METRIC is one of {}, or on a --watch NAME slope(NAME) drift(NAME) max(NAME); OP is <, <=, > or >=; latencies take us, ms or s, error_rate a % or a fraction, *_rss_slope a size (B, KiB, MiB, GiB) per time (s, min, h, d), target_fds_slope a count per time (/h), *_drift and drift(NAME) a relative change (% or a fraction), slope(NAME) the watch's unit per time (1MiB/h, 100/h), max(NAME) its unit (2GiB, 50ms, 1000), the others a plain number",
        metrics.join(" ")
    )
}

impl Threshold {
    /// Parses `METRIC OP VALUE`. `what` names where the expression came
    /// from (`--threshold`, or a file, line and key) for the message.
    pub fn parse(what: &str, expr: &str) -> Result<Threshold, Error> {
        Self::parse_inner(expr).map_err(|why| Error::Usage(format!("{what} {expr:?}: {why}; {}", grammar_help())))
    }

    fn parse_inner(expr: &str) -> Result<Threshold, String> {
        let text: String = expr.chars().filter(|c| !c.is_whitespace()).collect();
        let name_end = text
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .ok_or("no comparison operator")?;
        let name = &text[..name_end];
        let (metric, watch, name_end) = match (name, text[name_end..].strip_prefix('(')) {
            ("slope" | "drift" | "max", Some(inner)) => {
                let close = inner.find(')').ok_or("no ')' after the watch's name")?;
                let watch = &inner[..close];
                if watch.is_empty() || !watch.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    return Err(format!("{watch:?} is not a watch name (a --watch NAME)"));
                }
                let metric = match name {
                    "slope" => Metric::WatchSlope,
                    "drift" => Metric::WatchDrift,
                    _ => Metric::WatchMax,
                };
                (metric, Some(watch.to_string()), name_end + 1 + close + 1)
            }
            _ => {
                let metric = Metric::from_name(name).filter(|m| !m.is_watch()).ok_or_else(|| {
                    if name.is_empty() {
                        "no metric before the operator".to_string()
                    } else if matches!(name, "slope" | "drift" | "watch_max") {
                        format!("{name} is of a watched series: write {name}(NAME) with a --watch NAME")
                    } else {
                        format!("unknown metric {name:?}")
                    }
                })?;
                (metric, None, name_end)
            }
        };
        let rest = &text[name_end..];
        let op = Op::ALL
            .into_iter()
            .find(|op| rest.starts_with(op.symbol()))
            .ok_or_else(|| {
                let shown: String = rest.chars().take(2).collect();
                format!("{shown:?} is not a comparison operator")
            })?;
        let value = &rest[op.symbol().len()..];
        let limit = parse_value(metric, value)?;
        let watch = watch.map(|name| WatchLimit {
            name,
            sized: value.contains("B"),
            timed: metric == Metric::WatchMax && value.ends_with('s'),
        });
        Ok(Threshold {
            text,
            metric,
            op,
            limit,
            watch,
        })
    }

    /// Whether `measured` satisfies the threshold; `None` (nothing was
    /// measured) does not.
    pub fn passes(&self, measured: Option<f64>) -> bool {
        measured.is_some_and(|m| self.op.holds(m, self.limit))
    }
}

/// A watch threshold's value: for `max(NAME)` a number, a size or a time;
/// for `slope(NAME)` those per a time.
fn watched_value(metric: Metric, n: f64, unit: &str) -> Result<f64, String> {
    let (amount, per) = match unit.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (unit, None),
    };
    let scale = match amount {
        "" => Some(1.0),
        "us" | "µs" => Some(1e-6),
        "ms" => Some(1e-3),
        "s" if per.is_none() || metric == Metric::WatchSlope => Some(1.0),
        a => SIZES.iter().find(|(s, _)| *s == a).map(|(_, b)| *b),
    }
    .ok_or_else(|| format!("{amount:?} is not a size (B, KiB, MiB, GiB) or a time (us, ms, s)"))?;
    match (metric, per) {
        (Metric::WatchSlope, Some(per)) => {
            let secs = PER
                .iter()
                .find(|(p, _)| *p == per)
                .map(|(_, s)| *s)
                .ok_or_else(|| format!("{per:?} is not a time to write a slope per; write e.g. 1MiB/h or 100/h"))?;
            Ok(n * scale / secs)
        }
        (Metric::WatchSlope, None) => Err(format!(
            "slope(…) is a slope and {unit:?} has no time unit; write e.g. 1MiB/h or 100/h"
        )),
        (_, Some(_)) => Err("max(…) is a value, not a rate; write e.g. 2GiB or 5000".into()),
        (_, None) => Ok(n * scale),
    }
}

/// The value part, in the metric's base unit.
fn parse_value(metric: Metric, value: &str) -> Result<f64, String> {
    if value.is_empty() {
        return Err("no value after the operator".into());
    }
    let split = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    let n: f64 = number
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite())
        .ok_or_else(|| format!("{value:?} is not a non-negative number"))?;
    match (metric.unit(), unit) {
        (Unit::Seconds, "us" | "µs") => Ok(n / 1e6),
        (Unit::Seconds, "ms") => Ok(n / 1e3),
        (Unit::Seconds, "s") => Ok(n),
        (Unit::Seconds, "") => Err(format!(
            "{} is a latency and {value:?} has no unit; write e.g. 50ms",
            metric.name()
        )),
        (Unit::Ratio, "%") if n <= 100.0 => Ok(n / 100.0),
        (Unit::Ratio, "") if n <= 1.0 => Ok(n),
        (Unit::Ratio, "%" | "") => Err(format!("{value:?} is over 100%")),
        (Unit::Count, "") => Ok(n),
        (Unit::Relative, "%") => Ok(n / 100.0),
        (Unit::Relative, "") => Ok(n),
        (Unit::Watched, u) => watched_value(metric, n, u),
        (Unit::BytesPerSecond | Unit::PerSecond, u) if u.contains('/') => {
            let (size, per) = u.split_once('/').unwrap_or_default();
            let bytes = if metric.unit() == Unit::PerSecond {
                (size.is_empty()).then_some(1.0)
            } else {
                SIZES.iter().find(|(s, _)| *s == size).map(|(_, b)| *b)
            };
            let secs = PER.iter().find(|(p, _)| *p == per).map(|(_, s)| *s);
            match (bytes, secs) {
                (Some(b), Some(s)) => Ok(n * b / s),
                _ => Err(format!(
                    "{u:?} is not a unit {} takes; write e.g. {}",
                    metric.name(),
                    if metric.unit() == Unit::PerSecond {
                        "100/h or 2/min"
                    } else {
                        "10MiB/h, 512KiB/min or 1GiB/d"
                    }
                )),
            }
        }
        (Unit::BytesPerSecond | Unit::PerSecond, _) => Err(format!(
            "{} is a slope and {value:?} has no time unit; write e.g. {}",
            metric.name(),
            if metric.unit() == Unit::PerSecond {
                "100/h"
            } else {
                "10MiB/h"
            }
        )),
        (_, u) => Err(format!("{u:?} is not a unit {} takes", metric.name())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(expr: &str) -> Threshold {
        Threshold::parse("--threshold", expr).unwrap()
    }

    #[test]
    fn the_grammar() {
        for (expr, metric, op, limit, text) in [
            ("p99<50ms", Metric::P99, Op::Lt, 0.05, "p99<50ms"),
            ("p99 < 50ms", Metric::P99, Op::Lt, 0.05, "p99<50ms"),
            ("  p999<=1.5s ", Metric::P999, Op::Le, 1.5, "p999<=1.5s"),
            ("mean>250us", Metric::Mean, Op::Gt, 0.000_25, "mean>250us"),
            (
                "error_rate <= 0.1%",
                Metric::ErrorRate,
                Op::Le,
                0.001,
                "error_rate<=0.1%",
            ),
            ("error_rate<0.05", Metric::ErrorRate, Op::Lt, 0.05, "error_rate<0.05"),
            ("errors<1", Metric::Errors, Op::Lt, 1.0, "errors<1"),
            ("rps >= 900", Metric::Rps, Op::Ge, 900.0, "rps>=900"),
            ("open_min>=9000", Metric::OpenMin, Op::Ge, 9000.0, "open_min>=9000"),
            ("lag_p99<5ms", Metric::LagP99, Op::Lt, 0.005, "lag_p99<5ms"),
            (
                "tls_handshake_p99<20ms",
                Metric::TlsHandshakeP99,
                Op::Lt,
                0.02,
                "tls_handshake_p99<20ms",
            ),
            (
                "target_rss_slope <= 10MiB/h",
                Metric::TargetRssSlope,
                Op::Le,
                10.0 * 1048576.0 / 3600.0,
                "target_rss_slope<=10MiB/h",
            ),
            (
                "soakd_rss_slope<512KiB/min",
                Metric::SoakdRssSlope,
                Op::Lt,
                512.0 * 1024.0 / 60.0,
                "soakd_rss_slope<512KiB/min",
            ),
            (
                "target_fds_slope<=100/h",
                Metric::TargetFdsSlope,
                Op::Le,
                100.0 / 3600.0,
                "target_fds_slope<=100/h",
            ),
            ("p99_drift<=20%", Metric::P99Drift, Op::Le, 0.2, "p99_drift<=20%"),
            ("outages<=0", Metric::Outages, Op::Le, 0.0, "outages<=0"),
            ("outage_max<=10s", Metric::OutageMax, Op::Le, 10.0, "outage_max<=10s"),
            (
                "recovery_max<30s",
                Metric::RecoveryMax,
                Op::Lt,
                30.0,
                "recovery_max<30s",
            ),
            ("downtime<=0.1%", Metric::Downtime, Op::Le, 0.001, "downtime<=0.1%"),
            ("p50_drift<1.5", Metric::P50Drift, Op::Lt, 1.5, "p50_drift<1.5"),
            (
                "error_rate_drift<=150%",
                Metric::ErrorRateDrift,
                Op::Le,
                1.5,
                "error_rate_drift<=150%",
            ),
        ] {
            let got = t(expr);
            assert_eq!((got.metric, got.op, got.text.as_str()), (metric, op, text), "{expr}");
            assert!((got.limit - limit).abs() < 1e-12, "{expr}: {}", got.limit);
        }
    }

    #[test]
    fn bad_expressions_are_named_with_what_is_allowed() {
        for (expr, says) in [
            ("p98<50ms", "unknown metric \"p98\""),
            ("p99=50ms", "not a comparison operator"),
            ("p99<50", "has no unit"),
            ("p99<50kg", "not a unit"),
            ("rps>900ms", "not a unit"),
            ("error_rate<150%", "over 100%"),
            ("target_rss_slope<10", "no time unit"),
            ("target_rss_slope<10MB/h", "write e.g. 10MiB/h"),
            ("target_rss_slope<10MiB/week", "not a unit"),
            ("target_fds_slope<10MiB/h", "write e.g. 100/h"),
            ("p99_drift<20ms", "not a unit"),
            ("p99<", "no value"),
            ("p99", "no comparison operator"),
            ("<5ms", "no metric"),
            ("p99<-5ms", "not a non-negative number"),
            ("p99<fast", "not a non-negative number"),
            ("", "no comparison operator"),
        ] {
            let e = Threshold::parse("--threshold", expr).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            let e = e.to_string();
            assert!(e.contains(says), "{expr}: {e}");
            assert!(
                e.starts_with("--threshold") && e.contains(&format!("{expr:?}")),
                "{expr}: {e}"
            );
            assert!(e.contains("open_min") && e.contains("<="), "{expr}: {e}");
        }
    }

    #[test]
    fn watch_thresholds() {
        for (expr, metric, watch, limit, sized) in [
            (
                "slope(rss) <= 1MiB/h",
                Metric::WatchSlope,
                "rss",
                1048576.0 / 3600.0,
                true,
            ),
            ("slope(fds)<=100/h", Metric::WatchSlope, "fds", 100.0 / 3600.0, false),
            ("slope(gc)<1ms/min", Metric::WatchSlope, "gc", 1e-3 / 60.0, false),
            ("drift(heap_used)<=20%", Metric::WatchDrift, "heap_used", 0.2, false),
            ("max(rss)<=2GiB", Metric::WatchMax, "rss", 2.0 * 1073741824.0, true),
            ("max(goroutines)<5000", Metric::WatchMax, "goroutines", 5000.0, false),
            ("max(gc)<50ms", Metric::WatchMax, "gc", 0.05, false),
        ] {
            let t = t(expr);
            assert_eq!(t.metric, metric, "{expr}");
            let w = t.watch.as_ref().unwrap();
            assert_eq!((w.name.as_str(), w.sized), (watch, sized), "{expr}");
            assert!((t.limit - limit).abs() < 1e-12 * limit.max(1.0), "{expr}: {}", t.limit);
            assert_eq!(t.text, expr.replace(' ', ""));
        }
        assert!(t("max(gc)<50ms").watch.unwrap().timed);
        for (expr, says) in [
            ("slope(rss)<=1MiB", "no time unit"),
            ("slope(rss)<=1MiB/week", "not a time to write a slope per"),
            ("max(rss)<=1MiB/h", "not a rate"),
            ("max(rss)<=1furlong", "not a size"),
            ("slope()<1/h", "not a watch name"),
            ("slope(rss<1/h", "no ')'"),
            ("slope<=1MiB/h", "write slope(NAME)"),
            ("watch_max<=1", "write watch_max(NAME)"),
        ] {
            let e = Threshold::parse("--threshold", expr).unwrap_err().to_string();
            assert!(e.contains(says), "{expr}: {e}");
        }
        assert!(Metric::WatchSlope.is_watch() && !Metric::WatchSlope.is_trend());
    }

    #[test]
    fn trend_values_read_back() {
        assert_eq!(show_trend(Unit::BytesPerSecond, 2.0 * 1048576.0 / 60.0), "2.00MiB/min");
        assert_eq!(show_trend(Unit::BytesPerSecond, -35.0 * 1024.0 / 3600.0), "-35.00KiB/h");
        assert_eq!(show_trend(Unit::BytesPerSecond, 0.0), "0.00B/h");
        assert_eq!(show_trend(Unit::PerSecond, 12.0 / 3600.0), "12.0/h");
        assert_eq!(show_trend(Unit::PerSecond, 1.0), "60.0/min");
        assert_eq!(show_trend(Unit::Relative, 0.185), "+18.5%");
        assert!(Metric::P99Drift.is_trend() && !Metric::P99.is_trend());
        assert!(Metric::TargetFdsSlope.needs_target_pid() && !Metric::SoakdRssSlope.needs_target_pid());
    }

    #[test]
    fn comparisons_and_missing_measurements() {
        assert!(t("p99<50ms").passes(Some(0.049)));
        assert!(!t("p99<50ms").passes(Some(0.05)));
        assert!(t("p99<=50ms").passes(Some(0.05)));
        assert!(t("rps>10").passes(Some(10.5)));
        assert!(!t("rps>=10").passes(Some(9.9)));
        assert!(!t("p99<50ms").passes(None), "nothing measured never passes");
    }

    fn unit_strategy(metric: Metric) -> BoxedStrategy<(&'static str, f64)> {
        match metric.unit() {
            Unit::Seconds => prop_oneof![Just(("us", 1e-6)), Just(("ms", 1e-3)), Just(("s", 1.0))].boxed(),
            Unit::Ratio => prop_oneof![Just(("%", 0.01)), Just(("", 1.0))].boxed(),
            Unit::Count => Just(("", 1.0)).boxed(),
            Unit::BytesPerSecond => prop_oneof![
                Just(("MiB/h", 1048576.0 / 3600.0)),
                Just(("KiB/min", 1024.0 / 60.0)),
                Just(("B/s", 1.0))
            ]
            .boxed(),
            Unit::PerSecond => prop_oneof![Just(("/h", 1.0 / 3600.0)), Just(("/s", 1.0))].boxed(),
            Unit::Relative => prop_oneof![Just(("%", 0.01)), Just(("", 1.0))].boxed(),
            Unit::Watched => Just(("", 1.0)).boxed(),
        }
    }

    proptest! {
        /// Any threshold written with any spacing parses to its parts, and
        /// its text parses back to the same threshold.
        #[test]
        fn round_trip(
            (metric, (unit, scale)) in proptest::sample::select(
                    Metric::ALL.iter().copied().filter(|m| !m.is_watch()).collect::<Vec<_>>()
                )
                .prop_flat_map(|m| (Just(m), unit_strategy(m))),
            op in proptest::sample::select(Op::ALL.to_vec()),
            whole in 0u32..100_000,
            frac in proptest::option::of(0u32..1000),
            spaces in proptest::collection::vec(proptest::sample::select(vec!["", " ", "  ", "\t"]), 4),
        ) {
            let mut number = whole.to_string();
            if let Some(f) = frac {
                number = format!("{number}.{f:03}");
            }
            let n: f64 = number.parse().unwrap();
            prop_assume!(unit != "%" || n <= 100.0);
            prop_assume!(!(metric.unit() == Unit::Ratio && unit.is_empty()) || n <= 1.0);
            let expr = format!(
                "{}{}{}{}{}{number}{unit}{}",
                spaces[0], metric.name(), spaces[1], op.symbol(), spaces[2], spaces[3]
            );
            let parsed = Threshold::parse("--threshold", &expr).unwrap();
            prop_assert_eq!(parsed.metric, metric);
            prop_assert_eq!(parsed.op, op);
            prop_assert!((parsed.limit - n * scale).abs() <= 1e-9 * (1.0 + n * scale), "{} vs {}", parsed.limit, n * scale);
            prop_assert_eq!(&parsed.text, &format!("{}{}{number}{unit}", metric.name(), op.symbol()));
            let again = Threshold::parse("--threshold", &parsed.to_string()).unwrap();
            prop_assert_eq!(again, parsed);
        }

        /// Nothing panics on any input.
        #[test]
        fn never_panics(s in "\\PC{0,24}") {
            let _ = Threshold::parse("--threshold", &s);
        }
    }
}
