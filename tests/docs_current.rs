//! The man page and the shell completions are generated from the clap definitions and
//! committed under docs/ (so `make install` needs no build step to find them, and a
//! reviewer sees what changed): they must match the command line as it is.
//!
//! docs/findings.md is generated the same way, from the table of findings.
//!
//! After changing a flag or a finding: `UPDATE_DOCS=1 cargo test --test docs_current`.

use std::path::Path;

use clap_complete::Shell;

fn check(rel: &str, generated: Vec<u8>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{rel} is out of date: run `UPDATE_DOCS=1 cargo test --test docs_current`"
    );
}

#[test]
fn man_page_is_current_and_names_every_command() {
    let man = loadlens::cli::man_page().unwrap();
    let text = String::from_utf8(man.clone()).unwrap();
    for cmd in [
        "RUN",
        "COMPARE",
        "SWEEP",
        "REPORT",
        "EXPLAIN",
        "LAB",
        "COMPLETIONS",
    ] {
        assert!(text.contains(&format!(".SH \"LOADLENS {cmd}\"")), "{cmd}");
    }
    assert!(text.contains("\\-\\-connreqs"), "flags are documented");
    check("docs/loadlens.1", man);
}

#[test]
fn completions_are_current() {
    for (shell, file) in [
        (Shell::Bash, "docs/completions/loadlens.bash"),
        (Shell::Zsh, "docs/completions/_loadlens"),
        (Shell::Fish, "docs/completions/loadlens.fish"),
    ] {
        let c = loadlens::cli::completions(shell);
        assert!(String::from_utf8_lossy(&c).contains("connreqs"), "{file}");
        check(file, c);
    }
}

/// docs/findings.md is generated from the rules, their texts and the server kinds
/// (src/diagnose/catalog.rs): a finding added, renamed or reworded changes it.
#[test]
fn findings_page_is_current() {
    let md = loadlens::diagnose::catalog::findings_markdown();
    for id in ["client-saturated", "listen-queue-overflow", "syscall-bound"] {
        assert!(md.contains(&format!("\n## {id}\n")), "{id}");
    }
    check("docs/findings.md", md.into_bytes());
}
