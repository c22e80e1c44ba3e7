//! A lab scenario as the tests run it: `loadlens lab run NAME --fix -q -d D --json-dir
//! DIR FLAGS…`, its two Runs read back, and nothing left behind — no namespace or
//! process of that lab run, no host sysctl changed. The caller keeps its own policy
//! around it (one world at a time, runs again when the host's load made the finding).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

/// How long one `lab run --fix` (two worlds built, loaded and removed) is given before
/// it is interrupted and the test fails. Not a speed requirement: what it catches is a
/// run that would never end; the longest scenario takes under a minute alone, a few on a
/// busy 2-core machine.
pub const LAB_HANG: Duration = Duration::from_secs(600);

/// How long an interrupted lab run is given to remove its world before it is killed.
const CLEAN_UP: Duration = Duration::from_secs(30);

/// Host sysctls a lab run must never touch.
const HOST_SYSCTLS: &[&str] = &[
    "net/core/somaxconn",
    "net/ipv4/ip_local_port_range",
    "net/ipv4/tcp_tw_reuse",
    "net/ipv4/tcp_syncookies",
];

fn host_sysctls() -> Vec<String> {
    HOST_SYSCTLS
        .iter()
        .map(|k| std::fs::read_to_string(format!("/proc/sys/{k}")).unwrap())
        .collect()
}

/// The namespaces of the lab run with process id `pid` (`ll-<pid>-…`): scoped, so a
/// lab run elsewhere on the machine does not fail this test.
pub fn lab_namespaces(pid: u32) -> Vec<String> {
    let prefix = format!("ll-{pid}-");
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&prefix))
        .map(String::from)
        .collect()
}

/// The processes left by the lab run `pid` (their command lines name its directory).
pub fn lab_processes(pid: u32) -> Vec<String> {
    let out = Command::new("pgrep")
        .args(["-af", &format!("loadlens-lab-{pid}-")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect()
}

/// A running `lab run`: interrupted when dropped before it ended (the test failed or
/// gave up waiting), as Ctrl-C would — the lab then removes its world — and killed if
/// it has not ended after [`CLEAN_UP`].
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.0.try_wait() {
            return;
        }
        // SAFETY: kill(2) on a child this process started and has not reaped.
        unsafe {
            libc::kill(self.0.id() as i32, libc::SIGINT);
        }
        let t0 = Instant::now();
        while t0.elapsed() < CLEAN_UP {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A lab run's results.
pub struct LabRun {
    pub before: Value,
    pub after: Value,
    /// The `--json-dir` (the Runs, the flame graph `NAME-before.svg`), removed on drop.
    pub dir: TempDir,
    /// What `lab run` printed (the table before and after the fix).
    pub stdout: String,
}

/// `loadlens lab run NAME --fix -q -d DURATION --json-dir DIR FLAGS…`: fails with its
/// stdout and stderr when it fails, when it leaves a namespace or a process behind or
/// changes a host sysctl, or when it is still running after [`LAB_HANG`].
pub fn lab_run(name: &str, duration: &str, flags: &[&str]) -> LabRun {
    let sysctls = host_sysctls();
    let dir = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let (stdout, stderr) = (out.path().join("stdout"), out.path().join("stderr"));
    let mut running = Running(
        super::loadlens()
            .args(["lab", "run", name, "--fix", "-q", "-d", duration])
            .arg("--json-dir")
            .arg(dir.path())
            .args(flags)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap(),
    );
    let pid = running.0.id();
    let said = |what: &str| {
        format!(
            "lab run {name} {flags:?} {what}:\n{}\n{}",
            std::fs::read_to_string(&stdout).unwrap_or_default(),
            std::fs::read_to_string(&stderr).unwrap_or_default()
        )
    };
    let t0 = Instant::now();
    let status = loop {
        if let Some(status) = running.0.try_wait().unwrap() {
            break status;
        }
        // Dropping `running` interrupts the lab run and waits for its clean-up.
        assert!(
            t0.elapsed() < LAB_HANG,
            "{}",
            said(&format!("still running after {LAB_HANG:?}: interrupted"))
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{}", said(&format!("failed ({status})")));
    let printed = std::fs::read_to_string(&stdout).unwrap();
    assert!(printed.contains("after fix"), "{}", said("printed no fix"));
    // Nothing left behind, nothing changed on the host.
    assert_eq!(
        lab_namespaces(pid),
        Vec::<String>::new(),
        "namespaces left by {name}"
    );
    assert_eq!(
        lab_processes(pid),
        Vec::<String>::new(),
        "processes left by {name}"
    );
    assert_eq!(host_sysctls(), sysctls, "host sysctls changed by {name}");
    let read = |w: &str| read_json(&dir.path().join(format!("{name}-{w}.json")));
    LabRun {
        before: read("before"),
        after: read("after"),
        dir,
        stdout: printed,
    }
}

/// [`lab_run`]'s two Runs: (before, after the fix).
pub fn lab_pair(name: &str, duration: &str, flags: &[&str]) -> (Value, Value) {
    let r = lab_run(name, duration, flags);
    (r.before, r.after)
}

fn read_json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}
