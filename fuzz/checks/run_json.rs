//! A saved Run as `loadlens report` and `compare` load it, shared by the `run_json`
//! fuzz target and its smoke test (`tests/fuzz_seeds.rs`): any text is refused with an
//! error or loaded, diagnosed again when it has no findings, and rendered by every
//! view without a panic; a Run that loaded saves and loads again.

use loadlens::report::View;

/// Returns whether the input loaded as a Run (for the smoke test's count).
pub fn check(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let Ok(run) = loadlens::cli::saved_run(text) else {
        return false;
    };
    let _ = loadlens::report::terminal::render(&run, true);
    let html = loadlens::report::Html.render(&run);
    assert!(html.starts_with(b"<!DOCTYPE html>"));
    let json = loadlens::report::Json.render(&run);
    let again = loadlens::run::Run::from_json(std::str::from_utf8(&json).unwrap());
    assert!(again.is_ok(), "a loaded Run does not load again: {again:?}");
    true
}
