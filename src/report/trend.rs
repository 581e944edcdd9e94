//! What a run's trends are computed over: where the steady part starts.

use std::time::Duration;

use crate::stats::trends::Settings;

/// What the trends of a run are computed over: the points after the
/// slowest workload's ramp (from the start when it never completed) and
/// the warmup (`warmup` as `--warmup` gave it, else
/// [`crate::plan::defaults::default_warmup`] of the planned duration, else
/// of the time run so far), until `ran`.
pub fn trend_settings(
    planned: Option<Duration>,
    warmup: Option<Duration>,
    ramp: Option<Duration>,
    ran: Duration,
) -> Settings {
    let warmup = warmup.unwrap_or_else(|| crate::plan::defaults::default_warmup(planned.unwrap_or(ran)));
    Settings {
        steady_from: (ramp.unwrap_or_default() + warmup).as_secs_f64(),
        until: ran.as_secs_f64(),
        significance: crate::plan::defaults::SIGNIFICANCE,
        error_rate_floor: crate::plan::defaults::MIN_ERROR_RATE_CHANGE,
    }
}
