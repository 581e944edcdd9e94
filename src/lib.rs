//! soakd: a C10K soak-testing daemon.
//!
//! soakd opens and holds thousands to tens of thousands of keep-alive
//! connections (HTTP/1.1, HTTP/2, WebSocket, gRPC) against a target, keeps
//! sending requests on them for hours or days, and measures latency truthfully (from the time a
//! request was *due*, not when it happened to be written) while classifying
//! every failure.
//!
//! The crate is a library first so that tests and other programs can drive
//! the daemon in-process: [`run`] takes a validated [`Plan`] and returns the
//! final [`Report`]. Its modules are layers, each using only those below:
//!
//! | layer | modules |
//! |---|---|
//! | 0 parts | `error`, `fsio`, [`wire`], `timer`, `netio`, `stats` |
//! | 1 plan | [`plan`] |
//! | 2 | [`config`], `preflight`, [`reflection`] |
//! | 3 | `engine`, [`report`], `observe` |
//! | 4 | `server` (the built-in target), [`statuscmd`], `merge`, `html`, `verdict` |
//! | 5 | `daemon`, [`cli`] |
//!
//! Only what the binary, the tests and the fuzzers need is public.
#![deny(missing_docs, rust_2018_idioms, unsafe_code)]

#[macro_use]
mod names;

pub mod cli;
pub mod config;
mod daemon;
mod engine;
mod error;
mod fsio;
mod heap;
mod html;
mod merge;
mod netio;
mod observe;
pub mod plan;
mod preflight;
pub mod reflection;
pub mod report;
mod server;
mod state;
mod stats;
pub mod statuscmd;
#[cfg(test)]
mod test_alloc;
mod timer;
mod verdict;
pub mod wire;

/// Sizes of the per-connection types, for `tests/size.rs` only.
#[doc(hidden)]
pub use engine::SIZES as CONN_SIZES;
#[doc(hidden)]
pub use engine::fuzz_client_protocols;
pub use error::Error;
pub use plan::Plan;
pub use report::Report;
#[doc(hidden)]
pub use server::fuzzing::drive as fuzz_target_h2;

/// Runs the soak described by `plan` until it stops (duration, request
/// count, stages, or SIGINT/SIGTERM) and returns the final report.
///
/// Preflight (open-file and port limits) happens before any connection is
/// opened; its failures come back as [`Error::Preflight`].
pub fn run(plan: Plan) -> Result<Report, Error> {
    daemon::run(plan, None)
}
