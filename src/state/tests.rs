use super::*;
use crate::stats::{Timeline, Totals};

fn plan(args: &[&str]) -> Plan {
    let mut argv = vec!["soakd", "run", "http://127.0.0.1:1/"];
    argv.extend(args);
    let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
    let crate::cli::Command::Run(run) = cli.command else {
        unreachable!()
    };
    run.into_plan().unwrap()
}

fn body(p: &Plan, totals: &Totals) -> Body {
    let settings = digest::settings(p);
    Body {
        digest: digest::of(&settings),
        settings,
        at: Duration::from_secs(5),
        finished: false,
        totals: totals.saved(),
        window: None,
    }
}

#[test]
fn a_state_reads_back_and_damage_is_named() {
    let p = plan(&["-c", "3"]);
    let mut t = Totals::new(vec![p.workloads[0].name.clone()], 1, false, false);
    t.stats[0].counters.completed = 42;
    let bytes = encode(&body(&p, &t)).unwrap();
    let path = Path::new("/x/s.state");
    let back = decode(path, &bytes).unwrap();
    assert_eq!(back.totals.stats[0].counters.completed, 42);
    assert_eq!(back.at, Duration::from_secs(5));
    for cut in [bytes.len() / 2, bytes.len() - 2] {
        let e = decode(path, &bytes[..cut]).unwrap_err().to_string();
        assert!(
            e.contains("/x/s.state") && e.contains("truncated") && e.contains("--fresh"),
            "{e}"
        );
    }
    let mut bad = bytes.clone();
    let n = bad.len();
    bad[n - 3] ^= 1;
    let e = decode(path, &bad).unwrap_err().to_string();
    assert!(e.contains("damaged"), "{e}");
    assert!(decode(path, b"").unwrap_err().to_string().contains("empty"));
}

/// A week-long soak's state, its timeline full (1,000 points, each with
/// latencies over four decades and a process sample), its full-run
/// histograms well filled: a few MB at most.
#[test]
fn a_weeks_state_stays_small() {
    let p = plan(&["-c", "3"]);
    let mut t = Totals::new(vec![p.workloads[0].name.clone()], 1, false, false);
    let mut rng = fastrand::Rng::with_seed(3);
    let mut tl = Timeline::new();
    let step = 8u64;
    let mut d = crate::stats::WorkloadStats::default();
    for tick in 1..=(7 * 24 * 3600 / step) {
        for _ in 0..40 {
            let us = 10f64.powf(2.0 + 4.0 * rng.f64()) as u64;
            d.latency.record(us).unwrap();
            d.lag.record(us / 10 + 1).unwrap();
        }
        d.counters.completed = 40;
        tl.add(&d);
        t.stats[0].add(&d);
        d.clear();
        tl.sample(crate::stats::Resources {
            targets: vec![crate::stats::ProcSample {
                pid: 1,
                rss_bytes: 1 << 30,
                cpu_ms: tick,
                open_fds: Some(1000),
            }],
            soakd_rss_bytes: Some(1 << 28),
        });
        tl.tick(Duration::from_secs(step * tick));
    }
    t.timeline = tl;
    // What the control thread pays (a copy) and what the writer thread
    // pays (the encoding), for the record.
    let t0 = std::time::Instant::now();
    let b = body(&p, &t);
    let copied = t0.elapsed();
    let t1 = std::time::Instant::now();
    let bytes = encode(&b).unwrap();
    let encoded = t1.elapsed();
    eprintln!(
        "a week's state: {} bytes, {} timeline points; copied in {:.2} ms, encoded in {:.1} ms",
        bytes.len(),
        t.timeline.points().len(),
        copied.as_secs_f64() * 1e3,
        encoded.as_secs_f64() * 1e3
    );
    assert!(bytes.len() < 4 << 20, "{} bytes", bytes.len());
}
