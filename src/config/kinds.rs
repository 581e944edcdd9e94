//! The kinds of value a workload setting takes, each read two ways: from a
//! command-line flag (a string, parsed by clap with the parser here) and
//! from a TOML key (a typed value, checked here).
//!
//! A kind is written once and shared by every setting of that kind, so
//! `connections`, `ramp` and `max_requests_per_conn` refuse 0 with the same
//! words on the command line and in a file. The file's messages follow
//! "FILE:LINE: KEY " (the caller adds that prefix); the flag's follow clap's
//! "invalid value 'X' for '--flag <N>': ".

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::builder::ValueParser;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::plan::{self, HttpVersion, TlsVersion, defaults};

/// What a file's values are read against: the directory of the file, which
/// its relative paths are relative to (as Prometheus's `rule_files` and a
/// requests file's `@body-file` are).
#[derive(Clone, Copy, Debug)]
pub struct FileCx<'a> {
    /// The config file's directory (empty for a bare file name).
    pub base: &'a Path,
}

impl FileCx<'_> {
    /// `path` as written in the file, made relative to the file's
    /// directory (an absolute path stays as it is).
    pub fn path(&self, path: &Path) -> PathBuf {
        self.base.join(path)
    }
}

/// One kind of setting value.
pub trait Kind {
    /// What a flag's string becomes (one value of a repeatable flag).
    type One: Clone + Send + Sync + 'static;
    /// What a file's key becomes: `One`, or for a list kind `Vec<One>`.
    type Value;
    /// What the TOML holds for the key.
    type Raw: DeserializeOwned + Clone;
    /// The placeholder in `--help` (`None` for a switch, which takes none).
    const NAME: Option<&'static str>;
    /// Values may start with `-` (so `-c -5` says "-5 is not valid"
    /// instead of "unexpected argument").
    const HYPHEN: bool = false;
    /// The parser clap runs on a flag's value.
    fn parser() -> ValueParser;
    /// Checks a file's value; the message follows "FILE:LINE: KEY ".
    fn file(raw: Self::Raw, cx: &FileCx<'_>) -> Result<Self::Value, String>;
    /// A value as `--help` and the docs show a default.
    fn show(_: &Self::Value) -> String {
        String::new()
    }
}

/// A count of at least 1 (`connections`, `ramp`, `max_requests_per_conn`).
pub struct Count;
impl Kind for Count {
    type One = u32;
    type Value = u32;
    type Raw = u32;
    const NAME: Option<&'static str> = Some("N");
    const HYPHEN: bool = true;
    fn parser() -> ValueParser {
        clap::value_parser!(u32).range(1..).into()
    }
    fn file(raw: u32, _: &FileCx<'_>) -> Result<u32, String> {
        if raw == 0 {
            return Err("must be at least 1".into());
        }
        Ok(raw)
    }
    fn show(v: &u32) -> String {
        v.to_string()
    }
}

/// Requests in flight per connection, 1 to [`defaults::MAX_PIPELINE`].
pub struct Depth;
impl Kind for Depth {
    type One = u16;
    type Value = u16;
    type Raw = u16;
    const NAME: Option<&'static str> = Some("N");
    const HYPHEN: bool = true;
    fn parser() -> ValueParser {
        clap::value_parser!(u16).range(1..=defaults::MAX_PIPELINE as i64).into()
    }
    fn file(raw: u16, _: &FileCx<'_>) -> Result<u16, String> {
        if !(1..=defaults::MAX_PIPELINE).contains(&raw) {
            return Err(format!("must be between 1 and {}", defaults::MAX_PIPELINE));
        }
        Ok(raw)
    }
    fn show(v: &u16) -> String {
        v.to_string()
    }
}

/// A duration above zero: `250ms`, `5s`, `1m30s`.
pub struct Dur;
impl Kind for Dur {
    type One = Duration;
    type Value = Duration;
    type Raw = String;
    const NAME: Option<&'static str> = Some("DUR");
    const HYPHEN: bool = true;
    fn parser() -> ValueParser {
        ValueParser::new(positive_duration)
    }
    fn file(raw: String, _: &FileCx<'_>) -> Result<Duration, String> {
        file_duration(&raw, true)
    }
    fn show(v: &Duration) -> String {
        humantime::format_duration(*v).to_string()
    }
}

/// A file's duration (`positive`: zero is refused); the message follows
/// "FILE:LINE: KEY ".
pub fn file_duration(raw: &str, positive: bool) -> Result<Duration, String> {
    let d = plan::parse_duration("duration", raw)
        .map_err(|_| format!("= {raw:?} is not a duration; expected e.g. \"250ms\", \"5s\", \"10m\""))?;
    if positive && d.is_zero() {
        return Err("must be greater than 0".into());
    }
    Ok(d)
}

/// A flag's duration (negative ones refused with their own message).
pub fn duration(v: &str) -> Result<Duration, String> {
    if v.trim_start().starts_with('-') {
        return Err("durations cannot be negative; expected e.g. 250ms, 5s, 10m".into());
    }
    plan::parse_duration("duration", v)
        .map_err(|_| "expected a duration with a unit: ms, s, m, h or d (e.g. 250ms, 5s, 10m)".into())
}

/// A flag's duration above zero.
pub fn positive_duration(v: &str) -> Result<Duration, String> {
    let d = duration(v)?;
    if d.is_zero() {
        Err("expected a duration greater than 0".into())
    } else {
        Ok(d)
    }
}

/// Requests per second in total, above zero.
pub struct Rate;
impl Kind for Rate {
    type One = f64;
    type Value = f64;
    type Raw = f64;
    const NAME: Option<&'static str> = Some("N");
    const HYPHEN: bool = true;
    fn parser() -> ValueParser {
        ValueParser::new(|v: &str| match v.parse::<f64>() {
            Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
            _ => Err("expected a number of requests per second greater than 0 (e.g. 500 or 0.5)".to_string()),
        })
    }
    fn file(raw: f64, _: &FileCx<'_>) -> Result<f64, String> {
        if !(raw.is_finite() && raw > 0.0) {
            return Err(format!("= {raw} must be a number of requests per second above 0"));
        }
        Ok(raw)
    }
}

/// A request method (upper-case token).
pub struct Method;
impl Kind for Method {
    type One = String;
    type Value = String;
    type Raw = String;
    const NAME: Option<&'static str> = Some("M");
    fn parser() -> ValueParser {
        ValueParser::new(|v: &str| crate::wire::check_method(v).map(|()| v.to_string()))
    }
    fn file(raw: String, _: &FileCx<'_>) -> Result<String, String> {
        crate::wire::check_method(&raw)?;
        Ok(raw)
    }
    fn show(v: &String) -> String {
        v.clone()
    }
}

/// Header fields: `-H "Name: value"` (repeatable), or a TOML table.
pub struct Headers;
impl Kind for Headers {
    type One = (String, String);
    type Value = Vec<(String, String)>;
    type Raw = BTreeMap<String, String>;
    const NAME: Option<&'static str> = Some("HEADER");
    fn parser() -> ValueParser {
        ValueParser::new(|v: &str| {
            let Some((name, value)) = v.split_once(':') else {
                return Err("expected \"Name: value\"".to_string());
            };
            let (name, value) = (name.trim(), value.trim());
            crate::wire::check_header(name, value).map_err(|e| format!("{e}; expected \"Name: value\""))?;
            Ok((name.to_string(), value.to_string()))
        })
    }
    fn file(raw: Self::Raw, _: &FileCx<'_>) -> Result<Self::Value, String> {
        raw.into_iter()
            .map(|(name, value)| crate::wire::check_header(&name, &value).map(|()| (name, value)))
            .collect()
    }
}

/// Free text (a body, a server name).
pub struct Text;
impl Kind for Text {
    type One = String;
    type Value = String;
    type Raw = String;
    const NAME: Option<&'static str> = Some("STRING");
    fn parser() -> ValueParser {
        ValueParser::string()
    }
    fn file(raw: String, _: &FileCx<'_>) -> Result<String, String> {
        Ok(raw)
    }
}

/// A file to read. In a config file a relative path is relative to the
/// config file; on the command line, to the working directory.
pub struct File;
impl Kind for File {
    type One = PathBuf;
    type Value = PathBuf;
    type Raw = PathBuf;
    const NAME: Option<&'static str> = Some("FILE");
    fn parser() -> ValueParser {
        ValueParser::path_buf()
    }
    fn file(raw: PathBuf, cx: &FileCx<'_>) -> Result<PathBuf, String> {
        Ok(cx.path(&raw))
    }
}

/// A key that takes one path or a list of them (`cacert`).
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    /// `cacert = "ca.pem"`
    One(PathBuf),
    /// `cacert = ["a.pem", "b.pem"]`
    Many(Vec<PathBuf>),
}

/// Files: a repeatable flag, or a path or list of paths in a file.
pub struct Files;
impl Kind for Files {
    type One = PathBuf;
    type Value = Vec<PathBuf>;
    type Raw = OneOrMany;
    const NAME: Option<&'static str> = Some("FILE");
    fn parser() -> ValueParser {
        ValueParser::path_buf()
    }
    fn file(raw: OneOrMany, cx: &FileCx<'_>) -> Result<Vec<PathBuf>, String> {
        let paths = match raw {
            OneOrMany::One(p) => vec![p],
            OneOrMany::Many(v) => v,
        };
        Ok(paths.iter().map(|p| cx.path(p)).collect())
    }
}

/// Local IP addresses (repeatable).
pub struct Ips;
impl Kind for Ips {
    type One = IpAddr;
    type Value = Vec<IpAddr>;
    type Raw = Vec<String>;
    const NAME: Option<&'static str> = Some("ADDR");
    fn parser() -> ValueParser {
        clap::value_parser!(IpAddr).into()
    }
    fn file(raw: Vec<String>, _: &FileCx<'_>) -> Result<Vec<IpAddr>, String> {
        raw.iter()
            .map(|s| s.parse().map_err(|_| format!("{s:?} is not an IP address")))
            .collect()
    }
}

/// Process ids (repeatable).
pub struct Pids;
impl Kind for Pids {
    type One = u32;
    type Value = Vec<u32>;
    type Raw = Vec<u32>;
    const NAME: Option<&'static str> = Some("PID");
    fn parser() -> ValueParser {
        clap::value_parser!(u32).range(1..).into()
    }
    fn file(raw: Vec<u32>, _: &FileCx<'_>) -> Result<Vec<u32>, String> {
        Ok(raw)
    }
}

/// A TLS version, `1.2` or `1.3`.
pub struct Version;
impl Kind for Version {
    type One = TlsVersion;
    type Value = TlsVersion;
    type Raw = String;
    const NAME: Option<&'static str> = Some("V");
    fn parser() -> ValueParser {
        ValueParser::new(|v: &str| TlsVersion::parse(v).ok_or_else(|| "expected 1.2 or 1.3".to_string()))
    }
    fn file(raw: String, _: &FileCx<'_>) -> Result<TlsVersion, String> {
        TlsVersion::parse(&raw).ok_or_else(|| format!("= {raw:?}: expected \"1.2\" or \"1.3\""))
    }
    fn show(v: &TlsVersion) -> String {
        v.name().into()
    }
}

// HTTP/2
/// The HTTP version: `1.1`, `2` or `auto`, on the command line and in a
/// file alike.
pub struct Http;
impl Kind for Http {
    type One = HttpVersion;
    type Value = HttpVersion;
    type Raw = String;
    const NAME: Option<&'static str> = Some("1.1|2|3|auto");
    fn parser() -> ValueParser {
        ValueParser::new(|v: &str| HttpVersion::parse(v).ok_or_else(|| "expected 1.1, 2, 3 or auto".to_string()))
    }
    fn file(raw: String, _: &FileCx<'_>) -> Result<HttpVersion, String> {
        HttpVersion::parse(&raw)
            .ok_or_else(|| format!("= {raw:?} is not an HTTP version; expected \"1.1\", \"2\" or \"auto\""))
    }
    fn show(v: &HttpVersion) -> String {
        v.name().into()
    }
}

/// A duration or `off` (`None`), as a flag's value: a type of its own,
/// because clap reads an `Option<Option<_>>` field as a flag whose value
/// may be left out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrOff(pub Option<Duration>);

impl From<Option<Duration>> for OrOff {
    fn from(v: Option<Duration>) -> OrOff {
        OrOff(v)
    }
}

/// A WebSocket ping interval or timeout: a duration of at least
/// [`defaults::MIN_WS_PING`], or `off`.
pub struct PingDur;
impl Kind for PingDur {
    type One = OrOff;
    type Value = OrOff;
    type Raw = String;
    const NAME: Option<&'static str> = Some("DUR|off");
    const HYPHEN: bool = true;
    fn parser() -> ValueParser {
        ValueParser::new(|v: &str| ping_duration(v, duration).map(OrOff))
    }
    fn file(raw: String, _: &FileCx<'_>) -> Result<OrOff, String> {
        ping_duration(&raw, |v| file_duration(v, true))
            .map(OrOff)
            .map_err(|e| format!("= {raw:?}: {e}"))
    }
    fn show(v: &OrOff) -> String {
        v.0.map_or("off".into(), |d| humantime::format_duration(d).to_string())
    }
}

/// `off`, or a duration (read by `read`) of at least the ping floor.
fn ping_duration(v: &str, read: impl Fn(&str) -> Result<Duration, String>) -> Result<Option<Duration>, String> {
    if v == "off" {
        return Ok(None);
    }
    let d = read(v)?;
    if d < defaults::MIN_WS_PING {
        return Err(format!(
            "{v} is under {}: pings closer together flood a server, and none answers faster under load; give a longer one or off",
            humantime::format_duration(defaults::MIN_WS_PING)
        ));
    }
    Ok(Some(d))
}

/// A TCP keepalive idle time: whole seconds, at least
/// [`defaults::MIN_TCP_KEEPALIVE`] (the kernel's unit; a fraction would be
/// silently dropped, so it is refused).
pub struct KeepIdle;
impl Kind for KeepIdle {
    type One = Duration;
    type Value = Duration;
    type Raw = String;
    const NAME: Option<&'static str> = Some("DUR");
    const HYPHEN: bool = true;
    fn parser() -> ValueParser {
        ValueParser::new(|v: &str| keep_idle(duration(v)?))
    }
    fn file(raw: String, _: &FileCx<'_>) -> Result<Duration, String> {
        keep_idle(file_duration(&raw, true)?).map_err(|e| format!("= {raw:?}: {e}"))
    }
    fn show(v: &Duration) -> String {
        humantime::format_duration(*v).to_string()
    }
}

/// `d` when the kernel can hold it as a keepalive idle time.
fn keep_idle(d: Duration) -> Result<Duration, String> {
    if d < defaults::MIN_TCP_KEEPALIVE || d.subsec_nanos() != 0 {
        return Err(format!(
            "{} is not a whole number of seconds of at least {}: the kernel counts keepalive idle time in seconds; give e.g. 60s",
            humantime::format_duration(d),
            humantime::format_duration(defaults::MIN_TCP_KEEPALIVE)
        ));
    }
    Ok(d)
}

/// An HTTP/2 receive window in bytes, from the RFC's initial window to
/// its largest ([`defaults::MIN_H2_WINDOW`] ..= [`defaults::MAX_H2_WINDOW`]).
pub struct Window;
impl Kind for Window {
    type One = u32;
    type Value = u32;
    type Raw = u32;
    const NAME: Option<&'static str> = Some("BYTES");
    const HYPHEN: bool = true;
    fn parser() -> ValueParser {
        ValueParser::new(|v: &str| {
            let n: u32 = v.parse().map_err(|_| "expected a number of bytes".to_string())?;
            window(n)
        })
    }
    fn file(raw: u32, _: &FileCx<'_>) -> Result<u32, String> {
        window(raw).map_err(|e| format!("= {raw}: {e}"))
    }
    fn show(v: &u32) -> String {
        v.to_string()
    }
}

fn window(n: u32) -> Result<u32, String> {
    if (defaults::MIN_H2_WINDOW..=defaults::MAX_H2_WINDOW).contains(&n) {
        Ok(n)
    } else {
        Err(format!(
            "an HTTP/2 window is between {} and {} bytes; give one in that range",
            defaults::MIN_H2_WINDOW,
            defaults::MAX_H2_WINDOW
        ))
    }
}

/// `on|off` on the command line, a bool in a file.
pub struct OnOff;
impl Kind for OnOff {
    type One = bool;
    type Value = bool;
    type Raw = bool;
    const NAME: Option<&'static str> = Some("on|off");
    fn parser() -> ValueParser {
        ValueParser::new(|v: &str| match v {
            "on" => Ok(true),
            "off" => Ok(false),
            _ => Err("expected on or off".to_string()),
        })
    }
    fn file(raw: bool, _: &FileCx<'_>) -> Result<bool, String> {
        Ok(raw)
    }
    fn show(v: &bool) -> String {
        if *v { "on" } else { "off" }.into()
    }
}

/// A switch: a flag without a value, a bool in a file.
pub struct Switch;
impl Kind for Switch {
    type One = bool;
    type Value = bool;
    type Raw = bool;
    const NAME: Option<&'static str> = None;
    fn parser() -> ValueParser {
        ValueParser::bool()
    }
    fn file(raw: bool, _: &FileCx<'_>) -> Result<bool, String> {
        Ok(raw)
    }
}

/// How a file's value lands in the flags' field: `Option<T>` holds one,
/// `Vec<T>` and `bool` take it as it is.
pub trait Slot<V> {
    /// The field holding `v`.
    fn wrap(v: V) -> Self;
    /// Whether the field was given (a flag on the command line).
    fn given(&self) -> bool;
}

impl<T> Slot<T> for Option<T> {
    fn wrap(v: T) -> Self {
        Some(v)
    }
    fn given(&self) -> bool {
        self.is_some()
    }
}

impl<T> Slot<Vec<T>> for Vec<T> {
    fn wrap(v: Vec<T>) -> Self {
        v
    }
    fn given(&self) -> bool {
        !self.is_empty()
    }
}

impl Slot<bool> for bool {
    fn wrap(v: bool) -> Self {
        v
    }
    fn given(&self) -> bool {
        *self
    }
}

/// A flag's help line: its doc comment joined into one line, without the
/// closing period (as clap shows doc comments), with its default.
pub fn help(doc: &str, default: Option<String>) -> String {
    let text = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    let text = text.strip_suffix('.').unwrap_or(&text);
    match default {
        Some(d) => format!("{text} [default: {d}]"),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_follow_the_file() {
        let cx = FileCx {
            base: Path::new("/etc/soakd"),
        };
        assert_eq!(
            File::file("payload.json".into(), &cx).unwrap(),
            Path::new("/etc/soakd/payload.json")
        );
        assert_eq!(File::file("/abs/p".into(), &cx).unwrap(), Path::new("/abs/p"));
        let bare = FileCx { base: Path::new("") };
        assert_eq!(File::file("p".into(), &bare).unwrap(), Path::new("p"));
        let many = Files::file(OneOrMany::Many(vec!["a.pem".into(), "/b.pem".into()]), &cx).unwrap();
        assert_eq!(many, [PathBuf::from("/etc/soakd/a.pem"), PathBuf::from("/b.pem")]);
    }

    #[test]
    fn file_values_are_checked_like_flags() {
        let cx = FileCx { base: Path::new("") };
        assert_eq!(Count::file(0, &cx).unwrap_err(), "must be at least 1");
        assert!(Depth::file(0, &cx).unwrap_err().contains("between 1 and 1024"));
        assert!(Dur::file("0s".into(), &cx).unwrap_err().contains("greater than 0"));
        assert!(Dur::file("soon".into(), &cx).unwrap_err().contains("not a duration"));
        assert!(Rate::file(0.0, &cx).unwrap_err().contains("above 0"));
        assert!(
            Version::file("1.1".into(), &cx)
                .unwrap_err()
                .contains("\"1.2\" or \"1.3\"")
        );
        assert!(
            Ips::file(vec!["nope".into()], &cx)
                .unwrap_err()
                .contains("not an IP address")
        );
        assert_eq!(
            help("Connections to\n open.", Some("5".into())),
            "Connections to open [default: 5]"
        );
    }
}
