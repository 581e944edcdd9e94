//! The systemd service-notification protocol (`sd_notify(3)`), written by hand.
//!
//! When soakd runs as a `Type=notify` unit, systemd puts the address of a
//! datagram socket in `NOTIFY_SOCKET`; every notification is one datagram of
//! newline-separated `KEY=VALUE` assignments. soakd sends four:
//!
//! - `READY=1` once preflight passed and the metrics port is bound, so
//!   `systemctl start` returns when the soak really runs, and fails when
//!   preflight refuses the plan;
//! - `STATUS=…`, a one-line summary that `systemctl status` shows;
//! - `WATCHDOG=1` while every worker loop checks in, so a stuck loop stops
//!   the pings and systemd restarts the unit after `WatchdogSec=`;
//! - `STOPPING=1` when a graceful stop begins.
//!
//! The protocol is a stable, documented interface, and speaking it takes a
//! `sendto` on a Unix datagram socket; linking libsystemd (or a crate around
//! it) for that would add a C dependency and `unsafe` for a dozen lines.
//!
//! Without `NOTIFY_SOCKET` (not started by systemd, or not as `Type=notify`)
//! a [`Notifier`] is disabled and every call is a no-op, so callers never
//! check. Sending is best effort: errors (no listener, service manager gone)
//! are ignored, since a lost `STATUS=` is harmless and a lost `READY=1` or
//! `WATCHDOG=1` is what systemd's own timeouts are for. A send blocks for at
//! most [`SEND_TIMEOUT`] when the service manager's queue is full; keep calls
//! off the per-request path (once a second is plenty).

use std::ffi::{OsStr, OsString};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// The longest a notification may wait for room in the service manager's
/// socket queue before it is dropped.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(1);

/// systemd ignores a notification datagram longer than this (its
/// `NOTIFY_BUFFER_MAX`, `PIPE_BUF`), so `STATUS=` lines are cut to fit.
const MAX_DATAGRAM: usize = 4096;

/// A connection to the service manager; a no-op when soakd is not run by
/// systemd (no `NOTIFY_SOCKET`).
///
/// It is `Send` and `Sync`: share one behind an `Arc` between the threads
/// that report readiness, status and watchdog pings. With `NotifyAccess=main`
/// any thread may send, since systemd checks the process id, not the thread.
#[derive(Debug)]
pub struct Notifier {
    /// `None` when disabled.
    link: Option<Link>,
    /// `WATCHDOG_USEC`, when it was meant for this process.
    watchdog: Option<Duration>,
}

/// An unbound, unconnected datagram socket and the service manager's
/// address. Unconnected, so that each send resolves the address afresh: a
/// service manager that re-executes itself recreates its socket at the same
/// address, and the next notification reaches the new one.
#[derive(Debug)]
struct Link {
    socket: UnixDatagram,
    addr: SocketAddr,
}

impl Notifier {
    /// Reads `NOTIFY_SOCKET` and `WATCHDOG_USEC` (and `WATCHDOG_PID`: only if
    /// it equals our pid) from the environment.
    ///
    /// `NOTIFY_SOCKET` is an absolute path, or `@name` for a socket in the
    /// abstract namespace; anything else (or nothing) gives a disabled
    /// notifier. The variables are left in the environment.
    pub fn from_env() -> Notifier {
        Notifier::from_vars(|name| std::env::var_os(name), std::process::id())
    }

    #[cfg(test)]
    /// For tests: a notifier sending to this socket path with this watchdog
    /// interval. Disabled if the path cannot be a socket address (too long).
    pub fn to_path(path: &std::path::Path, watchdog: Option<Duration>) -> Notifier {
        match SocketAddr::from_pathname(path) {
            Ok(addr) => Notifier::open(addr, watchdog),
            Err(_) => Notifier::disabled(),
        }
    }

    /// A notifier that sends nothing.
    fn disabled() -> Notifier {
        Notifier {
            link: None,
            watchdog: None,
        }
    }

    /// [`Notifier::from_env`] with the environment and our pid passed in, so
    /// tests need not modify the process environment.
    fn from_vars(var: impl Fn(&str) -> Option<OsString>, pid: u32) -> Notifier {
        let Some(addr) = var("NOTIFY_SOCKET").and_then(|s| socket_addr(&s)) else {
            return Notifier::disabled();
        };
        let usec = var("WATCHDOG_USEC");
        let watchdog_pid = var("WATCHDOG_PID");
        let watchdog = parse_watchdog(
            usec.as_deref().and_then(OsStr::to_str),
            watchdog_pid.as_deref().and_then(OsStr::to_str),
            pid,
        );
        Notifier::open(addr, watchdog)
    }

    /// Creates the sending socket; disabled if that fails.
    fn open(addr: SocketAddr, watchdog: Option<Duration>) -> Notifier {
        let Ok(socket) = UnixDatagram::unbound() else {
            return Notifier::disabled();
        };
        // Without a timeout a full queue on the receiving side would block
        // the caller for as long as the service manager is busy.
        let _ = socket.set_write_timeout(Some(SEND_TIMEOUT));
        Notifier {
            link: Some(Link { socket, addr }),
            watchdog,
        }
    }

    /// Whether notifications go anywhere.
    pub fn enabled(&self) -> bool {
        self.link.is_some()
    }

    /// The watchdog interval systemd asked for (`WATCHDOG_USEC`), if any.
    /// systemd recommends pinging at half of it. Always `None` when disabled.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.link.as_ref().and(self.watchdog)
    }

    /// Tells the service manager that startup is finished: `READY=1`.
    pub fn ready(&self) {
        self.send("READY=1");
    }

    /// Sets the status line `systemctl status` shows: `STATUS=<line>`.
    /// Newlines in `line` become spaces (a newline would end the assignment),
    /// and a line too long for one notification is cut.
    pub fn status(&self, line: &str) {
        if self.link.is_none() {
            return;
        }
        let mut msg = String::with_capacity("STATUS=".len() + line.len());
        msg.push_str("STATUS=");
        msg.extend(line.chars().map(|c| if c == '\n' || c == '\r' { ' ' } else { c }));
        if msg.len() > MAX_DATAGRAM {
            let mut end = MAX_DATAGRAM;
            while !msg.is_char_boundary(end) {
                end -= 1;
            }
            msg.truncate(end);
        }
        self.send(&msg);
    }

    /// Pings the watchdog: `WATCHDOG=1`.
    pub fn watchdog(&self) {
        self.send("WATCHDOG=1");
    }

    /// Tells the service manager that a graceful stop has begun: `STOPPING=1`.
    pub fn stopping(&self) {
        self.send("STOPPING=1");
    }

    /// Sends one notification, ignoring errors.
    fn send(&self, msg: &str) {
        if let Some(link) = &self.link {
            let _ = link.socket.send_to_addr(msg.as_bytes(), &link.addr);
        }
    }
}

/// The address in `NOTIFY_SOCKET`: an absolute path, or `@name` for the
/// abstract namespace (as `sd_notify` accepts). `None` for anything else.
fn socket_addr(value: &OsStr) -> Option<SocketAddr> {
    match value.as_bytes() {
        [b'/', ..] => SocketAddr::from_pathname(value).ok(),
        [b'@', name @ ..] => SocketAddr::from_abstract_name(name).ok(),
        _ => None,
    }
}

/// The watchdog interval from `WATCHDOG_USEC` (microseconds), as
/// `sd_watchdog_enabled` reads it: absent, unparsable, zero or infinite
/// means no watchdog, and so does a `WATCHDOG_PID` that is set but is not
/// `our_pid` (the variables were inherited from a parent that is watched).
fn parse_watchdog(usec: Option<&str>, watchdog_pid: Option<&str>, our_pid: u32) -> Option<Duration> {
    let usec: u64 = usec?.trim().parse().ok()?;
    if usec == 0 || usec == u64::MAX {
        return None;
    }
    if let Some(pid) = watchdog_pid {
        let pid: u32 = pid.trim().parse().ok()?;
        if pid != our_pid {
            return None;
        }
    }
    Some(Duration::from_micros(usec))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use std::path::Path;
    use std::path::PathBuf;
    use std::time::{SystemTime, UNIX_EPOCH};

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            let dir = std::env::temp_dir().join(format!("soakd-notify-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("create temp dir");
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A receiving socket bound at `path`, with a read timeout so a missing
    /// message fails the test instead of hanging it.
    fn receiver(path: &Path) -> UnixDatagram {
        let rx = UnixDatagram::bind(path).expect("bind receiver");
        rx.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        rx
    }

    fn recv(rx: &UnixDatagram) -> String {
        let mut buf = vec![0u8; 2 * MAX_DATAGRAM];
        let n = rx.recv(&mut buf).expect("a notification");
        String::from_utf8(buf[..n].to_vec()).expect("UTF-8")
    }

    /// Asserts that nothing more is queued.
    fn assert_empty(rx: &UnixDatagram) {
        rx.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 64];
        let err = rx.recv(&mut buf).expect_err("no further notification");
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    }

    /// A name unlikely to clash in the abstract namespace, which is shared
    /// by the whole network namespace and has no directory to clean up.
    fn abstract_name(tag: &str) -> String {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos();
        format!("soakd-notify-test-{}-{nanos}-{tag}", std::process::id())
    }

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let pairs: Vec<(String, OsString)> = pairs.iter().map(|(k, v)| (k.to_string(), OsString::from(v))).collect();
        move |name| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn each_message_arrives_exactly() {
        let dir = TempDir::new("messages");
        let path = dir.0.join("notify.sock");
        let rx = receiver(&path);
        let n = Notifier::to_path(&path, Some(Duration::from_secs(30)));
        assert!(n.enabled());
        assert_eq!(n.watchdog_interval(), Some(Duration::from_secs(30)));

        n.ready();
        assert_eq!(recv(&rx), "READY=1");
        n.status("1000/1000 connections, 998.7 req/s, p99 0.53 ms, 0 errors");
        assert_eq!(
            recv(&rx),
            "STATUS=1000/1000 connections, 998.7 req/s, p99 0.53 ms, 0 errors"
        );
        n.status("two\nlines\r\n");
        assert_eq!(recv(&rx), "STATUS=two lines  ");
        n.status("");
        assert_eq!(recv(&rx), "STATUS=");
        n.watchdog();
        assert_eq!(recv(&rx), "WATCHDOG=1");
        n.stopping();
        assert_eq!(recv(&rx), "STOPPING=1");
        assert_empty(&rx);
    }

    #[test]
    fn without_watchdog_interval() {
        let dir = TempDir::new("nowatchdog");
        let path = dir.0.join("notify.sock");
        let rx = receiver(&path);
        let n = Notifier::to_path(&path, None);
        assert!(n.enabled());
        assert_eq!(n.watchdog_interval(), None);
        n.watchdog();
        assert_eq!(recv(&rx), "WATCHDOG=1");
    }

    #[test]
    fn long_status_is_cut_to_one_datagram_on_a_char_boundary() {
        let dir = TempDir::new("long");
        let path = dir.0.join("notify.sock");
        let rx = receiver(&path);
        let n = Notifier::to_path(&path, None);
        n.status(&"é".repeat(3000));
        let got = recv(&rx);
        assert!(
            got.len() <= MAX_DATAGRAM && got.len() > MAX_DATAGRAM - 2,
            "{}",
            got.len()
        );
        assert!(got.starts_with("STATUS=éé"));
        assert!(got.ends_with('é'));
    }

    #[test]
    fn no_notify_socket_means_disabled_and_no_ops() {
        let n = Notifier::from_vars(vars(&[("WATCHDOG_USEC", "30000000")]), 42);
        assert!(!n.enabled());
        assert_eq!(n.watchdog_interval(), None);
        n.ready();
        n.status("ignored");
        n.watchdog();
        n.stopping();

        // The real environment, unless this test itself runs under a
        // service manager that set NOTIFY_SOCKET.
        if std::env::var_os("NOTIFY_SOCKET").is_none() {
            let n = Notifier::from_env();
            assert!(!n.enabled());
            assert_eq!(n.watchdog_interval(), None);
            n.ready();
            n.status("ignored");
            n.watchdog();
            n.stopping();
        }
    }

    #[test]
    fn unusable_notify_socket_values_disable() {
        for value in ["", "relative/path", "notify", "vsock:2:1234"] {
            let n = Notifier::from_vars(vars(&[("NOTIFY_SOCKET", value)]), 42);
            assert!(!n.enabled(), "{value:?}");
        }
        let long = format!("/{}", "x".repeat(200));
        assert!(!Notifier::from_vars(vars(&[("NOTIFY_SOCKET", &long)]), 42).enabled());
        assert!(!Notifier::to_path(Path::new(&long), None).enabled());
    }

    #[test]
    fn path_from_environment_with_watchdog() {
        let dir = TempDir::new("env");
        let path = dir.0.join("notify.sock");
        let rx = receiver(&path);
        let p = path.to_str().unwrap();
        let n = Notifier::from_vars(
            vars(&[
                ("NOTIFY_SOCKET", p),
                ("WATCHDOG_USEC", "15000000"),
                ("WATCHDOG_PID", "42"),
            ]),
            42,
        );
        assert!(n.enabled());
        assert_eq!(n.watchdog_interval(), Some(Duration::from_secs(15)));
        n.ready();
        assert_eq!(recv(&rx), "READY=1");

        // A watchdog meant for another process is not ours, but notifications still go out.
        let n = Notifier::from_vars(
            vars(&[
                ("NOTIFY_SOCKET", p),
                ("WATCHDOG_USEC", "15000000"),
                ("WATCHDOG_PID", "41"),
            ]),
            42,
        );
        assert!(n.enabled());
        assert_eq!(n.watchdog_interval(), None);
        n.stopping();
        assert_eq!(recv(&rx), "STOPPING=1");
    }

    #[test]
    fn abstract_socket() {
        let name = abstract_name("abstract");
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let rx = UnixDatagram::bind_addr(&addr).expect("bind abstract receiver");
        rx.set_read_timeout(Some(Duration::from_secs(5))).unwrap();

        let n = Notifier::from_vars(vars(&[("NOTIFY_SOCKET", &format!("@{name}"))]), 42);
        assert!(n.enabled());
        n.ready();
        assert_eq!(recv(&rx), "READY=1");
        n.status("abstract\nok");
        assert_eq!(recv(&rx), "STATUS=abstract ok");
        n.watchdog();
        assert_eq!(recv(&rx), "WATCHDOG=1");
        assert_empty(&rx);
    }

    #[test]
    fn sending_to_nobody_is_ignored() {
        let dir = TempDir::new("nobody");
        let path = dir.0.join("notify.sock");
        // Nothing bound there: ENOENT.
        let n = Notifier::to_path(&path, None);
        assert!(n.enabled());
        n.ready();
        n.status("x");
        // A receiver that went away: ECONNREFUSED.
        drop(receiver(&path));
        n.watchdog();
        n.stopping();
        // The same for an abstract name nobody holds.
        let n = Notifier::from_vars(vars(&[("NOTIFY_SOCKET", &format!("@{}", abstract_name("gone")))]), 42);
        n.ready();
    }

    #[test]
    fn a_service_manager_that_comes_back_is_reached() {
        let dir = TempDir::new("again");
        let path = dir.0.join("notify.sock");
        let n = Notifier::to_path(&path, None);
        drop(receiver(&path));
        std::fs::remove_file(&path).unwrap();
        n.watchdog();
        let rx = receiver(&path);
        n.watchdog();
        assert_eq!(recv(&rx), "WATCHDOG=1");
    }

    #[test]
    fn watchdog_usec_parsing() {
        let s = Duration::from_secs;
        let cases: &[(Option<&str>, Option<&str>, Option<Duration>)] = &[
            (None, None, None),
            (Some("30000000"), None, Some(s(30))),
            (Some("500"), None, Some(Duration::from_micros(500))),
            (Some(" 30000000\n"), None, Some(s(30))),
            (Some("0"), None, None),
            (Some(""), None, None),
            (Some("-1"), None, None),
            (Some("30s"), None, None),
            (Some("18446744073709551615"), None, None), // USEC_INFINITY
            (Some("18446744073709551616"), None, None), // overflow
            (Some("30000000"), Some("4242"), Some(s(30))),
            (Some("30000000"), Some("4243"), None),
            (Some("30000000"), Some("not-a-pid"), None),
            (Some("30000000"), Some(""), None),
            (None, Some("4242"), None),
        ];
        for &(usec, pid, want) in cases {
            assert_eq!(
                parse_watchdog(usec, pid, 4242),
                want,
                "WATCHDOG_USEC={usec:?} WATCHDOG_PID={pid:?}"
            );
        }
    }

    #[test]
    fn notifier_is_shareable_between_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Notifier>();
    }
}
