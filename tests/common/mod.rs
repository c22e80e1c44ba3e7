//! Test support: the loadlens binary run with JSON out and its Run read back, waits
//! and bounds, skips; a lab scenario run before and after its fix (`lab`); the hostile
//! server (`bad_server`). The real servers the tests
//! run against (nginx, php-fpm, network namespaces) are the lab's, in
//! `loadlens::lab::testbed`, re-exported here.
#![allow(dead_code)]

pub mod bad_server;
pub mod lab;
pub mod mix;
pub mod sshd;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

// Each test file uses some of them.
#[allow(unused_imports)]
pub use lab::{lab_pair, lab_run};
#[allow(unused_imports)]
pub use loadlens::lab::testbed::{
    in_ns, stall_worker, Caddy, CaddyLine, LogLine, NetnsPair, Nginx, PhpFpm,
};

/// The loadlens binary under test.
pub fn loadlens() -> Command {
    Command::new(env!("CARGO_BIN_EXE_loadlens"))
}

/// Runs `loadlens run ARGS --json FILE` and returns the Run as JSON.
pub fn run_json(args: &[&str]) -> Value {
    let mut cmd = loadlens();
    cmd.arg("run");
    json_of(cmd, args)
}

/// `run_json` with environment variables set for loadlens.
pub fn run_json_env(env: &[(&str, &str)], args: &[&str]) -> Value {
    let mut cmd = loadlens();
    cmd.arg("run").envs(env.iter().copied());
    json_of(cmd, args)
}

/// Runs `cmd ARGS --json FILE -q` (a `loadlens run` however started), asserts it
/// succeeded and returns the Run.
fn json_of(mut cmd: Command, args: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let out_path: PathBuf = dir.path().join("run.json");
    let out = cmd
        .args(args)
        .arg("--json")
        .arg(&out_path)
        .arg("-q")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "loadlens failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(&out_path).unwrap()).unwrap()
}

/// Seconds since the Unix epoch (what `--start-at` takes).
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Starts segments 1..=n of `loadlens run ARGS` at once (all due at the same
/// `--start-at`), each writing its Run to DIR/seg-I.json; waits for all and returns the
/// files.
pub fn run_segments(dir: &Path, n: u32, args: &[&str], start_at: f64) -> Vec<PathBuf> {
    let children: Vec<(PathBuf, Child)> = (1..=n)
        .map(|i| {
            let f = dir.join(format!("seg-{i}.json"));
            let child = loadlens()
                .arg("run")
                .args(args)
                .args(["--segment", &format!("{i}/{n}")])
                .args(["--start-at", &format!("{start_at:.3}")])
                .arg("--json")
                .arg(&f)
                .arg("-q")
                .spawn()
                .unwrap();
            (f, child)
        })
        .collect();
    children
        .into_iter()
        .map(|(f, c)| {
            assert_ok(&c.wait_with_output().unwrap());
            f
        })
        .collect()
}

pub fn u(v: &Value, path: &str) -> u64 {
    let mut cur = v;
    for k in path.split('.') {
        cur = &cur[k];
    }
    cur.as_u64()
        .unwrap_or_else(|| panic!("{path} is not a number: {cur}"))
}

/// The latency histogram a Run (or a segment's part of a merged Run) carries: its
/// `latency` object, whose `histogram` is the serialised HdrHistogram in base64.
pub fn latency_histogram(latency: &Value) -> hdrhistogram::Histogram<u64> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(latency["histogram"].as_str().unwrap())
        .unwrap();
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .unwrap()
}

/// A Run's latency at percentile `p` (one of those it lists), µs.
pub fn percentile_us(run: &Value, p: f64) -> u64 {
    run["results"]["latency"]["percentiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["p"].as_f64() == Some(p))
        .unwrap_or_else(|| panic!("no p{p} in the Run"))["us"]
        .as_u64()
        .unwrap()
}

/// Status code → count from a Run.
pub fn status_codes(run: &Value) -> HashMap<u16, u64> {
    run["results"]["status_codes"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.parse().unwrap(), v.as_u64().unwrap()))
        .collect()
}

/// Runs loadlens inside network namespace `ns` and returns the Run.
pub fn run_json_in(ns: &str, args: &[&str]) -> Value {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_loadlens"), "run"]);
    json_of(cmd, args)
}

/// Asserts that `v` validates against `docs/NAME.schema.json` (run, comparison, sweep).
pub fn assert_valid(name: &str, v: &Value) {
    let path = format!("{}/docs/{name}.schema.json", env!("CARGO_MANIFEST_DIR"));
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    if let Some(errors) = schema_errors(&schema, v) {
        panic!("{name}: {errors}");
    }
}

/// Why `v` does not validate against `schema` (draft 2020-12, as schemars writes it), or
/// None when it does.
pub fn schema_errors(schema: &Value, v: &Value) -> Option<String> {
    // The schema is given to the compiler under a name of its own: nothing is fetched.
    const URL: &str = "file:///loadlens/schema.json";
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    compiler
        .add_resource(URL, schema.clone())
        .expect("a valid schema");
    let schema = compiler.compile(URL, &mut schemas).expect("a valid schema");
    schemas.validate(v, schema).err().map(|e| format!("{e:#}"))
}

/// Asserts that a command succeeded, showing its stderr when it did not.
pub fn assert_ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether a Run that was meant for io_uring ran on it. `false` (with a line on stderr)
/// only where the kernel refused the ring and the Run says so: a machine without
/// io_uring then tests the epoll path it fell back to. Any other backend is a failure.
pub fn ran_on_io_uring(run: &Value) -> bool {
    let io = &run["results"]["io"];
    if io == "io_uring" {
        return true;
    }
    let note = run["results"]["io_note"].as_str().unwrap_or("");
    assert!(
        io == "epoll" && note.starts_with("io_uring unavailable ("),
        "expected io_uring or the fallback note: io {io}, note {note:?}"
    );
    eprintln!("this kernel refuses io_uring ({note}): its epoll fallback was tested");
    false
}

/// A test that cannot run here (a tool or a Python package missing, one CPU): says so
/// on stderr with `SKIPPED: why`, and fails instead under `CI=true`, where
/// `scripts/install-deps.sh test` has installed everything a test needs. The caller
/// returns right after.
pub fn skip_or_fail(why: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true and a prerequisite is missing: {why}"
    );
    eprintln!("SKIPPED: {why}");
}

/// How long a command that must end on its own is given before it is killed and the
/// test fails. Not a speed requirement: what it catches is a process that would never
/// end (a run waiting on a server that never finishes, an input read forever, a load
/// that was not refused), and it is far beyond anything a busy 2-core machine takes to
/// start loadlens and let it do its work.
pub const HANG: Duration = Duration::from_secs(60);

/// Runs `cmd` to completion and returns its output; kills it and fails if it is still
/// running after `bound` (see [`HANG`]).
pub fn output_within(mut cmd: Command, bound: Duration) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let (o, e) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut child = cmd
        .stdout(std::fs::File::create(&o).unwrap())
        .stderr(std::fs::File::create(&e).unwrap())
        .spawn()
        .unwrap();
    let status = wait_exit(&mut child, bound);
    std::process::Output {
        status,
        stdout: std::fs::read(&o).unwrap(),
        stderr: std::fs::read(&e).unwrap(),
    }
}

/// Waits for `child` to exit; kills it and fails if it is still running after `bound`
/// (see [`HANG`]).
pub fn wait_exit(child: &mut Child, bound: Duration) -> std::process::ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if t0.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            panic!("pid {} still running after {bound:?}: killed", child.id());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `done()` holds, polling; fails with `what` (and what `done` last saw is
/// up to the caller's message) if it does not within [`HANG`]. A bounded wait for a
/// state, in place of a sleep that hopes the state has come.
pub fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(t0.elapsed() < HANG, "waited {HANG:?} for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}
