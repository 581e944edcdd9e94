//! Fuzzes the config file parser: any text (bytes decoded as lossy UTF-8)
//! must give a plan or an error, never a panic.
//!
//! `config::parse` resolves each workload's host and reads `body_file`. The
//! fuzzer must not send DNS queries or read devices, so an input is skipped
//! (not parsed) when a workload URL has a host that is not an IP literal
//! (IP literals resolve without any lookup), or when a `body_file` could be
//! anything but a small regular file or a missing path. The check reads the
//! document with the same `toml` parser `config::parse` uses; text it
//! rejects is rejected by `config::parse` before any workload is built.
#![no_main]

use std::net::IpAddr;
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use soakd::config::{Overrides, parse};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if !harmless(&text) {
        return;
    }
    let _ = parse(Path::new("fuzz.toml"), &text, Overrides::default());
});

/// Whether parsing `text` can neither resolve a name nor read a device.
fn harmless(text: &str) -> bool {
    let Ok(doc) = toml::from_str::<toml::Table>(text) else {
        return true;
    };
    let Some(list) = doc.get("workload").and_then(toml::Value::as_array) else {
        return true;
    };
    for w in list.iter().filter_map(toml::Value::as_table) {
        if let Some(url) = w.get("url").and_then(toml::Value::as_str)
            && let Ok(parsed) = soakd::plan::parse_url(url)
            && parsed.host.parse::<IpAddr>().is_err()
        {
            return false;
        }
        if let Some(file) = w.get("body_file") {
            let Some(file) = file.as_str() else { return false };
            if !harmless_file(Path::new(file)) {
                return false;
            }
        }
    }
    true
}

/// A missing path (the read fails), or a regular file of at most 1 MiB
/// outside /proc, /sys and /dev.
fn harmless_file(path: &Path) -> bool {
    match std::fs::metadata(path) {
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        Ok(m) => {
            let Ok(real) = path.canonicalize() else { return false };
            m.is_file() && m.len() <= 1 << 20 && !["/proc", "/sys", "/dev"].iter().any(|p| real.starts_with(p))
        }
    }
}
