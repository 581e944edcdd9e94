//! Line charts as inline SVG, written by hand.
//!
//! Why not plotters: its SVG backend lays text out with font metrics, and
//! those come either from `ab_glyph` (which fails with `FontUnavailable`
//! until a font file is registered, so the binary would have to embed one)
//! or from its `ttf` feature (fontconfig and the system's font paths). The
//! charts here need neither: every label is an SVG `<text>` element that
//! the browser sets in its own sans-serif, and the only place a width
//! matters (the legend, the left margin) uses a fixed estimate of 0.62 em
//! per character, generous enough for any proportional font. What remains
//! is a few hundred lines — axes with 1-2-5 ticks, polylines, a legend —
//! smaller than plotters' SVG output, with no dependency and deterministic
//! bytes (tests compare them).
//!
//! Every chart is one `<svg>` with a `<title>` (what the browser test and
//! screen readers see) and a visible caption.

use std::fmt::Write as _;

/// How values on an axis are shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Seconds, shown as µs/ms/s.
    Seconds,
    /// Plain numbers (counts, rates).
    Count,
    /// Percentile spectrum: x is log10(1/(1-q)), shown as 90%, 99% …
    Percentile,
    /// Bytes, shown as B/KiB/MiB/GiB.
    Bytes,
}

/// One line.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// CSS colour.
    pub color: &'static str,
    /// Drawn dashed (the baseline).
    pub dashed: bool,
    /// (x, y) points; non-finite ones break the line.
    pub points: Vec<(f64, f64)>,
}

/// A line chart.
#[derive(Clone, Debug)]
pub struct Chart {
    /// Caption and `<title>`.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// X axis unit.
    pub x_unit: Unit,
    /// Y axis unit.
    pub y_unit: Unit,
    /// Y axis on a log scale (latency: the tail and the median in one
    /// view); values ≤ 0 are not drawn.
    pub log_y: bool,
    /// The lines.
    pub series: Vec<Series>,
    /// X ranges shaded as "soakd not running" (a run continued from its
    /// `--state`: the restart's gap).
    pub gaps: Vec<(f64, f64)>,
    /// X ranges shaded for what happened to the target (outages, latency
    /// excursions), under the lines.
    pub bands: Vec<Band>,
    /// Moments marked with a vertical line (events), over the lines.
    pub marks: Vec<Mark>,
}

/// A shaded x range.
#[derive(Clone, Debug, PartialEq)]
pub struct Band {
    /// Where it begins and ends.
    pub from: f64,
    /// Where it ends.
    pub to: f64,
    /// Its CSS class (what it is, for tests and styling).
    pub class: &'static str,
    /// Its colour.
    pub color: &'static str,
    /// Its tooltip.
    pub title: String,
}

/// A moment marked on the x axis.
#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    /// Where.
    pub at: f64,
    /// Its label (shown cut short) and tooltip.
    pub label: String,
}

/// Most characters of a mark's label drawn on the chart (the tooltip
/// has it whole).
const MARK_LABEL: usize = 18;

const W: f64 = 1100.0;
const H: f64 = 300.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 34.0;
const BOTTOM: f64 = 40.0;
const FONT: f64 = 11.0;
/// Width of one character, in em, for layout (see the module doc).
const CHAR_EM: f64 = 0.62;

/// Escapes text for HTML and SVG.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A value for an axis label or a table cell.
pub fn label(v: f64, unit: Unit) -> String {
    match unit {
        Unit::Seconds => {
            if v == 0.0 {
                "0".into()
            } else if v.abs() < 1e-3 {
                format!("{}µs", trim(v * 1e6))
            } else if v.abs() < 1.0 {
                format!("{}ms", trim(v * 1e3))
            } else {
                format!("{}s", trim(v))
            }
        }
        Unit::Count => {
            if v.abs() >= 1e6 {
                format!("{}M", trim(v / 1e6))
            } else if v.abs() >= 1e4 {
                format!("{}k", trim(v / 1e3))
            } else {
                trim(v)
            }
        }
        Unit::Bytes => {
            let (name, size) = [("GiB", 1073741824.0), ("MiB", 1048576.0), ("KiB", 1024.0)]
                .into_iter()
                .find(|(_, b)| v.abs() >= *b)
                .unwrap_or(("B", 1.0));
            format!("{}{name}", trim(v / size))
        }
        Unit::Percentile => {
            // x = log10(1/(1-q)): 0 → 0%, 1 → 90%, 2 → 99%, 3 → 99.9% …
            if v.fract() == 0.0 && v >= 2.0 {
                format!("99.{}%", "9".repeat(v as usize - 2)).replace(".%", "%")
            } else {
                trim((1.0 - 10f64.powf(-v)) * 100.0) + "%"
            }
        }
    }
}

/// Up to 3 significant decimals, no trailing zeros.
fn trim(v: f64) -> String {
    let s = if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Ticks of a log axis over [lo, hi] (both > 0): powers of ten, with 2
/// and 5 between them when the range spans fewer than three decades.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let steps: &[f64] = if b - a < 3 { &[1.0, 2.0, 5.0] } else { &[1.0] };
    (a..=b)
        .flat_map(|e| steps.iter().map(move |m| m * 10f64.powi(e)))
        .filter(|t| *t >= lo * 0.999 && *t <= hi * 1.001)
        .collect()
}

/// Ticks at 1-2-5 steps covering [lo, hi], about `n` of them.
fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let span = (hi - lo).max(f64::MIN_POSITIVE);
    let raw = span / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi + step * 1e-9 {
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    out
}

impl Chart {
    /// The chart as an `<svg>` element.
    pub fn svg(&self) -> String {
        let log_y = self.log_y;
        let finite = |p: &&(f64, f64)| p.0.is_finite() && p.1.is_finite() && (!log_y || p.1 > 0.0);
        let all: Vec<(f64, f64)> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().filter(finite).copied())
            .collect();
        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" font-family="sans-serif" font-size="{FONT}"><title>{}</title>"#,
            esc(&self.title)
        );
        let _ = write!(
            s,
            r##"<rect width="{W}" height="{H}" fill="#fff"/><text x="{LEFT}" y="18" font-size="14" font-weight="bold">{}</text>"##,
            esc(&self.title)
        );
        if all.is_empty() {
            let _ = write!(
                s,
                r##"<text x="{}" y="{}" text-anchor="middle" fill="#888">no data</text></svg>"##,
                W / 2.0,
                H / 2.0
            );
            return s;
        }
        let (mut x0, mut x1) = all
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
        if self.x_unit == Unit::Percentile {
            x0 = 0.0;
            x1 = x1.max(5.0);
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        let mut y1 = all.iter().fold(0f64, |a, p| a.max(p.1));
        if y1 <= 0.0 {
            y1 = 1.0;
        }
        // Linear: from 0 to a round number above the top. Log: from the
        // decade below the lowest value to the decade above the highest.
        type Scale = fn(f64) -> f64;
        let (y0, y1, yt, ty): (f64, f64, Vec<f64>, Scale) = if log_y {
            let lo = all.iter().fold(f64::MAX, |a, p| a.min(p.1));
            let (lo, hi) = (10f64.powf(lo.log10().floor()), 10f64.powf(y1.log10().ceil()));
            let hi = if hi <= lo { lo * 10.0 } else { hi };
            (lo.log10(), hi.log10(), log_ticks(lo, hi), f64::log10)
        } else {
            let yt = ticks(0.0, y1 * 1.05, 5);
            (0.0, yt.last().copied().unwrap_or(y1).max(y1), yt, |v| v)
        };
        let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
        let px = |x: f64| LEFT + (x - x0) / (x1 - x0) * pw;
        let py = |y: f64| TOP + ph - (ty(y) - y0) / (y1 - y0) * ph;
        // Grid and y labels.
        for t in &yt {
            let y = py(*t);
            let _ = write!(
                s,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e4e4e4"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#444">{}</text>"##,
                LEFT + pw,
                LEFT - 6.0,
                y + FONT / 3.0,
                esc(&label(*t, self.y_unit))
            );
        }
        let xt = if self.x_unit == Unit::Percentile {
            (0..=x1.floor() as i64).map(|v| v as f64).collect()
        } else {
            ticks(x0, x1, 10)
        };
        for t in xt.iter().filter(|t| **t >= x0 && **t <= x1) {
            let x = px(*t);
            // A label at the right edge would be cut: it ends there instead.
            let anchor = if x > LEFT + pw - 30.0 { "end" } else { "middle" };
            let _ = write!(
                s,
                r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#f0f0f0"/><text x="{x:.1}" y="{:.1}" text-anchor="{anchor}" fill="#444">{}</text>"##,
                TOP + ph,
                TOP + ph + 15.0,
                esc(&label(*t, self.x_unit))
            );
        }
        let _ = write!(
            s,
            r##"<rect x="{LEFT}" y="{TOP}" width="{pw:.1}" height="{ph:.1}" fill="none" stroke="#999"/><text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#444">{}</text>"##,
            LEFT + pw / 2.0,
            H - 6.0,
            esc(&self.x_label)
        );
        // Gaps: a shaded band each, under the lines.
        for (a, b) in &self.gaps {
            let (a, b) = (a.max(x0), b.min(x1));
            if b > a {
                let _ = write!(
                    s,
                    r##"<rect class="gap" x="{:.1}" y="{TOP}" width="{:.1}" height="{ph:.1}" fill="#f3d9d9"><title>soakd was not running ({:.0} s lost in a restart)</title></rect>"##,
                    px(a),
                    (px(b) - px(a)).max(1.0),
                    b - a
                );
            }
        }
        for b in &self.bands {
            let (a, z) = (b.from.max(x0), b.to.min(x1));
            if z >= a {
                let _ = write!(
                    s,
                    r##"<rect class="{}" x="{:.1}" y="{TOP}" width="{:.1}" height="{ph:.1}" fill="{}" fill-opacity="0.55"><title>{}</title></rect>"##,
                    b.class,
                    px(a),
                    (px(z) - px(a)).max(2.0),
                    b.color,
                    esc(&b.title)
                );
            }
        }
        // Lines: one polyline per unbroken run of finite points.
        for ser in &self.series {
            let dash = if ser.dashed { r#" stroke-dasharray="6 4""# } else { "" };
            let mut run: Vec<String> = Vec::new();
            let flush = |run: &mut Vec<String>, s: &mut String| {
                if run.len() == 1 {
                    // A lone point: a dot, so it is seen.
                    let _ = write!(
                        s,
                        r#"<circle cx="{}" r="2" fill="{}"/>"#,
                        run[0].replace(',', r#"" cy=""#),
                        ser.color
                    );
                } else if run.len() > 1 {
                    let _ = write!(
                        s,
                        r#"<polyline fill="none" stroke="{}" stroke-width="1.6"{dash} points="{}"/>"#,
                        ser.color,
                        run.join(" ")
                    );
                }
                run.clear();
            };
            for p in &ser.points {
                if finite(&p) {
                    run.push(format!("{:.1},{:.1}", px(p.0), py(p.1)));
                } else {
                    flush(&mut run, &mut s);
                }
            }
            flush(&mut run, &mut s);
        }
        for m in self.marks.iter().filter(|m| m.at >= x0 && m.at <= x1) {
            let x = px(m.at);
            let short: String = m.label.chars().take(MARK_LABEL).collect();
            let _ = write!(
                s,
                r##"<g class="event"><title>{}</title><line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#6a3d9a" stroke-width="1.2" stroke-dasharray="3 3"/><text x="{:.1}" y="{:.1}" fill="#6a3d9a" font-size="10">{}</text></g>"##,
                esc(&m.label),
                TOP + ph,
                x + 3.0,
                TOP + 11.0,
                esc(&short)
            );
        }
        // Legend, right-aligned above the plot.
        let mut x = W - RIGHT;
        for ser in self.series.iter().rev() {
            let w = ser.name.chars().count() as f64 * FONT * CHAR_EM;
            x -= w;
            let _ = write!(
                s,
                r##"<text x="{x:.1}" y="{:.1}" fill="#222">{}</text>"##,
                TOP - 8.0,
                esc(&ser.name)
            );
            let dash = if ser.dashed { r#" stroke-dasharray="4 3""# } else { "" };
            let _ = write!(
                s,
                r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{}" stroke-width="2"{dash}/>"#,
                x - 24.0,
                TOP - 12.0,
                x - 6.0,
                TOP - 12.0,
                ser.color
            );
            x -= 36.0;
        }
        s.push_str("</svg>");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.0, 0.0042, 4), vec![0.0, 0.002, 0.004]);
    }

    #[test]
    fn labels() {
        assert_eq!(label(0.0025, Unit::Seconds), "2.5ms");
        assert_eq!(label(0.000_25, Unit::Seconds), "250µs");
        assert_eq!(label(12_000.0, Unit::Count), "12k");
        assert_eq!(label(2.0, Unit::Percentile), "99%");
        assert_eq!(label(5.0, Unit::Percentile), "99.999%");
        assert_eq!(label(1.0, Unit::Percentile), "90%");
        assert_eq!(label(0.0, Unit::Percentile), "0%");
        assert_eq!(label(3.0 * 1048576.0, Unit::Bytes), "3MiB");
        assert_eq!(label(1536.0, Unit::Bytes), "1.5KiB");
        assert_eq!(log_ticks(0.001, 0.1), vec![0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1]);
        assert_eq!(log_ticks(1e-5, 1.0), vec![1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0]);
        assert_eq!(esc("<a href='x'>&"), "&lt;a href=&#39;x&#39;&gt;&amp;");
    }

    #[test]
    fn a_chart_has_its_title_lines_and_breaks() {
        let c = Chart {
            title: "Latency <over> time".into(),
            x_label: "seconds".into(),
            x_unit: Unit::Count,
            y_unit: Unit::Seconds,
            log_y: false,
            series: vec![Series {
                name: "p99".into(),
                color: "#c00",
                dashed: false,
                points: vec![(0.0, 0.001), (1.0, 0.002), (2.0, f64::NAN), (3.0, 0.001), (4.0, 0.003)],
            }],
            gaps: vec![(1.5, 2.5)],
            bands: vec![Band {
                from: 3.0,
                to: 3.5,
                class: "outage",
                color: "#f4a6a6",
                title: "outage <1>".into(),
            }],
            marks: vec![Mark {
                at: 2.9,
                label: "a deploy with a long name".into(),
            }],
        };
        let svg = c.svg();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("<title>Latency &lt;over&gt; time</title>"));
        assert_eq!(svg.matches("<polyline").count(), 2, "{svg}");
        assert_eq!(svg.matches(r#"<rect class="gap""#).count(), 1, "{svg}");
        assert_eq!(svg.matches(r#"<rect class="outage""#).count(), 1, "{svg}");
        assert!(svg.contains("<title>outage &lt;1&gt;</title>"), "{svg}");
        assert!(
            svg.contains(r#"<g class="event"><title>a deploy with a long name</title>"#),
            "{svg}"
        );
        assert!(svg.contains(">a deploy with a lo<"), "cut short: {svg}");
        let log = Chart {
            log_y: true,
            ..c.clone()
        }
        .svg();
        assert_eq!(log.matches("<polyline").count(), 2, "{log}");
        assert!(log.contains(">1ms<") && log.contains(">10ms<"), "{log}");
        let empty = Chart { series: vec![], ..c }.svg();
        assert!(empty.contains("no data"));
    }
}
