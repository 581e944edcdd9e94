//! Response checks: what a request expects of its answers, compiled once.
//!
//! A soak against an API must notice a 200 carrying an error page or an
//! endpoint that starts answering 500, without turning that into a
//! connection error (the connection is fine; the answer is wrong). A
//! [`CheckSpec`] is what a config file or a requests file says, per request
//! or per workload (requests inherit each key they do not set); [`Checks`]
//! is its compiled form the workers evaluate. The per-connection
//! [`CheckState`] is a few plain fields: evaluating costs no allocation,
//! and the body is searched only when a body check exists, incrementally,
//! so a match split across two reads (or two chunks) is still found.

use memchr::memmem;

use crate::stats::CheckKind;

/// Default of `check_body_limit`: the bytes of a body searched for
/// `expect_body_contains`.
pub const CHECK_BODY_LIMIT: u64 = 64 * 1024;

/// The check keys as given; each is `None` when not set (so a request can
/// inherit the workload's).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckSpec {
    /// Accepted statuses (default: any 2xx or 3xx).
    pub expect_status: Option<Vec<u16>>,
    /// Header fields the response must carry, with these values.
    pub expect_header: Option<Vec<(String, String)>>,
    /// Text the body must contain within `check_body_limit` bytes.
    pub expect_body_contains: Option<String>,
    /// How far into the body `expect_body_contains` is searched.
    pub check_body_limit: Option<u64>,
    /// Longest body accepted.
    pub max_body_bytes: Option<u64>,
    /// gRPC: the status codes (their labels, `ok` to `unauthenticated`)
    /// that end a call well (default: `ok` alone).
    pub expect_grpc_status: Option<Vec<String>>,
    /// gRPC: a JSON object the decoded reply must contain (compiled with
    /// the schema, by `plan::grpc`).
    pub expect_grpc_message: Option<String>,
}

impl CheckSpec {
    /// Every key `self` does not set taken from `parent` (the workload's).
    pub fn inherit(&self, parent: &CheckSpec) -> CheckSpec {
        CheckSpec {
            expect_status: self.expect_status.clone().or_else(|| parent.expect_status.clone()),
            expect_header: self.expect_header.clone().or_else(|| parent.expect_header.clone()),
            expect_body_contains: self
                .expect_body_contains
                .clone()
                .or_else(|| parent.expect_body_contains.clone()),
            check_body_limit: self.check_body_limit.or(parent.check_body_limit),
            max_body_bytes: self.max_body_bytes.or(parent.max_body_bytes),
            expect_grpc_status: self
                .expect_grpc_status
                .clone()
                .or_else(|| parent.expect_grpc_status.clone()),
            expect_grpc_message: self
                .expect_grpc_message
                .clone()
                .or_else(|| parent.expect_grpc_message.clone()),
        }
    }

    /// Compiles the checks; `None` when no check is asked for (then
    /// responses are only counted by class, as without checks). The error
    /// names the key (as `key` spells it) and what is expected.
    pub fn compile(&self, key: &dyn Fn(&str) -> String) -> Result<Option<Checks>, String> {
        if let Some(list) = &self.expect_status {
            if list.is_empty() {
                return Err(format!(
                    "{} is empty; list the accepted statuses (e.g. [200, 201]) or leave it out",
                    key("expect_status")
                ));
            }
            if let Some(bad) = list.iter().find(|s| !(100..=599).contains(*s)) {
                return Err(format!(
                    "{}: {bad} is not an HTTP status; expected numbers from 100 to 599",
                    key("expect_status")
                ));
            }
        }
        if let Some(h) = &self.expect_header {
            if h.len() > MAX_HEADER_CHECKS {
                return Err(format!(
                    "{} has {} fields; at most {MAX_HEADER_CHECKS} can be checked per request",
                    key("expect_header"),
                    h.len()
                ));
            }
            for (name, value) in h {
                crate::wire::check_header(name, value).map_err(|e| format!("{}: {e}", key("expect_header")))?;
            }
        }
        if self.expect_body_contains.as_ref().is_some_and(String::is_empty) {
            return Err(format!(
                "{} is empty; give the text the body must contain",
                key("expect_body_contains")
            ));
        }
        if self.check_body_limit == Some(0) {
            return Err(format!("{} must be at least 1 byte", key("check_body_limit")));
        }
        let grpc_ok = match &self.expect_grpc_status {
            None => None,
            Some(list) if list.is_empty() => {
                return Err(format!(
                    "{} is empty; list the status codes that end a call well (e.g. [\"ok\", \"not_found\"]) or leave it out",
                    key("expect_grpc_status")
                ));
            }
            Some(list) => {
                let mut mask = 0u32;
                for name in list {
                    let Some(code) = crate::wire::grpc::Code::from_label(name) else {
                        let all: Vec<&str> = crate::wire::grpc::Code::ALL.iter().map(|c| c.label()).collect();
                        return Err(format!(
                            "{}: {name:?} is not a gRPC status code; expected one of {}",
                            key("expect_grpc_status"),
                            all.join(", ")
                        ));
                    };
                    mask |= 1 << code as u32;
                }
                Some(mask)
            }
        };
        let any = self.expect_status.is_some()
            || self.expect_header.is_some()
            || self.expect_body_contains.is_some()
            || self.max_body_bytes.is_some()
            || grpc_ok.is_some()
            || self.expect_grpc_message.is_some();
        if !any {
            return Ok(None);
        }
        Ok(Some(Checks {
            status: self.expect_status.clone(),
            headers: self
                .expect_header
                .iter()
                .flatten()
                .map(|(n, v)| (n.clone(), v.trim().as_bytes().to_vec()))
                .collect(),
            body: self.expect_body_contains.as_deref().map(Needle::new),
            body_limit: self.check_body_limit.unwrap_or(CHECK_BODY_LIMIT),
            max_body: self.max_body_bytes,
            grpc_ok,
            grpc_message: None,
        }))
    }
}

/// Header checks per request at most: which of them a response's fields
/// matched is one `u64` (see [`Checks::on_field`]).
pub const MAX_HEADER_CHECKS: usize = 64;

/// Compiled checks of one request.
#[derive(Clone, Debug)]
pub struct Checks {
    /// Accepted statuses; `None` is any 2xx or 3xx.
    pub status: Option<Vec<u16>>,
    /// Required header fields (name, trimmed value), compared ignoring
    /// ASCII case.
    pub headers: Vec<(String, Vec<u8>)>,
    /// Text the body must contain.
    pub body: Option<Needle>,
    /// Body bytes searched for [`Checks::body`].
    pub body_limit: u64,
    /// Longest body accepted.
    pub max_body: Option<u64>,
    /// gRPC: the codes that end a call well, bit `code` each (`None`: OK
    /// alone).
    pub grpc_ok: Option<u32>,
    /// gRPC: what the decoded reply must contain (`expect_grpc_message`;
    /// set by `plan::grpc` once the schema is known).
    pub grpc_message: Option<crate::plan::grpc::MessageCheck>,
}

impl PartialEq for Checks {
    fn eq(&self, o: &Checks) -> bool {
        self.status == o.status
            && self.headers == o.headers
            && self.body.as_ref().map(Needle::bytes) == o.body.as_ref().map(Needle::bytes)
            && self.body_limit == o.body_limit
            && self.max_body == o.max_body
            && self.grpc_ok == o.grpc_ok
            && self.grpc_message == o.grpc_message
    }
}

/// Where one connection's current response stands against its checks.
/// Plain fields, reset after each response.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckState {
    /// Body bytes seen so far.
    seen: u64,
    /// Length of the needle's prefix that ends the bytes searched so far
    /// (a match may straddle two reads).
    matched: u32,
    /// The needle was found.
    found: bool,
    /// A required header was missing or different.
    header_failed: bool,
}

impl Checks {
    /// gRPC: whether a call ending with `code` ended well.
    #[inline]
    pub fn grpc_accepts(&self, code: crate::wire::grpc::Code) -> bool {
        match self.grpc_ok {
            Some(mask) => mask & (1 << code as u32) != 0,
            None => code == crate::wire::grpc::Code::Ok,
        }
    }

    /// The keys that check a gRPC call (its status, its decoded reply),
    /// which an HTTP response does not have.
    pub fn grpc_keys(spec: &CheckSpec) -> Vec<&'static str> {
        [
            (spec.expect_grpc_status.is_some(), "expect_grpc_status"),
            (spec.expect_grpc_message.is_some(), "expect_grpc_message"),
        ]
        .into_iter()
        .filter_map(|(yes, k)| yes.then_some(k))
        .collect()
    }

    /// True when the checks look at HTTP responses (statuses, fields,
    /// bodies), which a gRPC call does not have.
    pub fn http_keys(spec: &CheckSpec) -> Vec<&'static str> {
        [
            (spec.expect_status.is_some(), "expect_status"),
            (spec.expect_header.is_some(), "expect_header"),
            (spec.expect_body_contains.is_some(), "expect_body_contains"),
            (spec.check_body_limit.is_some(), "check_body_limit"),
            (spec.max_body_bytes.is_some(), "max_body_bytes"),
        ]
        .into_iter()
        .filter_map(|(given, k)| given.then_some(k))
        .collect()
    }

    /// True when body bytes must be handed to [`Checks::on_body`].
    pub fn wants_body(&self) -> bool {
        self.body.is_some() || self.max_body.is_some()
    }

    /// Checks the final head's fields.
    pub fn on_head(&self, st: &mut CheckState, headers: &[httparse::Header<'_>]) {
        let mut seen = 0;
        for h in headers {
            self.on_field(&mut seen, h.name.as_bytes(), h.value);
        }
        self.end_fields(st, seen);
    }

    /// True when the checks look at header fields at all.
    pub fn wants_fields(&self) -> bool {
        !self.headers.is_empty()
    }

    /// One field of a head, for a decoder that hands fields over one at a
    /// time and keeps none (HTTP/2's HPACK): sets in `seen` the bit of each
    /// required header it matches. [`Checks::end_fields`] judges the head.
    pub fn on_field(&self, seen: &mut u64, name: &[u8], value: &[u8]) {
        for (i, (want_name, want)) in self.headers.iter().enumerate() {
            if name.eq_ignore_ascii_case(want_name.as_bytes()) && value.trim_ascii().eq_ignore_ascii_case(want) {
                *seen |= 1 << i;
            }
        }
    }

    /// Ends a final head whose fields went through [`Checks::on_field`]:
    /// a required header no field matched fails the header check.
    pub fn end_fields(&self, st: &mut CheckState, seen: u64) {
        // At most MAX_HEADER_CHECKS (64) headers: validated with the plan.
        let n = self.headers.len();
        let all = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
        st.header_failed |= seen & all != all;
    }

    /// Feeds a run of body bytes (the payload, in order).
    pub fn on_body(&self, st: &mut CheckState, chunk: &[u8]) {
        let before = st.seen;
        st.seen += chunk.len() as u64;
        if let Some(needle) = &self.body
            && !st.found
            && before < self.body_limit
        {
            let take = (self.body_limit - before).min(chunk.len() as u64) as usize;
            st.found = needle.search(&mut st.matched, &chunk[..take]);
        }
    }

    /// Ends the response: the failed checks as a bit set (bit `k as usize`
    /// for each failed [`CheckKind`] `k`), and the state reset for the next.
    pub fn finish(&self, st: &mut CheckState, status: u16) -> u8 {
        let ok_status = match &self.status {
            Some(list) => list.contains(&status),
            None => (200..400).contains(&status),
        };
        let mut failed = 0u8;
        if !ok_status {
            failed |= 1 << CheckKind::Status as u8;
        }
        if st.header_failed {
            failed |= 1 << CheckKind::Header as u8;
        }
        if self.body.is_some() && !st.found {
            failed |= 1 << CheckKind::Body as u8;
        }
        if self.max_body.is_some_and(|m| st.seen > m) {
            failed |= 1 << CheckKind::Size as u8;
        }
        *st = CheckState::default();
        failed
    }
}

/// One response being judged: hands the framer's head and body to the
/// checks.
pub struct Judge<'a> {
    /// The request's checks.
    pub checks: &'a Checks,
    /// The connection's state.
    pub state: &'a mut CheckState,
}

impl crate::wire::Inspect for Judge<'_> {
    fn head(&mut self, headers: &[httparse::Header<'_>]) {
        self.checks.on_head(self.state, headers);
    }

    fn body(&mut self, bytes: &[u8]) {
        self.checks.on_body(self.state, bytes);
    }
}

/// A substring searched for in a stream: whole matches within one run of
/// bytes with `memmem`, matches split across runs with the KMP automaton
/// (whose state is the only thing carried between runs).
#[derive(Clone, Debug)]
pub struct Needle {
    finder: memmem::Finder<'static>,
    /// KMP failure function: `fail[i]` is the length of the longest proper
    /// prefix of `needle[..=i]` that is also its suffix.
    fail: Vec<u32>,
}

impl Needle {
    /// Compiles `text`.
    pub fn new(text: &str) -> Needle {
        let n = text.as_bytes();
        let mut fail = vec![0u32; n.len()];
        let mut k = 0usize;
        for i in 1..n.len() {
            while k > 0 && n[i] != n[k] {
                k = fail[k - 1] as usize;
            }
            if n[i] == n[k] {
                k += 1;
            }
            fail[i] = k as u32;
        }
        Needle {
            finder: memmem::Finder::new(n).into_owned(),
            fail,
        }
    }

    /// The text searched for.
    pub fn bytes(&self) -> &[u8] {
        self.finder.needle()
    }

    /// KMP over `run` from state `k`: true when a match ends in `run`.
    fn walk(&self, k: &mut u32, run: &[u8]) -> bool {
        let n = self.bytes();
        let mut m = *k as usize;
        for &b in run {
            while m > 0 && n[m] != b {
                m = self.fail[m - 1] as usize;
            }
            if n[m] == b {
                m += 1;
                if m == n.len() {
                    *k = 0;
                    return true;
                }
            }
        }
        *k = m as u32;
        false
    }

    /// Searches the next run of the stream; `k` carries the state between
    /// runs. True when the needle was found (a match may begin in an
    /// earlier run).
    pub fn search(&self, k: &mut u32, run: &[u8]) -> bool {
        let len = self.bytes().len();
        // A short run is cheaper to walk byte by byte than to set up a
        // vectorised search for (a small JSON answer is one such run).
        if run.len() < 2 * len.max(8) {
            return self.walk(k, run);
        }
        // A match begun in an earlier run ends within the first len - 1
        // bytes of this one.
        let head = run.len().min(len - 1);
        if *k > 0 {
            if self.walk(k, &run[..head]) {
                return true;
            }
            if head == run.len() {
                return false; // the walk covered the run; `k` is current
            }
        }
        if self.finder.find(run).is_some() {
            return true;
        }
        // What may begin a match in the next run lies in the last len - 1
        // bytes, too short to hold a whole match (none was found above).
        *k = 0;
        self.walk(k, &run[run.len().saturating_sub(len - 1)..]);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn compile(spec: &CheckSpec) -> Checks {
        spec.compile(&|k| k.to_string()).unwrap().unwrap()
    }

    #[test]
    fn nothing_asked_is_no_checks() {
        let spec = CheckSpec {
            check_body_limit: Some(10),
            ..CheckSpec::default()
        };
        assert!(spec.compile(&|k| k.to_string()).unwrap().is_none());
    }

    #[test]
    fn bad_specs_name_the_key() {
        let key = |k: &str| format!("req.{k}");
        for (spec, says) in [
            (
                CheckSpec {
                    expect_status: Some(vec![]),
                    ..CheckSpec::default()
                },
                "req.expect_status is empty",
            ),
            (
                CheckSpec {
                    expect_status: Some(vec![200, 999]),
                    ..CheckSpec::default()
                },
                "999 is not an HTTP status",
            ),
            (
                CheckSpec {
                    expect_body_contains: Some(String::new()),
                    ..CheckSpec::default()
                },
                "req.expect_body_contains is empty",
            ),
            (
                CheckSpec {
                    expect_header: Some(vec![("Bad Name".into(), "x".into())]),
                    ..CheckSpec::default()
                },
                "req.expect_header",
            ),
        ] {
            let e = spec.compile(&key).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn inherits_each_key_it_does_not_set() {
        let parent = CheckSpec {
            expect_status: Some(vec![200]),
            max_body_bytes: Some(10),
            ..CheckSpec::default()
        };
        let child = CheckSpec {
            expect_status: Some(vec![201]),
            ..CheckSpec::default()
        }
        .inherit(&parent);
        assert_eq!(child.expect_status, Some(vec![201]));
        assert_eq!(child.max_body_bytes, Some(10));
    }

    #[test]
    fn each_kind_fails_on_its_own() {
        let c = compile(&CheckSpec {
            expect_status: Some(vec![200]),
            expect_header: Some(vec![("Content-Type".into(), "application/json".into())]),
            expect_body_contains: Some("\"ok\":true".into()),
            max_body_bytes: Some(20),
            ..CheckSpec::default()
        });
        let bit = |k: CheckKind| 1u8 << k as u8;
        let mut st = CheckState::default();
        let good = [httparse::Header {
            name: "content-type",
            value: b" Application/JSON ",
        }];
        c.on_head(&mut st, &good);
        c.on_body(&mut st, b"{\"ok\":true}");
        assert_eq!(c.finish(&mut st, 200), 0);
        c.on_head(&mut st, &[]);
        c.on_body(&mut st, b"{\"ok\":false, \"padding\": 1}");
        assert_eq!(
            c.finish(&mut st, 500),
            bit(CheckKind::Status) | bit(CheckKind::Header) | bit(CheckKind::Body) | bit(CheckKind::Size)
        );
        // The default status check: any 2xx or 3xx.
        let c = compile(&CheckSpec {
            max_body_bytes: Some(1000),
            ..CheckSpec::default()
        });
        assert_eq!(c.finish(&mut st, 304), 0);
        assert_eq!(c.finish(&mut st, 404), bit(CheckKind::Status));
    }

    #[test]
    fn body_is_searched_only_within_the_limit() {
        let c = compile(&CheckSpec {
            expect_body_contains: Some("needle".into()),
            check_body_limit: Some(10),
            ..CheckSpec::default()
        });
        let mut st = CheckState::default();
        c.on_body(&mut st, b"0123needle");
        assert_eq!(c.finish(&mut st, 200), 0);
        c.on_body(&mut st, b"01234needle");
        assert_ne!(c.finish(&mut st, 200), 0, "the match ends past the limit");
        c.on_body(&mut st, b"0123nee");
        c.on_body(&mut st, b"dle");
        assert_eq!(c.finish(&mut st, 200), 0, "split at the limit");
    }

    proptest! {
        /// Any split of a body finds the needle exactly when the whole body
        /// contains it (matches straddling runs included).
        #[test]
        fn any_split_finds_what_the_whole_finds(
            body in proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(b'c')], 0..200),
            needle in "[ab]{1,6}",
            cuts in proptest::collection::vec(0usize..200, 0..8),
        ) {
            let n = Needle::new(&needle);
            let whole = memmem::find(&body, needle.as_bytes()).is_some();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(body.len())).collect();
            cuts.sort_unstable();
            let (mut k, mut found, mut at) = (0u32, false, 0usize);
            for c in cuts.into_iter().chain([body.len()]) {
                found |= n.search(&mut k, &body[at..c]);
                at = c;
                if found { break; }
            }
            prop_assert_eq!(found, whole);
        }
    }
}
