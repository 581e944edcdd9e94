//! What a failed TLS handshake is called in the log: what is wrong with the
//! server's certificate, and what to do about it, in words.
//!
//! rustls reports a rejected certificate as a [`CertificateError`] whose
//! `Display` is terse and whose fallback, `Other`, wraps a webpki error that
//! prints as a Rust identifier (`Other(OtherError(CaUsedAsEndEntity))`). An
//! operator reading soakd's log at the start of a soak wants a sentence:
//! which date the certificate expired on, which names it covers, which
//! setting fixes it. Each failure is logged once per kind of reason, not
//! once per connection: a bad certificate fails every connection the same
//! way.

use std::time::{Duration, SystemTime};

use rustls::CertificateError;
use rustls::pki_types::{ServerName, UnixTime};

/// A rejected certificate in words: `reason` names the kind (one log line
/// per kind), `text` says what is wrong and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Words {
    /// A short stable name of the kind of failure (`expired`).
    pub reason: &'static str,
    /// The sentence for the log, without the `TLS certificate rejected:`
    /// prefix.
    pub text: String,
}

/// The words for a certificate rustls rejected.
pub fn certificate_words(e: &CertificateError) -> Words {
    let (reason, text) = match e {
        CertificateError::ExpiredContext { time, not_after } => (
            "expired",
            format!(
                "the server's certificate expired on {} (it is now {}); renew it on the server",
                date(*not_after),
                date(*time)
            ),
        ),
        CertificateError::Expired => (
            "expired",
            "the server's certificate has expired; renew it on the server".to_string(),
        ),
        CertificateError::NotValidYetContext { time, not_before } => (
            "not_yet_valid",
            format!(
                "the server's certificate is not valid until {} (it is now {}); check the clock here and on the server, or reissue it",
                date(*not_before),
                date(*time)
            ),
        ),
        CertificateError::NotValidYet => (
            "not_yet_valid",
            "the server's certificate is not valid yet; check the clock here and on the server, or reissue it"
                .to_string(),
        ),
        CertificateError::UnknownIssuer => (
            "unknown_issuer",
            "the server's certificate was not issued by a CA soakd trusts; give the CA that signed it (or, for a self-signed certificate, the certificate itself) with --cacert FILE, or have the server send its intermediate certificates".to_string(),
        ),
        CertificateError::NotValidForNameContext { expected, presented } => (
            "name_mismatch",
            format!(
                "the server's certificate is for {} and not for {}; connect with a name it covers, or give --servername NAME",
                if presented.is_empty() { "no name at all".to_string() } else { presented.iter().map(|p| presented_name(p)).collect::<Vec<_>>().join(", ") },
                name(expected)
            ),
        ),
        CertificateError::NotValidForName => (
            "name_mismatch",
            "the server's certificate does not cover the name connected to; connect with a name it covers, or give --servername NAME".to_string(),
        ),
        CertificateError::BadSignature => (
            "bad_signature",
            "a signature in the server's certificate chain does not verify: the certificate was not signed by the CA it names, or it is corrupt; check the chain the server sends and the --cacert file".to_string(),
        ),
        CertificateError::Revoked => (
            "revoked",
            "the server's certificate has been revoked by its CA; the server needs a new certificate".to_string(),
        ),
        CertificateError::BadEncoding => (
            "bad_encoding",
            "the server's certificate cannot be parsed (malformed DER); check the file the server is configured with".to_string(),
        ),
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => (
            "wrong_purpose",
            "the server's certificate is not for TLS servers (its extended key usage lacks serverAuth); reissue it with serverAuth".to_string(),
        ),
        CertificateError::UnsupportedSignatureAlgorithmContext { .. }
        | CertificateError::UnsupportedSignatureAlgorithmForPublicKeyContext { .. } => (
            "unsupported_algorithm",
            "the server's certificate is signed with an algorithm soakd does not support (supported: ECDSA, Ed25519, RSA with SHA-256 or better); reissue it".to_string(),
        ),
        CertificateError::Other(other) => match other.0.downcast_ref::<webpki::Error>() {
            Some(webpki::Error::CaUsedAsEndEntity) => (
                "ca_as_server",
                "the server's certificate is a CA certificate (basicConstraints CA:TRUE) and is not one of the --cacert certificates; give this very certificate with --cacert FILE to trust it, or issue the server a certificate without CA:TRUE".to_string(),
            ),
            Some(webpki::Error::EndEntityUsedAsCa) => (
                "server_as_ca",
                "a certificate in the server's chain signs another but is not a CA (no basicConstraints CA:TRUE); have the server send a chain issued by a CA".to_string(),
            ),
            Some(webpki::Error::PathLenConstraintViolated | webpki::Error::NameConstraintViolation) => (
                "chain_constraint",
                "the server's certificate chain breaks a constraint its CA set (path length or permitted names); reissue it within the CA's constraints".to_string(),
            ),
            Some(webpki::Error::MaximumPathDepthExceeded | webpki::Error::MaximumPathBuildCallsExceeded) => (
                "chain_too_long",
                "the server's certificate chain is too long to verify; have the server send a shorter chain".to_string(),
            ),
            Some(webpki::Error::UnsupportedCriticalExtension) => critical(),
            Some(inner) => unmapped(&format!("{inner:?}")),
            None => unmapped(&other.to_string()),
        },
        CertificateError::UnhandledCriticalExtension => critical(),
        // UnknownRevocationStatus, expired CRLs, OCSP and anything rustls
        // adds later.
        other => unmapped(&format!("{other:?}")),
    };
    Words { reason, text }
}

/// A critical extension that is not understood.
fn critical() -> (&'static str, String) {
    (
        "critical_extension",
        "the server's certificate has a critical extension soakd does not understand; reissue it without that extension"
            .to_string(),
    )
}

/// A failure without words of its own: the name of the condition spelled
/// out (`UnknownRevocationStatus` as "unknown revocation status"), never
/// its fields.
fn unmapped(debug: &str) -> (&'static str, String) {
    let ident: String = debug.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    // `...Context` variants are the same condition with its particulars.
    let ident = ident.strip_suffix("Context").unwrap_or(&ident);
    let mut spelled = String::new();
    for c in ident.chars() {
        if c.is_uppercase() && !spelled.is_empty() {
            spelled.push(' ');
        }
        spelled.extend(c.to_lowercase());
    }
    (
        "other",
        format!(
            "the server's certificate failed verification ({spelled}); look at it with `openssl s_client -connect HOST:PORT -showcerts`"
        ),
    )
}

/// A time as a UTC date and time to the second.
fn date(t: UnixTime) -> String {
    humantime::format_rfc3339_seconds(SystemTime::UNIX_EPOCH + Duration::from_secs(t.as_secs())).to_string()
}

/// A name the certificate presents, as written in it: webpki gives them
/// as `DnsName("localhost")` or `IpAddress(127.0.0.1)`.
fn presented_name(p: &str) -> &str {
    match (p.find('('), p.strip_suffix(')')) {
        (Some(open), Some(inner)) if p[..open].chars().all(char::is_alphanumeric) => {
            inner[open + 1..].trim_matches('"')
        }
        _ => p,
    }
}

/// A server name as the operator wrote it.
fn name(n: &ServerName<'_>) -> String {
    match n {
        ServerName::DnsName(d) => d.as_ref().to_string(),
        ServerName::IpAddress(ip) => std::net::IpAddr::from(*ip).to_string(),
        other => format!("{other:?}"),
    }
}

/// Prints `soakd: {line()}` once per distinct `reason` per process. Only
/// failed handshakes come here, never the hot path, so a lock is fine.
pub fn log_once(reason: &str, line: impl FnOnce() -> String) {
    static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    if seen.len() < 64 && !seen.iter().any(|s| s == reason) {
        eprintln!("soakd: {}", line());
        seen.push(reason.to_string());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rustls::OtherError;

    use super::*;

    fn at(secs: u64) -> UnixTime {
        UnixTime::since_unix_epoch(Duration::from_secs(secs))
    }

    fn other(e: webpki::Error) -> CertificateError {
        CertificateError::Other(OtherError(Arc::new(e)))
    }

    /// Every mapped variant: its reason, words that must appear, and never
    /// a Rust identifier or a Debug dump.
    #[test]
    fn each_failure_in_words() {
        let ip = ServerName::try_from("127.0.0.1").unwrap();
        let table: Vec<(CertificateError, &str, &[&str])> = vec![
            (
                CertificateError::ExpiredContext {
                    time: at(1_767_225_600),
                    not_after: at(1_041_379_200),
                },
                "expired",
                &["expired on 2003-01-01T00:00:00Z", "now 2026-01-01T00:00:00Z", "renew"],
            ),
            (CertificateError::Expired, "expired", &["has expired", "renew"]),
            (
                CertificateError::NotValidYetContext {
                    time: at(1_767_225_600),
                    not_before: at(4_102_444_800),
                },
                "not_yet_valid",
                &["not valid until 2100-01-01T00:00:00Z", "clock"],
            ),
            (
                CertificateError::NotValidYet,
                "not_yet_valid",
                &["not valid yet", "clock"],
            ),
            (
                CertificateError::UnknownIssuer,
                "unknown_issuer",
                &["not issued by a CA soakd trusts", "--cacert"],
            ),
            (
                CertificateError::NotValidForNameContext {
                    expected: ip.to_owned(),
                    presented: vec![
                        "DnsName(\"other.example\")".into(),
                        "IpAddress(10.0.0.1)".into(),
                        "*.example.org".into(),
                    ],
                },
                "name_mismatch",
                &[
                    "is for other.example, 10.0.0.1, *.example.org and not for 127.0.0.1",
                    "--servername",
                ],
            ),
            (
                CertificateError::NotValidForName,
                "name_mismatch",
                &["does not cover the name", "--servername"],
            ),
            (
                CertificateError::BadSignature,
                "bad_signature",
                &["does not verify", "--cacert"],
            ),
            (CertificateError::Revoked, "revoked", &["revoked", "new certificate"]),
            (CertificateError::BadEncoding, "bad_encoding", &["cannot be parsed"]),
            (CertificateError::InvalidPurpose, "wrong_purpose", &["serverAuth"]),
            (
                other(webpki::Error::CaUsedAsEndEntity),
                "ca_as_server",
                &["is a CA certificate", "CA:TRUE", "--cacert"],
            ),
            (other(webpki::Error::EndEntityUsedAsCa), "server_as_ca", &["not a CA"]),
            (
                other(webpki::Error::UnsupportedCriticalExtension),
                "critical_extension",
                &["critical extension"],
            ),
            (
                CertificateError::UnhandledCriticalExtension,
                "critical_extension",
                &["critical extension"],
            ),
            (
                other(webpki::Error::UnsupportedCertVersion),
                "other",
                &["failed verification (unsupported cert version)", "openssl s_client"],
            ),
            (
                CertificateError::UnknownRevocationStatus,
                "other",
                &["failed verification (unknown revocation status)"],
            ),
            (
                CertificateError::ExpiredRevocationListContext {
                    time: at(2),
                    next_update: at(1),
                },
                "other",
                &["failed verification (expired revocation list)"],
            ),
        ];
        for (e, reason, words) in table {
            let w = certificate_words(&e);
            assert_eq!(w.reason, reason, "{e:?}: {}", w.text);
            for word in words {
                assert!(w.text.contains(word), "{e:?}: {:?} lacks {word:?}", w.text);
            }
            assert!(
                w.text.starts_with("the server's certificate") || w.text.starts_with("a "),
                "{}",
                w.text
            );
            for dump in [
                "Context",
                "OtherError",
                "CaUsedAsEndEntity",
                "{ ",
                "Some(",
                "DnsName",
                "\"",
            ] {
                assert!(!w.text.contains(dump), "{e:?}: a Debug dump in {:?}", w.text);
            }
        }
    }
}
