//! Disruptions: the rules outages are found by, and the events a soak
//! runs or is told about, which outages are attributed to.
//!
//! An event is a command soakd runs at a time of the run (`[[event]]` in a
//! config, `--event AT=COMMAND`): a deploy, a fail-over, `systemctl stop`.
//! It is run without a shell (the user writes `sh -c` when one is wanted),
//! its output goes to a log file, and it has a time limit. Events can
//! also come from outside while the soak runs (`SIGUSR2` with a name in a
//! file, a line on `--event-socket`). Everything here is checked before
//! anything starts: a command that is not a program, a time in the past or
//! after the run's end, a socket path that is something else are bad input
//! (exit 2), not a surprise an hour in.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::{ReportDest, defaults};
use crate::Error;

/// How outages are told from noise (see `stats::outage`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OutagePlan {
    /// A second is bad when errors exceed this share of its attempts
    /// (`--outage-errors`).
    pub errors: f64,
    /// A second is bad when open connections fall below this share of
    /// those desired (`--outage-open`).
    pub open: f64,
    /// Both must stay back this long for an outage to end
    /// (`--outage-settle`).
    pub settle: Duration,
}

impl Default for OutagePlan {
    fn default() -> OutagePlan {
        OutagePlan {
            errors: defaults::OUTAGE_ERRORS,
            open: defaults::OUTAGE_OPEN,
            settle: defaults::OUTAGE_SETTLE,
        }
    }
}

/// When an event runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    /// This long after the run started.
    After(Duration),
    /// At this wall-clock time.
    Wall(SystemTime),
}

impl At {
    /// A duration from the start (`90s`, `2m`) or a UTC wall-clock time in
    /// RFC 3339 (`2026-12-03T04:00:00Z`). `what` names where it was given.
    pub fn parse(what: &str, value: &str) -> Result<At, Error> {
        let v = value.trim();
        if v.contains('-') && v.contains(':') {
            return humantime::parse_rfc3339_weak(v.trim_end_matches('Z'))
                .map(At::Wall)
                .map_err(|_| {
                    Error::Usage(format!(
                        "{what}: {value:?} is not a time; expected a duration from the start (90s, 2m) or a UTC time such as 2026-12-03T04:00:00Z"
                    ))
                });
        }
        super::parse_duration(what, v)
            .map(At::After)
            .map_err(|_| {
                Error::Usage(format!(
                    "{what}: {value:?} is not a time; expected a duration from the start (90s, 2m) or a UTC time such as 2026-12-03T04:00:00Z"
                ))
            })
    }

    /// The run time it falls at, for a run that started at `start`
    /// (a wall-clock time already past: now, zero).
    pub fn offset(&self, start: SystemTime) -> Duration {
        match *self {
            At::After(d) => d,
            At::Wall(t) => t.duration_since(start).unwrap_or_default(),
        }
    }
}

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            At::After(d) => write!(f, "{}", humantime::format_duration(*d)),
            At::Wall(t) => write!(f, "{}", humantime::format_rfc3339_seconds(*t)),
        }
    }
}

/// One event soakd runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventSpec {
    /// Its name (the report's, the `name` label of its metrics).
    pub name: String,
    /// When it runs.
    pub at: At,
    /// The program and its arguments (no shell).
    pub run: Vec<String>,
    /// How long it may run before it is killed.
    pub timeout: Duration,
}

/// Every event of a run and where events from outside come in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventPlan {
    /// The events soakd runs, in the order given.
    pub events: Vec<EventSpec>,
    /// An outage starting this close to an event is attributed to it
    /// (`--event-window`).
    pub window: Duration,
    /// Where the commands' output goes (`--event-log`; default beside
    /// the report, else in the temporary directory).
    pub log: Option<PathBuf>,
    /// `SIGUSR2` marks an event named by this file's first line
    /// (`--event-name-file`).
    pub name_file: Option<PathBuf>,
    /// A FIFO or Unix socket whose every line marks an event
    /// (`--event-socket`).
    pub socket: Option<PathBuf>,
}

/// Longest event name kept; longer names (from outside) are cut.
pub const MAX_NAME: usize = 64;

/// `--event AT=COMMAND`: the command's words (quotes as a shell reads
/// them, nothing expanded) run at AT; its name is the command as written.
pub fn parse_flag_event(value: &str) -> Result<EventSpec, Error> {
    let bad = |why: String| {
        Error::Usage(format!(
            "--event {value:?}: {why}; expected AT=COMMAND, e.g. --event '30s=systemctl restart nginx' (AT: a duration from the start or a UTC time; COMMAND: a program and its arguments, run without a shell)"
        ))
    };
    let (at, command) = value.split_once('=').ok_or_else(|| bad("no `=`".into()))?;
    let at = At::parse("--event", at).map_err(|e| bad(e.to_string()))?;
    let run = split_words(command).map_err(bad)?;
    if run.is_empty() {
        return Err(bad("no command after `=`".into()));
    }
    Ok(EventSpec {
        name: clean_name(command.trim()),
        at,
        run,
        timeout: defaults::EVENT_TIMEOUT,
    })
}

/// An event name as kept: trimmed, control characters dropped, at most
/// [`MAX_NAME`] characters; `None` when nothing is left.
pub fn event_name(raw: &str) -> Option<String> {
    let name = clean_name(raw);
    (!name.is_empty()).then_some(name)
}

fn clean_name(raw: &str) -> String {
    raw.trim().chars().filter(|c| !c.is_control()).take(MAX_NAME).collect()
}

/// Splits a command line into words as a POSIX shell would without
/// expanding anything: blanks separate words, `'…'` is literal, `"…"`
/// keeps blanks (a backslash escapes `"` and `\` in it), a backslash
/// outside quotes escapes the next character.
pub fn split_words(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if let Some(w) = word.take() {
                    words.push(w);
                }
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err("a ' is not closed".into()),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => w.push(c),
                            Some(c) => {
                                w.push('\\');
                                w.push(c);
                            }
                            None => return Err("a \" is not closed".into()),
                        },
                        Some(c) => w.push(c),
                        None => return Err("a \" is not closed".into()),
                    }
                }
            }
            '\\' => match chars.next() {
                Some(c) => word.get_or_insert_with(String::new).push(c),
                None => return Err("a \\ ends the command".into()),
            },
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Ok(words)
}

/// The program of an event, checked: a path (containing `/`) must be an
/// executable file, a bare name must be one on `PATH`.
pub fn check_program(what: &str, program: &str) -> Result<(), Error> {
    let executable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        if executable(Path::new(program)) {
            return Ok(());
        }
        return Err(Error::Usage(format!(
            "{what}: {program} is not an executable file; give the path of the program to run"
        )));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|d| executable(&d.join(program))) {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "{what}: {program:?} is not a program on PATH; give its path (events run without a shell: write [\"sh\", \"-c\", \"...\"] for one)"
    )))
}

/// A share such as `5%` or `0.05`, above 0 and at most 100%.
pub fn parse_share(what: &str, value: &str) -> Result<f64, Error> {
    match super::parse_tolerance(what, value) {
        Ok(v) if v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err(Error::Usage(format!(
            "{what}: {value:?} is not a share; expected a percentage above 0 and at most 100% (e.g. 5%, or a fraction such as 0.05)"
        ))),
    }
}

impl EventPlan {
    /// Checks the events against the run: each program exists, no time
    /// is past or after the run's end (`duration`). `key` names where the
    /// events were given, for the message.
    pub fn check(&self, duration: Option<Duration>, key: &str) -> Result<(), Error> {
        let now = SystemTime::now();
        for e in &self.events {
            let what = format!("{key} {:?}", e.name);
            check_program(&what, &e.run[0])?;
            let offset = match e.at {
                At::Wall(t) if t < now => {
                    return Err(Error::Usage(format!(
                        "{what}: {} is in the past (it is now {}); give a later time or a duration from the start",
                        e.at,
                        humantime::format_rfc3339_seconds(now)
                    )));
                }
                At::Wall(t) => t.duration_since(now).unwrap_or_default(),
                At::After(d) => d,
            };
            if let Some(d) = duration
                && offset >= d
            {
                return Err(Error::Usage(format!(
                    "{what}: at {} is not within the run ({} long): it would never run; move it or lengthen -d",
                    e.at,
                    humantime::format_duration(d)
                )));
            }
        }
        Ok(())
    }

    /// Where the commands' output goes: `--event-log`, else beside the
    /// report (`REPORT.events.log`), else in the temporary directory.
    pub fn log_path(&self, report: Option<&ReportDest>) -> PathBuf {
        if let Some(p) = &self.log {
            return p.clone();
        }
        match report {
            Some(ReportDest::File(r)) => {
                let mut name = r.as_os_str().to_owned();
                name.push(".events.log");
                PathBuf::from(name)
            }
            _ => std::env::temp_dir().join(format!("soakd-events-{}.log", std::process::id())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_as_a_shell_reads_them() {
        for (line, words) in [
            ("systemctl restart nginx", &["systemctl", "restart", "nginx"][..]),
            ("  a   b ", &["a", "b"]),
            (
                "sh -c 'nginx -s stop; sleep 3'",
                &["sh", "-c", "nginx -s stop; sleep 3"],
            ),
            (r#"echo "a \"b\" c" d\ e"#, &["echo", r#"a "b" c"#, "d e"]),
            (r#"x''y "" z"#, &["xy", "", "z"]),
            ("$HOME *", &["$HOME", "*"]),
        ] {
            assert_eq!(split_words(line).unwrap(), words, "{line}");
        }
        for bad in ["'open", "\"open", "end\\"] {
            assert!(split_words(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn flag_events_and_their_mistakes() {
        let e = parse_flag_event("30s=true --flag 'a b'").unwrap();
        assert_eq!(e.at, At::After(Duration::from_secs(30)));
        assert_eq!(e.run, ["true", "--flag", "a b"]);
        assert_eq!(e.name, "true --flag 'a b'");
        assert_eq!(e.timeout, defaults::EVENT_TIMEOUT);
        let wall = parse_flag_event("2099-01-02T03:04:05Z=true").unwrap();
        assert_eq!(wall.at.to_string(), "2099-01-02T03:04:05Z");
        for (bad, says) in [
            ("30s", "no `=`"),
            ("soon=true", "is not a time"),
            ("30s=", "no command"),
            ("30s='x", "not closed"),
        ] {
            let e = parse_flag_event(bad).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn events_are_checked_before_the_run() {
        let plan = |run: &str, at: At| EventPlan {
            events: vec![EventSpec {
                name: "x".into(),
                at,
                run: vec![run.into()],
                timeout: Duration::from_secs(1),
            }],
            ..EventPlan::default()
        };
        let secs = |s| At::After(Duration::from_secs(s));
        assert!(
            plan("true", secs(5))
                .check(Some(Duration::from_secs(10)), "--event")
                .is_ok()
        );
        assert!(plan("/bin/sh", secs(5)).check(None, "--event").is_ok());
        let data = std::env::temp_dir().join(format!("soakd-event-test-{}", std::process::id()));
        std::fs::write(&data, "not a program").unwrap();
        let data_path = data.display().to_string();
        for (p, says) in [
            (plan("no-such-program-here", secs(5)), "not a program on PATH"),
            (plan(&data_path, secs(5)), "not an executable file"),
            (plan("true", secs(10)), "not within the run"),
            (plan("true", At::Wall(SystemTime::UNIX_EPOCH)), "is in the past"),
        ] {
            let e = p.check(Some(Duration::from_secs(10)), "--event").unwrap_err();
            assert!(e.to_string().contains(says), "{e}");
        }
        let _ = std::fs::remove_file(&data);
    }

    #[test]
    fn shares_names_and_the_log() {
        assert_eq!(parse_share("--outage-errors", "5%").unwrap(), 0.05);
        assert_eq!(parse_share("--outage-open", "0.9").unwrap(), 0.9);
        for bad in ["0%", "101%", "-1", "x"] {
            assert!(parse_share("--outage-open", bad).is_err(), "{bad}");
        }
        assert_eq!(event_name("  deploy\u{7}-42\n"), Some("deploy-42".into()));
        assert_eq!(event_name(" \n"), None);
        assert_eq!(event_name(&"x".repeat(100)).unwrap().len(), MAX_NAME);
        let p = EventPlan::default();
        let r = ReportDest::File("/tmp/run.json".into());
        assert_eq!(p.log_path(Some(&r)), PathBuf::from("/tmp/run.json.events.log"));
        assert!(p.log_path(None).starts_with(std::env::temp_dir()));
    }
}
