//! Counts by a closed name table (status classes, error kinds, close
//! reasons, check kinds) as the report carries them: an object keyed by
//! the table's names, read back by finding the one table that has them
//! all. Its own file so the report's figures (`mod.rs`) stay readable.

use serde::{Deserialize, Serialize};

use super::check_failures;
use crate::stats::{CheckKind, CloseReason, ErrorKind, StatusClass};

/// Counts by name, in the name table's order: errors by kind, closes by
/// reason. Serialized as an object whose keys are the names, so the JSON
/// contract follows the one table in `stats` and cannot miss a name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ByName<const N: usize> {
    pub(super) names: [&'static str; N],
    pub(super) counts: [u64; N],
}

impl<const N: usize> ByName<N> {
    /// The count under `name` (0 for a name not in the table).
    pub fn get(&self, name: &str) -> u64 {
        self.names.iter().position(|n| *n == name).map_or(0, |i| self.counts[i])
    }

    /// (name, count) in table order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.names.iter().copied().zip(self.counts.iter().copied())
    }
}

impl<const N: usize> ByName<N> {
    /// `name count` for each count above 0, for the summary.
    pub(super) fn nonzero(&self) -> Vec<String> {
        self.iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect()
    }
}

impl<const N: usize> Serialize for ByName<N> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = ser.serialize_map(Some(N))?;
        for (name, count) in self.iter() {
            map.serialize_entry(name, &count)?;
        }
        map.end()
    }
}

impl<'de, const N: usize> Deserialize<'de> for ByName<N> {
    /// Reads the object back (`soakd merge`). The names are matched to the
    /// one name table of `N` names that has them all; a name missing from
    /// the object (a report from an older soakd) counts 0, a name in no
    /// table is refused.
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        let map = std::collections::BTreeMap::<String, u64>::deserialize(de)?;
        let tables: [&[&'static str]; 4] = [
            &StatusClass::ALL.map(StatusClass::name),
            &ErrorKind::ALL.map(ErrorKind::name),
            &CloseReason::ALL.map(CloseReason::name),
            &CheckKind::ALL.map(CheckKind::name),
        ];
        let names: [&'static str; N] = tables
            .iter()
            .filter(|t| t.len() == N && map.keys().all(|k| t.contains(&k.as_str())))
            .find_map(|t| (*t).try_into().ok())
            .ok_or_else(|| {
                let keys: Vec<&str> = map.keys().map(String::as_str).collect();
                serde::de::Error::custom(format!(
                    "names {keys:?} are not one of soakd's tables (status classes, error kinds, close reasons)"
                ))
            })?;
        Ok(ByName {
            names,
            counts: names.map(|n| map.get(n).copied().unwrap_or(0)),
        })
    }
}

impl<const N: usize> ByName<N> {
    /// The sum of two tables of the same names (`soakd merge`).
    pub fn plus(&self, other: &ByName<N>) -> ByName<N> {
        let mut sum = self.clone();
        for (c, o) in sum.counts.iter_mut().zip(other.counts) {
            *c += o;
        }
        sum
    }
}

/// Complete responses by status class (see [`StatusClass`]).
pub type Responses = ByName<{ StatusClass::COUNT }>;
/// Errors by kind (see [`ErrorKind`]).
pub type Errors = ByName<{ ErrorKind::COUNT }>;
/// Closes of established connections by reason (see [`CloseReason`]).
pub type Closes = ByName<{ CloseReason::COUNT }>;
/// Failed response checks by kind (see [`CheckKind`]).
pub type CheckFailures = ByName<{ CheckKind::COUNT }>;

/// No failed checks (what a report from before checks existed had).
pub(super) fn no_check_failures() -> CheckFailures {
    check_failures([0; CheckKind::COUNT])
}

// Zero tables by name, for reports that lack them (the four tables are
// told apart by their names, not their sizes: two have four names).
pub(super) fn no_responses() -> Responses {
    Responses {
        names: StatusClass::ALL.map(StatusClass::name),
        counts: [0; StatusClass::COUNT],
    }
}

pub(super) fn no_errors() -> Errors {
    Errors {
        names: ErrorKind::ALL.map(ErrorKind::name),
        counts: [0; ErrorKind::COUNT],
    }
}

impl Errors {
    /// Counts in [`ErrorKind`] order.
    pub fn counts(&self) -> &[u64; ErrorKind::COUNT] {
        &self.counts
    }
}
