//! Fuzz target `packet_path`: a small schedule and a packet sequence from the bytes, through the link core; invariants hold.
//! The checks live in ../checks.rs (shared with tests/fuzz_corpus.rs).
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check_packet_path(data));
