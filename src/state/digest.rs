//! Which settings define a run, and so must match for a restart to
//! continue it.
//!
//! A state file is continued only by the plan that wrote it: continuing a
//! 1,000-connection soak's counts with a 5,000-connection one would make a
//! report that describes neither. But not every setting defines the run:
//! the worker threads, the outputs (report, HDR log, metrics address,
//! linger), timeouts, TLS files, `--target-pid` (a restarted server has a
//! new PID) and the checkpoint interval may change across a restart. The
//! list below is the one place that says which do (docs/operating.md
//! repeats it); each is written as `name = value`, so a refusal can name
//! what changed instead of only saying that something did.

use ring::digest::{SHA256, digest};

use crate::plan::{Plan, Workload};

/// The settings that define `plan`'s run, as (name, value) in a fixed
/// order.
pub fn settings(plan: &Plan) -> Vec<(String, String)> {
    let dur = |d: Option<std::time::Duration>| d.map_or("none".into(), |d| humantime::format_duration(d).to_string());
    let mut out: Vec<(String, String)> = vec![
        ("duration".into(), dur(plan.duration)),
        (
            "requests".into(),
            plan.max_requests.map_or("none".into(), |n| n.to_string()),
        ),
        ("thresholds".into(), texts(plan.thresholds.iter().map(|t| &t.text))),
        ("threshold_window".into(), dur(plan.threshold_window)),
        ("shard".into(), format!("{}/{}", plan.shard.index, plan.shard.count)),
        ("workloads".into(), texts(plan.workloads.iter().map(|w| &w.name))),
    ];
    // Only with one, so a run without a baseline keeps the digest it had
    // before baselines were live: its state files still continue.
    if let Some(b) = &plan.baseline {
        out.push((
            "baseline".into(),
            format!(
                "{} window {} tolerance {}",
                b.report.display(),
                humantime::format_duration(b.window),
                b.tolerance
            ),
        ));
    }
    for w in &plan.workloads {
        out.extend(workload(w));
    }
    out
}

/// A workload's defining settings, named `workload NAME: key`.
fn workload(w: &Workload) -> Vec<(String, String)> {
    let key = |k: &str| format!("workload {}: {k}", w.name);
    let stages: Vec<String> = w
        .stages
        .iter()
        .map(|s| {
            format!(
                "{} conns, {} for {}",
                s.connections,
                s.model,
                humantime::format_duration(s.hold)
            )
        })
        .collect();
    vec![
        (key("url"), w.target.url.clone()),
        (key("connections"), w.connections.to_string()),
        (key("pace"), w.model.to_string()),
        (key("pipeline"), w.conn.pipeline.to_string()),
        (key("requests"), requests_digest(w)),
        (key("stages"), stages.join("; ")),
        (key("then_stop"), w.then_stop.to_string()),
        (
            key("churn"),
            format!(
                "close {} max_requests_per_conn {:?} max_conn_lifetime {:?}",
                w.conn.close, w.conn.max_requests_per_conn, w.conn.max_conn_lifetime
            ),
        ),
        (key("thresholds"), texts(w.thresholds.iter().map(|t| &t.text))),
    ]
}

/// The requests a workload sends (method, path, headers, body, weights):
/// their names and a digest of their bytes, since a body may be large.
fn requests_digest(w: &Workload) -> String {
    let names: Vec<String> = w.request_names();
    let d = digest(&SHA256, format!("{:?}", w.target.requests).as_bytes());
    format!("{} (sha256 {})", names.join(", "), hex(&d.as_ref()[..8]))
}

fn texts<'a>(items: impl Iterator<Item = &'a String>) -> String {
    let v: Vec<&str> = items.map(String::as_str).collect();
    format!("[{}]", v.join(", "))
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The digest of the settings: SHA-256 of `name=value` lines.
pub fn of(settings: &[(String, String)]) -> String {
    let text: String = settings.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    hex(digest(&SHA256, text.as_bytes()).as_ref())
}

/// What differs between the settings a state was written with and
/// today's: `name: was X, now Y` for each.
pub fn differences(was: &[(String, String)], now: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in now {
        match was.iter().find(|(wk, _)| wk == k) {
            Some((_, wv)) if wv == v => {}
            Some((_, wv)) => out.push(format!("{k}: was {wv}, now {v}")),
            None => out.push(format!("{k}: new ({v})")),
        }
    }
    for (k, v) in was {
        if !now.iter().any(|(nk, _)| nk == k) {
            out.push(format!("{k}: was {v}, now absent"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(args: &[&str]) -> Plan {
        let mut argv = vec!["soakd", "run", "http://127.0.0.1:1/"];
        argv.extend(args);
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
        let crate::cli::Command::Run(run) = cli.command else {
            unreachable!()
        };
        run.into_plan().unwrap()
    }

    #[test]
    fn outputs_do_not_define_the_run_connections_do() {
        let a = settings(&plan(&["-c", "10", "-d", "2m"]));
        let b = settings(&plan(&[
            "-c",
            "10",
            "-d",
            "2m",
            "-t",
            "3",
            "--report",
            "r.json",
            "--metrics-listen",
            "off",
        ]));
        assert_eq!(of(&a), of(&b));
        let c = settings(&plan(&["-c", "20", "-d", "3m"]));
        assert_ne!(of(&a), of(&c));
        let d = differences(&a, &c);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d[0].starts_with("duration: was 2m, now 3m"), "{d:?}");
        assert!(d[1].contains(": connections: was 10, now 20"), "{d:?}");
    }
}
