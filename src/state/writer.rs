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
//!
//! The thread runs as `SCHED_IDLE`: a checkpoint must not disturb the
//! schedule, and under CFS a thread that sleeps 30 s between bursts has
//! the lowest virtual runtime on its core, so when it wakes it preempts a
//! busy worker at once and keeps the CPU for its whole encode (up to 84 ms
//! for a week's state) while the worker's due requests wait. Nice 19
//! only lowers its weight, not that head start (tried: the lag stayed).
//! `SCHED_IDLE` runs it only on time no other thread of the core wants;
//! the last checkpoint, at exit, is written at normal priority (nothing
//! is left to disturb, and an idle thread on a busy machine could wait
//! long). With `SOAKD_STATE_DEBUG` set each checkpoint's phases are
//! printed: the copy on the control thread, the encode and the write.

use std::path::PathBuf;
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{Body, WindowSaved, digest};
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
    /// The live comparison with `--baseline`.
    pub baseline: Option<super::BaselineSaved>,
    /// How long taking it took on the control thread (for
    /// `SOAKD_STATE_DEBUG`).
    pub taken_in: Duration,
    /// The last one of the run (set by [`Writer::finish`]).
    pub last: bool,
}

/// The writer thread and when the next checkpoint is due.
pub struct Writer {
    sender: Option<SyncSender<Snapshot>>,
    /// The totals of the checkpoints written, handed back for the next
    /// copy to reuse ([`crate::stats::Totals::saved_reusing`]).
    spare: mpsc::Receiver<TotalsSaved>,
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
        // At most two in flight (one being written, one waiting), so the
        // channel back never holds more than that.
        let (spare_tx, spare) = mpsc::channel::<TotalsSaved>();
        let path = sf.path.clone();
        let thread = std::thread::Builder::new()
            .name("soakd-state".into())
            .spawn(move || write_loop(&path, fixed, receiver, spare_tx))
            .map_err(|e| Error::io("starting the state writer thread", e))?;
        Ok(Some(Writer {
            sender: Some(sender),
            spare,
            thread: Some(thread),
            every: sf.checkpoint_interval,
            next: from,
        }))
    }

    /// True when a checkpoint is due at run time `elapsed`.
    pub fn due(&self, elapsed: Duration) -> bool {
        elapsed >= self.next
    }

    /// The totals of a checkpoint already written, to copy the next one
    /// into (`None` before the first is written).
    pub fn spare(&mut self) -> Option<TotalsSaved> {
        self.spare.try_iter().last()
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
    pub fn finish(&mut self, mut snap: Snapshot) {
        snap.last = true;
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
    spare: mpsc::Sender<TotalsSaved>,
) {
    let mut failing = false;
    let target: PathBuf = path.to_path_buf();
    let debug = std::env::var_os("SOAKD_STATE_DEBUG").is_some();
    let mut idle = set_idle(true);
    if let Err(e) = &idle {
        eprintln!("soakd: --state: cannot run the checkpoint writer as SCHED_IDLE ({e}); it runs at normal priority");
    }
    for snap in rx {
        // The run is over: the last one at normal priority.
        if snap.last && matches!(idle, Ok(true)) {
            idle = set_idle(false).map(|_| false);
        }
        let t0 = Instant::now();
        let body = Body {
            digest: digest.clone(),
            settings: settings.clone(),
            at: snap.at,
            finished: snap.finished,
            totals: snap.totals,
            window: snap.window,
            baseline: snap.baseline,
        };
        // Encoded straight into the file (see `encode_to`): the encode
        // and the write are one step now.
        let mut bytes = 0usize;
        let written = crate::fsio::write_atomic_with(&target, |w| {
            let mut counted = Counted {
                inner: w,
                bytes: &mut bytes,
            };
            super::encode_to(&body, &mut counted)
        })
        .map(|()| bytes);
        let encoded_in = t0.elapsed();
        // The control thread copies the next checkpoint into these. The
        // timeline's points are let go now: while a copy holds them, a
        // coarsening timeline must copy them rather than reuse their room.
        let mut totals = body.totals;
        totals.timeline.points.clear();
        let _ = spare.send(totals);
        // The encoder's buffers (the histograms' compression, ~130 KB
        // each) go back now rather than at the control thread's next
        // give-back, whose phase against this write would decide whether
        // soakd's RSS counts them (see `crate::heap`). In the normal
        // class: the give-back takes every arena's lock in turn, the
        // workers' too, and at idle priority a busy machine could leave
        // it holding one while a worker waits. Where the class cannot be
        // raised, the control thread's timer gives them back instead.
        let was_idle = matches!(idle, Ok(true));
        if !was_idle || set_idle(false).is_ok() {
            crate::heap::give_back();
            if was_idle {
                idle = set_idle(true);
            }
        }
        match written {
            Ok(bytes) => {
                if failing {
                    eprintln!("soakd: --state {}: checkpoints written again", target.display());
                }
                failing = false;
                if debug {
                    let ms = |d: Duration| d.as_secs_f64() * 1e3;
                    eprintln!(
                        "soakd: --state {}: checkpoint at {:.1}s, {bytes} bytes: copied in {:.2} ms (control thread), encoded (twice: tallied, then streamed) and written in {:.1} ms{}",
                        target.display(),
                        snap.at.as_secs_f64(),
                        ms(snap.taken_in),
                        ms(encoded_in),
                        if matches!(idle, Ok(true)) { " (SCHED_IDLE)" } else { "" }
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

/// Counts the bytes written through it (for `SOAKD_STATE_DEBUG`).
struct Counted<'a> {
    inner: &'a mut dyn std::io::Write,
    bytes: &'a mut usize,
}

impl std::io::Write for Counted<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        *self.bytes += n;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Puts the calling thread in the `SCHED_IDLE` class (`idle`) or back in
/// the normal one; returns whether it is idle now. Linux applies
/// `sched_setscheduler` with pid 0 to the calling thread only.
#[allow(unsafe_code)]
fn set_idle(idle: bool) -> std::io::Result<bool> {
    let param = libc::sched_param { sched_priority: 0 };
    let policy = if idle { libc::SCHED_IDLE } else { libc::SCHED_OTHER };
    // SAFETY: `param` is a live sched_param for the duration of the call;
    // the call only changes this thread's scheduling class.
    let rc = unsafe { libc::sched_setscheduler(0, policy, &param) };
    if rc == 0 {
        Ok(idle)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writer_class_is_set_per_thread() {
        // On a thread of its own, as the writer: idle, then normal again,
        // and the test's own thread untouched.
        std::thread::spawn(|| {
            assert!(set_idle(true).unwrap());
            // SAFETY-free check through the policy getter.
            assert_eq!(policy(), libc::SCHED_IDLE);
            assert!(!set_idle(false).unwrap());
            assert_eq!(policy(), libc::SCHED_OTHER);
        })
        .join()
        .unwrap();
        assert_eq!(policy(), libc::SCHED_OTHER);
    }

    #[allow(unsafe_code)]
    fn policy() -> libc::c_int {
        // SAFETY: reads this thread's policy; no pointers.
        unsafe { libc::sched_getscheduler(0) }
    }
}
