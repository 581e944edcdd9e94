//! Fuzzes the client's HTTP/1.1 state machine the way the engine's loop drives
//! it: a server that says anything, in any pieces, between requests
//! issued, partial writes and timers. The script's layout and the
//! invariants checked are in `src/engine/worker/fuzzing.rs` (the driver
//! lives beside the protocols, which are private to the engine).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    soakd::fuzz_client_protocols(0, data);
});
