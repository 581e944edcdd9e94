//! The effective plan in words, for `soakd check`.

use std::fmt::Write as _;
use std::net::IpAddr;

use super::{LoadModel, Plan};

/// The plan in words: per workload what it connects to, how hard and for
/// how long, then the totals.
pub fn describe(plan: &Plan) -> String {
    // A workload's whole-plan rate (none in closed loop): this shard's part
    // of it is `share_rate` of that.
    // With `-i`, each HTTP/2 stream slot is paced as a connection is (the
    // worker's `WorkloadRt::set_load`): `streams` requests per interval per
    // connection, when HTTP/2 is spoken.
    let h2_slots = |w: &super::Workload| {
        if w.target.ws.is_none() && w.http.may_be_h2(w.target.tls.is_some()) {
            w.streams.max(1) as f64
        } else {
            1.0
        }
    };
    let whole_rate = |w: &super::Workload| match w.model {
        LoadModel::Closed => None,
        LoadModel::Interval(i) => Some(w.connections as f64 * h2_slots(w) / i.as_secs_f64()),
        LoadModel::Rate(r) => Some(r),
    };
    let mut s = String::new();
    let mut total_rate = 0.0;
    let mut rate_known = true;
    for w in &plan.workloads {
        let _ = writeln!(s, "workload {} -> {} ({})", w.name, w.target.url, w.target.addr);
        let model = match w.model {
            LoadModel::Closed => {
                rate_known = false;
                "closed loop (next request as soon as a response is in)".to_string()
            }
            LoadModel::Interval(i) => {
                let r = whole_rate(w).unwrap_or(0.0);
                total_rate += r;
                let every = humantime::format_duration(i);
                match (h2_slots(w) > 1.0, w.http) {
                    (false, _) => format!("paced: one request every {every} per connection = {r:.1} req/s"),
                    (true, super::HttpVersion::Http2) => format!(
                        "paced: one request every {every} per stream slot ({} per connection) = {r:.1} req/s",
                        w.streams
                    ),
                    (true, _) => format!(
                        "paced: one request every {every} per stream slot ({} per connection) = {r:.1} req/s over HTTP/2, {:.1} req/s if the server picks HTTP/1.1",
                        w.streams,
                        r / h2_slots(w)
                    ),
                }
            }
            LoadModel::Rate(r) => {
                total_rate += r;
                format!("open loop: {r} req/s spread over the connections")
            }
        };
        let _ = writeln!(
            s,
            "  connections {}  ramp {}/s (about {:.1} s)  pipeline {}{}",
            w.connections,
            w.ramp,
            w.connections as f64 / w.ramp as f64,
            w.conn.pipeline,
            match (w.conn.close, w.conn.close_with_reset) {
                (true, true) => "  one request per connection, closed with a reset",
                (true, false) => "  one request per connection",
                (false, true) => "  planned closes are resets",
                (false, false) => "",
            }
        );
        let _ = writeln!(s, "  {model}");
        // HTTP/2
        match w.http {
            // Plain `auto` is HTTP/1.1: nothing to negotiate with.
            super::HttpVersion::Http11 => {}
            super::HttpVersion::Auto if w.target.tls.is_none() => {}
            v => {
                let _ = writeln!(
                    s,
                    "  http {}  streams {} per connection (capped by the server's SETTINGS_MAX_CONCURRENT_STREAMS)",
                    v.name(),
                    w.streams
                );
            }
        }
        if !plan.shard.is_whole() {
            let sh = plan.shard;
            let rate = whole_rate(w).map_or(String::new(), |r| {
                format!(", {:.1} req/s", sh.share_rate(r, w.connections))
            });
            let _ = writeln!(
                s,
                "  shard {sh}: {} of the {} connections (slots s with s mod {} = {}, at their places in the whole plan's schedule){rate}, ramp {:.1}/s",
                sh.share(w.connections as u64),
                w.connections,
                sh.count,
                sh.index,
                sh.share_rate(w.ramp as f64, w.connections)
            );
        }
        let _ = writeln!(
            s,
            "  timeouts connect {} request {}",
            humantime::format_duration(w.conn.connect_timeout),
            humantime::format_duration(w.conn.request_timeout)
        );
        let reqs = &w.target.requests;
        if reqs.len() > 1 || reqs[0].checks.is_some() {
            let total: u32 = reqs.iter().map(|r| r.weight).sum();
            for r in reqs {
                let _ = writeln!(
                    s,
                    "  request {:?}  weight {} ({:.1}%){}",
                    r.name,
                    r.weight,
                    100.0 * r.weight as f64 / total as f64,
                    if r.checks.is_some() { "  checked" } else { "" }
                );
            }
        }
        if let Some(tls) = &w.target.tls {
            let _ = writeln!(s, "  {}", describe_tls(tls));
        }
        if !w.conn.source_addrs.is_empty() {
            let list: Vec<String> = w.conn.source_addrs.iter().map(IpAddr::to_string).collect();
            let _ = writeln!(s, "  source addresses {}", list.join(", "));
        }
        for (i, st) in w.stages.iter().enumerate() {
            let _ = writeln!(
                s,
                "  stage {}: {} connections, {}, for {}",
                i + 1,
                st.connections,
                st.model,
                humantime::format_duration(st.hold)
            );
        }
        if !w.stages.is_empty() {
            let _ = writeln!(
                s,
                "  after the last stage: {}",
                if w.then_stop { "stop the run" } else { "hold it" }
            );
        }
        if let Some(n) = w.conn.max_requests_per_conn {
            let _ = writeln!(s, "  churn: about {n} requests per connection");
        }
        if let Some(d) = w.conn.max_conn_lifetime {
            let _ = writeln!(s, "  churn: connections live about {}", humantime::format_duration(d));
        }
        if let Some(d) = w.conn.tcp_keepalive {
            let _ = writeln!(s, "  TCP keepalive after {} idle", humantime::format_duration(d));
        }
        if !w.thresholds.is_empty() {
            let list: Vec<&str> = w.thresholds.iter().map(|t| t.text.as_str()).collect();
            let _ = writeln!(s, "  thresholds {}", list.join(", "));
        }
    }
    if !plan.thresholds.is_empty() {
        let list: Vec<&str> = plan.thresholds.iter().map(|t| t.text.as_str()).collect();
        let _ = writeln!(
            s,
            "thresholds over all workloads: {} (live window {}{})",
            list.join(", "),
            plan.threshold_window
                .map_or("the whole run".into(), |d| humantime::format_duration(d).to_string()),
            plan.abort_on_fail.map_or(String::new(), |d| format!(
                ", abort after failing {}",
                humantime::format_duration(d)
            ))
        );
    }
    if let Some(b) = &plan.baseline {
        let _ = writeln!(
            s,
            "baseline {}: judged every {} (tolerance {}%){}",
            b.report.display(),
            humantime::format_duration(b.window),
            b.tolerance * 100.0,
            plan.abort_on_fail.map_or(String::new(), |d| format!(
                ", abort after a regression held {}",
                humantime::format_duration(d)
            ))
        );
    }
    let o = &plan.outages;
    let _ = writeln!(
        s,
        "outages: a second with errors over {}% of its attempts or open connections under {}% of those desired, until both are back for {}",
        o.errors * 100.0,
        o.open * 100.0,
        humantime::format_duration(o.settle)
    );
    for e in &plan.events.events {
        let _ = writeln!(s, "event {:?} at {}: {:?}", e.name, e.at, e.run);
    }
    watch(&mut s, &plan.watch);
    let share_rate: f64 = plan
        .workloads
        .iter()
        .map(|w| plan.shard.share_rate(whole_rate(w).unwrap_or(0.0), w.connections))
        .sum();
    if !plan.shard.is_whole() {
        let whole: u64 = plan.workloads.iter().map(|w| w.peak_connections()).sum();
        let _ = writeln!(
            s,
            "shard {}: {} of the plan's {whole} connections{}{}{}",
            plan.shard,
            plan.total_connections(),
            if rate_known {
                format!(", {share_rate:.1} of {total_rate:.1} req/s")
            } else {
                String::new()
            },
            plan.max_requests
                .map_or(String::new(), |n| format!(", {} of {n} requests", plan.shard.share(n))),
            if plan.shard_sources {
                ", its own slice of the source addresses"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(
        s,
        "total: {} connections, {}, {} worker threads, metrics {}",
        plan.total_connections(),
        if rate_known && !plan.shard.is_whole() {
            format!("{share_rate:.1} req/s")
        } else if rate_known {
            format!("{total_rate:.1} req/s")
        } else {
            "closed-loop rate (as fast as the target answers)".into()
        },
        plan.threads,
        plan.metrics_listen
            .map_or("off".into(), |a| format!("http://{a}/metrics"))
    );
    s
}

/// One line on how a workload speaks TLS; file paths, never their contents.
fn describe_tls(tls: &super::Tls) -> String {
    let spec = &tls.spec;
    let verify = if spec.insecure {
        "certificates NOT verified (--insecure)".to_string()
    } else if spec.cacert.is_empty() {
        "verified against the system's roots".to_string()
    } else {
        let files: Vec<String> = spec.cacert.iter().map(|p| p.display().to_string()).collect();
        format!("verified against {}", files.join(", "))
    };
    let name = match &spec.servername {
        Some(n) => format!("servername {n}"),
        None => "servername from the URL".to_string(),
    };
    let versions = format!(
        "TLS {}-{}",
        spec.min.map_or("1.2", |v| v.name()),
        spec.max.map_or("1.3", |v| v.name())
    );
    let resumption = if tls.resumption() {
        "resumption on"
    } else {
        "resumption off"
    };
    let client = match &spec.cert {
        Some(c) => format!(", client certificate {}", c.display()),
        None => String::new(),
    };
    format!("tls: {verify}, {name}, {versions}, {resumption}{client}")
}

/// The server watch in words: its sources (header names only, never a
/// value or a token) and its watches.
fn watch(s: &mut String, w: &super::watch::WatchPlan) {
    use super::watch::WatchExpr;
    if w.is_empty() {
        return;
    }
    let _ = writeln!(s, "server watch: every {}", humantime::format_duration(w.interval));
    for e in w.endpoints.iter().chain(&w.prometheus) {
        let mut extras: Vec<String> = e.headers.iter().map(|(k, _)| format!("header {k}")).collect();
        if let Some(f) = &e.bearer_file {
            extras.push(format!("bearer token from {}", f.display()));
        }
        if e.tls.as_ref().is_some_and(|t| !t.verified()) {
            extras.push("certificate not verified".into());
        }
        let _ = writeln!(
            s,
            "  {} {}{}",
            if w.prometheus.as_ref().is_some_and(|p| std::ptr::eq(p, e)) {
                "prometheus"
            } else {
                "scrape"
            },
            e.url.as_str(),
            if extras.is_empty() {
                String::new()
            } else {
                format!(" ({})", extras.join(", "))
            }
        );
    }
    for p in &w.pidfiles {
        let _ = writeln!(s, "  pid file {} (rss, fds, cpu)", p.display());
    }
    for c in &w.cgroups {
        let _ = writeln!(s, "  cgroup {} (rss, fds, cpu)", c.given);
    }
    for x in &w.watches {
        let what = match &x.expr {
            WatchExpr::Select(sel) => sel.metric.clone(),
            WatchExpr::Rate(sel) => format!("rate({})", sel.metric),
            WatchExpr::Query(q) => q.clone(),
        };
        let _ = writeln!(
            s,
            "  watch {} = {what} ({}){}",
            x.name,
            x.unit.name(),
            if w.defaulted { ", where the endpoint has it" } else { "" }
        );
    }
}
