//! The checkpoint writer: encodes and writes the state off the control
//! thread.
//!
//! The control thread must keep its 250 ms tick (the metrics, the status
//! line, stop decisions), so all it does for a checkpoint is copy the
//! totals ([`crate::stats::Totals::saved`]) and hand the copy to this
//! thread, which encodes it (the histograms' deflate is the costly part)
//! and writes it atomically. The hand-over is a channel of one: when the
//! previous checkpoint is still being written (a slow disk), the next one
//! is skipped rather than queued, so a stalled disk can neither grow
//! soakd's memory nor delay the tick.

use std::path::PathBuf;
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{Body, WindowSaved, digest, encode};
use crate::Error;
use crate::plan::Plan;
use crate::stats::TotalsSaved;

/// What the control thread hands over.
#[derive(Debug)]
pub struct Snapshot {
    /// Run time, since the original start.
    pub at: Duration,
    /// The run ended on its own: nothing is left to continue.
    pub finished: bool,
    /// The totals.
    pub totals: TotalsSaved,
    /// The live thresholds.
    pub window: Option<WindowSaved>,
}

/// The writer thread and when the next checkpoint is due.
pub struct Writer {
    sender: Option<SyncSender<Snapshot>>,
    thread: Option<JoinHandle<()>>,
    every: Duration,
    next: Duration,
}

impl Writer {
    /// Starts the writer of `plan`'s state file, if it has one; the first
    /// checkpoint is due at once (run time `from`).
    pub fn start(plan: &Plan, from: Duration) -> Result<Option<Writer>, Error> {
        let Some(sf) = &plan.state else { return Ok(None) };
        let settings = digest::settings(plan);
        let fixed = (digest::of(&settings), settings);
        let (sender, receiver) = mpsc::sync_channel::<Snapshot>(1);
        let path = sf.path.clone();
        let thread = std::thread::Builder::new()
            .name("soakd-state".into())
            .spawn(move || write_loop(&path, fixed, receiver))
            .map_err(|e| Error::io("starting the state writer thread", e))?;
        Ok(Some(Writer {
            sender: Some(sender),
            thread: Some(thread),
            every: sf.checkpoint_interval,
            next: from,
        }))
    }

    /// True when a checkpoint is due at run time `elapsed`.
    pub fn due(&self, elapsed: Duration) -> bool {
        elapsed >= self.next
    }

    /// Hands a checkpoint over; skipped when the last one is still being
    /// written (see the module doc).
    pub fn offer(&mut self, snap: Snapshot) {
        self.next = snap.at + self.every;
        if let Some(s) = &self.sender
            && let Err(TrySendError::Disconnected(_)) = s.try_send(snap)
        {
            self.sender = None;
        }
    }

    /// The last checkpoint: waits until it is written.
    pub fn finish(&mut self, snap: Snapshot) {
        if let Some(s) = self.sender.take() {
            let _ = s.send(snap);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.sender = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn write_loop(
    path: &std::path::Path,
    (digest, settings): (String, Vec<(String, String)>),
    rx: mpsc::Receiver<Snapshot>,
) {
    let mut failing = false;
    let target: PathBuf = path.to_path_buf();
    for snap in rx {
        let t0 = Instant::now();
        let body = Body {
            digest: digest.clone(),
            settings: settings.clone(),
            at: snap.at,
            finished: snap.finished,
            totals: snap.totals,
            window: snap.window,
        };
        let written = encode(&body)
            .map_err(std::io::Error::other)
            .and_then(|bytes| crate::fsio::write_atomic(&target, &bytes).map(|()| bytes.len()));
        match written {
            Ok(bytes) => {
                if failing {
                    eprintln!("soakd: --state {}: checkpoints written again", target.display());
                }
                failing = false;
                if std::env::var_os("SOAKD_STATE_DEBUG").is_some() {
                    eprintln!(
                        "soakd: --state {}: checkpoint at {:.1}s, {bytes} bytes in {:.1} ms",
                        target.display(),
                        snap.at.as_secs_f64(),
                        t0.elapsed().as_secs_f64() * 1e3
                    );
                }
            }
            Err(e) => {
                if !failing {
                    eprintln!(
                        "soakd: --state {}: cannot write a checkpoint ({e}); the previous one stays, retrying at the next",
                        target.display()
                    );
                }
                failing = true;
            }
        }
    }
}
