//! `soakd demo`: the built-in target and a soak against it in one
//! process, with the flags of `soakd run`, so that the first command on a
//! fresh machine exercises exactly the code path operators use.

use std::time::Duration;

use clap::Parser;

use super::target::target_tls;
use super::{Cli, Command, DemoArgs};
use crate::plan::{ReportDest, defaults};
use crate::{Error, server};

/// Streams per connection of the HTTP/2, HTTP/3 and gRPC demos.
const DEMO_STREAMS: u32 = 10;

/// A rate as the banner says it: `10,000` or `0.5`.
fn format_rate(rate: f64) -> String {
    if rate < 10.0 {
        return format!("{rate:.1}");
    }
    let digits = format!("{:.0}", rate);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub(super) fn demo(args: DemoArgs) -> Result<(), Error> {
    // QUIC is always encrypted: --h3 brings TLS with it.
    let tls = target_tls(args.tls || args.h3, None, None, None)?;
    let handle = server::spawn(&server::TargetConfig {
        listen: ([127, 0, 0, 1], 0).into(),
        threads: 1,
        delay: Duration::ZERO,
        fault: None,
        tls: tls.as_ref().map(|t| t.config.clone()),
        h2: args.h2,
        h3: args.h3,
        reset_key: tls.as_ref().map(|t| t.reset_key),
        grpc: args.grpc.then_some(server::GrpcService {
            status: None,
            max_age: None,
            grace: Duration::ZERO,
        }),
        degrade: server::Degrade::default(),
        outage: server::OutageSchedule::default(),
        reuse_port: false,
    })?;
    let (scheme, path) = match (tls.is_some(), args.ws, args.grpc) {
        (false, _, true) => ("grpc", ""),
        (true, _, true) => ("grpcs", ""),
        (false, false, _) => ("http", "/"),
        (true, false, _) => ("https", "/"),
        (false, true, _) => ("ws", "/ws"),
        (true, true, _) => ("wss", "/ws"),
    };
    let url = format!("{scheme}://{}{path}", handle.local_addr());
    // HTTP/2 and gRPC pace each of a connection's streams as a connection
    // is paced (`--streams`, `-i`): the banner says the rate that makes.
    let streams: u32 = if args.h2 || args.h3 || args.grpc {
        DEMO_STREAMS
    } else {
        1
    };
    let what = match (args.ws, args.grpc) {
        (true, _) => "message",
        (_, true) => "call",
        _ => "request",
    };
    let rate = f64::from(args.connections) * f64::from(streams) / args.interval.as_secs_f64();
    eprintln!(
        "soakd demo: built-in target on {url}{}; holding {} connections, one {what} every {} on each{}: {} {what}s/s{}",
        match (args.h2, args.h3, args.grpc) {
            (_, _, true) => ", gRPC calls of soakd.test.v1.Echo/Unary",
            (true, _, _) => " over HTTP/2",
            (_, true, _) => " over HTTP/3",
            _ => "",
        },
        args.connections,
        humantime::format_duration(args.interval),
        if streams > 1 {
            format!(" of its {streams} streams")
        } else {
            String::new()
        },
        format_rate(rate),
        match args.duration {
            Some(d) => format!(", for {}", humantime::format_duration(d)),
            None => "; Ctrl-C to stop and see the report".into(),
        }
    );
    let mut argv = vec![
        "soakd".to_string(),
        "run".into(),
        url,
        "-c".into(),
        args.connections.to_string(),
    ];
    argv.extend(["-i".into(), humantime::format_duration(args.interval).to_string()]);
    argv.extend(["--ramp".into(), "1000".into()]);
    if args.ws {
        // The echo answers each message with itself: a request/response
        // workload whose latency is the round trip of one message.
        argv.extend(["--ws-message".into(), "soakd demo".into()]);
    }
    if let Some(d) = args.duration {
        argv.extend(["-d".into(), humantime::format_duration(d).to_string()]);
    }
    argv.extend([
        "--metrics-listen".into(),
        args.metrics_listen
            .map_or(Some(defaults::METRICS_LISTEN), |l| l.0)
            .map_or("off".into(), |a| a.to_string()),
    ]);
    if let Some(t) = &tls {
        argv.extend(["--cacert".into(), t.cert_path.display().to_string()]);
    }
    if args.h2 {
        // HTTP/2 required (h2c with prior knowledge, or ALPN h2), ten
        // streams on each connection.
        argv.extend([
            "--http".into(),
            "2".into(),
            "--streams".into(),
            DEMO_STREAMS.to_string(),
        ]);
    }
    if args.h3 {
        // HTTP/3 over QUIC to the target's UDP port (the TCP port's
        // number), ten streams on each connection.
        argv.extend([
            "--http".into(),
            "3".into(),
            "--streams".into(),
            DEMO_STREAMS.to_string(),
        ]);
    }
    // Kept until the run ends (the schema is compiled when the plan is).
    let _schema = if args.grpc {
        let dir = demo_schema()?;
        argv.extend([
            "--call".into(),
            "soakd.test.v1.Echo/Unary".into(),
            "--proto".into(),
            dir.path().join("echo.proto").display().to_string(),
            "--data".into(),
            r#"{"text": "soakd demo"}"#.into(),
            "--streams".into(),
            DEMO_STREAMS.to_string(),
        ]);
        Some(dir)
    } else {
        None
    };
    // The demo is `soakd run` with fixed flags, so it exercises exactly
    // the code path operators use.
    let run = match Cli::try_parse_from(&argv).map(|c| c.command) {
        Ok(Command::Run(run)) => run,
        Ok(_) => return Err(Error::Internal("demo flags parse as another command".into())),
        Err(e) => return Err(Error::Internal(format!("demo flags do not parse: {e}"))),
    };
    let mut plan = run.into_plan()?;
    plan.report = args.report.as_deref().map(ReportDest::parse);
    let dest = plan.report.clone();
    let result = crate::run(plan);
    handle.stop();
    crate::daemon::output(&result?, dest.as_ref())
}

/// The target's service's schema (`tests/proto/echo.proto` and the file it
/// imports, built into the binary), written where `--proto` reads it, so
/// the demo runs from any directory; removed when dropped.
fn demo_schema() -> Result<SchemaDir, Error> {
    let dir = SchemaDir(std::env::temp_dir().join(format!("soakd-demo-grpc-{}", std::process::id())));
    let write = |rel: &str, text: &str| {
        let path = dir.0.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, text)
    };
    write("echo.proto", include_str!("../../tests/proto/echo.proto"))
        .and_then(|()| write("types/items.proto", include_str!("../../tests/proto/types/items.proto")))
        .map_err(|e| Error::io("writing the demo's schema", e))?;
    Ok(dir)
}

/// A directory removed with everything in it when dropped.
struct SchemaDir(std::path::PathBuf);

impl SchemaDir {
    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for SchemaDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::format_rate;

    #[test]
    fn banner_rates_read_as_numbers() {
        assert_eq!(format_rate(0.5), "0.5");
        assert_eq!(format_rate(1000.0), "1,000");
        assert_eq!(format_rate(10_000.0), "10,000");
        assert_eq!(format_rate(123_456.4), "123,456");
        assert_eq!(format_rate(12.0), "12");
    }
}
