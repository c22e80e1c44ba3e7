//! Test support: a real nginx (from Debian) on a free loopback port with a generated
//! config and an access log the tests read back; the loadlens binary run with JSON out.
#![allow(dead_code)]

pub mod bad_server;

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The access-log format the tests parse: status, bytes sent (headers + body),
/// connection serial number, requests served on that connection so far, `OK` if the
/// request completed (else empty), the protocol (`HTTP/1.1`, `HTTP/2.0`).
const LOG_FORMAT: &str =
    "$status $bytes_sent $connection $connection_requests $request_completion $server_protocol $request_length";

/// A running nginx, stopped (with its workers) when dropped.
pub struct Nginx {
    child: Child,
    pub dir: tempfile::TempDir,
    pub port: u16,
}

/// One access-log line.
#[derive(Debug, Clone, Copy)]
pub struct LogLine {
    pub status: u16,
    pub bytes_sent: u64,
    pub connection: u64,
    pub connection_requests: u64,
    /// nginx's `$request_completion`: the response was sent whole.
    pub completed: bool,
    /// `$server_protocol` was `HTTP/2.0`.
    pub http2: bool,
    /// `$request_length`: the request's bytes, line or header block and body.
    pub request_length: u64,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Nginx {
    /// Starts nginx with `server_extra` inside the `server {}` block and `http_extra` in
    /// `http {}`. The docroot holds `1k.txt` (1024 bytes of text) and `91k.bin`.
    pub fn start(http_extra: &str, server_extra: &str) -> Nginx {
        Self::start_with_listen(http_extra, server_extra, "")
    }

    pub fn start_with_listen(http_extra: &str, server_extra: &str, listen_extra: &str) -> Nginx {
        Self::start_opts(
            None,
            "127.0.0.1",
            "",
            http_extra,
            server_extra,
            listen_extra,
        )
    }

    /// The general form: inside network namespace `netns` (when given), listening on
    /// `addr`, with `main_extra` at the top level of the config.
    pub fn start_opts(
        netns: Option<&str>,
        addr: &str,
        main_extra: &str,
        http_extra: &str,
        server_extra: &str,
        listen_extra: &str,
    ) -> Nginx {
        let dir = tempfile::Builder::new()
            .prefix("loadlens-test-nginx")
            .tempdir()
            .unwrap();
        let root = dir.path();
        // Workers run as `nobody` when the master is root: the docroot must be readable.
        set_mode(root, 0o755);
        std::fs::create_dir(root.join("html")).unwrap();
        set_mode(&root.join("html"), 0o755);
        std::fs::create_dir(root.join("tmp")).unwrap();
        let text: String = (0..1024).map(|i| (b'a' + (i % 26) as u8) as char).collect();
        std::fs::write(root.join("html/1k.txt"), text).unwrap();
        let big: Vec<u8> = (0..93_184u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(root.join("html/91k.bin"), big).unwrap();
        for f in ["html/1k.txt", "html/91k.bin"] {
            set_mode(&root.join(f), 0o644);
        }
        for attempt in 0..5 {
            let port = free_port();
            let conf = format!(
                r#"{workers}
{main_extra}
pid {root}/nginx.pid;
error_log {root}/error.log info;
events {{ worker_connections 4096; }}
http {{
    log_format t '{LOG_FORMAT}';
    access_log {root}/access.log t;
    keepalive_requests 1000000;
    client_body_temp_path {root}/tmp;
    proxy_temp_path {root}/tmp;
    fastcgi_temp_path {root}/tmp;
    uwsgi_temp_path {root}/tmp;
    scgi_temp_path {root}/tmp;
    types {{ text/plain txt; application/octet-stream bin; }}
    {http_extra}
    server {{
        listen {addr}:{port} {listen_extra};
        root {root}/html;
        {server_extra}
    }}
}}
"#,
                root = root.display(),
                // `main_extra` may set its own.
                workers = if main_extra.contains("worker_processes") {
                    ""
                } else {
                    "worker_processes 1;"
                },
            );
            let conf_path = root.join("nginx.conf");
            std::fs::write(&conf_path, conf).unwrap();
            let mut cmd = match netns {
                Some(ns) => {
                    let mut c = Command::new("ip");
                    c.args(["netns", "exec", ns, "nginx"]);
                    c
                }
                None => Command::new("nginx"),
            };
            cmd.arg("-p")
                .arg(root)
                .arg("-e")
                .arg(root.join("error.log"))
                .arg("-c")
                .arg(&conf_path)
                .arg("-g")
                .arg("daemon off;")
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            // If the test process dies, the master gets SIGTERM and takes its workers down.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                    Ok(())
                });
            }
            let mut child = cmd
                .spawn()
                .expect("nginx must be installed (make test does it)");
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(5) {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                // Ready once the pid file is written and, on loopback, the port answers.
                let up = match netns {
                    None => {
                        let a: SocketAddr = format!("{addr}:{port}").parse().unwrap();
                        TcpStream::connect(a).is_ok()
                    }
                    Some(_) => root.join("nginx.pid").exists(),
                };
                if up {
                    return Nginx { child, dir, port };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr).to_string()
                + &std::fs::read_to_string(root.join("error.log")).unwrap_or_default();
            if attempt == 4 || !err.contains("Address already in use") {
                panic!("nginx did not start:\n{err}");
            }
        }
        unreachable!()
    }

    /// nginx serving https (and, with `listen_extra` `ssl http2`, HTTP/2 by ALPN) with
    /// a self-signed certificate for `localhost` made for this test.
    pub fn start_tls(http_extra: &str, listen_extra: &str) -> Nginx {
        let certs = tempfile::tempdir().unwrap();
        let (crt, key) = (certs.path().join("c.pem"), certs.path().join("k.pem"));
        let st = Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            ])
            .args(["-subj", "/CN=localhost", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&crt)
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "openssl could not make a certificate");
        let ng = Self::start_with_listen(
            http_extra,
            &format!(
                "ssl_certificate {}; ssl_certificate_key {};",
                crt.display(),
                key.display()
            ),
            listen_extra,
        );
        // nginx has read them; the certificate's directory goes with this scope.
        ng
    }

    /// The https URL of `path` on this server (the certificate is for `localhost`).
    pub fn https_url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.port)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The master's pid (the child process: `ip netns exec` execs nginx).
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// The access log, once nginx has written every line (lines are written when a
    /// request finishes; give the worker a moment after the client is done).
    pub fn log(&self) -> Vec<LogLine> {
        std::thread::sleep(Duration::from_millis(200));
        let text = std::fs::read_to_string(self.root().join("access.log")).unwrap_or_default();
        text.lines()
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                let n = |i: usize| -> u64 { f[i].parse().unwrap() };
                LogLine {
                    status: n(0) as u16,
                    bytes_sent: n(1),
                    connection: n(2),
                    connection_requests: n(3),
                    completed: f[4] == "OK",
                    http2: f[5] == "HTTP/2.0",
                    request_length: n(6),
                }
            })
            .collect()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        stop_child(&mut self.child);
    }
}

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

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

/// Stops nginx's worker for `pause_ms` after `delay_ms`, as a blocking call would.
pub fn stall_worker(ng: &Nginx, delay_ms: u64, pause_ms: u64) -> std::thread::JoinHandle<()> {
    let master = ng.pid();
    let worker: i32 = std::fs::read_to_string(format!("/proc/{master}/task/{master}/children"))
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        unsafe { libc::kill(worker, libc::SIGSTOP) };
        std::thread::sleep(std::time::Duration::from_millis(pause_ms));
        unsafe { libc::kill(worker, libc::SIGCONT) };
    })
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

/// A client and a server network namespace joined by a veth pair, with private
/// addresses that exist only inside them. Removed (with everything in it) when dropped.
pub struct NetnsPair {
    pub client: String,
    pub server: String,
    pub client_ip: &'static str,
    pub server_ip: &'static str,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("iproute2 installed");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs a command inside a namespace and asserts it worked.
pub fn in_ns(ns: &str, cmd: &[&str]) {
    let mut args = vec!["netns", "exec", ns];
    args.extend_from_slice(cmd);
    ip(&args);
}

impl NetnsPair {
    /// `tag` keeps names unique across tests running in parallel.
    pub fn new(tag: &str) -> NetnsPair {
        let base = format!("llt-{}-{tag}", std::process::id());
        let pair = NetnsPair {
            client: format!("{base}-c"),
            server: format!("{base}-s"),
            client_ip: "10.201.0.1",
            server_ip: "10.201.0.2",
        };
        ip(&["netns", "add", &pair.client]);
        ip(&["netns", "add", &pair.server]);
        ip(&[
            "link",
            "add",
            "veth0",
            "netns",
            &pair.client,
            "type",
            "veth",
            "peer",
            "name",
            "veth0",
            "netns",
            &pair.server,
        ]);
        for (ns, addr) in [
            (&pair.client, pair.client_ip),
            (&pair.server, pair.server_ip),
        ] {
            in_ns(
                ns,
                &["ip", "addr", "add", &format!("{addr}/24"), "dev", "veth0"],
            );
            in_ns(ns, &["ip", "link", "set", "veth0", "up"]);
            in_ns(ns, &["ip", "link", "set", "lo", "up"]);
        }
        pair
    }

    /// Sets a sysctl inside the server namespace (never on the host).
    pub fn server_sysctl(&self, key: &str, value: &str) {
        in_ns(
            &self.server,
            &["sysctl", "-q", "-w", &format!("{key}={value}")],
        );
    }

    /// Sets a sysctl inside the client namespace (never on the host).
    pub fn client_sysctl(&self, key: &str, value: &str) {
        in_ns(
            &self.client,
            &["sysctl", "-q", "-w", &format!("{key}={value}")],
        );
    }
}

impl Drop for NetnsPair {
    fn drop(&mut self) {
        for ns in [&self.client, &self.server] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// Runs loadlens inside network namespace `ns` and returns the Run.
pub fn run_json_in(ns: &str, args: &[&str]) -> Value {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_loadlens"), "run"]);
    json_of(cmd, args)
}

/// php-fpm (Debian's) on a unix socket in a temp dir, with a static pool of `children`
/// and a script `app.php` that sleeps `sleep_ms`: its capacity is children ÷ sleep by
/// construction, whatever the machine's CPU is doing (the script does not compute).
pub struct PhpFpm {
    child: Child,
    dir: tempfile::TempDir,
}

impl PhpFpm {
    /// A static pool of `children` whose script sleeps `sleep_ms` (it waits, it does
    /// not compute).
    pub fn start(children: u32, sleep_ms: u32) -> PhpFpm {
        Self::start_script(
            children,
            &format!("<?php\nusleep({});\necho \"ok\\n\";\n", sleep_ms * 1000),
        )
    }

    /// A static pool of `children` whose script computes for a few milliseconds.
    pub fn computing(children: u32) -> PhpFpm {
        Self::start_script(
            children,
            "<?php\n$x = 0;\nfor ($i = 0; $i < 200000; $i++) { $x += $i * 2; }\necho \"$x\\n\";\n",
        )
    }

    fn start_script(children: u32, script: &str) -> PhpFpm {
        let bin = std::fs::read_dir("/usr/sbin")
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("php-fpm"))
            })
            .expect("php-fpm must be installed (make test does it)");
        let dir = tempfile::Builder::new()
            .prefix("loadlens-test-php")
            .tempdir()
            .unwrap();
        let d = dir.path();
        set_mode(d, 0o755);
        std::fs::write(d.join("app.php"), script).unwrap();
        set_mode(&d.join("app.php"), 0o644);
        let conf = format!(
            "[global]\npid = {d}/php-fpm.pid\nerror_log = {d}/error.log\ndaemonize = no\n\n\
             [app]\nuser = nobody\ngroup = nogroup\nlisten = {d}/php.sock\nlisten.mode = 0666\n\
             listen.backlog = 4096\npm = static\npm.max_children = {children}\n",
            d = d.display()
        );
        std::fs::write(d.join("php-fpm.conf"), conf).unwrap();
        let mut cmd = Command::new(bin);
        cmd.args(["-n", "-F", "-y"])
            .arg(d.join("php-fpm.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        let t0 = Instant::now();
        while !d.join("php.sock").exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "php-fpm did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        PhpFpm { child, dir }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The nginx `location` that passes `/app.php` to this pool.
    pub fn location(&self) -> String {
        let d = self.dir.path().display();
        format!(
            "location = /app.php {{ fastcgi_pass unix:{d}/php.sock; \
             fastcgi_param SCRIPT_FILENAME {d}/app.php; fastcgi_param REQUEST_METHOD $request_method; }}"
        )
    }

    /// The pool's unix socket.
    pub fn socket(&self) -> String {
        self.dir.path().join("php.sock").display().to_string()
    }

    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }
}

impl Drop for PhpFpm {
    fn drop(&mut self) {
        stop_child(&mut self.child);
    }
}

/// Asserts that `v` validates against `docs/NAME.schema.json` (run, comparison, sweep).
pub fn assert_valid(name: &str, v: &Value) {
    let path = format!("{}/docs/{name}.schema.json", env!("CARGO_MANIFEST_DIR"));
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .take(5)
        .collect();
    assert!(errors.is_empty(), "{name}: {errors:?}");
}

/// SIGTERM (a fast shutdown of a master and its workers), then SIGKILL after 5 s.
fn stop_child(child: &mut Child) {
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
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
