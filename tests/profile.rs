//! The server's profile: on-CPU stacks of a real nginx during the load, the top table,
//! the flame graph, and a run without permission that goes on and says what to change.

mod common;

use common::{loadlens, run_json, Nginx};

#[test]
fn profile_of_a_real_nginx_and_its_flame_graph() {
    let ng = Nginx::start("", "");
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("flame.svg");
    let run = run_json(&[
        &ng.url("/1k.bin"),
        "-c",
        "10",
        "-t",
        "1",
        "-d",
        "2s",
        "--flamegraph",
        svg.to_str().unwrap(),
    ]);
    let p = &run["evidence"]["profile"];
    assert!(p["samples"].as_u64().unwrap() >= 50, "{}", p["samples"]);
    assert!(p["kernel"].as_bool().unwrap(), "root samples kernel frames");
    // The top table is the nginx worker's, and its kernel share is the bulk of a
    // static server's CPU.
    let top = &p["top"];
    let worker = run["evidence"]["topology"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["pid"] == top["pid"])
        .unwrap();
    assert_eq!(worker["role"], "worker");
    assert!(top["kernel_pct"].as_f64().unwrap() > 30.0, "{top}");
    let first = top["functions"][0]["name"].as_str().unwrap();
    // The flame graph: a whole SVG, searchable (inferno's script), with that function.
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.starts_with("<?xml"),
        "{}",
        &text[..100.min(text.len())]
    );
    assert!(text.trim_end().ends_with("</svg>"));
    assert!(text.contains("search"), "inferno's search");
    assert!(text.contains(first), "{first} not in the flame graph");
    assert!(text.contains("nginx (front)"));
}

#[test]
fn without_permission_the_run_goes_on_and_says_what_to_change() {
    // nginx runs as root, its worker as nobody; loadlens as another user may sample
    // neither.
    let ng = Nginx::start("", "");
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let json = dir.path().join("run.json");
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65533", "--regid=65533", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_loadlens"))
        .args(["run", &ng.url("/1k.bin"), "-c", "4", "-t", "1", "-d", "1s"])
        .args(["--profile", "--server-pid", &ng.pid().to_string(), "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hint: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("profile: not permitted"))
        .collect();
    assert_eq!(hint.len(), 1, "{stdout}");
    assert!(hint[0].contains("perf_event_paranoid"), "{}", hint[0]);
    assert!(hint[0].contains("CAP_PERFMON"), "{}", hint[0]);
    // The off-CPU watch, which --profile brings, is one note of its own.
    let off: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("off-CPU: not permitted"))
        .collect();
    assert_eq!(off.len(), 1, "{stdout}");
    assert!(off[0].contains("CAP_PERFMON"), "{}", off[0]);
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(run["results"]["responses"].as_u64().unwrap() > 0);
    assert!(run["evidence"]["profile"].is_null());
    assert!(run["evidence"]["offcpu"].is_null());
}

#[test]
fn a_bad_profile_rate_is_refused() {
    let out = loadlens()
        .args(["run", "http://127.0.0.1:9/", "--profile-hz", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--profile-hz"));
}
