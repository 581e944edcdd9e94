//! `soakd demo`: the built-in target and a soak against it in one
//! process, with the flags of `soakd run`, so that the first command on a
//! fresh machine exercises exactly the code path operators use.

use std::time::Duration;

use clap::Parser;

use super::{Cli, Command, DemoArgs, target_tls};
use crate::plan::{ReportDest, defaults};
use crate::{Error, target};

pub(super) fn demo(args: DemoArgs) -> Result<(), Error> {
    let tls = target_tls(args.tls, None, None, None)?;
    let handle = target::spawn(&target::TargetConfig {
        listen: ([127, 0, 0, 1], 0).into(),
        threads: 1,
        delay: Duration::ZERO,
        fault: None,
        tls: tls.as_ref().map(|t| t.config.clone()),
        h2: args.h2,
        grpc: args.grpc.then_some(target::GrpcService {
            status: None,
            max_age: None,
            grace: Duration::ZERO,
        }),
        degrade: target::Degrade::default(),
        outage: target::OutageSchedule::default(),
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
    eprintln!(
        "soakd demo: built-in target on {url}{}; holding {} connections, one {} every {} on each{}",
        match (args.h2, args.grpc) {
            (_, true) => ", gRPC calls of soakd.test.v1.Echo/Unary, 10 streams per connection",
            (true, _) => " over HTTP/2, 10 streams per connection",
            _ => "",
        },
        args.connections,
        match (args.ws, args.grpc) {
            (true, _) => "message",
            (_, true) => "call",
            _ => "request",
        },
        humantime::format_duration(args.interval),
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
        argv.extend(["--http".into(), "2".into(), "--streams".into(), "10".into()]);
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
            "10".into(),
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
