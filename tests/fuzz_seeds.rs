//! The fuzz targets' checks run on their seeds under plain `cargo test` (cargo-fuzz and a
//! nightly compiler are not needed): the command lines in `fuzz/seeds/cli/`, the recorded
//! Runs in `tests/data/runs/` and cut or altered copies of them, and whatever corpus a
//! local `cargo fuzz run` left in `fuzz/corpus/` (not committed).

#[path = "../fuzz/checks/cli.rs"]
mod cli;
#[path = "../fuzz/checks/run_json.rs"]
mod run_json;

use std::path::{Path, PathBuf};

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.is_file());
    v.sort();
    v
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn command_line_seeds() {
    let seeds = files(&root().join("fuzz/seeds/cli"));
    assert!(seeds.len() >= 10, "{seeds:?}");
    let accepted: Vec<String> = seeds
        .iter()
        .filter(|p| cli::check(&std::fs::read(p).unwrap()))
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    // The well-formed runs are accepted (and their requests checked); the injection,
    // the bad method, port 0 and the negative duration are refused.
    for ok in [
        "run-basic",
        "run-headers",
        "run-credentials",
        "run-https-ipv6",
        "run-units",
        "run-head-close",
    ] {
        assert!(accepted.iter().any(|a| a == ok), "{ok} refused");
    }
    for bad in [
        "run-injection",
        "run-bad-method",
        "run-port-zero",
        "run-negative",
    ] {
        assert!(!accepted.iter().any(|a| a == bad), "{bad} accepted");
    }
    for p in files(&root().join("fuzz/corpus/cli")) {
        cli::check(&std::fs::read(p).unwrap());
    }
}

#[test]
fn saved_run_seeds_and_their_mutations() {
    let runs = files(&root().join("tests/data/runs"));
    assert!(runs.len() >= 20);
    let mut loaded = 0;
    for p in &runs {
        let bytes = std::fs::read(p).unwrap();
        assert!(run_json::check(&bytes), "{} does not load", p.display());
        loaded += 1;
        // Cut short (never loads, never panics) and altered: one byte in every 997
        // changed, which keeps many files valid JSON with odd values.
        for cut in [1, bytes.len() / 3, bytes.len() - 2] {
            assert!(!run_json::check(&bytes[..cut]));
        }
        for (i, with) in [b'0', b'9', b'-', b' '].into_iter().enumerate() {
            let mut m = bytes.clone();
            for b in m.iter_mut().skip(i * 131).step_by(997) {
                if b.is_ascii_digit() {
                    *b = with;
                }
            }
            run_json::check(&m);
        }
    }
    assert_eq!(loaded, runs.len());
    for p in files(&root().join("fuzz/corpus/run_json")) {
        run_json::check(&std::fs::read(p).unwrap());
    }
}
