//! Request rendering: the bytes of a request, built once per workload.
//!
//! The engine sends the same request millions of times, so its bytes are
//! rendered here once and written straight from that buffer; the checks on
//! methods and header fields are shared by the command line and the config
//! file so a value means the same in both.

use std::fmt::Write as _;

/// What the request to render looks like.
#[derive(Clone, Debug)]
pub struct RequestSpec {
    /// Method, e.g. `GET`.
    pub method: String,
    /// Origin-form target: path plus query, e.g. `/index.html?x=1`.
    pub target: String,
    /// Value of the Host header (`host` or `host:port`).
    pub host: String,
    /// Extra header fields, in order. A `Host` or `User-Agent` here replaces
    /// soakd's own.
    pub headers: Vec<(String, String)>,
    /// Request body; a Content-Length is added when it is not empty.
    pub body: Vec<u8>,
    /// Add `Connection: close` (one request per connection).
    pub close: bool,
}

/// Checks a request method: an upper-case token such as `GET`. Anything
/// else would break the request line (the command line and the config file
/// both check with this).
pub fn check_method(method: &str) -> Result<(), String> {
    if !method.is_empty() && method.chars().all(|c| c.is_ascii_uppercase()) {
        Ok(())
    } else {
        Err(format!(
            "{method:?} is not an upper-case HTTP method such as GET, POST or HEAD"
        ))
    }
}

/// Checks an extra header field: the name must be an RFC 9110 token and the
/// value must not contain a line break (which would end the field early and
/// inject another, or end the head).
pub fn check_header(name: &str, value: &str) -> Result<(), String> {
    let is_token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(is_token) {
        return Err(format!("{name:?} is not a valid header name"));
    }
    if value.contains(['\r', '\n', '\0']) {
        return Err(format!("the value of {name} contains a line break or NUL"));
    }
    Ok(())
}

/// Renders `spec` into the exact bytes written for every request.
pub fn render_request(spec: &RequestSpec) -> Vec<u8> {
    let has = |name: &str| spec.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    let mut head = String::with_capacity(128);
    // Writing into a String cannot fail.
    let _ = write!(head, "{} {} HTTP/1.1\r\n", spec.method, spec.target);
    if !has("host") {
        let _ = write!(head, "Host: {}\r\n", spec.host);
    }
    if !has("user-agent") {
        let _ = write!(head, "User-Agent: soakd/{}\r\n", env!("CARGO_PKG_VERSION"));
    }
    for (name, value) in &spec.headers {
        let _ = write!(head, "{name}: {value}\r\n");
    }
    let wants_length = !spec.body.is_empty() || matches!(spec.method.as_str(), "POST" | "PUT" | "PATCH");
    if wants_length && !has("content-length") {
        let _ = write!(head, "Content-Length: {}\r\n", spec.body.len());
    }
    if spec.close && !has("connection") {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(&spec.body);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_request_once() {
        let spec = RequestSpec {
            method: "POST".into(),
            target: "/a?b=1".into(),
            host: "example.test:8080".into(),
            headers: vec![("X-Test".into(), "1".into())],
            body: b"hi".to_vec(),
            close: true,
        };
        let text = String::from_utf8(render_request(&spec)).unwrap();
        assert!(
            text.starts_with("POST /a?b=1 HTTP/1.1\r\nHost: example.test:8080\r\n"),
            "{text}"
        );
        assert!(text.contains("X-Test: 1\r\n"));
        assert!(text.contains("Content-Length: 2\r\n"));
        assert!(text.ends_with("Connection: close\r\n\r\nhi"));
        let mut own_host = spec.clone();
        own_host.headers = vec![("host".into(), "other".into())];
        let text = String::from_utf8(render_request(&own_host)).unwrap();
        assert!(!text.contains("Host: example.test"));
        assert!(text.contains("host: other\r\n"));
    }
}
