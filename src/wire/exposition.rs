//! A parser for the Prometheus text exposition format 0.0.4, the format of
//! soakd's `/metrics`, and of the servers the watch scrapes.
//!
//! This is soakd's only exposition parser: `soakd status` reads its two
//! scrapes with it, the server watch (`--target-metrics`) reads the
//! target's exposition with [`scan`], and the integration tests read
//! `/metrics` with it, which is why it is public (as
//! `soakd::statuscmd::exposition`).
//!
//! It reads samples and nothing else: `# HELP`, `# TYPE` and other `#`
//! lines are skipped without checking them against the samples, and a
//! series that appears twice is returned twice. [`parse`] is strict text
//! 0.0.4 (soakd's own output must be exactly that); [`scan`] also takes
//! what an OpenMetrics endpoint writes (an exemplar after the value, a
//! timestamp in float seconds, `# EOF`), and builds samples only of the
//! metrics asked for, so a node exporter's thousand lines cost a name
//! scan each.

use std::fmt::Write as _;

/// One sample line: `name{label="value",...} value [timestamp]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Metric name, e.g. `soakd_responses_total`.
    pub name: String,
    /// Labels in the order they appeared, values unescaped.
    pub labels: Vec<(String, String)>,
    /// The value; `NaN`, `+Inf` and `-Inf` come through as such.
    pub value: f64,
    /// The timestamp in milliseconds since the Unix epoch, when the line
    /// carried one (soakd's own exposition never does).
    pub timestamp_ms: Option<i64>,
}

impl Sample {
    /// The value of label `name`, if the sample has it.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// The series this sample belongs to, written as in the exposition:
    /// `name` alone without labels, otherwise `name{k="v",...}` with the
    /// labels in their original order and `\`, `"` and newlines in values
    /// escaped. For text as soakd writes it (no blanks inside the braces)
    /// this is the line up to the value, so it works as a lookup key for
    /// series written out by hand.
    pub fn series(&self) -> String {
        let mut out = self.name.clone();
        if self.labels.is_empty() {
            return out;
        }
        out.push('{');
        for (i, (k, v)) in self.labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            // Writing to a String cannot fail.
            let _ = write!(out, "{k}=\"");
            for c in v.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '"' => out.push_str("\\\""),
                    '\n' => out.push_str("\\n"),
                    c => out.push(c),
                }
            }
            out.push('"');
        }
        out.push('}');
        out
    }
}

/// Why a text is not an exposition: the first line that is not a sample.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct ParseError {
    /// The 1-based number of the offending line.
    pub line: usize,
    /// What was wrong with it.
    pub reason: String,
}

/// Parses exposition text into its samples, in order.
///
/// Blank lines and lines starting with `#` are skipped. A sample line is
/// `name [{labels}] value [timestamp]`, with blanks allowed between the
/// parts and inside the braces, an optional trailing comma in the label
/// list, and `\r\n` line ends. Label values may contain commas, braces and
/// the escapes `\"`, `\\` and `\n`; an undefined escape is kept as written.
/// Values are floats including `NaN`, `+Inf` and `-Inf`; timestamps are
/// integers. Anything else fails with the line number.
pub fn parse(text: &str) -> Result<Vec<Sample>, ParseError> {
    let mut samples = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let sample = parse_line(line).map_err(|reason| ParseError { line: i + 1, reason })?;
        samples.push(sample);
    }
    Ok(samples)
}

/// Reads exposition text as a scraped server writes it (text 0.0.4 or
/// OpenMetrics, see the module doc) and hands `each` the samples whose
/// metric name `want` says yes to, in order. Every line must start with a
/// metric name (an HTML page or JSON fails at its first line); only the
/// wanted lines are parsed further.
pub fn scan(text: &str, mut want: impl FnMut(&str) -> bool, mut each: impl FnMut(Sample)) -> Result<(), ParseError> {
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name_end = scan_name(line.as_bytes(), 0, true);
        if name_end == 0 {
            return Err(ParseError {
                line: i + 1,
                reason: "expected a metric name".to_string(),
            });
        }
        if !want(&line[..name_end]) {
            continue;
        }
        each(parse_line_as(line, true).map_err(|reason| ParseError { line: i + 1, reason })?);
    }
    Ok(())
}

/// Parses one trimmed sample line.
fn parse_line(line: &str) -> Result<Sample, String> {
    parse_line_as(line, false)
}

/// Parses one trimmed sample line; `open_metrics`: a timestamp may be in
/// float seconds (kept as milliseconds).
fn parse_line_as(line: &str, open_metrics: bool) -> Result<Sample, String> {
    let bytes = line.as_bytes();
    let name_end = scan_name(bytes, 0, true);
    if name_end == 0 {
        return Err("expected a metric name".to_string());
    }
    let name = line[..name_end].to_string();

    let mut pos = name_end;
    let mut labels = Vec::new();
    let brace = skip_blanks(bytes, pos);
    if bytes.get(brace) == Some(&b'{') {
        pos = parse_labels(line, brace + 1, &mut labels)?;
    }

    let mut rest = &line[pos..];
    if open_metrics && let Some((value, _exemplar)) = rest.split_once(" # ") {
        // An exemplar (` # {trace_id="…"} 1 …`) follows the value.
        rest = value;
    }
    if !rest.starts_with([' ', '\t']) {
        return Err("expected whitespace before the value".to_string());
    }
    let mut fields = rest.split_ascii_whitespace();
    let value = fields.next().ok_or("missing value")?;
    let value = parse_value(value).ok_or_else(|| format!("invalid value {value:?}"))?;
    let timestamp_ms = match fields.next() {
        None => None,
        Some(ts) if open_metrics => Some(
            ts.parse::<f64>()
                .ok()
                .filter(|t| t.is_finite())
                .map(|t| (t * 1e3) as i64)
                .ok_or_else(|| format!("invalid timestamp {ts:?}"))?,
        ),
        Some(ts) => Some(ts.parse::<i64>().map_err(|_| format!("invalid timestamp {ts:?}"))?),
    };
    if let Some(extra) = fields.next() {
        return Err(format!("unexpected {extra:?} after the value"));
    }
    Ok(Sample {
        name,
        labels,
        value,
        timestamp_ms,
    })
}

/// Parses the label list that starts just after `{` at `start` into
/// `labels`; returns the index after the closing `}`.
fn parse_labels(line: &str, start: usize, labels: &mut Vec<(String, String)>) -> Result<usize, String> {
    let bytes = line.as_bytes();
    let mut pos = skip_blanks(bytes, start);
    loop {
        if bytes.get(pos) == Some(&b'}') {
            return Ok(pos + 1);
        }
        let key_end = scan_name(bytes, pos, false);
        if key_end == pos {
            return Err(format!("expected a label name or '}}' at column {}", pos + 1));
        }
        let key = line[pos..key_end].to_string();
        pos = skip_blanks(bytes, key_end);
        if bytes.get(pos) != Some(&b'=') {
            return Err(format!("expected '=' after label {key}"));
        }
        pos = skip_blanks(bytes, pos + 1);
        if bytes.get(pos) != Some(&b'"') {
            return Err(format!("expected '\"' to open the value of label {key}"));
        }
        let (value, next) = scan_quoted(line, pos + 1).ok_or_else(|| format!("unterminated value of label {key}"))?;
        labels.push((key, value));
        pos = skip_blanks(bytes, next);
        match bytes.get(pos) {
            Some(b',') => pos = skip_blanks(bytes, pos + 1),
            Some(b'}') => return Ok(pos + 1),
            _ => return Err(format!("expected ',' or '}}' at column {}", pos + 1)),
        }
    }
}

/// End of the metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`, when `metric`) or
/// label name (the same without colons) starting at `start`; `start` when
/// there is none.
fn scan_name(bytes: &[u8], start: usize, metric: bool) -> usize {
    let mut i = start;
    while let Some(&b) = bytes.get(i) {
        let ok = b.is_ascii_alphabetic() || b == b'_' || (metric && b == b':') || (i > start && b.is_ascii_digit());
        if !ok {
            break;
        }
        i += 1;
    }
    i
}

/// Index of the first byte at or after `i` that is not a space or tab.
fn skip_blanks(bytes: &[u8], mut i: usize) -> usize {
    while matches!(bytes.get(i), Some(b' ' | b'\t')) {
        i += 1;
    }
    i
}

/// Reads a label value whose opening quote is just before `start`: the
/// unescaped value and the index after the closing quote, or `None` when the
/// line ends first.
fn scan_quoted(line: &str, start: usize) -> Option<(String, usize)> {
    let mut value = String::new();
    let mut chars = line[start..].char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((value, start + i + 1)),
            '\\' => match chars.next()?.1 {
                'n' => value.push('\n'),
                '"' => value.push('"'),
                '\\' => value.push('\\'),
                other => {
                    value.push('\\');
                    value.push(other);
                }
            },
            other => value.push(other),
        }
    }
    None
}

/// A sample value: the format's `NaN`, `+Inf`, `-Inf`, or a float.
fn parse_value(s: &str) -> Option<f64> {
    match s {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => s.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A label list for the tables.
    fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn sample_lines_table() {
        type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], f64, Option<i64>);
        let cases: &[Case<'_>] = &[
            ("up 1", "up", &[], 1.0, None),
            ("process_open_fds 12", "process_open_fds", &[], 12.0, None),
            ("up 1 1712345678000", "up", &[], 1.0, Some(1_712_345_678_000)),
            ("up 1 -5", "up", &[], 1.0, Some(-5)),
            ("x:y_z9 -3.5e2", "x:y_z9", &[], -350.0, None),
            ("_u 1e-3", "_u", &[], 0.001, None),
            ("m{} 2", "m", &[], 2.0, None),
            ("m {a=\"1\"} 2", "m", &[("a", "1")], 2.0, None),
            (
                "soakd_build_info{version=\"0.1.0\"} 1",
                "soakd_build_info",
                &[("version", "0.1.0")],
                1.0,
                None,
            ),
            ("m{a=\"1\",b=\"2\",} 3", "m", &[("a", "1"), ("b", "2")], 3.0, None),
            (
                "m{ a = \"1\" , b=\"2\" }   5",
                "m",
                &[("a", "1"), ("b", "2")],
                5.0,
                None,
            ),
            ("\tm\t6\t", "m", &[], 6.0, None),
            ("m{a=\"\"} 0", "m", &[("a", "")], 0.0, None),
            (
                r#"m{a="say \"hi\", then go"} 7"#,
                "m",
                &[("a", "say \"hi\", then go")],
                7.0,
                None,
            ),
            (r#"m{b="back\\slash"} 7"#, "m", &[("b", "back\\slash")], 7.0, None),
            (r#"m{c="two\nlines"} 7"#, "m", &[("c", "two\nlines")], 7.0, None),
            (r#"m{d="{}=,# x"} 7"#, "m", &[("d", "{}=,# x")], 7.0, None),
            (r#"m{e="\t kept"} 7"#, "m", &[("e", "\\t kept")], 7.0, None),
            ("m{f=\"größe\"} 7", "m", &[("f", "größe")], 7.0, None),
            ("b{le=\"+Inf\"} +Inf", "b", &[("le", "+Inf")], f64::INFINITY, None),
            ("c -Inf", "c", &[], f64::NEG_INFINITY, None),
            ("d{quantile=\"0.5\"} NaN", "d", &[("quantile", "0.5")], f64::NAN, None),
            ("e NaN 17", "e", &[], f64::NAN, Some(17)),
        ];
        for (line, name, want_labels, value, ts) in cases {
            let got = parse(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
            assert_eq!(got.len(), 1, "{line:?}");
            let s = &got[0];
            assert_eq!(s.name, *name, "{line:?}");
            assert_eq!(s.labels, labels(want_labels), "{line:?}");
            assert!(
                s.value == *value || (s.value.is_nan() && value.is_nan()),
                "{line:?}: {}",
                s.value
            );
            assert_eq!(s.timestamp_ms, *ts, "{line:?}");
        }
    }

    #[test]
    fn rejects_table() {
        let cases: &[(&str, usize, &str)] = &[
            ("<html><body>hi</body></html>", 1, "metric name"),
            ("{\"json\": true}", 1, "metric name"),
            ("9m 1", 1, "metric name"),
            ("ok 1\nm{a=\"1\" 3", 2, "expected ',' or '}'"),
            ("m{a=\"1} 3", 1, "unterminated"),
            ("m{a=1} 3", 1, "'\"'"),
            ("m{a} 3", 1, "'=' after label a"),
            ("m{a:b=\"1\"} 3", 1, "'=' after label a"),
            ("m{,} 3", 1, "label name"),
            ("m", 1, "whitespace"),
            ("m{a=\"1\"}3", 1, "whitespace"),
            ("m abc", 1, "invalid value"),
            ("m 1,5", 1, "invalid value"),
            ("m 1 2 3", 1, "unexpected"),
            ("m 1 soon", 1, "timestamp"),
            ("m 1 1.5", 1, "timestamp"),
            ("# HELP m x\n\n# TYPE m gauge\nm 1\nHTTP/1.1 200 OK", 5, "whitespace"),
        ];
        for (text, line, want) in cases {
            let err = parse(text).unwrap_err();
            assert_eq!(err.line, *line, "{text:?}: {err}");
            assert!(err.reason.contains(want), "{text:?}: {err}");
            assert!(err.to_string().starts_with(&format!("line {line}: ")), "{err}");
        }
    }

    #[test]
    fn comments_and_blank_lines_are_skipped() {
        let text = "# HELP soakd_healthy 1 while healthy.\r\n\
                    # TYPE soakd_healthy gauge\r\n\
                    \r\n\
                    #no space after the hash, still a comment\n\
                    \x20  # indented comment\n\
                    soakd_healthy 1\r\n\
                    # HELP process_open_fds Number of open file descriptors.\n\
                    process_open_fds 9\n";
        let samples = parse(text).unwrap();
        let got: Vec<(&str, f64)> = samples.iter().map(|s| (s.name.as_str(), s.value)).collect();
        assert_eq!(got, vec![("soakd_healthy", 1.0), ("process_open_fds", 9.0)]);
        assert_eq!(parse("").unwrap(), vec![]);
        assert_eq!(parse("# only a comment\n").unwrap(), vec![]);
    }

    #[test]
    fn label_lookup() {
        let s = &parse("m{target=\"a\",code=\"2xx\"} 1").unwrap()[0];
        assert_eq!(s.label("target"), Some("a"));
        assert_eq!(s.label("code"), Some("2xx"));
        assert_eq!(s.label("kind"), None);
    }

    #[test]
    fn series_round_trips() {
        let cases: &[(&str, &str)] = &[
            ("up 1", "up"),
            ("m{} 1", "m"),
            (
                "soakd_connections{target=\"127.0.0.1:8080\",state=\"open\"} 1000",
                "soakd_connections{target=\"127.0.0.1:8080\",state=\"open\"}",
            ),
            ("m{ b = \"2\" , a=\"1\", } 3 17", "m{b=\"2\",a=\"1\"}"),
            (
                r#"m{t="a \"quoted\" back\\slash\nnewline"} 1"#,
                r#"m{t="a \"quoted\" back\\slash\nnewline"}"#,
            ),
        ];
        for (line, series) in cases {
            let s = &parse(line).unwrap()[0];
            assert_eq!(s.series(), *series, "{line:?}");
            let again = &parse(&format!("{} 0", s.series())).unwrap()[0];
            assert_eq!((&again.name, &again.labels), (&s.name, &s.labels), "{line:?}");
        }
    }

    #[test]
    fn scan_takes_open_metrics_and_only_what_is_wanted() {
        let text = "# HELP process_resident_memory_bytes Resident memory.\n\
                    # TYPE process_resident_memory_bytes gauge\n\
                    process_resident_memory_bytes 1.048576e+06\n\
                    go_gc_duration_seconds_sum 0.25 1712345678.5\n\
                    http_requests_total{code=\"200\"} 17 # {trace_id=\"a # b\"} 1 1712345678.1\n\
                    go_goroutines 12\n\
                    # EOF\n";
        let mut got = Vec::new();
        scan(text, |n| n != "go_goroutines", |s| got.push(s)).unwrap();
        let names: Vec<(&str, f64, Option<i64>)> =
            got.iter().map(|s| (s.name.as_str(), s.value, s.timestamp_ms)).collect();
        assert_eq!(
            names,
            vec![
                ("process_resident_memory_bytes", 1_048_576.0, None),
                ("go_gc_duration_seconds_sum", 0.25, Some(1_712_345_678_500)),
                ("http_requests_total", 17.0, None),
            ]
        );
        assert_eq!(got[2].label("code"), Some("200"));
        // A label value holding " # " is not an exemplar.
        let mut v = Vec::new();
        scan("m{a=\"x # y\"} 3\n", |_| true, |s| v.push(s)).unwrap();
        assert_eq!((v[0].label("a"), v[0].value), (Some("x # y"), 3.0));
    }

    #[test]
    fn scan_refuses_what_is_not_an_exposition() {
        for (text, line) in [
            ("<!doctype html>\n<html>", 1),
            ("{\"status\":\"success\"}", 1),
            ("up 1\n\u{0}\u{1}garbage", 2),
        ] {
            let err = scan(text, |_| false, |_| {}).unwrap_err();
            assert_eq!(err.line, line, "{text:?}: {err}");
        }
        // A wanted line that does not parse names its line.
        let err = scan("up 1\nup{a=\"1\" 2\n", |_| true, |_| {}).unwrap_err();
        assert_eq!(err.line, 2, "{err}");
    }
}
