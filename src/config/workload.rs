//! A `[[workload]]` table → a built [`Workload`]: the declared settings
//! (read by [`settings`](super::settings)), then what only a file has: a
//! name, the load model's `closed`, a request mix, checks, stages,
//! thresholds.

use std::collections::HashSet;

use toml::Spanned;

use super::Locator;
use super::kinds::FileCx;
use super::request::check_spec;
use super::settings::FileWorkload;
use crate::Error;
use crate::plan::{LoadModel, Workload, WorkloadSpec};

/// Every workload of the file, names unique.
pub(super) fn build_all(
    list: &[Spanned<FileWorkload>],
    loc: &Locator<'_>,
    cx: &FileCx<'_>,
) -> Result<Vec<Workload>, Error> {
    let mut names = HashSet::new();
    let mut out = Vec::with_capacity(list.len());
    for w in list {
        let ww = w.get_ref();
        claim_name(ww, &mut names, loc)?;
        let built = build(w, loc, cx)?;
        if ww.name.is_none() && !names.insert(built.name.clone()) {
            return Err(Error::Usage(format!(
                "{}: two workloads are both named {:?} (from their URLs); give them distinct `name`s",
                loc.at(&ww.url, "url"),
                built.name
            )));
        }
        out.push(built);
    }
    Ok(out)
}

/// A given `name`: not empty, not taken.
fn claim_name(ww: &FileWorkload, names: &mut HashSet<String>, loc: &Locator<'_>) -> Result<(), Error> {
    let Some(n) = &ww.name else { return Ok(()) };
    if n.get_ref().is_empty() {
        return Err(loc.err(n, "name", "must not be empty"));
    }
    if !names.insert(n.get_ref().clone()) {
        return Err(loc.err(
            n,
            "name",
            format!("{:?} is used by two workloads; names must differ", n.get_ref()),
        ));
    }
    Ok(())
}

/// One workload: its settings into a spec, then built (URL resolved,
/// requests rendered), errors located at the key that caused them.
fn build(w: &Spanned<FileWorkload>, loc: &Locator<'_>, cx: &FileCx<'_>) -> Result<Workload, Error> {
    let ww = w.get_ref();
    let settings = ww.settings(loc, cx)?;
    let model = load_model(ww, settings.model(), loc)?;
    let mut spec = WorkloadSpec {
        name: ww.name.as_ref().map(|n| n.get_ref().clone()),
        url: ww.url.get_ref().clone(),
        model,
        requests: super::request::read_all(&ww.request, loc, cx)?,
        checks: check_spec!(ww),
        thresholds: loc.thresholds(&ww.thresholds)?,
        ..WorkloadSpec::default()
    };
    settings.apply(&mut spec);
    let key_at = |k: &str| format!("{}: workload key {k}", loc.place(w.span()));
    super::stages::apply(&ww.stages, ww.then.as_ref(), &mut spec, loc, cx, &key_at)?;
    // Cross-field errors from `build` name each key where it is written.
    let at = |k: &str| -> String {
        let found = match k {
            "url" => Some(format!("{}: ", loc.at(&ww.url, "url"))),
            "thresholds" => ww.thresholds.first().map(|v| loc.at(v, k)),
            _ => ww.span_of(k).map(|sp| loc.at_span(sp, k)),
        };
        found.unwrap_or_else(|| key_at(k))
    };
    spec.build(&at)
}

/// `interval`, `rate` or `closed = true`: at most one of them.
fn load_model(ww: &FileWorkload, model: LoadModel, loc: &Locator<'_>) -> Result<LoadModel, Error> {
    let closed = ww.closed.as_ref().is_some_and(|c| *c.get_ref());
    match (&ww.interval, &ww.rate) {
        (Some(_), Some(r)) => Err(loc.err(r, "rate", "cannot be used with interval; keep one")),
        (Some(i), None) if closed => Err(loc.err(i, "interval", "cannot be used with closed = true")),
        (None, Some(r)) if closed => Err(loc.err(r, "rate", "cannot be used with closed = true")),
        _ => Ok(model),
    }
}
