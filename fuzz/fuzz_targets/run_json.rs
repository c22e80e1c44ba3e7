//! Fuzz target: see `fuzz/checks/run_json.rs` (shared with the smoke test in
//! `tests/fuzz_seeds.rs`, which feeds it the seeds under `fuzz/seeds/run_json/`).
#![no_main]

#[path = "../checks/run_json.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    check::check(data);
});
