//! Wiring: preflight, then the observers, then the engine, then the report.
//!
//! The one place that knows every layer below it. The engine runs the
//! plan and feeds the observers; the report is built from what the engine
//! leaves. A reload closure, when the plan came from a file, is handed
//! through untouched.

use crate::engine::{self, Reload};
use crate::observe::Observers;
use crate::plan::Plan;
use crate::report::Report;
use crate::{Error, preflight};

/// Runs `plan` to its end and returns the final report. Preflight (open
/// files, ports, source addresses, output paths) and the metrics bind
/// happen before any connection is opened; their failures are exit 2.
pub fn run(plan: Plan, reload: Option<Reload>) -> Result<Report, Error> {
    preflight::check(&plan)?;
    let mut observers = Observers::start(&plan)?;
    let done = engine::run(plan, reload, &mut observers)?;
    let mut report = Report::build(&done.plan, &done.totals, done.ran);
    report.aborted = done.aborted;
    Ok(report)
}
