//! Target URLs: what soakd accepts, and where the connections go.

use std::net::{SocketAddr, ToSocketAddrs};

use crate::Error;

/// A parsed `http://`, `https://`, `ws://` or `wss://` URL.
#[derive(Clone, Debug)]
pub struct ParsedUrl {
    /// Host as written (name or literal address).
    pub host: String,
    /// Port (80 or 443 when absent).
    pub port: u16,
    /// `https://` or `wss://`: connections speak TLS.
    pub tls: bool,
    /// `ws://` or `wss://`: connections upgrade to WebSocket.
    pub ws: bool,
    /// `grpc://` or `grpcs://`: gRPC calls over HTTP/2.
    pub grpc: bool,
    /// Value for the Host header: host, plus `:port` when not the scheme's
    /// default.
    pub host_header: String,
    /// Path and query, at least `/`.
    pub target: String,
}

/// Parses and checks a target URL: `http://`, `https://`, `ws://` or
/// `wss://`, no user info, a host.
pub fn parse_url(value: &str) -> Result<ParsedUrl, Error> {
    let url = url::Url::parse(value).map_err(|e| {
        Error::Usage(format!(
            "URL {value:?} is not valid ({e}); expected something like http://127.0.0.1:8080/path"
        ))
    })?;
    let (tls, ws, grpc) = match url.scheme() {
        "http" => (false, false, false),
        "https" => (true, false, false),
        "ws" => (false, true, false),
        "wss" => (true, true, false),
        "grpc" => (false, false, true),
        "grpcs" => (true, false, true),
        other => {
            return Err(Error::Usage(format!(
                "URL {value:?}: scheme {other:?} is not supported; expected http://, https://, ws://, wss://, grpc:// or grpcs://"
            )));
        }
    };
    if !url.username().is_empty() || url.password().is_some() {
        // The URL itself is not repeated: it holds a credential.
        return Err(Error::Usage(
            "the target URL contains user info (user:password@); remove it and send credentials with -H \"Authorization: ...\""
                .into(),
        ));
    }
    if url.fragment().is_some() {
        return Err(Error::Usage(format!(
            "URL {value:?} has a fragment (#...), which is never sent; remove it"
        )));
    }
    let host = match url.host() {
        Some(url::Host::Ipv6(a)) => a.to_string(),
        Some(h) => h.to_string(),
        None => return Err(Error::Usage(format!("URL {value:?} has no host"))),
    };
    let port = match url.port_or_known_default() {
        Some(p) => p,
        None if grpc => {
            return Err(Error::Usage(format!(
                "URL {value:?} has no port, and gRPC has no default one; add it (grpc://host:50051)"
            )));
        }
        None => 80,
    };
    let host_header = match (url.host(), url.port()) {
        (Some(url::Host::Ipv6(a)), Some(p)) => format!("[{a}]:{p}"),
        (Some(url::Host::Ipv6(a)), None) => format!("[{a}]"),
        (_, Some(p)) => format!("{host}:{p}"),
        (_, None) => host.clone(),
    };
    // A scheme the url crate does not know (grpc) may have an empty path.
    let mut target = match url.path() {
        "" => "/".to_string(),
        p => p.to_string(),
    };
    if let Some(q) = url.query() {
        target.push('?');
        target.push_str(q);
    }
    Ok(ParsedUrl {
        host,
        port,
        tls,
        ws,
        grpc,
        host_header,
        target,
    })
}

/// Resolves a parsed URL to the address connections go to.
pub fn resolve(url: &ParsedUrl, original: &str) -> Result<SocketAddr, Error> {
    let mut addrs = (url.host.as_str(), url.port).to_socket_addrs().map_err(|e| {
        Error::Usage(format!(
            "URL {original:?}: cannot resolve host {:?} ({e}); check the name or use an IP address",
            url.host
        ))
    })?;
    addrs
        .next()
        .ok_or_else(|| Error::Usage(format!("URL {original:?}: host {:?} resolved to no address", url.host)))
}
