//! The /proc helpers of `tests/util` against processes whose figures are
//! known. Other tests assert bounds on what these helpers return (memory
//! stays under a limit, few sockets in CLOSE_WAIT, little CPU used), so a
//! helper that quietly returned nothing or a wrong unit would make those
//! tests pass for the wrong reason.

mod util;

use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use util::{cpu_seconds, is_root, socket_states, vm_rss_kb, wait_for_comm, wait_until};

/// The pid of a process that existed and has been reaped.
fn gone_pid() -> u32 {
    let mut child = Command::new("true").spawn().expect("run true");
    let pid = child.id();
    child.wait().unwrap();
    pid
}

#[test]
fn resident_memory_is_in_kib() {
    let before = vm_rss_kb(std::process::id()).expect("own VmRSS");
    assert!(before > 500, "a test binary uses more than {before} KiB");
    // 64 MiB, written so that it is resident (and kept from the optimiser,
    // which would otherwise drop the unused allocation).
    let block = std::hint::black_box(vec![1u8; 64 << 20]);
    let after = vm_rss_kb(std::process::id()).expect("own VmRSS");
    assert!(
        after >= before + 60 * 1024,
        "64 MiB more resident, but VmRSS went {before} -> {after} KiB"
    );
    assert!(after < before + 200 * 1024, "{before} -> {after} KiB");
    drop(block);
    assert_eq!(vm_rss_kb(gone_pid()), None);
    assert_eq!(vm_rss_kb(u32::MAX), None);
}

#[test]
fn cpu_time_is_in_seconds() {
    let me = std::process::id();
    let start = cpu_seconds(me).expect("own CPU time");
    let began = Instant::now();
    let mut x = 0u64;
    while cpu_seconds(me).unwrap() - start < 0.3 {
        assert!(began.elapsed() < Duration::from_secs(20), "CPU time never moved");
        for i in 0..100_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
    }
    let used = cpu_seconds(me).unwrap() - start;
    let wall = began.elapsed().as_secs_f64();
    // One spinning thread (plus whatever the harness runs alongside, on at
    // most a few cores) uses about the wall time: not 10 times more, and
    // not 10 times less unless the machine is starved.
    assert!(used <= wall * 4.0 + 0.05, "{used} s of CPU in {wall} s");
    assert!(used >= wall * 0.2, "{used} s of CPU in {wall} s");
    assert_eq!(cpu_seconds(gone_pid()), None);
}

#[test]
fn comm_seen_after_exec() {
    let mut child = Command::new("sh")
        .args(["-c", "sleep 1; exec sleep 30"])
        .stdin(Stdio::null())
        .spawn()
        .expect("run sh");
    let pid = child.id();
    // The spawn returns once the exec has begun, which is a moment before
    // the kernel renames the task: the very reason for waiting.
    assert!(wait_for_comm(pid, "sh", 5), "becomes sh");
    assert!(!wait_for_comm(pid, "sleep", 0), "not exec'd yet");
    assert!(wait_for_comm(pid, "sleep", 10), "becomes sleep");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!wait_for_comm(pid, "sleep", 2), "gone");
}

#[test]
fn socket_states_by_name() {
    let me = std::process::id();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    let states = socket_states(me);
    assert!(states.get("LISTEN").copied().unwrap_or(0) >= 1, "{states:?}");
    assert!(states.get("ESTABLISHED").copied().unwrap_or(0) >= 2, "{states:?}");

    // The client closes (with nothing unread, or it would reset); the
    // server side waits for us to close it.
    client.shutdown(Shutdown::Both).unwrap();
    drop(client);
    wait_until(
        || socket_states(me).get("CLOSE_WAIT").copied().unwrap_or(0) > 0,
        Duration::from_secs(5),
        "the server side of the closed connection in CLOSE_WAIT",
    );
    drop(server);

    // tcp6 is read too, where the host has IPv6.
    if let Ok(v6) = TcpListener::bind("[::1]:0") {
        let before = socket_states(me).get("LISTEN").copied().unwrap_or(0);
        let v6b = TcpListener::bind("[::1]:0").unwrap();
        assert_eq!(socket_states(me).get("LISTEN").copied().unwrap_or(0), before + 1);
        drop((v6, v6b));
    }
    assert!(socket_states(gone_pid()).is_empty());
}

#[test]
fn root_is_effective_uid_0() {
    let out = Command::new("id").arg("-u").output().expect("run id -u");
    let uid = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(is_root(), uid == "0", "id -u says {uid}");
}
