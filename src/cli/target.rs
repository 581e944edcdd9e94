//! `soakd target`: the built-in server from its flags, and the TLS it
//! serves (shared with `soakd demo`).

use std::io::Write as _;
use std::path::PathBuf;

use super::TargetArgs;
use crate::{Error, server};

/// The target's TLS, when asked for: the given pair, or a certificate made
/// now (its PEM path and fingerprint are printed for clients to trust).
pub(super) fn target_tls(
    tls: bool,
    cert: Option<&PathBuf>,
    key: Option<&PathBuf>,
    client_ca: Option<&PathBuf>,
) -> Result<Option<server::tls::ServerTls>, Error> {
    let client_ca = client_ca.map(PathBuf::as_path);
    match (tls || cert.is_some() || key.is_some() || client_ca.is_some(), cert, key) {
        (false, _, _) => Ok(None),
        (true, Some(c), Some(k)) => server::tls::from_files(c, k, client_ca).map(Some),
        (true, None, None) => server::tls::self_signed(&std::env::temp_dir(), client_ca).map(Some),
        (true, _, _) => Err(Error::Usage("--tls-cert and --tls-key go together".into())),
    }
}

pub(super) fn serve_target(args: TargetArgs) -> Result<(), Error> {
    let tls = target_tls(
        args.tls,
        args.tls_cert.as_ref(),
        args.tls_key.as_ref(),
        args.tls_client_ca.as_ref(),
    )?;
    let handle = server::spawn(&server::TargetConfig {
        listen: args.listen,
        threads: args.threads as usize,
        delay: args.delay,
        fault: args.fault,
        tls: tls.as_ref().map(|t| t.config.clone()),
        h2: args.h2,
        h3: args.h3,
        reset_key: tls.as_ref().map(|t| t.reset_key),
        grpc: args.grpc.then_some(server::GrpcService {
            status: args.grpc_status,
            max_age: args.max_connection_age,
            grace: args.max_connection_age_grace,
        }),
        outage: args.outage.schedule(),
        degrade: server::Degrade {
            leak_bytes_per_s: args.leak.unwrap_or(0.0),
            fds_per_s: args.fd_leak.unwrap_or(0.0),
            slowdown_per_s: args.slowdown.unwrap_or(0.0),
        },
        reuse_port: args.reuse_port,
    })?;
    if let Some(t) = &tls {
        println!("certificate {} sha256 {}", t.cert_path.display(), t.fingerprint);
    }
    if let Some(addr) = handle.h3_addr() {
        println!("serving HTTP/3 on udp {addr}");
    }
    // Tests and scripts read this line to learn the port.
    println!("listening on {}", handle.local_addr());
    let _ = std::io::stdout().flush();
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM])
        .map_err(|e| Error::io("installing signal handlers", e))?;
    let _ = signals.forever().next();
    if let Some(c) = handle.h3_counts() {
        // The server's side of what HTTP/3 clients counted (tests compare).
        // One write of the whole line (stderr is unbuffered).
        let line = format!(
            "soakd target: HTTP/3 answered {} requests, refused {} streams (H3_REQUEST_REJECTED), sent {} GOAWAYs\n",
            c.answered, c.rejected, c.goaways
        );
        let _ = std::io::stderr().write_all(line.as_bytes());
    }
    handle.stop();
    Ok(())
}
