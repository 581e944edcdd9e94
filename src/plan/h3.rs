//! An HTTP/3 workload (`--http 3`): the rules it is checked by, and the
//! QUIC client its connections are made with (quinn-proto's settings,
//! derived from the workload's TLS client), in one place.
//!
//! The QUIC transport settings are chosen for many long-held connections
//! (docs/http3.md has the measurements): the server may open no
//! bidirectional stream (HTTP/3 servers never do) and a few
//! unidirectional ones (its control stream, QPACK's two, and greasing);
//! receive windows of 64 KiB a stream and 256 KiB a connection; no
//! keep-alive of quinn's own (soakd sends its PINGs from what the two
//! sides negotiated, `engine/worker/h3.rs`).

use std::sync::Arc;
use std::time::Duration;

use quinn_proto::crypto::rustls::QuicClientConfig;
use quinn_proto::{TransportConfig, VarInt};

use super::{ParsedUrl, WorkloadSpec, tls};
use crate::Error;

/// The idle timeout soakd announces: a connection nothing was heard on
/// for this long (keep-alive PINGs answered included) is dead
/// (`quic_idle_timeout`); the server's may be shorter.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

impl WorkloadSpec {
    /// `--http 3`'s rules: an `https://` URL (QUIC is TLS 1.3 only), no
    /// WebSocket or gRPC URL, no pipelining (streams are its
    /// concurrency), TLS 1.3 allowed.
    pub(super) fn check_h3(
        &self,
        parsed: &ParsedUrl,
        tls: Option<&tls::Tls>,
        key: &dyn Fn(&str) -> String,
    ) -> Result<(), Error> {
        if parsed.ws || parsed.grpc || !parsed.tls {
            return Err(Error::Usage(format!(
                "{} 3 needs an https:// URL (HTTP/3 runs over QUIC, which is TLS 1.3 only), and {:?} is not one; use https:// or another {}",
                key("http"),
                self.url,
                key("http")
            )));
        }
        if self.conn.pipeline > 1 {
            return Err(Error::Usage(format!(
                "{} cannot be used with {} 3: requests are streams, not a pipeline; use {} N",
                key("pipeline"),
                key("http"),
                key("streams")
            )));
        }
        if self.tls.max == Some(tls::TlsVersion::V12) {
            return Err(Error::Usage(format!(
                "{} 1.2 cannot be used with {} 3: QUIC carries TLS 1.3 only; drop {}",
                key("tls_max"),
                key("http"),
                key("tls_max")
            )));
        }
        if self.h3_0rtt == Some(true) && tls.is_some_and(|t| !t.resumption()) {
            return Err(Error::Usage(format!(
                "{} needs sessions to resume: drop {} off, or {}",
                key("h3_0rtt"),
                key("tls_resumption"),
                key("h3_0rtt")
            )));
        }
        if let Some(t) = tls {
            client_config(&t.config, self.streams, self.h3_0rtt == Some(true))
                .map_err(|e| Error::Usage(format!("{} 3: this TLS client cannot speak QUIC ({e})", key("http"))))?;
        }
        Ok(())
    }
}

/// quinn-proto's client configuration for a workload whose TLS client is
/// `tls` (ALPN `h3` already set, see `plan::WorkloadSpec::build`); with
/// `zero_rtt`, TLS offers early data on a resumed session.
pub fn client_config(
    tls: &Arc<rustls::ClientConfig>,
    streams: u16,
    zero_rtt: bool,
) -> Result<quinn_proto::ClientConfig, String> {
    let crypto = if zero_rtt {
        // A copy that shares the session store (`resumption` holds it in
        // an Arc): tickets the workload's connections got still resume.
        let mut t = (**tls).clone();
        t.enable_early_data = true;
        QuicClientConfig::try_from(t)
    } else {
        QuicClientConfig::try_from(tls.clone())
    }
    .map_err(|e| e.to_string())?;
    let mut config = quinn_proto::ClientConfig::new(Arc::new(crypto));
    let mut t = TransportConfig::default();
    t.max_concurrent_bidi_streams(VarInt::from_u32(0))
        .max_concurrent_uni_streams(VarInt::from_u32(8))
        .stream_receive_window(VarInt::from_u32(64 * 1024))
        .receive_window(VarInt::from_u32((256 * 1024).max(u32::from(streams) * 16 * 1024)))
        .send_window(256 * 1024)
        .keep_alive_interval(None)
        .datagram_receive_buffer_size(None)
        .max_idle_timeout(Some(IDLE_TIMEOUT.try_into().expect("30 s is a valid idle timeout")));
    config.transport_config(Arc::new(t));
    Ok(config)
}
