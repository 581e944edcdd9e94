//! The library's error type and how each variant maps to an exit code.
//!
//! Errors the operator can fix (bad flags, limits that do not fit) are kept
//! apart from internal failures because the exit-code contract says so:
//! 2 for bad input or preflight, 3 for a run whose verdict is negative
//! (failed thresholds, worse than its baseline), 1 for anything else.

use std::io;

/// Everything [`crate::run`] and friends can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input: a flag, URL, duration or number that cannot be used.
    /// The message names the value and what is expected.
    #[error("{0}")]
    Usage(String),
    /// The plan is valid but does not fit this machine (open files, ports,
    /// a port that cannot be bound). The message names the limit and the fix.
    #[error("{0}")]
    Preflight(String),
    /// The run (or comparison) completed and its verdict is negative: a
    /// threshold failed, the run was aborted by one, or something is worse
    /// than the baseline. The message says which.
    #[error("{0}")]
    Verdict(String),
    /// An internal failure that is not an I/O error (a worker died).
    #[error("internal error: {0}")]
    Internal(String),
    /// An internal failure: an I/O error the daemon cannot work around.
    #[error("{context}: {source}")]
    Io {
        /// What soakd was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

impl Error {
    /// The process exit code for this error: 2 for usage and preflight
    /// errors, 3 for a negative verdict, 1 for internal failures.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) | Error::Preflight(_) => 2,
            Error::Verdict(_) => 3,
            Error::Io { .. } | Error::Internal(_) => 1,
        }
    }

    /// Wraps an I/O error with what soakd was doing when it happened.
    pub fn io(context: impl Into<String>, source: io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}
