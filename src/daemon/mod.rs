//! Wiring: preflight, then the observers, then the engine, then the
//! report, then the linger.
//!
//! The one place that knows every layer below it. The engine runs the
//! plan and feeds the observers; the report is built from what the engine
//! leaves and written (JSON, HTML, the baseline's verdict) as soon as the
//! workers are gone, before the metrics linger (`--metrics-linger`): a
//! user waiting for the file does not wait out the linger, and a signal
//! during it cannot cost the report. A reload closure, when the plan came
//! from a file, is handed through untouched.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::engine::{self, Ended, Reload};
use crate::fsio::{self, Fallback};
use crate::observe::Observers;
use crate::observe::baseline::Reference;
use crate::plan::{Plan, ReportDest};
use crate::report::Report;
use crate::verdict::{Comparison, Options, Run, compare};
use crate::{Error, preflight, state};

pub mod processes;

/// Runs `plan` to its end and returns the final report, writing nothing
/// (the library's [`crate::run`]). Preflight (open files, ports, source
/// addresses, output paths) and the metrics bind happen before any
/// connection is opened; their failures are exit 2.
pub fn run(plan: Plan, reload: Option<Reload>) -> Result<Report, Error> {
    let baseline = load_baseline(&plan)?;
    run_then(plan, reload, baseline.map(|b| b.reference), Checked::Here, |_| Ok(()))
}

/// `--baseline`, read at start: the run to compare with at the end and
/// what the live comparison judges each window against.
pub(crate) struct Baseline {
    pub(crate) run: Run,
    reference: Reference,
    pub(crate) tolerance: f64,
}

/// Reads `--baseline` (its report, its interval log) and checks it pairs
/// with the plan, before anything opens: a typo must not cost a soak. A
/// load that differs is said here, once.
pub(crate) fn load_baseline(plan: &Plan) -> Result<Option<Baseline>, Error> {
    let Some(b) = &plan.baseline else { return Ok(None) };
    let run = Run::load(&b.report, b.hdr_log.as_deref(), "--baseline", "--baseline-hdr-log")?;
    let reference = crate::verdict::live::reference(plan, &run, b)?;
    if !reference.load_differs.is_empty() {
        eprintln!(
            "soakd: --baseline {}: its load differs from this run's ({}); a comparison of different loads is not a regression verdict: its verdicts are shown, but neither abort the run nor fail it",
            run.label,
            reference.load_differs.join("; ")
        );
    }
    Ok(Some(Baseline {
        run,
        reference,
        tolerance: b.tolerance,
    }))
}

/// `soakd run`: the run, then its outputs as soon as it is over (the
/// summary on stderr, the `--report`, the comparison with `--baseline`,
/// the `--html-report`), then the linger, then the verdict as an error
/// (exit 3) or `Ok`. The baseline is read and the HTML path checked before
/// anything connects: a typo must not cost a soak.
pub fn run_to_end(plan: Plan, reload: Option<Reload>, html: Option<PathBuf>) -> Result<(), Error> {
    check_html(html.as_deref())?;
    let baseline = load_baseline(&plan)?;
    let (reference, base) = match baseline {
        Some(b) => (Some(b.reference), Some((b.run, b.tolerance))),
        None => (None, None),
    };
    let dest = plan.report.clone();
    let hdr_log = plan.hdr_log.clone();
    let mut comparison = None;
    let base_report = base.as_ref().map(|(r, _)| r.report.clone());
    let report = run_then(plan, reload, reference, Checked::Here, |report| {
        // Every output is tried even when one fails: a full disk for the
        // JSON must not also cost the HTML page or the verdict.
        let written = output(report, dest.as_ref());
        let compared = against_baseline(report, hdr_log.as_deref(), base);
        let page = match &html {
            Some(path) => write_html(
                report,
                base_report.as_ref(),
                hdr_log.as_deref(),
                path,
                compared.as_ref().ok().and_then(Option::as_ref),
            ),
            None => Ok(()),
        };
        comparison = compared?;
        written.and(page)
    })?;
    verdicts(&report, comparison.as_ref())
}

/// `--html-report`'s path, checked before anything connects.
pub(crate) fn check_html(html: Option<&Path>) -> Result<(), Error> {
    let Some(path) = html else { return Ok(()) };
    fsio::check_writable(path).map_err(|e| {
        Error::Usage(format!(
            "--html-report {}: cannot be written ({e}); give a writable path",
            path.display()
        ))
    })
}

/// Who ran preflight for a plan.
enum Checked {
    /// This process: every check.
    Here,
    /// The parent of `soakd run --processes N`, for every share before it
    /// started any: a share only raises and checks its own open-file limit.
    /// Each check of ports reads the kernel's whole socket table
    /// (/proc/net/tcp); N shards reading it while the others ramp cost
    /// seconds of CPU each at half a million sockets and left the last
    /// shards minutes behind.
    ByParent,
}

/// One share of `soakd run --processes N` ([`processes`]): the run, its
/// report written where the parent reads it, the verdict as the exit code;
/// no status line and no summary (the parent prints the merged one).
pub(crate) fn run_shard(plan: Plan, reload: Option<Reload>) -> Result<(), Error> {
    crate::observe::silence();
    let dest = plan.report.clone();
    let report = run_then(plan, reload, None, Checked::ByParent, |report| match &dest {
        Some(ReportDest::File(path)) => write_whole(path, (report.to_json() + "\n").as_bytes(), "report"),
        _ => Ok(()),
    })?;
    verdicts(&report, None)
}

/// Runs `plan`, builds the report, hands it to `at_end` before the
/// linger, then lingers. An error of `at_end` is returned after the
/// linger (the metrics still get their last scrape).
fn run_then(
    plan: Plan,
    reload: Option<Reload>,
    baseline: Option<Reference>,
    checked: Checked,
    at_end: impl FnOnce(&Report) -> Result<(), Error>,
) -> Result<Report, Error> {
    let mut plan = plan;
    // A gRPC schema from the server's reflection service: fetched before
    // anything else opens, its refusals bad input like the rest.
    crate::reflection::complete(&mut plan)?;
    match checked {
        Checked::Here => preflight::check(&plan)?,
        Checked::ByParent => preflight::check_own_limit(&plan)?,
    }
    // After preflight (a refused plan must not move a state aside), before
    // anything opens: a state that cannot be continued is bad input.
    let loaded = state::open(&plan)?;
    if let (Some(l), Some(sf)) = (&loaded, &plan.state) {
        eprintln!(
            "soakd: --state {}: continuing the soak at {} of its run ({} since its last checkpoint are lost)",
            sf.path.display(),
            humantime::format_duration(Duration::from_secs(l.now.as_secs())),
            humantime::format_duration(Duration::from_millis((l.now - l.checkpoint_at).as_millis() as u64))
        );
    }
    let mut observers = Observers::start(&plan, loaded.as_ref(), baseline)?;
    let baseline_section = observers.baseline_section();
    let resume = loaded.map(|l| engine::Resume {
        totals: l.totals,
        checkpoint_at: l.checkpoint_at,
        now: l.now,
    });
    let ended: Ended<'_> = engine::run(plan, reload, &mut observers, resume)?;
    let mut report = Report::build(ended.plan(), ended.totals(), ended.ran());
    report.aborted = ended.aborted().map(str::to_string);
    report.baseline = baseline_section.lock().unwrap_or_else(|p| p.into_inner()).take();
    let written = at_end(&report);
    ended.linger()?;
    written.map(|()| report)
}

/// Prints the summary on stderr and writes the report where `dest` says
/// (`soakd run`, `soakd demo`, `soakd merge`). A file is written whole or
/// not at all (see [`fsio`]); when it cannot be, the report goes to the
/// temporary directory or onto stderr, the place is named at once, and the
/// error (exit 1: the file asked for is missing) says where it went.
pub fn output(report: &Report, dest: Option<&ReportDest>) -> Result<(), Error> {
    eprint!("{}", report.summary());
    match dest {
        None => Ok(()),
        Some(ReportDest::Stdout) => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{}", report.to_json()).map_err(|e| Error::io("writing the report to stdout", e))
        }
        Some(ReportDest::File(path)) => write_whole(path, (report.to_json() + "\n").as_bytes(), "report"),
    }
}

/// Writes `bytes` to `path` whole, or to a fallback named on stderr (see
/// [`output`]). `kind` names the file in messages ("report", "HTML
/// report").
fn write_whole(path: &Path, bytes: &[u8], kind: &str) -> Result<(), Error> {
    // A whole HTML page on a terminal helps nobody; JSON can be saved from
    // a journal.
    let stderr_ok = kind == "report";
    let Err((e, went)) = fsio::write_with_fallback(path, bytes, kind, stderr_ok) else {
        return Ok(());
    };
    let instead = match &went {
        Fallback::File(f) => format!("the {kind} is in {} instead", f.display()),
        Fallback::Stderr => format!("the {kind} was printed on stderr instead"),
        Fallback::Lost => format!("the {kind} could not be written anywhere else either"),
    };
    eprintln!("soakd: cannot write the {kind} to {} ({e}); {instead}", path.display());
    Err(Error::io(
        format!("writing the {kind} to {} ({instead})", path.display()),
        e,
    ))
}

/// `--baseline`: this run compared with it (printed to stderr), if given.
pub(crate) fn against_baseline(
    report: &Report,
    hdr_log: Option<&Path>,
    baseline: Option<(Run, f64)>,
) -> Result<Option<Comparison>, Error> {
    let Some((base, tolerance)) = baseline else {
        return Ok(None);
    };
    let samples = match hdr_log {
        Some(p) => Some(crate::verdict::samples::read_log(p, "--hdr-log")?),
        None => None,
    };
    let new = Run::of(report.clone(), samples, "this run");
    let opts = Options {
        tolerance,
        ..Options::default()
    };
    let c = compare(&base, &new, &opts);
    eprint!("\n{}", c.text(&opts));
    if let Some(differs) = load_differs(report) {
        eprintln!("  (the loads differ: {differs}; a comparison, not a regression verdict)");
    }
    Ok(Some(c))
}

/// Where the baseline's load differs from the run's, as the report's
/// `baseline` section says (`None`: the same load, or no live section).
fn load_differs(report: &Report) -> Option<String> {
    let b = report.baseline.as_ref()?;
    (!b.load_differs.is_empty()).then(|| b.load_differs.join("; "))
}

/// The HTML page of a finished run, its spectrum from the run's HDR log
/// when it wrote one, the baseline's p50 and p99 drawn under its own.
pub(crate) fn write_html(
    report: &Report,
    baseline: Option<&Report>,
    hdr_log: Option<&Path>,
    path: &Path,
    comparison: Option<&Comparison>,
) -> Result<(), Error> {
    let spectrum = match hdr_log.map(crate::html::spectrum_of_log) {
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            eprintln!("soakd: {e}; the spectrum comes from the report instead");
            None
        }
        None => None,
    };
    let page = crate::html::render(&crate::html::Inputs {
        report,
        baseline,
        spectrum,
        verdicts: comparison.map(|c| c.rows.as_slice()),
    });
    write_whole(path, page.as_bytes(), "HTML report")?;
    eprintln!("soakd: HTML report written to {}", path.display());
    Ok(())
}

/// After `soakd run`: failed thresholds, an abort, a worse-than-baseline
/// comparison, folded into one exit code (3).
fn verdicts(report: &Report, comparison: Option<&Comparison>) -> Result<(), Error> {
    let mut bad: Vec<String> = Vec::new();
    if let Some(why) = &report.aborted {
        bad.push(format!("aborted: {why}"));
    }
    let failed: Vec<String> = report
        .failed_thresholds()
        .map(|t| match &t.workload {
            Some(w) => format!("{} ({w})", t.threshold),
            None => t.threshold.clone(),
        })
        .collect();
    if !failed.is_empty() {
        bad.push(format!("threshold(s) failed: {}", failed.join(", ")));
    }
    // A comparison of different loads is not a regression verdict.
    if let Some(Err(e)) = comparison.map(Comparison::verdict)
        && load_differs(report).is_none()
    {
        bad.push(e.to_string());
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(Error::Verdict(bad.join("; ")))
    }
}
