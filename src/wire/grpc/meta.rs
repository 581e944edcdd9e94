//! gRPC's call metadata on the wire: the `grpc-timeout` a deadline is sent
//! as, the `content-type` that marks a response as gRPC, and which custom
//! metadata names and values are valid (PROTOCOL-HTTP2.md, "Requests").

use std::time::Duration;

/// The `content-type` soakd sends.
pub const CONTENT_TYPE: &str = "application/grpc";

/// True for `application/grpc` and its subtypes (`application/grpc+proto`,
/// `+json`, any `+custom`), with or without parameters; the type is
/// matched case-insensitively, as MIME types are.
pub fn is_grpc_content_type(value: &[u8]) -> bool {
    const BASE: &[u8] = b"application/grpc";
    match value.get(..BASE.len()) {
        Some(head) if head.eq_ignore_ascii_case(BASE) => {
            matches!(value.get(BASE.len()), None | Some(b'+' | b';'))
        }
        _ => false,
    }
}

/// The largest TimeoutValue: at most 8 digits.
const MAX_TIMEOUT_VALUE: u64 = 99_999_999;

/// The units of `grpc-timeout`, coarsest first, with their length in
/// nanoseconds.
const UNITS: [(u8, u128); 6] = [
    (b'H', 3_600_000_000_000),
    (b'M', 60_000_000_000),
    (b'S', 1_000_000_000),
    (b'm', 1_000_000),
    (b'u', 1_000),
    (b'n', 1),
];

/// A rendered `grpc-timeout` value: up to 8 digits and a unit, on the
/// stack.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Timeout {
    bytes: [u8; 9],
    len: u8,
}

impl Timeout {
    /// The value's bytes (`"250m"`).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// The value as text.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).expect("digits and a unit letter")
    }
}

impl std::fmt::Debug for Timeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Timeout({})", self.as_str())
    }
}

impl std::fmt::Display for Timeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `timeout` as a `grpc-timeout` value, `None` for zero (the spec's value
/// is positive).
///
/// The coarsest unit that states the duration exactly in at most 8 digits
/// (`1500m`, not `1500000u`; `2M`, not `120S`). A duration no unit states
/// exactly in 8 digits (`1.000000001` s needs 10 digits of nanoseconds) is
/// rounded *up* in the finest unit that fits, so the server never gives up
/// before the client would; durations past 99,999,999 hours are capped
/// there.
pub fn render_timeout(timeout: Duration) -> Option<Timeout> {
    let nanos = timeout.as_nanos();
    if nanos == 0 {
        return None;
    }
    let exact = UNITS
        .iter()
        .find(|(_, unit)| nanos.is_multiple_of(*unit) && nanos / unit <= MAX_TIMEOUT_VALUE as u128);
    let (letter, value) = match exact {
        Some(&(letter, unit)) => (letter, (nanos / unit) as u64),
        None => UNITS
            .iter()
            .rev()
            .map(|&(letter, unit)| (letter, nanos.div_ceil(unit)))
            .find(|&(_, v)| v <= MAX_TIMEOUT_VALUE as u128)
            .map_or((b'H', MAX_TIMEOUT_VALUE), |(l, v)| (l, v as u64)),
    };
    let mut bytes = [0u8; 9];
    let digits = value.to_string();
    bytes[..digits.len()].copy_from_slice(digits.as_bytes());
    bytes[digits.len()] = letter;
    Some(Timeout {
        bytes,
        len: digits.len() as u8 + 1,
    })
}

/// Reads a `grpc-timeout` value (a server's view, and the tests'): `None`
/// unless it is 1 to 8 digits and a unit.
pub fn parse_timeout(value: &[u8]) -> Option<Duration> {
    let (&letter, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits.iter().fold(0u128, |n, d| n * 10 + u128::from(d - b'0'));
    let (_, unit) = UNITS.iter().find(|(l, _)| *l == letter)?;
    let nanos = n * unit;
    Some(Duration::new(
        (nanos / 1_000_000_000) as u64,
        (nanos % 1_000_000_000) as u32,
    ))
}

/// Why a custom metadata name cannot be sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Empty.
    #[error("the name is empty")]
    Empty,
    /// A character outside `0-9 a-z _ - .` (after lower-casing).
    #[error("{0:?} is not allowed in a metadata name (only 0-9 a-z _ - .)")]
    BadChar(char),
    /// A name gRPC or HTTP/2 sets itself (`grpc-*`, `content-type`, `te`,
    /// pseudo-headers, connection-specific fields).
    #[error("it is reserved: gRPC or HTTP/2 sets it")]
    Reserved,
}

/// Names a caller may not set as custom metadata: gRPC's own (besides the
/// `grpc-` prefix), and what HTTP/2 forbids or soakd sends itself.
const RESERVED: &[&str] = &[
    "content-type",
    "te",
    "user-agent",
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// Checks a custom metadata name, already lower-cased (Header-Name: 1 or
/// more of `0-9 a-z _ - .`, and not reserved).
pub fn check_metadata_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_digit() || c.is_ascii_lowercase() || matches!(c, '_' | '-' | '.')))
    {
        return Err(NameError::BadChar(c));
    }
    if name.starts_with("grpc-") || RESERVED.contains(&name) {
        return Err(NameError::Reserved);
    }
    Ok(())
}

/// True for a name whose value is binary (sent in base64).
pub fn is_binary_name(name: &str) -> bool {
    name.ends_with("-bin")
}

/// The first byte of an ASCII metadata value outside space ..= `~` (the
/// spec's ASCII-Value), if any.
pub fn bad_ascii_value_byte(value: &[u8]) -> Option<u8> {
    value.iter().copied().find(|b| !(0x20..=0x7e).contains(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_content_types() {
        for ok in [
            "application/grpc",
            "application/grpc+proto",
            "application/grpc+json",
            "application/grpc+my-codec",
            "Application/GRPC",
            "application/grpc;charset=utf-8",
        ] {
            assert!(is_grpc_content_type(ok.as_bytes()), "{ok}");
        }
        for bad in [
            "",
            "application/grp",
            "application/grpcx",
            "application/json",
            "text/html",
        ] {
            assert!(!is_grpc_content_type(bad.as_bytes()), "{bad}");
        }
    }

    #[test]
    fn timeouts_use_the_coarsest_exact_unit_in_8_digits() {
        let ms = Duration::from_millis;
        let cases: &[(Duration, &str)] = &[
            (Duration::from_secs(1), "1S"),
            (ms(1500), "1500m"),
            (ms(250), "250m"),
            (Duration::from_secs(120), "2M"),
            (Duration::from_secs(7200), "2H"),
            (Duration::from_secs(90), "90S"),
            (Duration::from_micros(1), "1u"),
            (Duration::from_nanos(1), "1n"),
            (Duration::from_nanos(99_999_999), "99999999n"),
            // 100,000,000 ns is 100 ms exactly.
            (Duration::from_nanos(100_000_000), "100m"),
            // 9 digits of nanoseconds: microseconds, rounded up.
            (Duration::from_nanos(123_456_789), "123457u"),
            (Duration::new(1, 1), "1000001u"),
            // 100,000,000 s: 9 digits in seconds, and no coarser unit is
            // exact: minutes, rounded up.
            (Duration::from_secs(100_000_000), "1666667M"),
            (Duration::from_secs(u64::MAX), "99999999H"),
        ];
        for (d, want) in cases {
            let t = render_timeout(*d).unwrap();
            assert_eq!(t.as_str(), *want, "{d:?}");
            assert!(t.as_bytes().len() <= 9);
            let back = parse_timeout(t.as_bytes()).unwrap();
            assert!(
                back >= *d || *want == "99999999H",
                "{d:?} rendered {want} reads {back:?}"
            );
        }
        assert_eq!(render_timeout(Duration::ZERO), None);
    }

    #[test]
    fn timeouts_parse() {
        assert_eq!(parse_timeout(b"1S"), Some(Duration::from_secs(1)));
        assert_eq!(parse_timeout(b"5H"), Some(Duration::from_secs(18000)));
        assert_eq!(parse_timeout(b"12345678n"), Some(Duration::from_nanos(12_345_678)));
        for bad in [&b""[..], b"S", b"123456789S", b"1s", b"1.5S", b"-1S", b"1"] {
            assert_eq!(parse_timeout(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn metadata_names_and_values() {
        for ok in ["x-request-id", "authorization", "trace.id_1", "token-bin"] {
            assert_eq!(check_metadata_name(ok), Ok(()), "{ok}");
        }
        assert_eq!(check_metadata_name(""), Err(NameError::Empty));
        assert_eq!(check_metadata_name("x y"), Err(NameError::BadChar(' ')));
        assert_eq!(check_metadata_name(":path"), Err(NameError::BadChar(':')));
        assert_eq!(check_metadata_name("grpc-timeout"), Err(NameError::Reserved));
        assert_eq!(check_metadata_name("content-type"), Err(NameError::Reserved));
        assert_eq!(check_metadata_name("te"), Err(NameError::Reserved));
        assert!(is_binary_name("trace-bin") && !is_binary_name("bin"));
        assert_eq!(bad_ascii_value_byte(b"Bearer abc ~"), None);
        assert_eq!(bad_ascii_value_byte(b"a\tb"), Some(b'\t'));
        assert_eq!(bad_ascii_value_byte("\u{e9}".as_bytes()), Some(0xc3));
    }
}
