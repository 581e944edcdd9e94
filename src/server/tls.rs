//! `soakd target --tls`: the server side of TLS for the built-in target.
//!
//! With no files given the target makes itself a certificate at start
//! (self-signed, for `localhost`, `127.0.0.1` and `::1`), writes it as PEM
//! next to the system's temporary files and prints the path and its
//! SHA-256 fingerprint, so a client can trust exactly that certificate
//! (`soakd run https://127.0.0.1:PORT/ --cacert PATH`). With `--tls-cert`
//! and `--tls-key` it serves the given pair instead (tests use that for
//! expired, wrong-name and CA-signed certificates).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::Error;

/// A server configuration and where its certificate is.
pub struct ServerTls {
    /// The rustls configuration the target's connections share.
    pub config: Arc<ServerConfig>,
    /// The certificate's PEM file.
    pub cert_path: PathBuf,
    /// SHA-256 of the certificate's DER, hex.
    pub fingerprint: String,
    /// The secret HTTP/3's stateless resets are keyed with (`--h3`),
    /// derived from the private key: a target restarted with the same key
    /// resets the connections its predecessor left, as a server that keeps
    /// its reset key across restarts does (RFC 9000 §10.3), and a made-up
    /// certificate brings a fresh one.
    pub reset_key: [u8; 32],
}

/// A fresh self-signed certificate for the loopback names, written to
/// `dir` (the file names carry the process id). With `client_ca`, clients
/// must present a certificate that CA signed.
pub fn self_signed(dir: &Path, client_ca: Option<&Path>) -> Result<ServerTls, Error> {
    let names = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
    let made = rcgen::generate_simple_self_signed(names)
        .map_err(|e| Error::Internal(format!("generating the target's certificate: {e}")))?;
    let cert_path = dir.join(format!("soakd-target-{}.pem", std::process::id()));
    std::fs::write(&cert_path, made.cert.pem())
        .map_err(|e| Error::io(format!("writing {}", cert_path.display()), e))?;
    let key = PrivateKeyDer::try_from(made.signing_key.serialize_der())
        .map_err(|e| Error::Internal(format!("the generated key: {e}")))?;
    finish(vec![made.cert.der().clone()], key, cert_path, client_ca)
}

/// The certificate chain and key in the given PEM files.
pub fn from_files(cert: &Path, key: &Path, client_ca: Option<&Path>) -> Result<ServerTls, Error> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| {
            Error::Usage(format!(
                "--tls-cert {}: cannot read a PEM certificate ({e})",
                cert.display()
            ))
        })?;
    if chain.is_empty() {
        return Err(Error::Usage(format!(
            "--tls-cert {}: no certificate in it",
            cert.display()
        )));
    }
    let private = PrivateKeyDer::from_pem_file(key)
        .map_err(|_| Error::Usage(format!("--tls-key {}: cannot read a PEM private key", key.display())))?;
    finish(chain, private, cert.to_path_buf(), client_ca)
}

fn finish(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    cert_path: PathBuf,
    client_ca: Option<&Path>,
) -> Result<ServerTls, Error> {
    let fingerprint = sha256_hex(chain[0].as_ref());
    let reset_key = reset_key(key.secret_der());
    let provider = crate::plan::tls::provider();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Internal(format!("TLS versions: {e}")))?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(path)
                .map_err(|e| Error::Usage(format!("--tls-client-ca {}: {e}", path.display())))?
            {
                let cert = cert.map_err(|e| Error::Usage(format!("--tls-client-ca {}: {e}", path.display())))?;
                roots
                    .add(cert)
                    .map_err(|e| Error::Usage(format!("--tls-client-ca {}: {e}", path.display())))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| Error::Usage(format!("--tls-client-ca {}: {e}", path.display())))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| Error::Usage(format!("the target's certificate and key: {e}")))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(ServerTls {
        config: Arc::new(config),
        cert_path,
        fingerprint,
        reset_key,
    })
}

/// A key of its own for stateless resets, from the private key's bytes:
/// SHA-256 over a label and the key, so the private key is neither used
/// for two purposes nor recoverable from the reset key.
fn reset_key(private: &[u8]) -> [u8; 32] {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(b"soakd target: QUIC stateless reset key\0");
    ctx.update(private);
    let mut out = [0; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

fn sha256_hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref().iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
