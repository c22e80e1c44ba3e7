//! The Kubernetes example (`deploy/kubernetes/`: an Indexed Job of segments and the
//! merge Job) is valid for the Kubernetes API, checked offline with the Kubernetes
//! Python client's models (`tests/validate_k8s.py`), and its pods run the segments
//! 1/N … N/N.
//!
//! Needs the virtual environment `scripts/install-deps.sh test` makes (or the Python in
//! LOADLENS_PYTHON); without it the test says `SKIPPED: why` and passes, except under
//! `CI=true`, where it fails (`common::skip_or_fail`).

mod common;

use std::path::PathBuf;
use std::process::Command;

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("LOADLENS_PYTHON") {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("HOME").unwrap_or_default();
    PathBuf::from(home).join(".cache/loadlens-venv/bin/python3")
}

#[test]
fn kubernetes_example_is_valid() {
    let py = python();
    let has = Command::new(&py)
        .args(["-c", "import kubernetes, yaml"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has {
        let why = format!(
            "the kubernetes client is not installed for {} (scripts/install-deps.sh test installs it)",
            py.display()
        );
        common::skip_or_fail(&why);
        return;
    }
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(&py)
        .arg(format!("{root}/tests/validate_k8s.py"))
        .arg(format!("{root}/deploy/kubernetes/loadlens-segments.yaml"))
        .arg(format!("{root}/deploy/kubernetes/loadlens-merge.yaml"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("valid 3 documents"), "{text}");
}
