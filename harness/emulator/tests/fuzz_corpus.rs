//! Replays the committed fuzz corpus (fuzz/corpus/<target>/) on stable Rust, through
//! the same checks as the cargo-fuzz targets (fuzz/checks.rs), so CI exercises every
//! input the fuzzer kept. A failing input is named; replay it alone with
//! `cargo +nightly fuzz run <target> <file>` from fuzz/ (see fuzz/README.md).

#[path = "../fuzz/checks.rs"]
mod checks;

use std::path::Path;

fn replay(target: &str, check: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} holds no inputs", dir.display());
    let failed: Vec<String> = files
        .iter()
        .filter(|f| {
            let data = std::fs::read(f).expect("readable corpus file");
            std::panic::catch_unwind(|| check(&data)).is_err()
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(failed.is_empty(), "{} of {} {target} inputs failed:\n{}", failed.len(), files.len(), failed.join("\n"));
}

#[test]
fn schedule_parse_corpus() {
    replay("schedule_parse", checks::check_schedule_parse);
}

#[test]
fn packet_path_corpus() {
    replay("packet_path", checks::check_packet_path);
}

#[test]
fn offload_corpus() {
    replay("offload", checks::check_offload);
}
