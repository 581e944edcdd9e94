//! The one reader of report files, and the one definition of the error
//! rate the report's readers (thresholds, `soakd compare`, the HTML page)
//! share.

use crate::stats::ErrorKind;

use super::Report;

/// Reads a report file for the commands that take one (`compare`,
/// `report`, `merge`, `run --baseline`): the one reader of report files.
/// Unreadable, not JSON, not a soakd report (an object with
/// `duration_seconds` and a `workloads` list with names) or not one this
/// version can read is a usage error naming `what` (the argument) and the
/// file. A report from an older soakd reads: what it lacks takes its
/// default (zero counts, `null` percentiles, no timeline).
pub fn read(path: &std::path::Path, what: &str) -> Result<Report, crate::Error> {
    let name = format!("{what} {}", path.display()).trim().to_string();
    let bad =
        |why: String| crate::Error::Usage(format!("{name}: {why}; give the JSON file `soakd run --report` wrote"));
    let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read it ({e})")))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(format!("not JSON ({e})")))?;
    let named_workloads = v
        .get("workloads")
        .and_then(serde_json::Value::as_array)
        .is_some_and(|ws| {
            ws.iter()
                .all(|w| w.get("name").and_then(serde_json::Value::as_str).is_some())
        });
    if v.get("duration_seconds").is_none() || !named_workloads {
        return Err(bad(
            "not a soakd report (no duration_seconds or no \"workloads\" list with names)".into(),
        ));
    }
    serde_json::from_value(v).map_err(|e| bad(format!("not a soakd report this version can read ({e})")))
}

/// Error kinds that are limits of the soakd host (ports, file
/// descriptors), not faults of the target: a comparison of two servers
/// leaves them out (docs/verdicts.md).
pub const HOST_ERRORS: [ErrorKind; 2] = ErrorKind::HOST;

/// Which errors an error rate counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    /// Every kind: the `error_rate` threshold (a dead target is 100%).
    Every,
    /// The target's: every kind but [`HOST_ERRORS`] (`soakd compare`).
    Target,
}

/// The error rate: errors ÷ (completed + errors), per attempt, so a failed
/// connect (which owes no request) counts as a failure and a dead target
/// is 100%, not a division by zero. `None` when nothing was attempted. The
/// one definition, for thresholds (live and at the end) and comparisons.
pub fn error_rate(completed: u64, errors: &[u64; ErrorKind::COUNT], counted: Counted) -> Option<f64> {
    let errors: u64 = ErrorKind::ALL
        .iter()
        .filter(|k| counted == Counted::Every || !HOST_ERRORS.contains(k))
        .map(|k| errors[*k as usize])
        .sum();
    let attempts = completed + errors;
    (attempts > 0).then(|| errors as f64 / attempts as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(tag: &str, text: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("soakd-read-{tag}-{}.json", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn an_older_report_reads_with_defaults() {
        // What a soakd before checks, TLS, histograms and the timeline wrote.
        let p = file(
            "old",
            r#"{"duration_seconds": 2.0, "requests": {"completed": 90},
                "errors": {"reset": 10}, "workloads": [{"name": "a", "url": "http://127.0.0.1:1/",
                "latency_seconds": {"count": 90, "p99": 0.002}}]}"#,
        );
        let r = read(&p, "REPORT").unwrap();
        std::fs::remove_file(&p).unwrap();
        assert_eq!(r.all.errors.get("reset"), 10);
        assert_eq!(r.all.errors.get("timeout"), 0);
        assert_eq!(r.all.checks.get("status"), 0);
        assert_eq!(r.workloads[0].figures.latency_seconds.p99, Some(0.002));
        assert_eq!(r.workloads[0].figures.latency_seconds.p50, None);
        assert!(r.timeline.points.is_empty() && r.thresholds.is_empty());
        assert_eq!((r.shard.index, r.shard.count), (Some(0), 1));
        assert_eq!(r.all.error_rate(Counted::Every), Some(0.1));
    }

    #[test]
    fn what_is_not_a_report_is_refused_by_name() {
        for (tag, text, why) in [
            ("notjson", "{", "not JSON"),
            ("other", r#"{"workloads": []}"#, "not a soakd report"),
            (
                "badtype",
                r#"{"duration_seconds": "x", "workloads": []}"#,
                "this version can read",
            ),
        ] {
            let p = file(tag, text);
            let e = read(&p, "--baseline").unwrap_err().to_string();
            std::fs::remove_file(&p).unwrap();
            assert!(e.starts_with(&format!("--baseline {}", p.display())), "{e}");
            assert!(e.contains(why) && e.contains("soakd run --report"), "{e}");
        }
    }

    #[test]
    fn host_errors_count_for_thresholds_not_for_comparisons() {
        let mut errors = [0; ErrorKind::COUNT];
        errors[ErrorKind::Reset as usize] = 5;
        errors[ErrorKind::AddrUnavailable as usize] = 10;
        errors[ErrorKind::FdLimit as usize] = 5;
        assert_eq!(error_rate(80, &errors, Counted::Every), Some(0.2));
        assert_eq!(error_rate(95, &errors, Counted::Target), Some(0.05));
        assert_eq!(error_rate(0, &[0; ErrorKind::COUNT], Counted::Every), None);
        // A dead target: every attempt failed.
        assert_eq!(error_rate(0, &errors, Counted::Every), Some(1.0));
    }
}
