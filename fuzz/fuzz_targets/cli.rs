//! Fuzz target: see `fuzz/checks/cli.rs` (shared with the smoke test in
//! `tests/fuzz_seeds.rs`, which feeds it the seeds under `fuzz/seeds/cli/`).
#![no_main]

#[path = "../checks/cli.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    check::check(data);
});
