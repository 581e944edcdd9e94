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
        degrade: target::Degrade::default(),
        outage: target::OutageSchedule::default(),
    })?;
    let (scheme, path) = match (tls.is_some(), args.ws) {
        (false, false) => ("http", "/"),
        (true, false) => ("https", "/"),
        (false, true) => ("ws", "/ws"),
        (true, true) => ("wss", "/ws"),
    };
    let url = format!("{scheme}://{}{path}", handle.local_addr());
    eprintln!(
        "soakd demo: built-in target on {url}{}; holding {} connections, one {} every {} on each{}",
        if args.h2 {
            " over HTTP/2, 10 streams per connection"
        } else {
            ""
        },
        args.connections,
        if args.ws { "message" } else { "request" },
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
