//! Fuzz target `offload`: TUN offload: split (vnet header + bytes) and coalesce never panic and keep the payload.
//! The checks live in ../checks.rs (shared with tests/fuzz_corpus.rs).
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check_offload(data));
