//! How QUIC connections and HTTP/3 streams end, as soakd counts them: a
//! connection's loss reason, a stream's reset code and a TLS alert carried
//! as a QUIC CRYPTO_ERROR, each mapped to an error kind, the particulars
//! (a code's name, the peer's reason) logged once per code. One table for
//! the HTTP/3 client's every end, so no failure is silent or named twice.

use quinn_proto::{ConnectionError, TransportErrorCode, VarInt};

use crate::netio::log_once;
use crate::stats::ErrorKind;
use crate::wire::h3::{self, error};

/// How a request stream ended.
pub(super) enum StreamEnd {
    /// A whole response with this status.
    Complete(u16),
    /// The server reset it with H3_REQUEST_REJECTED: not processed.
    Rejected,
    /// The stream failed alone.
    Failed(ErrorKind),
}

/// A stream the server reset: rejected (sent again) or reset, the code's
/// name logged once.
pub(super) fn reset_end(code: VarInt) -> StreamEnd {
    let code = code.into_inner();
    if code == error::REQUEST_REJECTED {
        return StreamEnd::Rejected;
    }
    // A server may reset every stream: the process-wide `log_once` (a
    // lock, a key formatted) is asked once per code and thread, not per
    // reset; the thread's own record is one word of bits, one per name.
    thread_local! {
        static LOGGED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    let known = h3::ErrorCode::from_u64(code);
    let bit = 1u64 << (known as u32).min(63);
    if LOGGED.with(|l| l.replace(l.get() | bit) & bit == 0) {
        let name = known.name();
        log_once(&format!("h3_reset_{name}"), || {
            format!("HTTP/3: the server reset a request stream with {name} (0x{code:x})")
        });
    }
    StreamEnd::Failed(ErrorKind::StreamReset)
}

/// The error kind of a connection lost for `reason`; the particulars (a
/// code's name, the server's reason) are logged once per code.
pub(super) fn lost_kind(reason: &ConnectionError, connected: bool) -> ErrorKind {
    match reason {
        ConnectionError::VersionMismatch => ErrorKind::QuicVersion,
        ConnectionError::Reset => ErrorKind::QuicStatelessReset,
        ConnectionError::TimedOut if connected => ErrorKind::QuicIdleTimeout,
        ConnectionError::TimedOut => ErrorKind::ConnectTimeout,
        ConnectionError::TransportError(e) => transport_kind(e.code, &e.reason, "soakd"),
        ConnectionError::ConnectionClosed(c) => {
            let reason = String::from_utf8_lossy(&c.reason);
            transport_kind(c.error_code, &reason, "the server")
        }
        ConnectionError::ApplicationClosed(c) => {
            let code = c.error_code.into_inner();
            let name = h3::error_name(code);
            log_once(&format!("h3_closed_{name}"), || {
                format!(
                    "HTTP/3: the server closed the connection with {name} (0x{code:x}): {}",
                    String::from_utf8_lossy(&c.reason)
                )
            });
            ErrorKind::H3Closed
        }
        ConnectionError::LocallyClosed | ConnectionError::CidsExhausted => ErrorKind::QuicTransport,
    }
}

/// TLS alerts that say a certificate was refused (RFC 8446 §6.2):
/// bad_certificate, unsupported_certificate, certificate_revoked,
/// certificate_expired, certificate_unknown, unknown_ca.
const CERTIFICATE_ALERTS: [u64; 6] = [42, 43, 44, 45, 46, 48];

/// A transport error's kind: QUIC carries a TLS alert as CRYPTO_ERROR
/// 0x100 + alert (RFC 9001 §4.8), which is a TLS failure like one over
/// TCP; anything else is a transport error by its code's name.
fn transport_kind(code: TransportErrorCode, reason: &str, by: &str) -> ErrorKind {
    let n = u64::from(code);
    if (0x100..0x200).contains(&n) {
        let alert = n - 0x100;
        let kind = if CERTIFICATE_ALERTS.contains(&alert) {
            ErrorKind::TlsCertificate
        } else {
            ErrorKind::TlsHandshake
        };
        log_once(&format!("quic_crypto_{alert}"), || {
            format!("QUIC handshake failed ({by} sent TLS alert {alert}): {reason}")
        });
        return kind;
    }
    // quinn's Debug of a code is its RFC 9000 §20.1 name.
    log_once(&format!("quic_transport_{n}"), || {
        format!("QUIC: {by} closed the connection with {code:?} (0x{n:x}): {reason}")
    });
    ErrorKind::QuicTransport
}

#[cfg(test)]
mod tests {
    use super::*;
    use quinn_proto::TransportError;

    fn transport(code: TransportErrorCode) -> ConnectionError {
        ConnectionError::TransportError(TransportError {
            code,
            frame: None,
            reason: "test".into(),
        })
    }

    #[test]
    fn every_end_has_its_kind() {
        // A certificate refused (bad_certificate, unknown_ca) is a
        // certificate failure; another alert (no_application_protocol) a
        // handshake one; other transport codes are transport errors.
        assert_eq!(
            lost_kind(&transport(TransportErrorCode::crypto(42)), false),
            ErrorKind::TlsCertificate
        );
        assert_eq!(
            lost_kind(&transport(TransportErrorCode::crypto(48)), false),
            ErrorKind::TlsCertificate
        );
        assert_eq!(
            lost_kind(&transport(TransportErrorCode::crypto(120)), false),
            ErrorKind::TlsHandshake
        );
        assert_eq!(
            lost_kind(&transport(TransportErrorCode::PROTOCOL_VIOLATION), true),
            ErrorKind::QuicTransport
        );
        assert_eq!(lost_kind(&ConnectionError::TimedOut, true), ErrorKind::QuicIdleTimeout);
        assert_eq!(lost_kind(&ConnectionError::TimedOut, false), ErrorKind::ConnectTimeout);
        assert_eq!(lost_kind(&ConnectionError::Reset, true), ErrorKind::QuicStatelessReset);
        assert_eq!(
            lost_kind(&ConnectionError::VersionMismatch, false),
            ErrorKind::QuicVersion
        );
        assert!(matches!(reset_end(VarInt::from_u32(0x10b)), StreamEnd::Rejected));
        assert!(matches!(
            reset_end(VarInt::from_u32(0x102)),
            StreamEnd::Failed(ErrorKind::StreamReset)
        ));
    }
}
