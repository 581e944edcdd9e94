//! What the processes of a run looked like at one moment (the server
//! under test and soakd itself): sampled once a timeline point, kept with
//! the point, and read by the trends (leak slopes) and the report.

use serde::{Deserialize, Serialize};

/// One process of the server under test (`--target-pid`) as /proc saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcSample {
    /// The process.
    pub pid: u32,
    /// Resident memory, bytes.
    pub rss_bytes: u64,
    /// User and system CPU time, milliseconds (the report gives seconds).
    #[serde(rename = "cpu_seconds", with = "millis_as_seconds")]
    pub cpu_ms: u64,
    /// Open descriptors; `None` when /proc/PID/fd is not readable.
    pub open_fds: Option<u64>,
}

/// `cpu_ms` written as seconds.
mod millis_as_seconds {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(ms: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(*ms as f64 / 1e3)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        Ok((f64::deserialize(d)?.max(0.0) * 1e3).round() as u64)
    }
}

/// What the processes of a run looked like at one moment: the server
/// under test (one entry per `--target-pid` that could be read) and soakd
/// itself, whose memory must stay flat too.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Resources {
    /// The `--target-pid` processes, in the order given.
    pub targets: Vec<ProcSample>,
    /// soakd's own resident memory, bytes.
    pub soakd_rss_bytes: Option<u64>,
}

impl Resources {
    /// Makes `self` a copy of `other` in the room it has (a derived
    /// `clone_from` would make a new vector: a timeline point's room is
    /// made once).
    pub fn copy_from(&mut self, other: &Resources) {
        self.targets.clear();
        self.targets.extend_from_slice(&other.targets);
        self.soakd_rss_bytes = other.soakd_rss_bytes;
    }
}
