//! Fuzzes the built-in target's HTTP/2 connection: a client that says
//! anything, in any pieces, while delayed responses come due. The script's
//! layout and the invariants checked (every byte written is well-formed
//! HTTP/2, streams stay within the announced limit, output is bounded) are
//! in `src/server/fuzzing.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    soakd::fuzz_target_h2(data);
});
