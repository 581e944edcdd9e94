//! Request mixes: several weighted requests in one workload, chosen in a
//! fixed, exact order.
//!
//! A soak of one URL misses the endpoint that slows down after hours while
//! the others stay fast. A workload may therefore list up to
//! [`defaults::MAX_REQUESTS`] requests (`[[workload.request]]` in a config
//! file, or `--requests-file`), each rendered to bytes once at start.
//!
//! Selection is nginx's smooth weighted round-robin, computed once into a
//! [`cycle`] of request indexes (its length is the sum of the weights over
//! their greatest common divisor). A connection slot walks the cycle from an
//! offset of its own (slot `s` starts at `s mod len`), so each connection
//! sends exactly `weight` of each request over any `len` consecutive
//! requests, and at any instant the connections are spread over the whole
//! cycle: the mix is even across connections too. Choosing costs an index
//! increment: no random draw, no state beyond one counter per slot.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::checks::{CheckSpec, Checks};
use super::defaults;
use crate::Error;

/// One request of a mix as given, before its body is read and its bytes
/// rendered.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestEntry {
    /// The `request` label; `METHOD path` when absent.
    pub name: Option<String>,
    /// Method; the workload's (GET) when absent.
    pub method: Option<String>,
    /// Origin-form path (with query), or an absolute URL of the workload's
    /// origin.
    pub path: String,
    /// Header fields of this request (added to the workload's).
    pub headers: Vec<(String, String)>,
    /// Body given inline.
    pub body: Option<Vec<u8>>,
    /// Body read from a file.
    pub body_file: Option<PathBuf>,
    /// Weight in the mix.
    pub weight: u32,
    /// Checks of this request (unset keys come from the workload).
    pub checks: CheckSpec,
    /// gRPC: the method this request calls (`package.Service/Method`).
    pub call: Option<String>,
    /// gRPC: its message as protobuf's canonical JSON.
    pub data: Option<String>,
    /// gRPC: its message as JSON read from a file.
    pub data_file: Option<PathBuf>,
    /// Where it was given (`file:line: request 2`), for messages.
    pub origin: String,
}

/// One request of a workload, ready to send.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The `request` label.
    pub name: String,
    /// The request bytes, rendered once and shared (never copied per worker
    /// or per connection).
    pub bytes: Arc<[u8]>,
    /// A HEAD request: its responses have no body.
    pub head: bool,
    /// Weight in the mix.
    pub weight: u32,
    /// What its responses must look like; `None` checks nothing.
    pub checks: Option<Arc<Checks>>,
}

/// The selection order of requests with these weights: nginx's smooth
/// weighted round-robin over one period. Each index `i` appears exactly
/// `weights[i] / g` times (g the weights' greatest common divisor), spread
/// as evenly as the weights allow.
pub fn cycle(weights: &[u32]) -> Vec<u8> {
    let g = weights.iter().copied().fold(0, gcd).max(1);
    let w: Vec<i64> = weights.iter().map(|&x| (x / g) as i64).collect();
    let total: i64 = w.iter().sum();
    let mut current = vec![0i64; w.len()];
    (0..total)
        .map(|_| {
            let mut best = 0;
            for i in 0..w.len() {
                current[i] += w[i];
                if current[i] > current[best] {
                    best = i;
                }
            }
            current[best] -= total;
            best as u8
        })
        .collect()
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Checks a mix's size, names and weights.
pub fn check_entries(entries: &[RequestEntry]) -> Result<(), Error> {
    if entries.len() > defaults::MAX_REQUESTS {
        return Err(Error::Usage(format!(
            "{}: {} requests in one workload, over the limit of {}; split them over several workloads",
            entries[defaults::MAX_REQUESTS].origin,
            entries.len(),
            defaults::MAX_REQUESTS
        )));
    }
    for e in entries {
        if !(1..=defaults::MAX_WEIGHT).contains(&e.weight) {
            return Err(Error::Usage(format!(
                "{}: weight {} is out of range; expected 1 to {}",
                e.origin,
                e.weight,
                defaults::MAX_WEIGHT
            )));
        }
    }
    Ok(())
}

/// The label of an entry: its name, or `METHOD path`.
pub fn label(e: &RequestEntry, method: &str, path: &str) -> String {
    e.name.clone().unwrap_or_else(|| format!("{method} {path}"))
}

/// Parses a requests file (`--requests-file`): requests separated by blank
/// lines, each
///
/// ```text
/// [WEIGHT] METHOD URL-or-path
/// Header: value        (any number)
/// @body-file           (optional, relative to the requests file)
/// ```
///
/// or, for a `grpc://` workload, a call of a mix of methods:
///
/// ```text
/// [WEIGHT] package.Service/Method
/// name: value          (metadata, any number)
/// @message.json        (optional: the message as JSON; empty without)
/// ```
///
/// `#` starts a comment line. Errors name the file and line.
pub fn parse_requests_file(path: &Path, text: &str) -> Result<Vec<RequestEntry>, Error> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let at = |n: usize| format!("{}:{}", path.display(), n + 1);
    let mut out: Vec<RequestEntry> = Vec::new();
    let mut open = false;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            open = false;
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        if !open {
            let mut words = line.split_whitespace();
            let first = words.next().unwrap_or_default();
            let (weight, method) = match first.parse::<u32>() {
                Ok(w) => (w, words.next().unwrap_or_default()),
                Err(_) if first.chars().all(|c| c.is_ascii_digit()) => {
                    return Err(Error::Usage(format!("{}: weight {first} is too large", at(n))));
                }
                Err(_) => (defaults::WEIGHT, first),
            };
            let (target, rest) = (words.next(), words.next());
            if target.is_none() && is_grpc_method(method) {
                out.push(RequestEntry {
                    call: Some(method.to_string()),
                    path: String::new(),
                    weight,
                    origin: at(n),
                    ..RequestEntry::default()
                });
                open = true;
                continue;
            }
            let (Some(target), None) = (target, rest) else {
                return Err(Error::Usage(format!(
                    "{}: expected `[WEIGHT] METHOD URL-or-path` (e.g. `8 GET /items`), found {line:?}",
                    at(n)
                )));
            };
            crate::wire::check_method(method).map_err(|e| Error::Usage(format!("{}: {e}", at(n))))?;
            out.push(RequestEntry {
                method: Some(method.to_string()),
                path: target.to_string(),
                weight,
                origin: at(n),
                ..RequestEntry::default()
            });
            open = true;
            continue;
        }
        let cur = out.last_mut().expect("a request is open");
        if let Some(file) = line.strip_prefix('@') {
            if cur.body_file.is_some() || cur.data_file.is_some() {
                return Err(Error::Usage(format!("{}: a second @body-file for one request", at(n))));
            }
            match cur.call {
                Some(_) => cur.data_file = Some(dir.join(file.trim())),
                None => cur.body_file = Some(dir.join(file.trim())),
            }
        } else if let Some((name, value)) = line.split_once(':') {
            let (name, value) = (name.trim(), value.trim());
            crate::wire::check_header(name, value).map_err(|e| Error::Usage(format!("{}: {e}", at(n))))?;
            cur.headers.push((name.to_string(), value.to_string()));
        } else {
            return Err(Error::Usage(format!(
                "{}: expected a `Name: value` header, an `@body-file`, or a blank line before the next request; found {line:?}",
                at(n)
            )));
        }
    }
    if out.is_empty() {
        return Err(Error::Usage(format!(
            "{}: no request in it; write one per block, e.g. `GET /health`",
            path.display()
        )));
    }
    check_entries(&out)?;
    Ok(out)
}

/// A gRPC method as a requests file names it: `package.Service/Method`
/// (one word, a dotted service, no leading slash), never an HTTP method.
fn is_grpc_method(word: &str) -> bool {
    word.split_once('/')
        .is_some_and(|(svc, m)| !svc.is_empty() && !m.is_empty() && !m.contains('/') && svc.contains('.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cycle_is_nginx_smooth() {
        // nginx's documented example: weights 5, 1, 1 give a a b a c a a.
        assert_eq!(cycle(&[5, 1, 1]), [0, 0, 1, 0, 2, 0, 0]);
        assert_eq!(cycle(&[2, 4]), [1, 0, 1], "reduced by the gcd");
        assert_eq!(cycle(&[7]), [0]);
    }

    proptest! {
        /// Over any window of sum(weights) picks of the endless sequence,
        /// from any start, each request appears exactly its weight (over the
        /// gcd) times.
        #[test]
        fn every_window_is_exact(weights in proptest::collection::vec(1u32..50, 1..10), start in 0usize..10_000) {
            let c = cycle(&weights);
            let g = weights.iter().copied().fold(0, gcd);
            let total: u32 = weights.iter().map(|w| w / g).sum();
            prop_assert_eq!(c.len(), total as usize);
            let mut counts = vec![0u32; weights.len()];
            for k in 0..c.len() {
                counts[c[(start + k) % c.len()] as usize] += 1;
            }
            for (i, w) in weights.iter().enumerate() {
                prop_assert_eq!(counts[i], w / g);
            }
        }

        /// Connections walking the cycle from their slot offsets hold, at any
        /// instant (the same step on every connection), each request in
        /// proportion to its weight: within one of the exact share.
        #[test]
        fn offsets_spread_the_mix_over_connections(
            weights in proptest::collection::vec(1u32..20, 1..6),
            connections in 1usize..500,
            step in 0usize..100,
        ) {
            let c = cycle(&weights);
            let mut counts = vec![0usize; weights.len()];
            for slot in 0..connections {
                counts[c[(slot + step) % c.len()] as usize] += 1;
            }
            let g = weights.iter().copied().fold(0, gcd);
            for (i, w) in weights.iter().enumerate() {
                let share = connections as f64 * (w / g) as f64 / c.len() as f64;
                // Whole cycles are exact; the remainder is a window of the
                // smooth sequence, off by less than the largest weight.
                let slack = weights.iter().map(|w| w / g).max().unwrap() as f64;
                prop_assert!((counts[i] as f64 - share).abs() <= slack, "{counts:?} {share}");
            }
        }
    }

    #[test]
    fn requests_file_parses() {
        let text = "# a mix\n8 GET /items?page=1\nAccept: application/json\n\n1 POST http://h:1/items\nContent-Type: application/json\n@item.json\n\nHEAD /\n";
        let r = parse_requests_file(Path::new("/x/mix.txt"), text).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(
            (r[0].weight, r[0].method.as_deref(), r[0].path.as_str()),
            (8, Some("GET"), "/items?page=1")
        );
        assert_eq!(r[0].headers, [("Accept".to_string(), "application/json".to_string())]);
        assert_eq!(r[1].body_file.as_deref(), Some(Path::new("/x/item.json")));
        assert_eq!((r[2].weight, r[2].method.as_deref()), (1, Some("HEAD")));
        assert_eq!(r[2].origin, "/x/mix.txt:9");
        // A gRPC mix: a method per block, metadata, the message's JSON file.
        let text = "3 shop.v1.Catalog/Get\nx-tenant: a\n@get.json\n\nshop.v1.Cart/Add\n";
        let r = parse_requests_file(Path::new("/x/calls.txt"), text).unwrap();
        assert_eq!(
            (r[0].weight, r[0].call.as_deref(), r[0].method.as_deref()),
            (3, Some("shop.v1.Catalog/Get"), None)
        );
        assert_eq!(r[0].headers, [("x-tenant".to_string(), "a".to_string())]);
        assert_eq!(
            (r[0].data_file.as_deref(), r[0].body_file.as_deref()),
            (Some(Path::new("/x/get.json")), None)
        );
        assert_eq!((r[1].weight, r[1].call.as_deref()), (1, Some("shop.v1.Cart/Add")));
        assert!(!is_grpc_method("GET") && !is_grpc_method("/a/b") && !is_grpc_method("a/b"));
    }

    #[test]
    fn requests_file_errors_name_the_line() {
        for (text, says) in [
            ("GET\n", "mix.txt:1: expected `[WEIGHT] METHOD URL-or-path`"),
            ("GET / extra\n", "mix.txt:1: expected"),
            ("get /\n", "mix.txt:1: \"get\" is not an upper-case"),
            ("GET /\nnot a header\n", "mix.txt:2: expected a `Name: value` header"),
            (
                "GET /\nBad Name: x\n",
                "mix.txt:2: \"Bad Name\" is not a valid header name",
            ),
            ("0 GET /\n", "mix.txt:1: weight 0 is out of range"),
            ("99999999999 GET /\n", "mix.txt:1: weight 99999999999 is too large"),
            ("GET /\n@a\n@b\n", "mix.txt:3: a second @body-file"),
            ("# only a comment\n", "no request in it"),
        ] {
            let e = parse_requests_file(Path::new("mix.txt"), text).unwrap_err().to_string();
            assert!(e.contains(says), "{text:?}: {e}");
        }
        let many: String = (0..65).map(|i| format!("GET /{i}\n\n")).collect();
        let e = parse_requests_file(Path::new("mix.txt"), &many)
            .unwrap_err()
            .to_string();
        assert!(e.contains("65 requests in one workload, over the limit of 64"), "{e}");
    }
}
