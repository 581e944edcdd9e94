//! Shards: one plan run as N processes (pods, hosts), each taking share I.
//!
//! A plan outgrows one machine long before it outgrows one plan, so the
//! shards keep the whole plan's numbers (connections, rate, ramp, stages)
//! and each process only takes the slots that are its own: slot `s` of a
//! workload belongs to shard `s % N`. Every slot keeps its place on the
//! whole plan's schedule grid (slot j of n is due at j/n of the interval),
//! so N shards together are as even in time as one process, and the shares
//! add up to the plan exactly: connections by counting slots, rate and ramp
//! in proportion to them (they are rates: shard I sends its slots' requests
//! on the global grid, which is `rate × share / connections`), and the
//! `--requests` budget by an integer split with the remainder spread over
//! the first shards. Intervals, pipeline depth and closed loop are per
//! connection and stay as they are.

use std::net::IpAddr;

use super::Plan;
use crate::Error;

/// Share `index` of `count` (0-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// This shard, `0..count`.
    pub index: u32,
    /// Shards of the plan in all.
    pub count: u32,
}

impl Default for Shard {
    /// An unsharded run is shard 0 of 1: it owns every slot.
    fn default() -> Shard {
        Shard::WHOLE
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The environment variable that stands in for `--shard`.
pub const SHARD_ENV: &str = "SOAKD_SHARD";

/// The environment variable Kubernetes sets in each pod of an Indexed Job.
pub const JOB_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";

impl Shard {
    /// The whole plan.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Parses `I/N` or `auto/N` (I from `job_index`, Kubernetes'
    /// `JOB_COMPLETION_INDEX`). `what` names where the value came from
    /// (`--shard`, `SOAKD_SHARD`, a file's line) for the message.
    pub fn parse(what: &str, value: &str, job_index: Option<&str>) -> Result<Shard, Error> {
        let bad = |why: String| Error::Usage(format!("{what} {value:?}: {why}"));
        let Some((i, n)) = value.trim().split_once('/') else {
            return Err(bad("expected I/N (e.g. 0/3: share 0 of 3) or auto/N".into()));
        };
        let count: u32 = n
            .trim()
            .parse()
            .map_err(|_| bad(format!("{n:?} is not a number of shards; expected I/N such as 0/3")))?;
        if count == 0 {
            return Err(bad("there must be at least one shard (N ≥ 1)".into()));
        }
        let index: u32 = if i.trim() == "auto" {
            let Some(job) = job_index else {
                return Err(bad(format!(
                    "auto takes the index from {JOB_INDEX_ENV}, which is not set; run it in a Kubernetes Indexed Job or give the index (I/N)"
                )));
            };
            job.trim().parse().map_err(|_| {
                bad(format!(
                    "{JOB_INDEX_ENV}={job:?} is not a shard index; expected a number from 0 to {}",
                    count - 1
                ))
            })?
        } else {
            i.trim().parse().map_err(|_| {
                bad(format!(
                    "{i:?} is not a shard index; expected I/N such as 0/3, or auto/N"
                ))
            })?
        };
        if index >= count {
            return Err(bad(format!(
                "shard index {index} is out of range: the shards of {count} are 0 to {}",
                count - 1
            )));
        }
        Ok(Shard { index, count })
    }

    /// True for an unsharded run.
    pub fn is_whole(&self) -> bool {
        self.count == 1
    }

    /// Slot `slot` of a workload is this shard's.
    pub fn owns(&self, slot: u32) -> bool {
        slot % self.count == self.index
    }

    /// The slot's place among this shard's own slots (0, 1, 2 …).
    pub fn local(&self, slot: u32) -> u32 {
        slot / self.count
    }

    /// This shard's part of `n` things dealt round-robin: the slots among
    /// `0..n` it owns, and its part of a request budget of `n`. The shares
    /// of all shards add up to `n`; they differ by at most one.
    pub fn share(&self, n: u64) -> u64 {
        let c = self.count as u64;
        n / c + u64::from((self.index as u64) < n % c)
    }

    /// This shard's part of a rate (requests or new connections per
    /// second) spread over `connections` slots: in proportion to its slots.
    pub fn share_rate(&self, rate: f64, connections: u32) -> f64 {
        rate * self.share(connections as u64) as f64 / connections.max(1) as f64
    }

    /// This shard's disjoint, contiguous slice of `addrs` (`--shard-sources`).
    pub fn slice<'a, T>(&self, addrs: &'a [T]) -> &'a [T] {
        let (len, c, i) = (addrs.len(), self.count as usize, self.index as usize);
        &addrs[i * len / c..(i + 1) * len / c]
    }
}

/// Checks that shard `shard` of `plan` holds something of every workload
/// and, with `split_sources`, gives it its slice of each workload's source
/// addresses. `flag` names how the shard was given, for the messages.
pub fn apply(mut plan: Plan, shard: Shard, split_sources: bool, flag: &str) -> Result<Plan, Error> {
    plan.shard = shard;
    for w in &mut plan.workloads {
        let peak = w.peak_connections();
        if shard.share(peak) == 0 {
            return Err(Error::Usage(format!(
                "{flag} {shard}: workload {} has {peak} connections, fewer than the {} shards, so shard {} would hold none of it; \
                 give it at least {} connections or use fewer shards",
                w.name, shard.count, shard.index, shard.count
            )));
        }
        if split_sources {
            let n = w.conn.source_addrs.len();
            if n < shard.count as usize {
                return Err(Error::Usage(format!(
                    "--shard-sources: workload {} has {n} source address(es) for {} shards; each shard needs at least one: \
                     give at least {} (e.g. --source-addr 127.0.0.2 … on loopback) or drop --shard-sources",
                    w.name, shard.count, shard.count
                )));
            }
            let mine: Vec<IpAddr> = shard.slice(&w.conn.source_addrs).to_vec();
            w.conn.source_addrs = mine;
        }
    }
    plan.shard_sources = split_sources;
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_and_refuses_with_the_reason() {
        assert_eq!(
            Shard::parse("--shard", "1/3", None).unwrap(),
            Shard { index: 1, count: 3 }
        );
        assert_eq!(
            Shard::parse("--shard", "auto/4", Some("3")).unwrap(),
            Shard { index: 3, count: 4 }
        );
        for (value, job, says) in [
            ("3/3", None, "out of range"),
            ("0/0", None, "at least one shard"),
            ("1", None, "expected I/N"),
            ("a/3", None, "not a shard index"),
            ("1/x", None, "not a number of shards"),
            ("auto/3", None, "JOB_COMPLETION_INDEX"),
            ("auto/3", Some("x"), "JOB_COMPLETION_INDEX=\"x\""),
            ("auto/3", Some("3"), "out of range"),
            ("-1/3", None, "not a shard index"),
        ] {
            let e = Shard::parse("--shard", value, job).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains("--shard"), "{value}: {e}");
        }
    }

    #[test]
    fn remainders_go_to_the_first_shards() {
        let shares: Vec<u64> = (0..3).map(|i| Shard { index: i, count: 3 }.share(10)).collect();
        assert_eq!(shares, [4, 3, 3]);
        let s = Shard { index: 1, count: 3 };
        assert!((s.share_rate(900.0, 10) - 270.0).abs() < 1e-9);
        let addrs = [1, 2, 3, 4, 5];
        let slices: Vec<&[i32]> = (0..3).map(|i| Shard { index: i, count: 3 }.slice(&addrs)).collect();
        assert_eq!(slices, [&[1][..], &[2, 3][..], &[4, 5][..]]);
    }

    fn plan(text: &str, shard: &str, sources: bool) -> Result<Plan, String> {
        let over = crate::config::Overrides {
            shard: Some((Shard::parse("--shard", shard, None).unwrap(), "--shard".into())),
            shard_sources: sources,
            ..Default::default()
        };
        crate::config::parse(std::path::Path::new("t.toml"), text, over).map_err(|e| e.to_string())
    }

    #[test]
    fn a_shard_plan_counts_its_share_and_takes_its_sources() {
        let text = "requests = 10\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\nconnections = 10\n\
                    stages = [{ connections = 20, hold = \"1s\" }, { connections = 5, hold = \"1s\" }]\n\
                    source_addrs = [\"127.0.0.2\", \"127.0.0.3\", \"127.0.0.4\", \"127.0.0.5\"]\n";
        // Preflight's figure is the shard's part of the largest stage.
        let p = plan(text, "1/3", true).unwrap();
        assert_eq!(p.total_connections(), 7);
        assert_eq!(
            p.workloads[0].connections, 20,
            "the workload keeps the whole plan's numbers"
        );
        assert_eq!(
            p.workloads[0].conn.source_addrs,
            ["127.0.0.3".parse::<IpAddr>().unwrap()]
        );
        assert_eq!(plan(text, "3/4", true).unwrap().workloads[0].conn.source_addrs.len(), 1);
        assert_eq!(
            plan(text, "1/3", false).unwrap().workloads[0].conn.source_addrs.len(),
            4
        );
        let e = plan(text, "0/5", true).unwrap_err();
        assert!(e.contains("4 source address(es) for 5 shards"), "{e}");
        let e = plan(text, "20/21", false).unwrap_err();
        assert!(e.contains("20 connections, fewer than the 21 shards"), "{e}");
        // A shard named in the file: its line is in the message.
        let e = crate::config::parse(
            std::path::Path::new("t.toml"),
            &format!("shard = \"4/3\"\n{text}"),
            Default::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("t.toml:1: shard") && e.contains("out of range"), "{e}");
    }

    proptest! {
        #[test]
        fn shares_add_up_and_grid_places_partition(n in 0u64..5000, count in 1u32..40, rate in 0.1f64..1e6) {
            let shards: Vec<Shard> = (0..count).map(|index| Shard { index, count }).collect();
            // Counts (connections, request budgets) add up exactly.
            prop_assert_eq!(shards.iter().map(|s| s.share(n)).sum::<u64>(), n);
            // Every slot of the grid has exactly one owner, and a shard's
            // share is the number of slots it owns.
            let conns = n as u32;
            for slot in 0..conns {
                prop_assert_eq!(shards.iter().filter(|s| s.owns(slot)).count(), 1);
            }
            for s in &shards {
                prop_assert_eq!((0..conns).filter(|&x| s.owns(x)).count() as u64, s.share(n));
                // Local places are 0, 1, 2 … without gaps.
                let locals: Vec<u32> = (0..conns).filter(|&x| s.owns(x)).map(|x| s.local(x)).collect();
                prop_assert_eq!(locals, (0..s.share(n) as u32).collect::<Vec<_>>());
            }
            // Rates add up (to float precision).
            if conns > 0 {
                let sum: f64 = shards.iter().map(|s| s.share_rate(rate, conns)).sum();
                prop_assert!((sum - rate).abs() <= rate * 1e-9, "{} vs {}", sum, rate);
            }
            // Source slices are disjoint and cover the list.
            let addrs: Vec<u64> = (0..n % 64).collect();
            let joined: Vec<u64> = shards.iter().flat_map(|s| s.slice(&addrs).iter().copied()).collect();
            prop_assert_eq!(joined, addrs);
        }
    }
}
