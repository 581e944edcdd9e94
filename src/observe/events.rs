//! The run's events: the commands soakd runs at a time of the run, and
//! the marks that come from outside (`SIGUSR2`, `--event-socket`).
//!
//! A command is spawned without a shell, its stdin empty, its stdout and
//! stderr appended to the event log (a header line per event says which);
//! a thread per running command waits for it and kills it (SIGKILL) at its
//! time limit, so the control thread never blocks on one. Its start, end
//! and exit status go into the totals' event list, which the report, the
//! HTML page and `/metrics` read; outages are attributed to the nearest.
//! A command still running when the run ends is stopped (SIGTERM, then
//! SIGKILL after [`STOP_GRACE`]): soakd leaves no process of its own
//! behind. With `--shard I/N` only shard 0 runs the commands (the others
//! would run them N times over); every shard takes marks.
//!
//! The list is bounded: past [`MAX_EVENTS`] events, marks are counted and
//! dropped (a script writing to the socket in a loop must not grow the
//! report without end).

use std::fs::File;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant, SystemTime};

use super::event_socket::{EventSocket, Mark};
use crate::Error;
use crate::plan::{EventSpec, Plan};
use crate::stats::{EventRecord, Totals};

/// Most events a run records.
pub const MAX_EVENTS: usize = 1000;
/// How long a command still running at the end of the run gets after
/// SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How often a waiting thread looks at its command.
const WAIT_STEP: Duration = Duration::from_millis(20);

/// How a command ended, from its waiting thread.
struct Done {
    index: usize,
    at: Instant,
    status: String,
    exit_code: Option<i32>,
}

/// A command running now, and what its waiting thread is asked to do
/// (0: wait, [`libc::SIGTERM`] or [`libc::SIGKILL`]: send it): only
/// that thread, which reaps the command, ever signals it.
struct Running {
    index: usize,
    stop: Arc<AtomicI32>,
}

/// The events of a run. See the module doc.
pub struct Events {
    /// Commands not started yet, with their run time (resolved at the
    /// first tick, when the run's start is known).
    pending: Vec<EventSpec>,
    due: Vec<(Duration, EventSpec)>,
    resolved: bool,
    log_path: PathBuf,
    log: Option<File>,
    running: Vec<Running>,
    done_tx: mpsc::Sender<Done>,
    done: mpsc::Receiver<Done>,
    name_file: Option<PathBuf>,
    socket: Option<EventSocket>,
    /// SIGUSR2 marks not yet recorded.
    signalled: Vec<Mark>,
    dropped: u64,
    /// Outages said so far: how many began, and which had ended.
    outages_said: (usize, Vec<bool>),
}

impl Events {
    /// The plan's events; opens `--event-socket` now (before anything
    /// connects: a path that cannot be had is a preflight failure) and
    /// checks that the event log can be written.
    pub fn start(plan: &Plan) -> Result<Events, Error> {
        let e = &plan.events;
        // Only shard 0 runs the commands.
        let pending = if plan.shard.index == 0 {
            e.events.clone()
        } else {
            Vec::new()
        };
        let log_path = e.log_path(plan.report.as_ref());
        let log = if pending.is_empty() {
            None
        } else {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log_path)
                .map_err(|err| {
                    Error::Preflight(format!(
                        "--event-log {}: cannot be written ({err}); give a writable path",
                        log_path.display()
                    ))
                })?;
            eprintln!("soakd: event commands write their output to {}", log_path.display());
            Some(f)
        };
        let socket = match &e.socket {
            Some(p) => Some(EventSocket::open(p)?),
            None => None,
        };
        let (done_tx, done) = mpsc::channel();
        Ok(Events {
            pending,
            due: Vec::new(),
            resolved: false,
            log_path,
            log,
            running: Vec::new(),
            done_tx,
            done,
            name_file: e.name_file.clone(),
            socket,
            signalled: Vec::new(),
            dropped: 0,
            outages_said: (0, Vec::new()),
        })
    }

    /// SIGUSR2: an event now, named by `--event-name-file`'s first line.
    pub fn signalled(&mut self) {
        let name = self
            .name_file
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| t.lines().next().and_then(crate::plan::events::event_name))
            .unwrap_or_else(|| "sigusr2".into());
        self.signalled.push((name, Instant::now()));
    }

    /// Every tick: starts the commands that are due, records those that
    /// ended and the marks that came. Returns notes for the operator.
    pub fn tick(&mut self, totals: &mut Totals, elapsed: Duration) -> Vec<String> {
        let mut notes = Vec::new();
        if !self.resolved {
            self.resolved = true;
            let start = totals.timeline.started_at();
            for spec in self.pending.drain(..) {
                let at = spec.at.offset(start);
                // A run continued from its --state does not run what fell
                // due before this process started (it ran then, or soakd
                // was not running): said, not done late.
                if at + Duration::from_secs(1) >= elapsed {
                    self.due.push((at, spec));
                } else {
                    notes.push(format!(
                        "event {:?} at {} was due before this process started: not run",
                        spec.name, spec.at
                    ));
                }
            }
            self.due.sort_by_key(|(at, _)| *at);
        }
        let now = Instant::now();
        let run_time = |at: Instant| elapsed.saturating_sub(now.saturating_duration_since(at)).as_secs_f64();
        while self.due.first().is_some_and(|(at, _)| *at <= elapsed) {
            let (_, spec) = self.due.remove(0);
            notes.push(self.spawn(totals, spec, elapsed));
        }
        while let Ok(d) = self.done.try_recv() {
            self.running.retain(|r| r.index != d.index);
            if let Some(e) = totals.events.get_mut(d.index) {
                e.end = Some(run_time(d.at));
                e.exit_code = d.exit_code;
                notes.push(format!("event {:?} ended: {}", e.name, d.status));
                e.status = d.status;
            }
        }
        let mut marks: Vec<(Mark, &str)> = self.signalled.drain(..).map(|m| (m, "signal")).collect();
        if let Some(s) = &self.socket {
            marks.extend(s.marks.try_iter().map(|m| (m, "socket")));
        }
        for ((name, at), source) in marks {
            if totals.events.len() >= MAX_EVENTS {
                self.dropped += 1;
                continue;
            }
            notes.push(format!("event {name:?} marked ({source})"));
            totals.events.push(EventRecord {
                name,
                source: source.into(),
                at: run_time(at),
                status: "marked".into(),
                ..EventRecord::default()
            });
        }
        notes.extend(self.outage_notes(totals));
        if self.dropped > 0 {
            notes.push(format!(
                "{} events dropped: a run records at most {MAX_EVENTS}",
                std::mem::take(&mut self.dropped)
            ));
        }
        notes
    }

    /// A line for the operator when an outage begins and when it ends
    /// (the journal of a soak left running says when, not only the
    /// report at its end).
    fn outage_notes(&mut self, totals: &Totals) -> Vec<String> {
        let list = totals.outages.outages();
        let (began, ended) = &mut self.outages_said;
        let mut notes = Vec::new();
        for o in &list[*began..] {
            notes.push(format!(
                "outage of {} began at {:.1} s ({})",
                o.workload,
                o.start,
                o.cause.join(", ")
            ));
        }
        *began = list.len();
        ended.resize(list.len(), false);
        for (o, said) in list.iter().zip(ended.iter_mut()) {
            if let (Some(end), false) = (o.end, *said) {
                *said = true;
                notes.push(format!(
                    "outage of {} ended at {end:.1} s after {:.1} s",
                    o.workload, o.duration_seconds
                ));
            }
        }
        notes
    }

    /// Starts one command now; returns the note.
    fn spawn(&mut self, totals: &mut Totals, spec: EventSpec, elapsed: Duration) -> String {
        let index = totals.events.len();
        let mut record = EventRecord {
            name: spec.name.clone(),
            source: "command".into(),
            at: elapsed.as_secs_f64(),
            status: "running".into(),
            command: spec.run.clone(),
            log: Some(self.log_path.display().to_string()),
            ..EventRecord::default()
        };
        let outputs = self.log.as_mut().and_then(|log| {
            let _ = writeln!(
                log,
                "==== soakd event {:?} at {:.3} s of the run ({}): {:?}",
                spec.name,
                elapsed.as_secs_f64(),
                humantime::format_rfc3339_millis(SystemTime::now()),
                spec.run
            );
            Some((log.try_clone().ok()?, log.try_clone().ok()?))
        });
        let mut cmd = Command::new(&spec.run[0]);
        cmd.args(&spec.run[1..])
            .stdin(Stdio::null())
            .env("SOAKD_EVENT", &spec.name);
        if let Some((out, err)) = outputs {
            cmd.stdout(out).stderr(err);
        } else {
            cmd.stdout(Stdio::null()).stderr(Stdio::null());
        }
        let note = match cmd.spawn() {
            Ok(child) => {
                let pid = child.id();
                let stop = Arc::new(AtomicI32::new(0));
                let tx = self.done_tx.clone();
                let timeout = spec.timeout;
                let asked = stop.clone();
                match std::thread::Builder::new()
                    .name("soakd-event".into())
                    .spawn(move || wait(child, index, timeout, &asked, &tx))
                {
                    Ok(_) => self.running.push(Running { index, stop }),
                    // The child went with the closure: dropped, not
                    // waited for; it is reaped when soakd exits.
                    Err(e) => record.status = format!("could not be watched: {e}"),
                }
                format!("event {:?} started: {:?} (pid {pid})", spec.name, spec.run)
            }
            Err(e) => {
                record.status = format!("could not start: {e}");
                record.end = Some(elapsed.as_secs_f64());
                format!("event {:?} could not start: {e}", spec.name)
            }
        };
        totals.events.push(record);
        note
    }

    /// The run is over: commands still running are stopped (SIGTERM,
    /// then SIGKILL after [`STOP_GRACE`]) and recorded as such.
    pub fn finish(&mut self, totals: &mut Totals, elapsed: Duration) {
        let mut notes = self.tick(totals, elapsed);
        if !self.running.is_empty() {
            for r in &self.running {
                r.stop.store(libc::SIGTERM, Ordering::Release);
            }
            let until = Instant::now() + STOP_GRACE;
            let mut killed = false;
            while !self.running.is_empty() {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() && !killed {
                    for r in &self.running {
                        r.stop.store(libc::SIGKILL, Ordering::Release);
                    }
                    killed = true;
                }
                let Ok(d) = self.done.recv_timeout(left.max(WAIT_STEP)) else {
                    if killed {
                        break;
                    }
                    continue;
                };
                self.running.retain(|r| r.index != d.index);
                if let Some(e) = totals.events.get_mut(d.index) {
                    e.end = Some(elapsed.as_secs_f64());
                    e.exit_code = d.exit_code;
                    e.status = format!("stopped at the end of the run ({})", d.status);
                    notes.push(format!("event {:?} {}", e.name, e.status));
                }
            }
        }
        for n in notes {
            eprintln!("soakd: {n}");
        }
    }
}

/// Sends `sig` to a command soakd started and has not reaped yet.
#[allow(unsafe_code)]
fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    // It is called only by the command's waiting thread, which alone
    // reaps it, right after `try_wait` found it still running: the pid
    // is still the command's.
    let _ = unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// Waits for `child`, killing it at `timeout` or when `stop` asks (see
/// [`Running`]); reports how it ended.
fn wait(mut child: std::process::Child, index: usize, timeout: Duration, stop: &AtomicI32, tx: &mpsc::Sender<Done>) {
    use std::os::unix::process::ExitStatusExt;
    let start = Instant::now();
    let mut timed_out = false;
    let mut sent = 0;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Ok(s),
            Ok(None) => {
                let asked = stop.load(Ordering::Acquire);
                if asked != 0 && asked != sent {
                    signal(child.id(), asked);
                    sent = asked;
                } else if !timed_out && start.elapsed() >= timeout {
                    timed_out = true;
                    let _ = child.kill();
                }
                std::thread::sleep(WAIT_STEP);
            }
            Err(e) => break Err(e),
        }
    };
    let at = Instant::now();
    let (status, exit_code) = match status {
        Ok(_) if timed_out => (
            format!("timed out after {} (killed)", humantime::format_duration(timeout)),
            None,
        ),
        Ok(s) => match (s.code(), s.signal()) {
            (Some(c), _) => (format!("exit {c}"), Some(c)),
            (None, Some(sig)) => (format!("killed by signal {sig}"), None),
            (None, None) => ("ended".into(), None),
        },
        Err(e) => (format!("could not be waited for: {e}"), None),
    };
    let _ = tx.send(Done {
        index,
        at,
        status,
        exit_code,
    });
}
