//! The `soakd` binary: parse the command line, run, map errors to exit
//! codes (0 completed, 3 completed with a negative verdict — a failed
//! threshold, worse than the baseline —, 2 bad input or preflight, 1
//! internal failure).
//! Everything else lives in the library.

use clap::Parser;

fn main() {
    // clap exits with code 2 on bad flags, matching soakd's contract.
    let cli = soakd::cli::Cli::parse();
    if let Err(e) = soakd::cli::execute(cli) {
        if e.exit_code() == 3 {
            // Not an error of soakd's: the run's verdict.
            eprintln!("soakd: FAILED: {e}");
        } else {
            eprintln!("soakd: error: {e}");
        }
        std::process::exit(e.exit_code());
    }
}
