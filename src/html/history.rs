//! `soakd history --html`: each figure across the runs of a history, one
//! chart per figure and a line per workload, the runs worse than the one
//! before them shaded red and the better ones green, and the table.

use std::fmt::Write as _;

use super::svg::{Band, Chart, Series, Unit, esc};
use super::{PALETTE, STYLE};
use crate::verdict::Verdict;
use crate::verdict::history::{History, shown};

/// The page.
pub fn render(h: &History) -> String {
    let mut s = String::with_capacity(32 * 1024);
    let _ = write!(
        s,
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>soakd history</title><style>{STYLE}</style></head><body>\
<h1>soakd history</h1><p>{} runs in start order; each figure judged against the run before it with soakd compare's rules (tolerance {:.0}%).</p>",
        h.runs.len(),
        h.tolerance * 100.0
    );
    match h.first_worse {
        Some(n) => {
            let _ = write!(
                s,
                "<p class=fail>First run worse than the one before it: run {n} ({}).</p>",
                esc(&h.runs[n - 1].report)
            );
        }
        None => s.push_str("<p class=pass>No run is worse than the one before it.</p>"),
    }
    let names: Vec<&str> = h
        .runs
        .first()
        .map(|r| r.workloads.iter().map(|w| w.workload.as_str()).collect())
        .unwrap_or_default();
    let metrics: Vec<&'static str> = h
        .runs
        .first()
        .and_then(|r| r.workloads.first())
        .map(|w| w.cells.iter().map(|c| c.metric).collect())
        .unwrap_or_default();
    for (mi, metric) in metrics.iter().enumerate() {
        let mut bands = Vec::new();
        for r in &h.runs {
            let verdicts: Vec<Verdict> = r
                .workloads
                .iter()
                .filter_map(|w| w.cells.get(mi)?.vs_previous.map(|j| j.verdict))
                .collect();
            let (class, color) = if verdicts.contains(&Verdict::Worse) {
                ("worse", "#fbe3d6")
            } else if verdicts.contains(&Verdict::Better) {
                ("better", "#dff0d8")
            } else {
                continue;
            };
            bands.push(Band {
                from: r.run as f64 - 0.5,
                to: r.run as f64 + 0.5,
                class,
                color,
                title: format!("run {} ({}): {} than run {}", r.run, r.report, class, r.run - 1),
            });
        }
        let series = names
            .iter()
            .enumerate()
            .map(|(wi, name)| Series {
                name: (*name).to_string(),
                color: PALETTE[(wi + 6) % PALETTE.len()],
                dashed: false,
                points: h
                    .runs
                    .iter()
                    .map(|r| {
                        let v = r
                            .workloads
                            .iter()
                            .find(|w| w.workload == *name)
                            .and_then(|w| w.cells.get(mi)?.value);
                        (r.run as f64, v.unwrap_or(f64::NAN))
                    })
                    .collect(),
            })
            .collect();
        let unit = match *metric {
            "rps" | "error_rate" => Unit::Count,
            _ => Unit::Seconds,
        };
        let chart = Chart {
            title: format!("{metric} by run"),
            x_label: "run (start order)".into(),
            x_unit: Unit::Count,
            y_unit: unit,
            log_y: false,
            series,
            gaps: Vec::new(),
            bands,
            marks: Vec::new(),
        };
        let _ = write!(
            s,
            "<figure>{}<figcaption>{}</figcaption></figure>",
            chart.svg(),
            esc(&format!(
                "{metric} of each run{}; shaded: worse (red) or better (green) than the run before.",
                if *metric == "error_rate" { " (0–1)" } else { "" }
            ))
        );
    }
    s.push_str("<h2>Runs</h2><table><tr><th>run</th><th>started</th><th>report</th><th>workload</th>");
    for m in &metrics {
        let _ = write!(s, "<th>{m}</th>");
    }
    s.push_str("</tr>");
    for r in &h.runs {
        for w in &r.workloads {
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
                r.run,
                esc(&r.started_at),
                esc(&r.report),
                esc(&w.workload)
            );
            for c in &w.cells {
                let (class, word) = match c.vs_previous.map(|j| j.verdict) {
                    Some(Verdict::Worse) => (" class=fail", " worse"),
                    Some(Verdict::Better) => (" class=pass", " better"),
                    _ => ("", ""),
                };
                let change = c
                    .vs_previous
                    .and_then(|j| j.change)
                    .filter(|_| !word.is_empty())
                    .map_or(String::new(), |x| format!(" {:+.0}%", x * 100.0));
                let _ = write!(s, "<td{class}>{}{word}{change}</td>", shown(c.metric, c.value));
            }
            s.push_str("</tr>");
        }
        if !r.load_differs.is_empty() {
            let _ = write!(
                s,
                "<tr><td colspan=9 class=note>run {}: its load differs from run {}'s ({}): not a regression verdict</td></tr>",
                r.run,
                r.run - 1,
                esc(&r.load_differs.join("; "))
            );
        }
    }
    s.push_str("</table></body></html>\n");
    s
}
