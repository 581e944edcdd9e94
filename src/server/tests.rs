//! The built-in target's own tests: each route, fault and limit against
//! a real listener on port 0, with plain sockets as the client.

use super::responder::TRICKLE_STEP;
use super::*;
use crate::netio::testing;
use crate::wire::request_head::MAX_HEADERS;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::thread;
use std::time::Instant;

const PONG: &str = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\r\npong";

fn start_with(threads: usize, delay: Duration) -> TargetHandle {
    spawn(&TargetConfig {
        threads,
        delay,
        ..Default::default()
    })
    .expect("target starts")
}

fn start() -> TargetHandle {
    start_with(2, Duration::ZERO)
}

/// Connects through the test client the exporter's tests use too.
fn connect(target: &TargetHandle) -> TcpStream {
    let stream = testing::connect(target.local_addr());
    stream.set_read_timeout(Some(testing::TIMEOUT)).unwrap();
    stream.set_nodelay(true).unwrap();
    stream
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n")
}

/// Reads exactly as many bytes as `want` holds and compares.
fn expect(stream: &mut TcpStream, want: &str) {
    let mut got = vec![0; want.len()];
    stream.read_exact(&mut got).expect("full response");
    assert_eq!(String::from_utf8_lossy(&got), want);
}

fn expect_eof(stream: &mut TcpStream) {
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).expect("clean close");
    assert_eq!(String::from_utf8_lossy(&rest), "", "nothing after the response");
}

fn status(code: u16, reason: &str) -> String {
    format!("HTTP/1.1 {code} {reason}\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\r\npong")
}

fn big() -> String {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: 65536\r\nContent-Type: text/plain\r\n\r\n{}",
        "x".repeat(BIG_BODY)
    )
}

#[test]
fn pong_on_a_kept_alive_connection() {
    let target = start();
    let mut s = connect(&target);
    for _ in 0..3 {
        s.write_all(get("/").as_bytes()).unwrap();
        expect(&mut s, PONG);
    }
    target.stop();
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let target = start();
    let mut s = connect(&target);
    let requests = format!("{}{}{}", get("/status/201"), get("/"), get("/status/404"));
    s.write_all(requests.as_bytes()).unwrap();
    expect(
        &mut s,
        &format!("{}{PONG}{}", status(201, "Created"), status(404, "Not Found")),
    );
    target.stop();
}

#[test]
fn request_split_across_writes() {
    let target = start();
    let mut s = connect(&target);
    s.write_all(b"GET /status/202 HT").unwrap();
    thread::sleep(Duration::from_millis(50));
    s.write_all(b"TP/1.1\r\nHost: t\r\n").unwrap();
    thread::sleep(Duration::from_millis(50));
    // The rest of the head plus a whole second request in one write.
    s.write_all(format!("\r\n{}", get("/")).as_bytes()).unwrap();
    expect(&mut s, &format!("{}{PONG}", status(202, "Accepted")));
    target.stop();
}

#[test]
fn request_trickled_byte_by_byte() {
    let target = start();
    let mut s = connect(&target);
    for byte in get("/").bytes() {
        s.write_all(&[byte]).unwrap();
        thread::sleep(Duration::from_millis(2));
    }
    expect(&mut s, PONG);
    target.stop();
}

#[test]
fn request_bodies_are_skipped() {
    let target = start();
    let mut s = connect(&target);
    // Body and the next request in one write.
    let post = "POST /status/201 HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789";
    s.write_all(format!("{post}{}", get("/")).as_bytes()).unwrap();
    expect(&mut s, &format!("{}{PONG}", status(201, "Created")));
    // A body that spans writes and looks like a request itself.
    let body = get("/close");
    s.write_all(format!("PUT / HTTP/1.1\r\nContent-Length: {}\r\n\r\n", body.len()).as_bytes())
        .unwrap();
    thread::sleep(Duration::from_millis(30));
    s.write_all(&body.as_bytes()[..5]).unwrap();
    thread::sleep(Duration::from_millis(30));
    s.write_all(format!("{}{}", &body[5..], get("/status/202")).as_bytes())
        .unwrap();
    expect(&mut s, &format!("{PONG}{}", status(202, "Accepted")));
    // Larger than the read buffer.
    let huge = "y".repeat(3 * READ_BUF + 17);
    s.write_all(format!("POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n{huge}", huge.len()).as_bytes())
        .unwrap();
    s.write_all(get("/status/201").as_bytes()).unwrap();
    expect(&mut s, &format!("{PONG}{}", status(201, "Created")));
    target.stop();
}

#[test]
fn chunked_route_sends_chunks_and_a_trailer() {
    let target = start();
    let mut s = connect(&target);
    s.write_all(get("/chunked").as_bytes()).unwrap();
    expect(
        &mut s,
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Trailer\r\n\
         Content-Type: text/plain\r\n\r\n2\r\npo\r\n2\r\nng\r\n0\r\nX-Trailer: done\r\n\r\n",
    );
    s.write_all(get("/").as_bytes()).unwrap();
    expect(&mut s, PONG);
    target.stop();
}

#[test]
fn close_route_closes_after_the_response() {
    let target = start();
    let mut s = connect(&target);
    s.write_all(get("/close?x=1").as_bytes()).unwrap();
    expect(
        &mut s,
        "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\
         Connection: close\r\n\r\npong",
    );
    expect_eof(&mut s);
    target.stop();
}

#[test]
fn http10_route_is_close_delimited() {
    let target = start();
    let mut s = connect(&target);
    s.write_all(get("/http10").as_bytes()).unwrap();
    expect(&mut s, "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\npong");
    expect_eof(&mut s);
    target.stop();
}

#[test]
fn continue_route_sends_100_then_pong() {
    let target = start();
    let mut s = connect(&target);
    s.write_all(get("/continue").as_bytes()).unwrap();
    expect(&mut s, &format!("HTTP/1.1 100 Continue\r\n\r\n{PONG}"));
    target.stop();
}

#[test]
fn status_route() {
    let target = start();
    let mut s = connect(&target);
    for (code, reason) in [
        (200, "OK"),
        (299, "Success"),
        (404, "Not Found"),
        (503, "Service Unavailable"),
        (599, "Server Error"),
    ] {
        s.write_all(get(&format!("/status/{code}")).as_bytes()).unwrap();
        expect(&mut s, &status(code, reason));
    }
    s.write_all(get("/status/204").as_bytes()).unwrap();
    expect(&mut s, "HTTP/1.1 204 No Content\r\n\r\n");
    s.write_all(get("/status/304").as_bytes()).unwrap();
    expect(&mut s, "HTTP/1.1 304 Not Modified\r\n\r\n");
    // Informational and out-of-range codes are not routes: plain pong.
    for path in ["/status/101", "/status/600", "/status/20", "/status/abc"] {
        s.write_all(get(path).as_bytes()).unwrap();
        expect(&mut s, PONG);
    }
    target.stop();
}

#[test]
fn big_route_spans_many_reads() {
    let target = start();
    let mut s = connect(&target);
    for _ in 0..2 {
        s.write_all(get("/big").as_bytes()).unwrap();
        expect(&mut s, &big());
    }
    target.stop();
}

#[test]
fn head_gets_headers_only() {
    let target = start();
    let mut s = connect(&target);
    s.write_all(b"HEAD / HTTP/1.1\r\n\r\nHEAD /big HTTP/1.1\r\n\r\nHEAD /chunked HTTP/1.1\r\n\r\n")
        .unwrap();
    s.write_all(get("/").as_bytes()).unwrap();
    expect(
        &mut s,
        &format!(
            "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\r\n\
             HTTP/1.1 200 OK\r\nContent-Length: 65536\r\nContent-Type: text/plain\r\n\r\n\
             HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Trailer\r\n\
             Content-Type: text/plain\r\n\r\n{PONG}"
        ),
    );
    target.stop();
}

#[test]
fn connection_close_request_is_honoured() {
    let target = start();
    let mut s = connect(&target);
    // The request after the closing one is never answered.
    s.write_all(format!("GET / HTTP/1.1\r\nConnection: Keep-Alive, close\r\n\r\n{}", get("/")).as_bytes())
        .unwrap();
    expect(
        &mut s,
        "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\
         Connection: close\r\n\r\npong",
    );
    expect_eof(&mut s);
    target.stop();
}

#[test]
fn http10_requests_close_unless_kept_alive() {
    let target = start();
    let mut s = connect(&target);
    for _ in 0..2 {
        s.write_all(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            .unwrap();
        expect(
            &mut s,
            "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\
             Connection: keep-alive\r\n\r\npong",
        );
    }
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    expect(
        &mut s,
        "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\
         Connection: close\r\n\r\npong",
    );
    expect_eof(&mut s);
    target.stop();
}

#[test]
fn bad_requests_get_400_or_431_and_close() {
    let target = start();
    let bad = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    let large = "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n\
                 Connection: close\r\n\r\n";
    let many_headers: String = (0..MAX_HEADERS + 1).map(|i| format!("X-{i}: v\r\n")).collect();
    let cases = [
        ("garbage\0\r\n\r\n".to_string(), bad),
        ("GET / HTTP/1.1\r\nContent-Length: ten\r\n\r\n".to_string(), bad),
        ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_string(), bad),
        (format!("GET / HTTP/1.1\r\n{many_headers}\r\n"), large),
        // Incomplete and already too long.
        (format!("GET /{} HTTP/1.1\r\n", "a".repeat(MAX_HEAD)), large),
        // Complete but too long.
        (format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD)), large),
    ];
    for (request, want) in cases {
        let mut s = connect(&target);
        s.write_all(request.as_bytes()).unwrap();
        expect(&mut s, want);
        expect_eof(&mut s);
    }
    target.stop();
}

#[test]
fn half_closed_client_still_gets_its_response() {
    let target = start();
    let mut s = connect(&target);
    s.write_all(format!("{}{}", get("/"), get("/big")).as_bytes()).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    expect(&mut s, &format!("{PONG}{}", big()));
    expect_eof(&mut s);
    target.stop();
}

#[test]
fn slow_reader_gets_every_pipelined_response() {
    let target = start_with(1, Duration::ZERO);
    let mut s = connect(&target);
    let count = 200;
    let requests: String = (0..count).map(|i| get(if i % 2 == 0 { "/big" } else { "/" })).collect();
    s.write_all(requests.as_bytes()).unwrap();
    // Let the server fill the socket buffers and block.
    thread::sleep(Duration::from_millis(200));
    for i in 0..count {
        if i % 2 == 0 {
            expect(&mut s, &big());
        } else {
            expect(&mut s, PONG);
        }
    }
    // Still usable afterwards.
    s.write_all(get("/status/201").as_bytes()).unwrap();
    expect(&mut s, &status(201, "Created"));
    target.stop();
}

#[test]
fn delay_holds_each_response() {
    let delay = Duration::from_millis(100);
    let target = start_with(1, delay);
    let mut s = connect(&target);
    let sent = Instant::now();
    s.write_all(get("/").as_bytes()).unwrap();
    expect(&mut s, PONG);
    assert!(sent.elapsed() >= delay, "answered after {:?}", sent.elapsed());

    // Pipelined requests keep their order, and a close still closes.
    let sent = Instant::now();
    s.write_all(format!("{}{}{}", get("/status/201"), get("/"), get("/close")).as_bytes())
        .unwrap();
    expect(&mut s, &format!("{}{PONG}", status(201, "Created")));
    assert!(sent.elapsed() >= delay, "answered after {:?}", sent.elapsed());
    expect(
        &mut s,
        "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\
         Connection: close\r\n\r\npong",
    );
    expect_eof(&mut s);
    target.stop();
}

#[test]
fn delay_with_many_pipelined_requests() {
    let delay = Duration::from_millis(20);
    let target = start_with(1, delay);
    let mut s = connect(&target);
    // More than MAX_IN_FLIGHT, so reading pauses and resumes.
    let count = MAX_IN_FLIGHT as usize * 3;
    let requests: String = (0..count).map(|_| get("/")).collect();
    s.write_all(requests.as_bytes()).unwrap();
    expect(&mut s, &PONG.repeat(count));
    target.stop();
}

#[test]
fn a_thousand_concurrent_connections() {
    let target = start();
    let mut streams: Vec<TcpStream> = (0..1000).map(|_| connect(&target)).collect();
    for s in &mut streams {
        s.write_all(get("/").as_bytes()).unwrap();
    }
    for s in &mut streams {
        expect(s, PONG);
    }
    target.stop();
}

#[test]
fn connection_churn_does_not_confuse_slots() {
    let target = start_with(1, Duration::ZERO);
    let mut keeper = connect(&target);
    for i in 0..300 {
        let mut s = connect(&target);
        s.write_all(get("/close").as_bytes()).unwrap();
        if i % 3 == 0 {
            drop(s); // gone before it is even answered
        } else {
            let mut all = Vec::new();
            s.read_to_end(&mut all).unwrap();
            assert!(all.ends_with(b"pong"));
        }
        keeper.write_all(get("/").as_bytes()).unwrap();
        expect(&mut keeper, PONG);
    }
    target.stop();
}

#[test]
fn stop_is_prompt_and_frees_the_port() {
    let target = start_with(3, Duration::from_secs(60));
    let addr = target.local_addr();
    assert_ne!(addr.port(), 0);
    let mut idle: Vec<TcpStream> = (0..20).map(|_| connect(&target)).collect();
    // One response is waiting on the (long) delay timer.
    idle[0].write_all(get("/").as_bytes()).unwrap();
    thread::sleep(Duration::from_millis(50));
    let began = Instant::now();
    target.stop();
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "stop took {:?}",
        began.elapsed()
    );
    for s in &mut idle {
        let mut rest = Vec::new();
        // Closed either way: a FIN, or a reset for unread input.
        if let Ok(n) = s.read_to_end(&mut rest) {
            assert_eq!(n, 0);
        }
    }
    // Restart on the same port at once, as the tests of soakd do.
    let again = spawn(&TargetConfig {
        listen: addr,
        threads: 3,
        ..Default::default()
    })
    .expect("rebinds the same port");
    let mut s = connect(&again);
    s.write_all(get("/").as_bytes()).unwrap();
    expect(&mut s, PONG);
    again.stop();
}

fn start_faulty(fault: &str, delay: Duration) -> TargetHandle {
    spawn(&TargetConfig {
        delay,
        fault: Some(fault.parse().expect("a valid fault")),
        ..Default::default()
    })
    .expect("target starts")
}

/// Everything until the server closes (a reset counts as a close).
fn read_all(stream: &mut TcpStream) -> Vec<u8> {
    let mut all = Vec::new();
    let mut buf = [0; 64 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return all,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return all,
            Err(e) => panic!("read: {e} after {} bytes", all.len()),
        }
    }
}

#[test]
fn fault_names_parse_and_print() {
    for mode in FaultMode::ALL {
        let name = mode.name();
        if mode == FaultMode::MaxStreams {
            let fault: Fault = "max-streams=3".parse().unwrap();
            assert_eq!(fault, Fault { mode, every: 3 });
            assert_eq!(fault.to_string(), "max-streams=3");
            continue;
        }
        let fault: Fault = name.parse().unwrap();
        assert_eq!(fault, Fault { mode, every: 1 });
        assert_eq!(fault.to_string(), name);
        if !matches!(
            mode,
            FaultMode::StopAccepting | FaultMode::WindowStall | FaultMode::SettingsFlood
        ) {
            let fault: Fault = format!("{name}@7").parse().unwrap();
            assert_eq!(fault, Fault { mode, every: 7 });
            assert_eq!(fault.to_string(), format!("{name}@7"));
        }
    }
    for bad in [
        "",
        "nope",
        "reset@",
        "reset@0",
        "reset@-1",
        "reset@x",
        "@3",
        "stop-accepting@2",
        "max-streams",
        "max-streams=0",
        "max-streams=x",
        "max-streams@2",
        "window-stall@2",
        "settings-flood@3",
    ] {
        assert!(bad.parse::<Fault>().is_err(), "{bad:?} parsed");
    }
    let err = spawn(&TargetConfig {
        fault: Some(Fault {
            mode: FaultMode::Reset,
            every: 0,
        }),
        ..Default::default()
    })
    .unwrap_err();
    assert!(matches!(err, Error::Usage(_)), "{err:?}");
}

#[test]
fn broken_responses_then_close() {
    let head100 = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nContent-Type: text/plain\r\n\r\n";
    let cases = [
        ("close-mid-head", PONG[..(PONG.len() - 4) / 2].to_string()),
        ("close-mid-body", format!("{head100}{}", "x".repeat(10))),
        ("short-body", format!("{head100}{}", "x".repeat(50))),
        (
            "bad-status",
            "HTTP/1.1 2x0 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\r\npong".to_string(),
        ),
        (
            "bad-chunk",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n\
             zz\r\npong\r\n0\r\n\r\n"
                .to_string(),
        ),
        (
            "http10-no-length",
            "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\npong".to_string(),
        ),
    ];
    for (fault, want) in cases {
        let target = start_faulty(fault, Duration::ZERO);
        let mut s = connect(&target);
        // A second request in the same write must not be answered.
        s.write_all(format!("{}{}", get("/"), get("/")).as_bytes()).unwrap();
        assert_eq!(String::from_utf8_lossy(&read_all(&mut s)), want, "{fault}");
        target.stop();
    }
}

#[test]
fn every_nth_request_is_faulted_per_thread() {
    let target = start_faulty("continue@3", Duration::ZERO);
    let continued = format!("HTTP/1.1 100 Continue\r\n\r\n{PONG}");
    let mut a = connect(&target);
    let mut b = connect(&target);
    // The count is the thread's, across connections.
    for i in 0..6 {
        let s = if i % 2 == 0 { &mut a } else { &mut b };
        s.write_all(get("/status/201").as_bytes()).unwrap();
        if i % 3 == 2 {
            expect(s, &continued);
        } else {
            expect(s, &status(201, "Created"));
        }
    }
    target.stop();
}

#[test]
fn extra_bytes_and_huge_head_keep_the_connection() {
    let target = start_faulty("extra-bytes@2", Duration::ZERO);
    let mut s = connect(&target);
    s.write_all(get("/").as_bytes()).unwrap();
    expect(&mut s, PONG);
    s.write_all(get("/").as_bytes()).unwrap();
    expect(&mut s, &format!("{PONG}GARBAGE\r\n\r\n"));
    s.write_all(get("/").as_bytes()).unwrap();
    expect(&mut s, PONG);
    target.stop();

    let target = start_faulty("huge-head", Duration::ZERO);
    let mut s = connect(&target);
    for _ in 0..2 {
        s.write_all(get("/").as_bytes()).unwrap();
        let mut got = Vec::new();
        let mut buf = [0; 64 * 1024];
        while !got.ends_with(b"\r\n\r\npong") {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "closed after {} bytes", got.len());
            got.extend_from_slice(&buf[..n]);
        }
        assert!(got.len() > HUGE_HEAD, "{} bytes", got.len());
        assert!(got.starts_with(b"HTTP/1.1 200 OK\r\n"));
    }
    target.stop();
}

#[test]
fn reset_sends_an_rst_after_earlier_responses() {
    for delay in [Duration::ZERO, Duration::from_millis(20)] {
        let target = start_faulty("reset@2", delay);
        let mut s = connect(&target);
        s.write_all(get("/").as_bytes()).unwrap();
        expect(&mut s, PONG);
        s.write_all(get("/").as_bytes()).unwrap();
        let mut buf = [0; 16];
        let err = s.read(&mut buf).expect_err("a reset, not a response");
        assert_eq!(err.kind(), io::ErrorKind::ConnectionReset, "{delay:?}");
        target.stop();
    }
}

#[test]
fn never_answer_keeps_the_connection_silent() {
    let target = start_faulty("never-answer@2", Duration::ZERO);
    let mut s = connect(&target);
    s.write_all(get("/").as_bytes()).unwrap();
    expect(&mut s, PONG);
    s.write_all(get("/").as_bytes()).unwrap();
    s.write_all(get("/").as_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut buf = [0; 16];
    let err = s.read(&mut buf).expect_err("silence");
    assert!(
        matches!(err.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut),
        "{err}"
    );
    // Other connections are served; the count goes on (3rd request).
    let mut other = connect(&target);
    other.write_all(get("/").as_bytes()).unwrap();
    expect(&mut other, PONG);
    // The silent one closes when the client does.
    s.shutdown(Shutdown::Write).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    expect_eof(&mut s);
    target.stop();
}

#[test]
fn trickle_sends_a_byte_per_step_and_holds_later_requests() {
    let target = start_faulty("trickle", Duration::ZERO);
    let mut s = connect(&target);
    let sent = Instant::now();
    // Pipelined: the second response must come after the whole first.
    s.write_all(format!("{}{}", get("/"), get("/")).as_bytes()).unwrap();
    let mut got = [0; 4];
    s.read_exact(&mut got[..1]).unwrap();
    assert!(sent.elapsed() < TRICKLE_STEP, "first byte after {:?}", sent.elapsed());
    for i in 1..4 {
        s.read_exact(&mut got[i..=i]).unwrap();
    }
    let took = sent.elapsed();
    assert!(
        took >= TRICKLE_STEP * 3 - Duration::from_millis(10),
        "4 bytes in {took:?}"
    );
    assert!(took < TRICKLE_STEP * 8, "4 bytes in {took:?}");
    assert_eq!(&got, b"HTTP");
    // The client leaves mid-trickle; the target carries on serving.
    drop(s);
    let mut other = connect(&target);
    other.write_all(b"HEAD / HTTP/1.1\r\n\r\n").unwrap();
    other.read_exact(&mut got[..1]).unwrap();
    target.stop();
}

#[test]
fn close_after_accept_closes_every_nth_connection() {
    let target = start_faulty("close-after-accept@2", Duration::ZERO);
    for i in 0..4 {
        let mut s = connect(&target);
        if i % 2 == 1 {
            // Closed before the request was read: nothing, then EOF
            // (or a reset if the request got there first).
            let _ = s.write_all(get("/").as_bytes());
            assert!(read_all(&mut s).is_empty(), "connection {i}");
        } else {
            s.write_all(get("/").as_bytes()).unwrap();
            expect(&mut s, PONG);
        }
    }
    target.stop();
}

#[test]
fn stop_accepting_fills_the_backlog() {
    let target = start_faulty("stop-accepting", Duration::ZERO);
    let addr = target.local_addr();
    let mut held = Vec::new();
    let mut timed_out = false;
    for _ in 0..8 {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(s) => held.push(s),
            Err(_) => {
                timed_out = true;
                break;
            }
        }
    }
    assert!(timed_out, "{} connects went through", held.len());
    // What the backlog took is never answered.
    if let Some(s) = held.first_mut() {
        s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        s.write_all(get("/").as_bytes()).unwrap();
        let mut buf = [0; 16];
        assert!(
            s.read(&mut buf).is_err(),
            "an answer from a listener that never accepts"
        );
    }
    target.stop();
}

#[test]
fn zero_threads_is_a_usage_error() {
    let err = spawn(&TargetConfig {
        threads: 0,
        ..Default::default()
    })
    .unwrap_err();
    assert!(matches!(err, Error::Usage(_)), "{err:?}");
}

#[test]
fn busy_address_is_a_preflight_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    for threads in [1, 2] {
        let err = spawn(&TargetConfig {
            listen: addr,
            threads,
            ..Default::default()
        })
        .unwrap_err();
        let Error::Preflight(message) = err else {
            panic!("expected a preflight error, got {err:?}");
        };
        assert!(message.contains(&addr.to_string()), "{message}");
        assert!(message.contains("--listen"), "{message}");
    }
}

#[test]
fn response_table_matches_ids() {
    let responses = Responses::build(None);
    assert_eq!(responses.table.len(), usize::from(TOO_LARGE) + 1);
    for index in 0..ROUTES {
        assert_eq!(Route::from_index(index).index(), index);
    }
    let close = &responses.table[usize::from(response_id(Route::Status(404), true, Persist::Close))];
    assert!(close.close);
    assert_eq!(
        &*close.bytes,
        &b"HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"[..]
    );
    assert_eq!(Route::of("/status/250?x"), Route::Status(250));
    assert_eq!(Route::of("/big?"), Route::Big);
    assert_eq!(Route::of("/bigger"), Route::Pong);
}
