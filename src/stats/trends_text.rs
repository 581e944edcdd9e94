//! The trends as the text summary writes them: slopes in readable units
//! (`2.00MiB/min`), drifts with their windows and p-values. Apart from
//! the analysis (`trends.rs`), which decides; this only words it.

use std::fmt::Write as _;

use super::trends::{Drift, Trends};

/// A trend value of `unit` (`bytes/s`, `1/s`, `relative`) in a readable
/// unit: `2.00MiB/min`, `-35.00KiB/h`, `12.0/h`, `+18.5%`.
pub fn show(unit: &str, v: f64) -> String {
    match unit {
        "bytes/s" => {
            let (per, secs) = if v.abs() * 60.0 >= 1048576.0 {
                ("min", 60.0)
            } else {
                ("h", 3600.0)
            };
            let x = v * secs;
            let (size, bytes) = [("GiB", 1073741824.0), ("MiB", 1048576.0), ("KiB", 1024.0)]
                .into_iter()
                .find(|(_, b)| x.abs() >= *b)
                .unwrap_or(("B", 1.0));
            format!("{:.2}{size}/{per}", x / bytes)
        }
        "1/s" if v.abs() * 60.0 >= 10.0 => format!("{:.1}/min", v * 60.0),
        "1/s" => format!("{:.1}/h", v * 3600.0),
        // A watched series' slope: its unit per second.
        u if u.ends_with("/s") => {
            let base = &u[..u.len() - 2];
            let (per, secs) = if v.abs() * 60.0 >= 1.0 {
                ("min", 60.0)
            } else {
                ("h", 3600.0)
            };
            format!("{}/{per}", show_value(base, v * secs))
        }
        _ => format!("{:+.1}%", v * 100.0),
    }
}

/// A watch threshold's figure (`metric` `slope`, `drift` or `watch_max`)
/// in its unit.
pub fn show_watched(metric: &str, unit: &str, v: f64) -> String {
    match metric {
        "slope" | "drift" => show(unit, v),
        _ => show_value(unit, v),
    }
}

/// A value of a watched series' unit (`bytes`, `seconds`, `1`, or a rate
/// of one, `bytes/s`): `157.94MiB`, `12.50ms`, `1234`, `2.00MiB/s`.
pub fn show_value(unit: &str, v: f64) -> String {
    match unit {
        "bytes" => {
            let (size, bytes) = [("GiB", 1073741824.0), ("MiB", 1048576.0), ("KiB", 1024.0)]
                .into_iter()
                .find(|(_, b)| v.abs() >= *b)
                .unwrap_or(("B", 1.0));
            format!("{:.2}{size}", v / bytes)
        }
        "seconds" => secs(v),
        u if u.ends_with("/s") => format!("{}/s", show_value(&u[..u.len() - 2], v)),
        _ if v.fract() == 0.0 && v.abs() < 1e15 => format!("{v:.0}"),
        _ if v.abs() >= 100.0 => format!("{v:.1}"),
        _ => format!("{v:.4}"),
    }
}

/// Seconds as the summary writes latencies.
pub fn secs(v: f64) -> String {
    if v < 1e-3 {
        format!("{:.0}µs", v * 1e6)
    } else if v < 1.0 {
        format!("{:.2}ms", v * 1e3)
    } else {
        format!("{v:.2}s")
    }
}

impl Trends {
    /// The text summary's `trends` lines: slope or drift, its interval or
    /// windows, p-value, significant or not (nothing without trends).
    pub fn summary(&self) -> String {
        let mut s = String::new();
        if self.slopes.is_empty() && self.drifts.is_empty() {
            return s;
        }
        let _ = writeln!(
            s,
            "  trends (after {:.0} s of ramp and warmup)",
            self.steady_from_seconds
        );
        let sig = |p: Option<f64>, yes: bool| match p {
            Some(p) if yes => format!("p={p:.2e}, significant"),
            Some(p) => format!("p={p:.2}, not significant"),
            None => String::new(),
        };
        for x in &self.slopes {
            let v = |v: Option<f64>| v.map_or("-".into(), |v| show(&x.unit, v));
            let _ = match &x.not_judged {
                Some(why) => writeln!(s, "    {:<20} - ({why})", x.metric),
                None => writeln!(
                    s,
                    "    {:<20} {} (95% {} .. {}) over {} points, {}",
                    x.metric,
                    v(x.slope),
                    v(x.low),
                    v(x.high),
                    x.points,
                    match (x.p_value, x.significant) {
                        // Significant by its rise, not by the corrected
                        // p-value (`stats::trend`).
                        (Some(p), true) if p >= self.significance => format!(
                            "p={p:.2}, significant (it rose {} times its scatter)",
                            x.rise_to_scatter.map_or("many".into(), |r| format!("{r:.0}"))
                        ),
                        (p, yes) => sig(p, yes),
                    }
                ),
            };
        }
        for d in &self.drifts {
            drift_line(&mut s, "    ", d);
        }
        for w in &self.workloads {
            let _ = writeln!(s, "    workload {}", w.workload);
            for d in &w.drifts {
                drift_line(&mut s, "      ", d);
            }
        }
        s
    }
}

/// One drift's summary line.
fn drift_line(s: &mut String, indent: &str, d: &Drift) {
    let sig = |p: Option<f64>, yes: bool| match p {
        Some(p) if yes => format!("p={p:.2e}, significant"),
        Some(p) => format!("p={p:.2}, not significant"),
        None => String::new(),
    };
    let v = |v: Option<f64>| match v {
        None => "-".to_string(),
        Some(v) if d.unit == "seconds" => secs(v),
        Some(v) => format!("{:.3}%", v * 100.0),
    };
    let verdict = match d.generator_lag {
        Some(lag) if d.excused_by_lag => format!(
            "not judged: soakd's own schedule lag ({}) is half the change or more",
            secs(lag)
        ),
        _ => sig(d.p_value, d.significant),
    };
    let _ = match &d.not_judged {
        Some(why) => writeln!(s, "{indent}{:<20} - ({why})", d.metric),
        None => writeln!(
            s,
            "{indent}{:<20} {} ({} in {:.0}-{:.0} s → {} in {:.0}-{:.0} s), {}",
            d.metric,
            d.drift.map_or("-".into(), |x| show("relative", x)),
            v(d.first),
            d.first_window[0],
            d.first_window[1],
            v(d.last),
            d.last_window[0],
            d.last_window[1],
            verdict
        ),
    };
}
