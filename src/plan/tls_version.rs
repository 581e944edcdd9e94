//! The TLS versions a run can be limited to: a file of its own because
//! both the defaults and the TLS settings name it.

/// A TLS protocol version soakd can be limited to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
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
