//! The run's disruption settings, from flags and from a file: how outages
//! are found (`--outage-errors`, `--outage-open`, `--outage-settle`) and
//! the events (`[[event]]` tables, `--event AT=COMMAND`, `--event-window`,
//! `--event-log`, `--event-name-file`, `--event-socket`).
//!
//! They are run-wide, like the thresholds' window, so they sit beside the
//! file's other globals; a flag given next to `--config` replaces the
//! file's key (`--event` replaces the file's `[[event]]` list, as
//! `--threshold` replaces `thresholds`).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::Locator;
use super::kinds::{FileCx, duration, help, positive_duration};
use crate::Error;
use crate::plan::events::{At, EventPlan, EventSpec, OutagePlan, check_program, event_name, parse_share};
use crate::plan::{defaults, parse_flag_event};

fn share(v: &str) -> Result<f64, String> {
    parse_share("share", v).map_err(|_| "expected a percentage above 0 and at most 100% (e.g. 5%)".into())
}

/// A share as `--help` shows it.
fn pct(v: f64) -> String {
    format!("{}%", v * 100.0)
}

fn flag_event(v: &str) -> Result<EventSpec, String> {
    parse_flag_event(v).map_err(|e| e.to_string())
}

/// The disruption flags of `soakd run`.
#[derive(Clone, Debug, Default, PartialEq, clap::Args)]
pub struct DisruptionArgs {
    /// A second is part of an outage when its errors exceed PCT of its
    /// attempts.
    #[arg(long, value_name = "PCT", value_parser = share, help = help(
        "A second is part of an outage when its errors exceed PCT of its attempts",
        Some(pct(defaults::OUTAGE_ERRORS)),
    ))]
    pub outage_errors: Option<f64>,
    /// ... or when open connections fall below PCT of those desired.
    #[arg(long, value_name = "PCT", value_parser = share, help = help(
        "... or when open connections fall below PCT of those desired",
        Some(pct(defaults::OUTAGE_OPEN)),
    ))]
    pub outage_open: Option<f64>,
    /// An outage ends once both have stayed back this long.
    #[arg(long, value_name = "DUR", value_parser = positive_duration, allow_hyphen_values = true, help = help(
        "An outage ends once both have stayed back this long (the duration reported is the downtime, without it)",
        Some(humantime::format_duration(defaults::OUTAGE_SETTLE).to_string()),
    ))]
    pub outage_settle: Option<Duration>,
    /// Run COMMAND (a program and its arguments, no shell) at AT (a
    /// duration from the start, or a UTC time such as
    /// 2026-12-03T04:00:00Z); repeatable. Its output goes to --event-log.
    #[arg(long = "event", value_name = "AT=COMMAND", value_parser = flag_event, allow_hyphen_values = true)]
    pub events: Vec<EventSpec>,
    /// An outage that starts this close to an event is attributed to it.
    #[arg(long, value_name = "DUR", value_parser = duration, allow_hyphen_values = true, help = help(
        "An outage that starts this close to an event is attributed to it",
        Some(humantime::format_duration(defaults::EVENT_WINDOW).to_string()),
    ))]
    pub event_window: Option<Duration>,
    /// Where the events' commands write their output (default: beside
    /// --report as REPORT.events.log, else in the temporary directory).
    #[arg(long, value_name = "FILE")]
    pub event_log: Option<PathBuf>,
    /// SIGUSR2 marks an event now, named by this file's first line
    /// (without it, or when it is empty: "sigusr2").
    #[arg(long, value_name = "FILE")]
    pub event_name_file: Option<PathBuf>,
    /// Every line written to this FIFO (when PATH is one) or Unix socket
    /// (made at PATH) marks an event now, named by the line.
    #[arg(long, value_name = "PATH")]
    pub event_socket: Option<PathBuf>,
}

/// One `[[event]]` table as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileEvent {
    name: Spanned<String>,
    at: Spanned<String>,
    run: Spanned<Vec<String>>,
    timeout: Option<Spanned<String>>,
}

/// A share written as `"5%"` or as a number.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum ShareRaw {
    /// `"5%"`, `"0.05"`.
    Text(String),
    /// `0.05`.
    Number(f64),
}

/// The file's disruption keys (from its globals).
#[derive(Default)]
pub(super) struct FileKeys<'a> {
    pub(super) outage_errors: Option<&'a Spanned<ShareRaw>>,
    pub(super) outage_open: Option<&'a Spanned<ShareRaw>>,
    pub(super) outage_settle: Option<&'a Spanned<String>>,
    pub(super) events: &'a [Spanned<FileEvent>],
    pub(super) event_window: Option<&'a Spanned<String>>,
    pub(super) event_log: Option<&'a PathBuf>,
    pub(super) event_name_file: Option<&'a PathBuf>,
    pub(super) event_socket: Option<&'a PathBuf>,
}

impl DisruptionArgs {
    /// The plans from the flags alone (no `--config`), checked against a
    /// run of `duration`.
    pub fn plans(&self, duration: Option<Duration>) -> Result<(OutagePlan, EventPlan), Error> {
        let outages = OutagePlan {
            errors: self.outage_errors.unwrap_or(defaults::OUTAGE_ERRORS),
            open: self.outage_open.unwrap_or(defaults::OUTAGE_OPEN),
            settle: self.outage_settle.unwrap_or(defaults::OUTAGE_SETTLE),
        };
        let events = EventPlan {
            events: self.events.clone(),
            window: self.event_window.unwrap_or(defaults::EVENT_WINDOW),
            log: self.event_log.clone(),
            name_file: self.event_name_file.clone(),
            socket: self.event_socket.clone(),
        };
        events.check(duration, "--event")?;
        check_socket(events.socket.as_deref(), "--event-socket")?;
        Ok((outages, events))
    }
}

/// The plans of a file's keys, each replaced by its flag when given.
pub(super) fn plans(
    flags: &DisruptionArgs,
    file: FileKeys<'_>,
    duration: Option<Duration>,
    loc: &Locator<'_>,
    cx: &FileCx<'_>,
) -> Result<(OutagePlan, EventPlan), Error> {
    let share_key = |v: Option<&Spanned<ShareRaw>>, key: &str| -> Result<Option<f64>, Error> {
        let Some(v) = v else { return Ok(None) };
        let text = match v.get_ref() {
            ShareRaw::Text(t) => t.clone(),
            ShareRaw::Number(n) => n.to_string(),
        };
        parse_share(key, &text).map(Some).map_err(|_| {
            loc.err(
                v,
                key,
                "is not a share; expected a percentage above 0 and at most 100% (e.g. \"5%\")",
            )
        })
    };
    let dur_key = |v: Option<&Spanned<String>>, key: &str| loc.duration(&v.cloned(), key, false);
    let outages = OutagePlan {
        errors: match flags.outage_errors {
            Some(v) => v,
            None => share_key(file.outage_errors, "outage_errors")?.unwrap_or(defaults::OUTAGE_ERRORS),
        },
        open: match flags.outage_open {
            Some(v) => v,
            None => share_key(file.outage_open, "outage_open")?.unwrap_or(defaults::OUTAGE_OPEN),
        },
        settle: match flags.outage_settle {
            Some(v) => v,
            None => match dur_key(file.outage_settle, "outage_settle")? {
                Some(d) if d.is_zero() => {
                    let v = file.outage_settle.expect("given");
                    return Err(loc.err(v, "outage_settle", "must be greater than 0"));
                }
                d => d.unwrap_or(defaults::OUTAGE_SETTLE),
            },
        },
    };
    let from_flags = !flags.events.is_empty();
    let events = if from_flags {
        flags.events.clone()
    } else {
        file.events
            .iter()
            .map(|e| file_event(e, duration, loc, cx))
            .collect::<Result<_, _>>()?
    };
    let events = EventPlan {
        events,
        window: match flags.event_window {
            Some(w) => w,
            None => dur_key(file.event_window, "event_window")?.unwrap_or(defaults::EVENT_WINDOW),
        },
        log: flags.event_log.clone().or(file.event_log.map(|p| cx.path(p))),
        name_file: flags
            .event_name_file
            .clone()
            .or(file.event_name_file.map(|p| cx.path(p))),
        socket: flags.event_socket.clone().or(file.event_socket.map(|p| cx.path(p))),
    };
    if from_flags {
        events.check(duration, "--event")?;
    }
    check_socket(events.socket.as_deref(), "--event-socket / event_socket")?;
    Ok((outages, events))
}

/// One `[[event]]` table, checked (its line named in every message). A
/// program given as a relative path is relative to the file's directory,
/// as the file's other paths are.
fn file_event(
    e: &Spanned<FileEvent>,
    duration: Option<Duration>,
    loc: &Locator<'_>,
    cx: &FileCx<'_>,
) -> Result<EventSpec, Error> {
    let f = e.get_ref();
    let name = event_name(f.name.get_ref()).ok_or_else(|| loc.err(&f.name, "event.name", "is empty"))?;
    let at = At::parse("at", f.at.get_ref()).map_err(|err| loc.err(&f.at, "event.at", err))?;
    let mut run = f.run.get_ref().clone();
    let Some(program) = run.first_mut() else {
        return Err(loc.err(
            &f.run,
            "event.run",
            "is empty; give the program and its arguments, e.g. run = [\"systemctl\", \"restart\", \"nginx\"]",
        ));
    };
    if program.contains('/') && !program.starts_with('/') {
        *program = cx.path(program.as_ref()).display().to_string();
    }
    check_program(&loc.at(&f.run, "event.run"), program)?;
    let timeout = match &f.timeout {
        Some(t) => loc
            .duration(&Some(t.clone()), "event.timeout", true)?
            .unwrap_or(defaults::EVENT_TIMEOUT),
        None => defaults::EVENT_TIMEOUT,
    };
    let spec = EventSpec { name, at, run, timeout };
    EventPlan {
        events: vec![spec.clone()],
        ..EventPlan::default()
    }
    .check(duration, &loc.at(&f.at, "event.at"))?;
    Ok(spec)
}

/// `--event-socket`: a FIFO to read, or a place to make a Unix socket
/// (a stale socket there is replaced); anything else is refused.
fn check_socket(path: Option<&std::path::Path>, what: &str) -> Result<(), Error> {
    use std::os::unix::fs::FileTypeExt;
    let Some(path) = path else { return Ok(()) };
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_fifo() || m.file_type().is_socket() => Ok(()),
        Ok(_) => Err(Error::Usage(format!(
            "{what} {}: exists and is neither a FIFO nor a socket; give a new path (soakd makes a socket there) or a FIFO (mkfifo)",
            path.display()
        ))),
        Err(_) => {
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
            if dir.is_none_or(|d| d.is_dir()) {
                Ok(())
            } else {
                Err(Error::Usage(format!(
                    "{what} {}: its directory does not exist; create it or give another path",
                    path.display()
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use crate::plan::events::At;

    const W: &str = "[[workload]]\nurl = \"http://127.0.0.1:1/\"\n";

    fn parse(text: &str) -> Result<crate::plan::Plan, crate::Error> {
        crate::config::parse(Path::new("/etc/soakd/t.toml"), text, Default::default())
    }

    #[test]
    fn file_keys_and_events() {
        let p = parse(&format!(
            "outage_errors = 0.1\noutage_open = \"80%\"\noutage_settle = \"10s\"\nevent_window = \"30s\"\n\
             event_log = \"events.log\"\n[[event]]\nname = \"deploy\"\nat = \"90s\"\nrun = [\"true\", \"x\"]\n{W}"
        ))
        .unwrap();
        assert_eq!((p.outages.errors, p.outages.open), (0.1, 0.8));
        assert_eq!(p.outages.settle, Duration::from_secs(10));
        assert_eq!(p.events.window, Duration::from_secs(30));
        assert_eq!(p.events.log.as_deref(), Some(Path::new("/etc/soakd/events.log")));
        let e = &p.events.events[0];
        assert_eq!((e.name.as_str(), e.at), ("deploy", At::After(Duration::from_secs(90))));
        assert_eq!(e.run, ["true", "x"]);
        // Without the keys: the defaults.
        let d = parse(W).unwrap();
        assert_eq!(d.outages, crate::plan::OutagePlan::default());
        assert_eq!(d.events.window, crate::plan::defaults::EVENT_WINDOW);
    }

    #[test]
    fn bad_keys_name_their_line() {
        for (text, says) in [
            ("outage_open = \"120%\"\n", "t.toml:1: outage_open"),
            (
                "outage_settle = \"0s\"\n",
                "t.toml:1: outage_settle must be greater than 0",
            ),
            (
                "[[event]]\nname = \"x\"\nat = \"1m\"\nrun = []\n",
                "t.toml:4: event.run is empty",
            ),
            (
                "[[event]]\nname = \"x\"\nat = \"later\"\nrun = [\"true\"]\n",
                "t.toml:3: event.at",
            ),
            (
                "[[event]]\nname = \"x\"\nat = \"1m\"\nrun = [\"./deploy.sh\"]\n",
                "/etc/soakd/./deploy.sh",
            ),
            (
                "[[event]]\nname = \"x\"\nat = \"1m\"\nrun = [\"true\"]\nshell = true\n",
                "unknown field `shell`",
            ),
            (
                "duration = \"1m\"\n[[event]]\nname = \"x\"\nat = \"2m\"\nrun = [\"true\"]\n",
                "not within the run",
            ),
        ] {
            let e = parse(&format!("{text}{W}")).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains(says), "{text}: {e}");
        }
    }
}
