//! TLS settings of an `https://` workload, checked and turned into a
//! rustls client configuration before anything connects.
//!
//! Every file named (CA bundle, client certificate, key) is read and parsed
//! here, so an unreadable file, a PEM without the object it should hold, or
//! a key that does not belong to its certificate is bad input (exit 2), not
//! a failure an hour into a soak. Verification is on unless `--insecure`
//! says otherwise; the roots are the system's unless `--cacert` replaces
//! them. Nothing here ever prints key material.

use std::hash::{Hash as _, Hasher as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::Resumption;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::Error;

/// A TLS protocol version soakd can be limited to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    /// TLS 1.2.
    V12,
    /// TLS 1.3.
    V13,
}

impl TlsVersion {
    /// Parses `1.2` or `1.3`.
    pub fn parse(value: &str) -> Option<TlsVersion> {
        match value.trim() {
            "1.2" => Some(TlsVersion::V12),
            "1.3" => Some(TlsVersion::V13),
            _ => None,
        }
    }

    /// How it is written on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            TlsVersion::V12 => "1.2",
            TlsVersion::V13 => "1.3",
        }
    }
}

/// The TLS settings of a workload as given (flags or config keys).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsSpec {
    /// The name sent (SNI) and verified instead of the URL's host.
    pub servername: Option<String>,
    /// PEM CA bundles that replace the system's roots.
    pub cacert: Vec<PathBuf>,
    /// Skip certificate verification.
    pub insecure: bool,
    /// PEM client certificate chain (mTLS).
    pub cert: Option<PathBuf>,
    /// PEM private key of `cert`.
    pub key: Option<PathBuf>,
    /// Lowest version offered.
    pub min: Option<TlsVersion>,
    /// Highest version offered.
    pub max: Option<TlsVersion>,
    /// Resume sessions on reconnect (default [`super::defaults::TLS_RESUMPTION`]).
    pub resumption: Option<bool>,
}

impl TlsSpec {
    /// The setting names given, for the "TLS settings on an http:// URL"
    /// message.
    pub fn given(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        for (set, name) in [
            (self.servername.is_some(), "servername"),
            (!self.cacert.is_empty(), "cacert"),
            (self.insecure, "insecure"),
            (self.cert.is_some(), "cert"),
            (self.key.is_some(), "key"),
            (self.min.is_some(), "tls_min"),
            (self.max.is_some(), "tls_max"),
            (self.resumption.is_some(), "tls_resumption"),
        ] {
            if set {
                v.push(name);
            }
        }
        v
    }
}

/// A workload's TLS client, ready to connect with.
#[derive(Clone)]
pub struct Tls {
    /// The rustls configuration every connection of the workload shares
    /// (and, with resumption, its session cache).
    pub config: Arc<ClientConfig>,
    /// The name sent and verified (no SNI is sent for an IP address).
    pub server_name: ServerName<'static>,
    /// The settings it was built from.
    pub spec: TlsSpec,
    /// A digest of the files read, so a reload notices a changed file
    /// behind an unchanged path.
    files_digest: u64,
}

impl Tls {
    /// Certificates are verified (no `--insecure`).
    pub fn verified(&self) -> bool {
        !self.spec.insecure
    }

    /// Sessions are resumed on reconnect.
    pub fn resumption(&self) -> bool {
        self.spec.resumption.unwrap_or(super::defaults::TLS_RESUMPTION)
    }
}

impl PartialEq for Tls {
    fn eq(&self, other: &Tls) -> bool {
        self.spec == other.spec && self.files_digest == other.files_digest && self.server_name == other.server_name
    }
}

impl std::fmt::Debug for Tls {
    /// The settings and the name only: never the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("server_name", &self.server_name)
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

/// Builds the client for a URL whose host is `host`. `key` turns a setting
/// name (`"cacert"`) into how the operator wrote it, for messages.
pub fn build(spec: &TlsSpec, host: &str, key: &dyn Fn(&str) -> String) -> Result<Tls, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut digest = std::collections::hash_map::DefaultHasher::new();
    let mut read = |setting: &str, path: &Path| -> Result<Vec<u8>, Error> {
        let bytes = std::fs::read(path).map_err(|e| {
            Error::Usage(format!(
                "{} {}: cannot read it ({e}); give a readable PEM file",
                key(setting),
                path.display()
            ))
        })?;
        bytes.hash(&mut digest);
        Ok(bytes)
    };

    let versions: Vec<&'static rustls::SupportedProtocolVersion> = {
        let min = spec.min.unwrap_or(super::defaults::TLS_MIN);
        let max = spec.max.unwrap_or(super::defaults::TLS_MAX);
        if min > max {
            return Err(Error::Usage(format!(
                "{} {} is above {} {}; the lowest version must not exceed the highest",
                key("tls_min"),
                min.name(),
                key("tls_max"),
                max.name()
            )));
        }
        [
            (TlsVersion::V12, &rustls::version::TLS12),
            (TlsVersion::V13, &rustls::version::TLS13),
        ]
        .into_iter()
        .filter(|(v, _)| (min..=max).contains(v))
        .map(|(_, p)| p)
        .collect()
    };
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| Error::Usage(format!("TLS versions: {e}")))?;

    let mut roots = RootCertStore::empty();
    if spec.cacert.is_empty() {
        if !spec.insecure {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(Error::Usage(format!(
                    "no system root certificates were found to verify the target with; install the ca-certificates package, or give {} FILE with the CA that signed the server's certificate",
                    key("cacert")
                )));
            }
        }
    } else {
        for path in &spec.cacert {
            let pem = read("cacert", path)?;
            let mut n = 0;
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert
                    .map_err(|e| Error::Usage(format!("{} {}: not valid PEM ({e})", key("cacert"), path.display())))?;
                roots.add(cert).map_err(|e| {
                    Error::Usage(format!(
                        "{} {}: a certificate cannot be used as a root ({e})",
                        key("cacert"),
                        path.display()
                    ))
                })?;
                n += 1;
            }
            if n == 0 {
                return Err(Error::Usage(format!(
                    "{} {}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
                    key("cacert"),
                    path.display()
                )));
            }
        }
    }
    let builder = builder.with_root_certificates(roots);

    let mut config = match (&spec.cert, &spec.key) {
        (None, None) => builder.with_no_client_auth(),
        (Some(_), None) => {
            return Err(Error::Usage(format!(
                "{} needs {} with its private key",
                key("cert"),
                key("key")
            )));
        }
        (None, Some(_)) => {
            return Err(Error::Usage(format!(
                "{} needs {} with the certificate it belongs to",
                key("key"),
                key("cert")
            )));
        }
        (Some(cert_path), Some(key_path)) => {
            let pem = read("cert", cert_path)?;
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
                .collect::<Result<_, _>>()
                .map_err(|e| Error::Usage(format!("{} {}: not valid PEM ({e})", key("cert"), cert_path.display())))?;
            if chain.is_empty() {
                return Err(Error::Usage(format!(
                    "{} {}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
                    key("cert"),
                    cert_path.display()
                )));
            }
            let key_pem = read("key", key_path)?;
            // The parser's message never quotes the key itself.
            let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|_| {
                Error::Usage(format!(
                    "{} {}: no PEM private key (a PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY block) in it",
                    key("key"),
                    key_path.display()
                ))
            })?;
            builder.with_client_auth_cert(chain, private).map_err(|e| {
                let why = match e {
                    rustls::Error::InconsistentKeys(_) => "the key does not belong to the certificate".to_string(),
                    other => other.to_string(),
                };
                Error::Usage(format!(
                    "{} {} with {} {}: {why}; give the certificate's own private key",
                    key("cert"),
                    cert_path.display(),
                    key("key"),
                    key_path.display()
                ))
            })?
        }
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.resumption = if spec.resumption.unwrap_or(super::defaults::TLS_RESUMPTION) {
        Resumption::default()
    } else {
        Resumption::disabled()
    };
    if spec.insecure {
        config
            .dangerous()
            .set_certificate_verifier(Arc::new(NoVerification(provider)));
    }

    let name = spec.servername.as_deref().unwrap_or(host);
    let server_name = ServerName::try_from(name.to_string()).map_err(|_| {
        Error::Usage(format!(
            "{}{name:?} is not a valid server name (a DNS name or an IP address)",
            if spec.servername.is_some() {
                format!("{} ", key("servername"))
            } else {
                String::new()
            }
        ))
    })?;
    Ok(Tls {
        config: Arc::new(config),
        server_name,
        spec: spec.clone(),
        files_digest: digest.finish(),
    })
}

/// `--insecure`: accepts any certificate. The handshake's signatures are
/// still checked, so the peer holds the key of the certificate it sent;
/// only who that certificate names is not.
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
