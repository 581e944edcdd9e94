//! TLS settings of an `https://` workload, checked and turned into a
//! rustls client configuration before anything connects.
//!
//! Every file named (CA bundle, client certificate, key) is read and parsed
//! here, so an unreadable file, a PEM without the object it should hold, or
//! a key that does not belong to its certificate is bad input (exit 2), not
//! a failure an hour into a soak. Verification is on unless `--insecure`
//! says otherwise; the roots are the system's unless `--cacert` replaces
//! them. Nothing here ever prints key material.
//!
//! A certificate made the common way for a test server (`openssl req
//! -x509`: self-signed, `CA:TRUE`) and given with `--cacert` is accepted as
//! the server's own certificate, as curl, wrk and Go accept it: webpki
//! alone refuses a CA as an end entity ([`AnchorsAsServers`]).
//!
//! The crypto provider (aws-lc-rs or ring) is chosen here, once, by a cargo
//! feature; docs/tls.md has the measurement behind the default.

use std::hash::{Hash as _, Hasher as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{Resumption, WebPkiServerVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::Error;

pub use super::tls_version::TlsVersion;

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
    let provider = provider();
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
    let mut anchors = Vec::new();
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
                anchors.push(cert.clone());
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
    let roots = Arc::new(roots);
    let builder = builder.with_root_certificates(roots.clone());

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
    } else if !anchors.is_empty() {
        let verifier = AnchorsAsServers::new(roots, anchors, provider)
            .map_err(|e| Error::Usage(format!("{}: {e}", key("cacert"))))?;
        config.dangerous().set_certificate_verifier(Arc::new(verifier));
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

/// The crypto provider of every TLS client and server in soakd: aws-lc-rs
/// (the `aws-lc` feature, the default) or ring (`--no-default-features
/// --features ring`). aws-lc-rs won the handshake measurement in
/// docs/tls.md; ring stays buildable to repeat it.
pub fn provider() -> Arc<CryptoProvider> {
    #[cfg(feature = "aws-lc")]
    let p = rustls::crypto::aws_lc_rs::default_provider();
    #[cfg(all(feature = "ring", not(feature = "aws-lc")))]
    let p = rustls::crypto::ring::default_provider();
    Arc::new(p)
}

#[cfg(not(any(feature = "aws-lc", feature = "ring")))]
compile_error!("soakd needs a TLS crypto provider: build with the `aws-lc` (default) or the `ring` feature");

/// Verification with `--cacert`: webpki's, except that a server
/// certificate which is byte for byte one of the `--cacert` certificates is
/// trusted even when it is a CA (`CA:TRUE`, what `openssl req -x509`
/// makes). webpki refuses a CA as an end entity (`CaUsedAsEndEntity`);
/// OpenSSL, Go and therefore curl and wrk trust a certificate the operator
/// named as a trust anchor outright. Only that one refusal is overridden:
/// webpki has already checked the validity dates when it reaches the
/// basicConstraints (tested below), and the name is checked here, so an
/// expired or misnamed anchor still fails.
#[derive(Debug)]
struct AnchorsAsServers {
    inner: Arc<WebPkiServerVerifier>,
    anchors: Vec<CertificateDer<'static>>,
}

impl AnchorsAsServers {
    /// webpki's verifier over `roots`, which hold `anchors`.
    fn new(
        roots: Arc<RootCertStore>,
        anchors: Vec<CertificateDer<'static>>,
        provider: Arc<CryptoProvider>,
    ) -> Result<AnchorsAsServers, rustls::client::VerifierBuilderError> {
        let inner = WebPkiServerVerifier::builder_with_provider(roots, provider).build()?;
        Ok(AnchorsAsServers { inner, anchors })
    }
}

impl ServerCertVerifier for AnchorsAsServers {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(CertificateError::Other(e)))
                if matches!(
                    e.0.downcast_ref::<webpki::Error>(),
                    Some(webpki::Error::CaUsedAsEndEntity)
                ) && self.anchors.iter().any(|a| a.as_ref() == end_entity.as_ref()) =>
            {
                rustls::client::verify_server_name(&ParsedCertificate::try_from(end_entity)?, server_name)?;
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }

    fn root_hint_subjects(&self) -> Option<&[rustls::DistinguishedName]> {
        self.inner.root_hint_subjects()
    }
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

#[cfg(test)]
mod tests {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

    use super::*;
    use crate::netio::certificate_words;

    /// A self-signed certificate for localhost and 127.0.0.1 valid in
    /// 2020..2100, as `openssl req -x509` makes it (`CA:TRUE`) or not.
    fn self_signed(ca: bool) -> (CertificateParams, KeyPair, CertificateDer<'static>) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        if ca {
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        }
        // A subject of its own: webpki finds an issuer by its name, and two
        // CAs of one name would fail as a bad signature, not an unknown
        // issuer.
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("test {}", fastrand::u64(..)));
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2100, 1, 1);
        let der = params.self_signed(&key).unwrap().der().clone();
        (params, key, der)
    }

    fn verifier(anchors: &[&CertificateDer<'static>]) -> AnchorsAsServers {
        let mut roots = RootCertStore::empty();
        for a in anchors {
            roots.add((*a).clone()).unwrap();
        }
        AnchorsAsServers::new(
            Arc::new(roots),
            anchors.iter().map(|a| (*a).clone()).collect(),
            provider(),
        )
        .unwrap()
    }

    fn year(y: u64) -> UnixTime {
        UnixTime::since_unix_epoch(std::time::Duration::from_secs((y - 1970) * 31_556_952))
    }

    fn verify(v: &AnchorsAsServers, cert: &CertificateDer<'_>, name: &str, at: UnixTime) -> Result<(), rustls::Error> {
        let name = ServerName::try_from(name.to_string()).unwrap();
        v.verify_server_cert(cert, &[], &name, &[], at).map(|_| ())
    }

    fn reason(r: Result<(), rustls::Error>) -> &'static str {
        match r {
            Err(rustls::Error::InvalidCertificate(e)) => certificate_words(&e).reason,
            other => panic!("not a certificate error: {other:?}"),
        }
    }

    #[test]
    fn a_ca_certificate_given_as_cacert_is_trusted_as_the_server() {
        let (_, _, cert) = self_signed(true);
        let v = verifier(&[&cert]);
        verify(&v, &cert, "localhost", year(2030)).unwrap();
        verify(&v, &cert, "127.0.0.1", year(2030)).unwrap();
        // Name and dates are still checked.
        assert_eq!(reason(verify(&v, &cert, "other.example", year(2030))), "name_mismatch");
        assert_eq!(reason(verify(&v, &cert, "localhost", year(2101))), "expired");
        assert_eq!(reason(verify(&v, &cert, "localhost", year(2019))), "not_yet_valid");
    }

    #[test]
    fn a_ca_certificate_that_is_not_an_anchor_is_still_refused() {
        let (_, _, cert) = self_signed(true);
        let (_, _, other) = self_signed(true);
        let v = verifier(&[&other]);
        assert_eq!(reason(verify(&v, &cert, "localhost", year(2030))), "ca_as_server");
    }

    #[test]
    fn ordinary_chains_verify_as_before() {
        let (ca_params, ca_key, ca) = self_signed(true);
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2100, 1, 1);
        let leaf = params
            .signed_by(&key, &Issuer::from_params(&ca_params, &ca_key))
            .unwrap();
        let v = verifier(&[&ca]);
        verify(&v, leaf.der(), "localhost", year(2030)).unwrap();
        assert_eq!(reason(verify(&v, leaf.der(), "127.0.0.1", year(2030))), "name_mismatch");
        // A self-signed leaf (CA:FALSE) named as the anchor verifies too.
        let (_, _, plain) = self_signed(false);
        verify(&verifier(&[&plain]), &plain, "localhost", year(2030)).unwrap();
        // An unknown CA is an unknown issuer.
        let (_, _, stranger) = self_signed(true);
        assert_eq!(
            reason(verify(&verifier(&[&stranger]), leaf.der(), "localhost", year(2030))),
            "unknown_issuer"
        );
    }
}
