//! The live status: one line refreshed every second on a terminal, a plain
//! log line every 10 s otherwise (journald, files, CI logs).
//!
//! Figures are over the interval since the previous line (rates, p50/p99),
//! plus the current connection levels, so a stall or an error burst shows
//! within a second instead of being averaged away.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use crate::report::human;
use crate::stats::Gauges;
use crate::stats::Totals;
use crate::stats::WorkloadStats;

/// Prints the status line.
#[derive(Debug)]
pub struct StatusLine {
    tty: bool,
    every: Duration,
    last: Duration,
    last_errors: u64,
    shown: bool,
    /// The interval's sum, kept from line to line (see
    /// [`Totals::take_interval`]); none in a shard of `soakd run
    /// --processes N`, which prints no line of its own (see [`silence`]).
    interval: Option<WorkloadStats>,
}

/// Set once by a shard of `soakd run --processes N` before its run: N
/// status lines on one terminal would only overwrite each other, and the
/// parent's merged summary and the metrics say the same.
static SILENT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// No status line in this process (a shard of `soakd run --processes N`).
pub fn silence() {
    SILENT.store(true, std::sync::atomic::Ordering::Relaxed);
}

impl Default for StatusLine {
    fn default() -> Self {
        StatusLine::new()
    }
}

impl StatusLine {
    /// A status line in terminal or log form depending on whether stderr is
    /// a terminal.
    pub fn new() -> StatusLine {
        let silent = SILENT.load(std::sync::atomic::Ordering::Relaxed);
        let tty = std::io::stderr().is_terminal() && !silent;
        StatusLine {
            tty,
            every: if tty {
                Duration::from_secs(1)
            } else {
                Duration::from_secs(10)
            },
            last: Duration::ZERO,
            last_errors: 0,
            shown: false,
            interval: (!silent).then(WorkloadStats::default),
        }
    }

    /// Whether the line reads [`Totals::take_interval`].
    pub fn takes_intervals(&self) -> bool {
        self.interval.is_some()
    }

    /// Called every aggregation tick; prints when a line is due.
    /// A run continued from its `--state` at run time `at`, with
    /// `errors` counted before: the first line's rate and new errors are
    /// this process's, not the whole run's.
    pub fn continue_at(&mut self, at: Duration, errors: u64) {
        self.last = at;
        self.last_errors = errors;
    }

    pub fn tick(&mut self, totals: &mut Totals, elapsed: Duration) {
        if elapsed < self.last + self.every {
            return;
        }
        let span = (elapsed - self.last).as_secs_f64();
        self.last = elapsed;
        let Some(interval) = self.interval.as_mut() else {
            return;
        };
        totals.take_interval(interval);
        let interval = &*interval;
        let mut g = Gauges::default();
        for x in &totals.gauges {
            g.add(x);
        }
        let errors: u64 = totals.stats.iter().map(|s| s.counters.total_errors()).sum();
        let new_errors = errors - self.last_errors;
        self.last_errors = errors;
        let q = |p: f64| (!interval.latency.is_empty()).then(|| interval.latency.value_at_quantile(p) as f64 / 1e6);
        let line = format!(
            "[{:>6}] open {}/{}  connecting {}  waiting {}  req/s {:.1}  p50 {}  p99 {}  errors +{} ({} total)",
            format_elapsed(elapsed),
            g.open,
            g.desired,
            g.connecting,
            g.backoff,
            interval.counters.completed as f64 / span,
            human(q(0.5)),
            human(q(0.99)),
            new_errors,
            errors
        );
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K{line}");
            self.shown = true;
        } else {
            let _ = writeln!(err, "soakd: {line}");
        }
        let _ = err.flush();
    }

    /// Prints a one-off message on its own line.
    pub fn note(&mut self, msg: &str) {
        self.clear();
        eprintln!("soakd: {msg}");
    }

    /// Removes the status line from the terminal before other output.
    pub fn clear(&mut self) {
        if self.tty && self.shown {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            self.shown = false;
        }
    }

    /// Ends the status line (the report follows).
    pub fn finish(&mut self) {
        if self.tty && self.shown {
            eprintln!();
            self.shown = false;
        }
    }
}

fn format_elapsed(d: Duration) -> String {
    let s = d.as_secs();
    if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    }
}
