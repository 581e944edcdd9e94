//! Fuzzes the HTTP/2 connection core (`wire/h2/conn.rs`) in the client
//! role: a peer that says anything, read in pieces of any size. The input's
//! layout and the invariants checked (the same events, replies and error
//! however the bytes are split; bounded replies, carry and header blocks)
//! are in `soakd::wire::h2::fuzz_core`'s doc.
#![no_main]

use libfuzzer_sys::fuzz_target;
use soakd::wire::h2::{Role, fuzz_core};

fuzz_target!(|data: &[u8]| {
    fuzz_core(Role::Client, data);
});
