//! Fuzz target `schedule_parse`: arbitrary bytes as schedule text: parse never panics; an accepted schedule round-trips and runs.
//! The checks live in ../checks.rs (shared with tests/fuzz_corpus.rs).
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check_schedule_parse(data));
