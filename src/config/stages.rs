//! A workload's `stages` and `then`: steps of connections and pace, each
//! inheriting what it does not set from the step before.

use serde::Deserialize;
use toml::Spanned;

use super::Locator;
use super::kinds::{Count, FileCx, Kind, Rate};
use crate::Error;
use crate::plan::{self, LoadModel, WorkloadSpec};

/// One step of `stages = [...]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileStage {
    connections: Option<Spanned<u32>>,
    interval: Option<Spanned<String>>,
    rate: Option<Spanned<f64>>,
    hold: Spanned<String>,
}

/// Reads the stages into `spec`: the first step replaces the workload's
/// own connections and model; `then` is the workload's `then` key.
/// `key_at` names the workload's table, for a rule about the table rather
/// than one key. (It takes the two keys, not the workload's table, so that
/// the settings table, which declares `stages`, and this file do not use
/// each other.)
pub(super) fn apply(
    list: &[Spanned<FileStage>],
    then: Option<&Spanned<String>>,
    spec: &mut WorkloadSpec,
    loc: &Locator<'_>,
    cx: &FileCx<'_>,
    key_at: &dyn Fn(&str) -> String,
) -> Result<(), Error> {
    let mut stages = Vec::with_capacity(list.len());
    let (mut connections, mut model) = (spec.connections, spec.model);
    for st in list {
        let step = st.get_ref();
        if let Some(c) = &step.connections {
            connections = Count::file(*c.get_ref(), cx).map_err(|e| loc.err(c, "stages.connections", e))?;
        }
        model = pace(step, model, loc, cx)?;
        let hold = loc
            .duration(&Some(step.hold.clone()), "stages.hold", true)?
            .unwrap_or_default();
        stages.push(plan::Stage {
            connections,
            model,
            hold,
        });
    }
    let then_stop = match then {
        None => false,
        Some(t) if t.get_ref() == "stop" => true,
        Some(t) if t.get_ref() == "hold" => false,
        Some(t) => return Err(loc.err(t, "then", format!("= {:?}: expected \"hold\" or \"stop\"", t.get_ref()))),
    };
    if then_stop && stages.is_empty() {
        return Err(Error::Usage(format!(
            "{}: then = \"stop\" needs stages",
            key_at("then")
        )));
    }
    if let Some(first) = stages.first() {
        spec.connections = first.connections;
        spec.model = first.model;
    }
    spec.stages = stages;
    spec.then_stop = then_stop;
    Ok(())
}

/// The step's pace: its `interval` or `rate`, else the one before.
fn pace(step: &FileStage, before: LoadModel, loc: &Locator<'_>, cx: &FileCx<'_>) -> Result<LoadModel, Error> {
    match (&step.interval, &step.rate) {
        (Some(_), Some(r)) => Err(loc.err(r, "stages.rate", "cannot be used with interval in the same stage")),
        (Some(_), None) => Ok(LoadModel::Interval(
            loc.duration(&step.interval, "stages.interval", true)?
                .unwrap_or_default(),
        )),
        (None, Some(r)) => Rate::file(*r.get_ref(), cx)
            .map(LoadModel::Rate)
            .map_err(|_| loc.err(r, "stages.rate", "must be a number of requests per second above 0")),
        (None, None) => Ok(before),
    }
}
