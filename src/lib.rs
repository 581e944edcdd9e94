//! soakd: a C10K soak-testing daemon.
//!
//! soakd opens and holds thousands to tens of thousands of HTTP/1.1
//! keep-alive connections against a target, keeps sending requests on them
//! for hours or days, and measures latency truthfully (from the time a
//! request was *due*, not when it happened to be written) while classifying
//! every failure.
//!
//! The crate is a library first so that tests and other programs can drive
//! the daemon in-process: [`run`] takes a validated [`plan::Plan`] and returns
//! the final [`report::Report`]. `main.rs` only parses flags and maps errors to
//! exit codes.
#![deny(missing_docs, rust_2018_idioms, unsafe_code)]

pub mod cli;
pub mod config;
pub mod engine;
pub mod error;
pub mod exporter;
pub mod hdrlog;
pub mod http;
pub mod metrics;
pub mod notify;
pub mod plan;
pub mod preflight;
pub mod report;
pub mod stats;
pub mod status;
pub mod statuscmd;
pub mod target;
pub mod timer;

pub use error::Error;
pub use plan::Plan;
pub use report::Report;

/// Runs the soak described by `plan` until it stops (duration, request
/// count, or SIGINT/SIGTERM) and returns the final report.
///
/// Preflight (open-file and port limits) happens before any connection is
/// opened; its failures come back as [`Error::Preflight`].
pub fn run(plan: Plan) -> Result<Report, Error> {
    engine::run(plan)
}
