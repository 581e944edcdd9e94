//! Waiting for readiness until a deadline finer than a millisecond, with no
//! timer of its own: `epoll_pwait2` on a mio `Poll`'s epoll set.
//!
//! A paced soak's loop wakes for two things per request: its due time and
//! its response. mio's `Poll::poll` takes its timeout in whole
//! milliseconds (rounded up), which would add up to a millisecond of
//! schedule lag to every paced request; a timerfd armed for each due time
//! fixes that at the cost of one `timerfd_settime` per request (a third of
//! what a paced request cost, measured in issue 40). `epoll_pwait2` (Linux
//! 5.11) takes a `timespec`: the wait itself ends on time, so a paced
//! request costs its send, its receive and the waits, nothing else.
//!
//! The registrations stay mio's (`Registry`, tokens, edge-triggered
//! interests); only the wait is made here, on the same epoll descriptor,
//! and its events are read with mio's own rules ([`Ready`]). On a kernel
//! without `epoll_pwait2` (ENOSYS, or a seccomp filter that refuses it)
//! the wait falls back for good to `epoll_wait`, its timeout rounded up to
//! the millisecond as mio's is: late by at most that, never early.
//!
//! A timerfd fires exactly; a wait's timeout may end late by the kernel's
//! timer slack: the thread's (50 us by default) or 0.1% of the timeout,
//! whichever is more. The thread's 50 us is kept on purpose: it lets the
//! timer's wake-up fall together with a socket's within it, and at 15,000
//! paced requests a second a slack of 1 us cost 9% more CPU per request
//! (bench/syscalls.sh, issue 40) for about 30 us less schedule lag at the
//! median, within the wheel's 100 us tick. A long timeout (over [`LONG`])
//! would be late by more, so it ends early by 0.2% of it, an empty
//! wake-up after which the loop waits the rest: one more wake-up per long
//! wait, none per request.

use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// One readiness event, read as mio reads it.
#[derive(Clone, Copy, Debug)]
pub struct Ready {
    events: u32,
    token: usize,
}

impl Ready {
    /// An event of `flags` (`EPOLL*` bits) for `token` (unit tests).
    #[cfg(test)]
    pub fn new(token: mio::Token, flags: i32) -> Ready {
        Ready {
            events: flags as u32,
            token: token.0,
        }
    }

    #[inline]
    fn has(&self, flag: i32) -> bool {
        self.events as i32 & flag != 0
    }

    /// The token it was registered with.
    #[inline]
    pub fn token(&self) -> mio::Token {
        mio::Token(self.token)
    }

    /// Readable (or urgent data).
    #[inline]
    pub fn is_readable(&self) -> bool {
        self.has(libc::EPOLLIN) || self.has(libc::EPOLLPRI)
    }

    /// Writable.
    #[inline]
    pub fn is_writable(&self) -> bool {
        self.has(libc::EPOLLOUT)
    }

    /// An error is pending on the socket.
    #[inline]
    pub fn is_error(&self) -> bool {
        self.has(libc::EPOLLERR)
    }

    /// The peer's FIN arrived (or both halves closed).
    #[inline]
    pub fn is_read_closed(&self) -> bool {
        self.has(libc::EPOLLHUP) || (self.has(libc::EPOLLIN) && self.has(libc::EPOLLRDHUP))
    }
}

/// A loop's wait and the events it brought (kept between waits, so the
/// buffer is allocated once).
pub struct Waiter {
    events: Vec<libc::epoll_event>,
    len: usize,
    /// `epoll_pwait2` works here (false once it said ENOSYS or EPERM).
    fine: bool,
}

impl std::fmt::Debug for Waiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiter")
            .field("fine", &self.fine)
            .finish_non_exhaustive()
    }
}

/// A timeout past which the kernel's slack (0.1% of it) exceeds the
/// thread's own (50 us); such a wait ends early (see the module doc).
const LONG: Duration = Duration::from_millis(50);

impl Waiter {
    /// Room for `capacity` events per wait.
    pub fn new(capacity: usize) -> Waiter {
        Waiter {
            events: vec![libc::epoll_event { events: 0, u64: 0 }; capacity.max(1)],
            len: 0,
            fine: true,
        }
    }

    /// Waits on `poll`'s epoll set until an event or `timeout` (`None`:
    /// no limit); a timeout over [`LONG`] ends a little early, and
    /// `Interrupted` is an empty wait: the caller waits again for what is
    /// left.
    pub fn wait(&mut self, poll: &mio::Poll, timeout: Option<Duration>) -> io::Result<()> {
        self.len = 0;
        let timeout = timeout.map(|t| if t > LONG { t - t / 500 } else { t });
        let fd = poll.as_raw_fd();
        let cap = self.events.len().min(i32::MAX as usize) as i32;
        let n = if self.fine {
            let ts = timeout.map(|t| libc::timespec {
                tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
                tv_nsec: t.subsec_nanos() as libc::c_long,
            });
            let n = pwait2(fd, &mut self.events, cap, ts.as_ref());
            match n {
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM)) => {
                    self.fine = false;
                    return self.wait(poll, timeout);
                }
                n => n,
            }
        } else {
            let ms = timeout.map_or(-1, |t| {
                t.checked_add(Duration::from_nanos(999_999))
                    .unwrap_or(t)
                    .as_millis()
                    .min(i32::MAX as u128) as i32
            });
            wait_ms(fd, &mut self.events, cap, ms)
        };
        match n {
            Ok(n) => self.len = n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// The events the last wait brought.
    pub fn iter(&self) -> impl Iterator<Item = Ready> + '_ {
        self.events[..self.len].iter().map(|e| Ready {
            events: e.events,
            token: e.u64 as usize,
        })
    }
}

/// `epoll_pwait2(fd, events, cap, timeout, NULL)`: the events written
/// into the front of `events`.
#[allow(unsafe_code)]
fn pwait2(fd: i32, events: &mut [libc::epoll_event], cap: i32, timeout: Option<&libc::timespec>) -> io::Result<usize> {
    debug_assert!(cap as usize <= events.len());
    let ts = timeout.map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `events` holds `cap` writable entries, `ts` is null or points
    // to a live timespec, and a null signal mask leaves the mask alone.
    let n = unsafe { libc::epoll_pwait2(fd, events.as_mut_ptr(), cap, ts, std::ptr::null()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// `epoll_wait(fd, events, cap, ms)`.
#[allow(unsafe_code)]
fn wait_ms(fd: i32, events: &mut [libc::epoll_event], cap: i32, ms: i32) -> io::Result<usize> {
    debug_assert!(cap as usize <= events.len());
    // SAFETY: `events` holds `cap` writable entries.
    let n = unsafe { libc::epoll_wait(fd, events.as_mut_ptr(), cap, ms) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_timeout_ends_the_wait_on_time_to_well_under_a_millisecond() {
        let poll = mio::Poll::new().unwrap();
        let mut w = Waiter::new(8);
        // The shortest of several waits: a busy machine may only delay one.
        let best = (0..20)
            .map(|_| {
                let t = Instant::now();
                w.wait(&poll, Some(Duration::from_micros(300))).unwrap();
                assert_eq!(w.iter().count(), 0);
                t.elapsed()
            })
            .min()
            .unwrap();
        assert!(best >= Duration::from_micros(300), "woke early: {best:?}");
        assert!(
            !w.fine || best < Duration::from_micros(900),
            "a 300 us wait took {best:?} at best: rounded to the millisecond?"
        );
    }

    #[test]
    fn events_read_as_mio_reads_them() {
        let poll = mio::Poll::new().unwrap();
        let waker = mio::Waker::new(poll.registry(), mio::Token(7)).unwrap();
        let mut w = Waiter::new(8);
        waker.wake().unwrap();
        w.wait(&poll, Some(Duration::from_secs(5))).unwrap();
        let got: Vec<Ready> = w.iter().collect();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].token(), mio::Token(7));
        assert!(got[0].is_readable() && !got[0].is_writable() && !got[0].is_error());
        let closed = Ready::new(mio::Token(1), libc::EPOLLIN | libc::EPOLLRDHUP);
        assert!(closed.is_read_closed() && closed.is_readable());
        assert!(Ready::new(mio::Token(1), libc::EPOLLHUP).is_read_closed());
        assert!(!Ready::new(mio::Token(1), libc::EPOLLRDHUP).is_read_closed());
        assert!(Ready::new(mio::Token(1), libc::EPOLLERR).is_error());
    }
}
