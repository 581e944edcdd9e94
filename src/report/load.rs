//! The load a workload put on its target, as the report states it: what a
//! comparison with another run must match before a difference is the
//! server's.
//!
//! Twice the connections, another rate or HTTP/2 instead of HTTP/1.1 change
//! latency and requests/s by themselves. `soakd run --baseline` (live and
//! at the end) and `soakd history` compare loads first and say where they
//! differ: a comparison of different loads is information, not a
//! regression verdict. The plan in words (`plan`) says the same for people;
//! this is its form for the comparison. A report from a soakd before it has
//! no `load` (all fields empty), and nothing can be said about it.

use serde::{Deserialize, Serialize};

use crate::plan::{LoadModel, Stage, Workload};

/// How a workload paced its requests, and on what.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Load {
    /// Connections held (the whole plan's, whatever the shard).
    pub connections: u64,
    /// `closed`, `interval` or `rate`.
    pub model: String,
    /// `-i`: each connection's interval, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval_seconds: Option<f64>,
    /// `-r`: requests per second in total.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Requests in flight per connection.
    pub pipeline: u16,
    /// HTTP/2 streams per connection.
    pub streams: u16,
    /// The protocol: the URL's scheme and the HTTP version asked for
    /// (`http, HTTP auto`), or the WebSocket mode (`ws, request`).
    pub protocol: String,
    /// The stages after the start, in order (empty for a constant load).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageLoad>,
}

/// One stage of a [`Load`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StageLoad {
    /// Connections during the stage.
    pub connections: u64,
    /// `closed`, `interval` or `rate`.
    pub model: String,
    /// `-i` during the stage, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval_seconds: Option<f64>,
    /// `-r` during the stage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// How long the stage lasts, seconds.
    pub seconds: f64,
}

fn model(m: LoadModel) -> (String, Option<f64>, Option<f64>) {
    match m {
        LoadModel::Closed => ("closed".into(), None, None),
        LoadModel::Interval(d) => ("interval".into(), Some(d.as_secs_f64()), None),
        LoadModel::Rate(r) => ("rate".into(), None, Some(r)),
    }
}

impl Load {
    /// The load `w` plans.
    pub fn of(w: &Workload) -> Load {
        let (model_name, interval_seconds, rate) = model(w.model);
        let scheme = w.target.url.split("://").next().unwrap_or("").to_ascii_lowercase();
        let protocol = match &w.target.ws {
            Some(ws) => format!("{scheme}, {}", ws.mode.name()),
            None => format!("{scheme}, HTTP {}", w.http.name()),
        };
        Load {
            connections: u64::from(w.connections),
            model: model_name,
            interval_seconds,
            rate,
            pipeline: w.conn.pipeline,
            streams: w.streams,
            protocol,
            stages: w.stages.iter().map(StageLoad::of).collect(),
        }
    }

    /// Nothing stated (a report from a soakd before `load`).
    pub fn is_unknown(&self) -> bool {
        self.protocol.is_empty() && self.model.is_empty()
    }

    /// Where `self` (the baseline's) and `new` differ, in words (`connections
    /// 100 → 200`); empty when they match or the baseline states none.
    pub fn differences(&self, new: &Load) -> Vec<String> {
        if self.is_unknown() || new.is_unknown() {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut differ = |what: &str, a: String, b: String| {
            if a != b {
                out.push(format!("{what} {a} → {b}"));
            }
        };
        differ("connections", self.connections.to_string(), new.connections.to_string());
        differ("pace", self.pace(), new.pace());
        differ("pipeline", self.pipeline.to_string(), new.pipeline.to_string());
        differ("streams", self.streams.to_string(), new.streams.to_string());
        differ("protocol", self.protocol.clone(), new.protocol.clone());
        differ("stages", stages(&self.stages), stages(&new.stages));
        out
    }

    /// The pace in words: `closed loop`, `-i 1s`, `-r 500`.
    fn pace(&self) -> String {
        pace(&self.model, self.interval_seconds, self.rate)
    }
}

fn pace(model: &str, interval: Option<f64>, rate: Option<f64>) -> String {
    match (model, interval, rate) {
        ("interval", Some(i), _) => format!("-i {}", dur(i)),
        ("rate", _, Some(r)) => format!("-r {r}"),
        _ => "closed loop".into(),
    }
}

/// Seconds as `1s`, `1m 30s`, `250ms`.
fn dur(secs: f64) -> String {
    let d = std::time::Duration::from_secs_f64(secs.max(0.0));
    humantime::format_duration(std::time::Duration::from_millis(d.as_millis() as u64)).to_string()
}

fn stages(s: &[StageLoad]) -> String {
    if s.is_empty() {
        return "none".into();
    }
    let each: Vec<String> = s
        .iter()
        .map(|st| {
            format!(
                "{} conns {} for {}",
                st.connections,
                pace(&st.model, st.interval_seconds, st.rate),
                dur(st.seconds)
            )
        })
        .collect();
    each.join("; ")
}

impl StageLoad {
    fn of(s: &Stage) -> StageLoad {
        let (model_name, interval_seconds, rate) = model(s.model);
        StageLoad {
            connections: u64::from(s.connections),
            model: model_name,
            interval_seconds,
            rate,
            seconds: s.hold.as_secs_f64(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(connections: u64, rate: f64) -> Load {
        Load {
            connections,
            model: "rate".into(),
            rate: Some(rate),
            pipeline: 1,
            streams: 1,
            protocol: "http, HTTP auto".into(),
            ..Load::default()
        }
    }

    #[test]
    fn differences_are_named_and_unknown_loads_say_nothing() {
        assert!(load(100, 500.0).differences(&load(100, 500.0)).is_empty());
        assert_eq!(
            load(100, 500.0).differences(&load(200, 250.0)),
            ["connections 100 → 200", "pace -r 500 → -r 250"]
        );
        assert!(Load::default().differences(&load(1, 1.0)).is_empty());
        let mut staged = load(100, 500.0);
        staged.stages.push(StageLoad {
            connections: 200,
            model: "interval".into(),
            interval_seconds: Some(1.0),
            rate: None,
            seconds: 60.0,
        });
        assert_eq!(
            load(100, 500.0).differences(&staged),
            ["stages none → 200 conns -i 1s for 1m"]
        );
    }
}
