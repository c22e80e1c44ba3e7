//! `loadlens doctor` as root and as an unprivileged user (setpriv, as tests/profile.rs
//! does), against an nginx this test starts as root: the differences are the ones the
//! machine's settings make certain (the server's threads are readable by root only;
//! perf events by root only where perf_event_paranoid ≥ 2), and it exits 0 both ways.

mod common;

use common::{loadlens, Nginx};

fn doctor(as_nobody: bool, pid: i32) -> String {
    let mut cmd = if as_nobody {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_loadlens"));
        c
    } else {
        loadlens()
    };
    let out = cmd
        .args(["doctor", "--pid", &pid.to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The status word of the line that starts with `what`.
fn status<'a>(text: &'a str, what: &str) -> &'a str {
    text.lines()
        .find(|l| l.trim_start().starts_with(what))
        .unwrap_or_else(|| panic!("no line for {what}: {text}"))
        .trim_start()[what.len()..]
        .split_whitespace()
        .next()
        .unwrap()
}

#[test]
fn doctor_as_root_and_as_an_unprivileged_user() {
    if unsafe { libc::geteuid() } != 0 {
        common::skip_or_fail("needs root (to start a server another user cannot read)");
        return;
    }
    let ng = Nginx::start("", "");
    let root = doctor(false, ng.pid());
    let nobody = doctor(true, ng.pid());
    assert!(root.contains("(as root)"), "{root}");
    assert!(nobody.contains("(as uid 65534)"), "{nobody}");
    // The master runs as root: its threads' calls are root's to read.
    assert_eq!(status(&root, "server access"), "yes", "{root}");
    assert_eq!(status(&nobody, "server access"), "no", "{nobody}");
    assert!(
        nobody.contains("cap_sys_ptrace") || nobody.contains("as root"),
        "{nobody}"
    );
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().parse().unwrap())
        .unwrap_or(4);
    assert_eq!(status(&root, "perf events"), "yes", "{root}");
    if paranoid >= 2 {
        assert_eq!(status(&nobody, "perf events"), "no", "{nobody}");
        assert!(nobody.contains("kernel.perf_event_paranoid=1"), "{nobody}");
    }
    // What does not depend on the user reads the same.
    for what in ["schedstat", "cgroup", "sock_diag", "SMT"] {
        assert_eq!(status(&root, what), status(&nobody, what), "{what}");
    }
    // Every line that is not fine says how to change it.
    for text in [&root, &nobody] {
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            // "  WHAT (21 wide) STATUS (5 wide)  says"
            let word = l.get(24..29).map(str::trim);
            if matches!(word, Some("no") | Some("noise")) {
                assert!(
                    lines.get(i + 1).is_some_and(|n| n.contains("fix: ")),
                    "{l}\n{text}"
                );
            }
        }
    }
}

#[test]
fn doctor_refuses_a_pid_that_is_not_there() {
    let out = loadlens()
        .args(["doctor", "--pid", "999999999"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no process 999999999") && err.contains("--pid"),
        "{err}"
    );
}
