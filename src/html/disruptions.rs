//! What happened to the target on the page: every outage and latency
//! excursion shaded on every time chart, every event drawn as a line,
//! and a table of each (what it cost, when it came back, what caused it).

use std::fmt::Write as _;

use super::svg::{Band, Mark, esc};
use super::{cell_secs, threshold_value};
use crate::report::Report;

/// An outage's shade.
const OUTAGE: &str = "#f4a6a6";
/// A latency excursion's shade.
const SLOWDOWN: &str = "#f6d7a0";

/// The outages and excursions of `r` as shaded ranges (one not over when
/// the run stopped runs to the end).
pub(super) fn bands(r: &Report) -> Vec<Band> {
    let end = r.duration_seconds;
    let mut out: Vec<Band> = r
        .disruptions
        .outages
        .iter()
        .map(|o| Band {
            from: o.start,
            to: o.end.unwrap_or(end.max(o.start)),
            class: "outage",
            color: OUTAGE,
            title: format!(
                "outage of {}: {:.1} s{}",
                o.workload,
                o.duration_seconds,
                o.event.as_ref().map_or(String::new(), |e| format!(" (event {e})"))
            ),
        })
        .collect();
    out.extend(r.disruptions.excursions.iter().map(|x| Band {
        from: x.start,
        to: x.end.unwrap_or(end.max(x.start)),
        class: "slowdown",
        color: SLOWDOWN,
        title: format!("latency excursion of {}: {:.1} s", x.workload, x.duration_seconds),
    }));
    out
}

/// The events of `r` as marks.
pub(super) fn marks(r: &Report) -> Vec<Mark> {
    r.disruptions
        .events
        .iter()
        .map(|e| Mark {
            at: e.at,
            label: format!("{} ({})", e.name, e.status),
        })
        .collect()
}

/// The tables of outages, excursions and events (a line saying there
/// were none otherwise).
pub(super) fn tables(s: &mut String, r: &Report) {
    s.push_str("<h2>Outages and events</h2>");
    if r.disruptions.outages.is_empty() && r.disruptions.excursions.is_empty() && r.disruptions.events.is_empty() {
        s.push_str("<p class=note>No outage, latency excursion or event in this run.</p>");
        return;
    }
    if r.disruptions.outages.is_empty() {
        s.push_str("<p class=note>No outage.</p>");
    } else {
        s.push_str(
            "<table><tr><th>workload</th><th>start</th><th>duration</th><th>cause</th><th>errors</th><th>failed</th>\
<th>late</th><th>connections lost</th><th>reconnect</th><th>recovery</th><th>event</th></tr>",
        );
        for o in &r.disruptions.outages {
            let errors: Vec<String> = o.errors.iter().map(|(k, n)| format!("{k} {n}")).collect();
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} of {}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&o.workload),
                cell_secs(Some(o.start)),
                cell_secs(Some(o.duration_seconds)),
                if o.end.is_none() { " (not over)" } else { "" },
                esc(&o.cause.join(", ")),
                esc(&errors.join(", ")),
                o.failed,
                o.late,
                o.connections_lost,
                o.desired,
                cell_secs(o.reconnect_seconds),
                o.recovery_seconds
                    .map_or("not recovered".into(), |v| cell_secs(Some(v))),
                esc(&event(o.event.as_deref(), o.event_offset_seconds)),
            );
        }
        s.push_str("</table>");
    }
    if !r.disruptions.excursions.is_empty() {
        s.push_str(
            "<p>Latency excursions (slower, without errors):</p><table><tr><th>workload</th><th>start</th><th>duration</th>\
<th>p50 up to</th><th>p99 up to</th><th>p99 before</th><th>late</th><th>recovery</th><th>event</th></tr>",
        );
        for x in &r.disruptions.excursions {
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&x.workload),
                cell_secs(Some(x.start)),
                cell_secs(Some(x.duration_seconds)),
                threshold_value("p50", x.p50_max),
                threshold_value("p99", x.p99_max),
                threshold_value("p99", x.baseline_p99),
                x.late,
                x.recovery_seconds
                    .map_or("not recovered".into(), |v| cell_secs(Some(v))),
                esc(&event(x.event.as_deref(), x.event_offset_seconds)),
            );
        }
        s.push_str("</table>");
    }
    if !r.disruptions.events.is_empty() {
        s.push_str("<p>Events:</p><table><tr><th>event</th><th>from</th><th>at</th><th>ended</th><th>status</th><th>command</th></tr>");
        for e in &r.disruptions.events {
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&e.name),
                esc(&e.source),
                cell_secs(Some(e.at)),
                cell_secs(e.end),
                esc(&e.status),
                esc(&e.command.join(" ")),
            );
        }
        s.push_str("</table>");
    }
}

/// `NAME (+0.3 s)`, or a dash.
fn event(name: Option<&str>, offset: Option<f64>) -> String {
    match (name, offset) {
        (Some(n), Some(off)) => format!("{n} ({off:+.1} s)"),
        _ => "-".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Inputs, render};
    use super::*;
    use serde_json::json;

    #[test]
    fn outages_are_shaded_on_every_time_chart_and_events_drawn() {
        let r: Report = serde_json::from_value(json!({
            "duration_seconds": 30.0,
            "workloads": [{"name": "api"}],
            "timeline": {"started_at": "2026-01-01T00:00:00.000Z", "started_at_unix_seconds": 1767225600.0,
                "interval_seconds": 1.0, "max_points": 1000, "points": (0..30).map(|t| json!({
                "t": t as f64, "seconds": 1.0, "sent": 10, "completed": 10, "responses": {}, "errors": {}, "open": 10, "open_min": 10, "p50": 0.001, "p90": 0.002, "p99": 0.002, "max": 0.003, "lag_p99": 0.0001
            })).collect::<Vec<_>>()},
            "outages": [{"workload": "api", "start": 10.0, "end": 13.5, "duration_seconds": 3.5,
                         "cause": ["errors"], "errors": {"connect_refused": 40}, "desired": 10,
                         "reconnect_seconds": 0.25, "recovery_seconds": 1.0,
                         "event": "stop <nginx>", "event_offset_seconds": 0.2},
                        {"workload": "api", "start": 25.0, "end": null, "duration_seconds": 5.0}],
            "excursions": [{"workload": "api", "start": 18.0, "end": 20.0, "duration_seconds": 2.0}],
            "events": [{"name": "stop <nginx>", "source": "command", "at": 9.8, "end": 13.4, "status": "exit 0",
                        "command": ["sh", "-c", "stop"]}]
        }))
        .unwrap();
        let b = bands(&r);
        assert_eq!(b.len(), 3);
        assert_eq!((b[1].from, b[1].to), (25.0, 30.0), "not over: to the end");
        let page = render(&Inputs {
            report: &r,
            baseline: None,
            spectrum: None,
            verdicts: None,
        });
        // Five time charts (the spectrum is not one), each with both
        // outages, the excursion and the event.
        assert_eq!(page.matches(r#"<rect class="outage""#).count(), 5 * 2, "{page}");
        assert_eq!(page.matches(r#"<rect class="slowdown""#).count(), 5);
        assert_eq!(page.matches(r#"<g class="event">"#).count(), 5);
        assert!(page.contains("<h2>Outages and events</h2>"));
        assert!(page.contains("connect_refused 40"));
        assert!(page.contains("stop &lt;nginx&gt; (+0.2 s)"));
        assert!(page.contains("not recovered"), "the second one");
        assert!(page.contains("(not over)"));
    }
}
