//! Real servers beside a test: nginx on a free loopback port (or inside a network
//! namespace) with an access log in a known format that the test reads back, php-fpm
//! pools on a unix socket, and a client/server pair of namespaces. The integration
//! tests build their servers here (`tests/common` re-exports these); the
//! configurations are the lab's own ([`servers::nginx_conf`], [`servers::php_fpm_conf`])
//! and the namespaces a lab [`World`]'s.
//!
//! Everything is stopped and removed when dropped, also when the test panics: servers
//! get SIGTERM, then SIGKILL after 5 s, and SIGTERM if the test process dies
//! (`PR_SET_PDEATHSIG`); temp dirs go with their `TempDir`; namespaces with their
//! `World`. These are test fixtures: they panic, with what went wrong, instead of
//! returning errors.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::servers::{self, children, nginx_conf, php_fpm_binary, php_fpm_conf};
use super::world::{in_netns, World};

pub use super::caddy::{Caddy, CaddyLine};

/// The access-log format [`Nginx::log`] parses: status, bytes sent (headers + body),
/// connection serial number, requests served on that connection so far, `OK` if the
/// request completed (else empty), the protocol (`HTTP/1.1`, `HTTP/2.0`), the
/// request's length.
pub const LOG_FORMAT: &str =
    "$status $bytes_sent $connection $connection_requests $request_completion $server_protocol $request_length";

/// How long a server is given to start, or to finish with its connections.
pub(super) const READY: Duration = Duration::from_secs(10);

/// A running nginx (from Debian) with a generated config in a temp dir, stopped (with
/// its workers) when dropped. The docroot holds `1k.txt` (1024 bytes of text) and
/// `91k.bin`.
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

/// A port that was free a moment ago (nginx's start is retried if it was taken since).
pub(super) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("cannot bind a loopback port")
}

impl Nginx {
    /// nginx on a free loopback port with `http_extra` inside `http {}` and
    /// `server_extra` inside `server {}`.
    pub fn start(http_extra: &str, server_extra: &str) -> Nginx {
        Self::start_with_listen(http_extra, server_extra, "")
    }

    /// The same, with `listen_extra` after the address (`backlog=77`, `http2`, `ssl`).
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
    /// `addr`, with `main_extra` at the top level of the config (one worker unless it
    /// sets `worker_processes`).
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
            .expect("cannot make a temp dir");
        let root = dir.path().to_path_buf();
        write_docroot(&root);
        for attempt in 0..5 {
            let port = free_port();
            let n = servers::Nginx {
                name: "nginx",
                workers: if main_extra.contains("worker_processes") {
                    ""
                } else {
                    "1"
                },
                listen: format!("{addr}:{port}"),
                listen_opts: listen_extra,
                worker_connections: "4096",
                main_extra: main_extra.into(),
                http_extra: http_extra.into(),
                server_extra: server_extra.into(),
                logging: format!(
                    "log_format t '{LOG_FORMAT}';\n    access_log {}/access.log t;",
                    root.display()
                ),
                error_log_level: "info",
            };
            let d = root.display().to_string();
            let conf_path = root.join("nginx.conf");
            std::fs::write(&conf_path, nginx_conf(&n, &d, &root.join("html")))
                .expect("cannot write nginx.conf");
            let mut cmd = match netns {
                Some(ns) => {
                    let mut c = Command::new("ip");
                    c.args(["netns", "exec", ns, "nginx"]);
                    c
                }
                None => Command::new("nginx"),
            };
            cmd.arg("-p")
                .arg(&root)
                .arg("-e")
                .arg(root.join("error.log"))
                .arg("-c")
                .arg(&conf_path)
                .arg("-g")
                .arg("daemon off;")
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            let mut child = spawn(cmd, "nginx must be installed (make test does it)");
            let a: SocketAddr = format!("{addr}:{port}")
                .parse()
                .expect("an IP address and a port");
            let t0 = Instant::now();
            while t0.elapsed() < READY {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                // Ready once the port answers, from inside the namespace when there is one,
                // and the master has forked its workers: the master listens before it
                // forks, so a port that answers may still have nobody to accept.
                let up = !children(child.id() as i32).is_empty()
                    && match netns {
                        None => TcpStream::connect(a).is_ok(),
                        Some(ns) => in_netns(&format!("/run/netns/{ns}"), move || {
                            TcpStream::connect_timeout(&a, Duration::from_millis(200)).is_ok()
                        })
                        .unwrap_or(false),
                    };
                if up {
                    return Nginx { child, dir, port };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let err = match child.wait_with_output() {
                Ok(out) => String::from_utf8_lossy(&out.stderr).to_string(),
                Err(e) => e.to_string(),
            } + &std::fs::read_to_string(root.join("error.log")).unwrap_or_default();
            if attempt == 4 || !err.contains("Address already in use") {
                panic!("nginx did not start:\n{err}");
            }
        }
        unreachable!()
    }

    /// nginx serving https (and, with `listen_extra` `ssl http2`, HTTP/2 by ALPN) with
    /// a self-signed certificate for `localhost` made for this server.
    pub fn start_tls(http_extra: &str, listen_extra: &str) -> Nginx {
        let certs = tempfile::tempdir().expect("cannot make a temp dir");
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
            .expect("openssl must be installed (make test does it)");
        assert!(st.success(), "openssl could not make a certificate");
        // nginx has read them once started; the certificate's directory goes with this
        // scope.
        Self::start_with_listen(
            http_extra,
            &format!(
                "ssl_certificate {}; ssl_certificate_key {};",
                crt.display(),
                key.display()
            ),
            listen_extra,
        )
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

    /// The workers' pids (the master's children).
    pub fn workers(&self) -> Vec<i32> {
        children(self.pid())
    }

    /// The temp dir: config, pid file, logs; the docroot is `html/`.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn access_log_path(&self) -> PathBuf {
        self.root().join("access.log")
    }

    pub fn error_log_path(&self) -> PathBuf {
        self.root().join("error.log")
    }

    /// The access log, once nginx is done with every connection made to it: a request
    /// is logged when it ends, and one cut short when nginx sees its client gone, so
    /// the lines are read when no connection to the port is left open on nginx's side
    /// (established, or closed by the client and not yet by nginx), a state waited for
    /// (10 s at most: a test still holding a connection gets the log as it is then).
    pub fn log(&self) -> Vec<LogLine> {
        let t0 = Instant::now();
        while self.open_connections() > 0 && t0.elapsed() < READY {
            std::thread::sleep(Duration::from_millis(10));
        }
        let text = std::fs::read_to_string(self.access_log_path()).unwrap_or_default();
        text.lines()
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                let n = |i: usize| -> u64 {
                    f[i].parse()
                        .unwrap_or_else(|_| panic!("access log field {i} of {l:?}"))
                };
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

    /// Connections to this server's port that nginx has not closed yet: TCP sockets in
    /// its network namespace (`/proc/PID/net/tcp*`) whose local port is nginx's, in
    /// state ESTABLISHED (01) or CLOSE_WAIT (08).
    fn open_connections(&self) -> usize {
        let port = format!("{:04X}", self.port);
        ["tcp", "tcp6"]
            .iter()
            .map(|f| {
                std::fs::read_to_string(format!("/proc/{}/net/{f}", self.pid()))
                    .unwrap_or_default()
                    .lines()
                    .skip(1)
                    .filter(|l| {
                        let mut fields = l.split_whitespace();
                        let local = fields.nth(1).unwrap_or("");
                        let state = fields.nth(1).unwrap_or("");
                        local.rsplit(':').next() == Some(port.as_str())
                            && (state == "01" || state == "08")
                    })
                    .count()
            })
            .sum()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        stop_child(&mut self.child);
    }
}

/// The test docroot: `1k.txt` (1024 bytes of a-z), `91k.bin`; readable by the workers,
/// which run as `nobody` when the master is root.
pub(super) fn write_docroot(root: &Path) {
    set_mode(root, 0o755);
    let html = root.join("html");
    std::fs::create_dir_all(root.join("tmp")).expect("cannot make tmp/");
    std::fs::create_dir_all(&html).expect("cannot make html/");
    set_mode(&html, 0o755);
    let text: String = (0..1024).map(|i| (b'a' + (i % 26) as u8) as char).collect();
    let big: Vec<u8> = (0..93_184u32).map(|i| (i * 7 % 251) as u8).collect();
    for (f, bytes) in [("1k.txt", text.as_bytes()), ("91k.bin", &big[..])] {
        std::fs::write(html.join(f), bytes).expect("cannot write the docroot");
        set_mode(&html.join(f), 0o644);
    }
}

/// Stops nginx's worker for `pause_ms` after `delay_ms`, as a blocking call would.
pub fn stall_worker(ng: &Nginx, delay_ms: u64, pause_ms: u64) -> std::thread::JoinHandle<()> {
    let worker = *ng.workers().first().expect("nginx has a worker");
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(delay_ms));
        // SAFETY: kill(2) on the worker of an nginx this test started.
        unsafe { libc::kill(worker, libc::SIGSTOP) };
        std::thread::sleep(Duration::from_millis(pause_ms));
        // SAFETY: as above.
        unsafe { libc::kill(worker, libc::SIGCONT) };
    })
}

/// A client and a server network namespace joined by a veth pair, with private
/// addresses that exist only inside them: a lab [`World`]'s two hosts. Removed (with
/// every process in them) when dropped.
pub struct NetnsPair {
    pub client: String,
    pub server: String,
    pub client_ip: &'static str,
    pub server_ip: &'static str,
    world: World,
}

impl NetnsPair {
    /// `tag` keeps names unique across tests running in parallel.
    pub fn new(tag: &str) -> NetnsPair {
        let mut world = World::new(&format!("t-{tag}"), false)
            .unwrap_or_else(|e| panic!("cannot make namespaces: {e:#}"));
        world
            .two_hosts()
            .unwrap_or_else(|e| panic!("cannot join the namespaces: {e:#}"));
        NetnsPair {
            client: world.client(),
            server: world.server(),
            client_ip: super::world::CLIENT_IP,
            server_ip: super::world::SERVER_IP,
            world,
        }
    }

    /// Sets a sysctl inside the server namespace (never on the host).
    pub fn server_sysctl(&self, key: &str, value: &str) {
        self.world
            .sysctl(&self.server, key, value)
            .unwrap_or_else(|e| panic!("{e:#}"));
    }

    /// Sets a sysctl inside the client namespace (never on the host).
    pub fn client_sysctl(&self, key: &str, value: &str) {
        self.world
            .sysctl(&self.client, key, value)
            .unwrap_or_else(|e| panic!("{e:#}"));
    }

    /// The world the pair belongs to (its temp dir, commands in its namespaces).
    pub fn world(&self) -> &World {
        &self.world
    }
}

/// Runs a command inside namespace `ns` and asserts it worked.
pub fn in_ns(ns: &str, cmd: &[&str]) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(cmd)
        .output()
        .expect("iproute2 must be installed");
    assert!(
        out.status.success(),
        "ip netns exec {ns} {}: {}",
        cmd.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// php-fpm (Debian's) on a unix socket in a temp dir with a static pool of `children`
/// running one script, `app.php`. Stopped when dropped.
pub struct PhpFpm {
    child: Child,
    dir: tempfile::TempDir,
}

impl PhpFpm {
    /// A static pool of `children` whose script sleeps `sleep_ms` (it waits, it does
    /// not compute): its capacity is children ÷ sleep by construction, whatever the
    /// machine's CPU is doing.
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

    /// A static pool of `children` running `script`.
    pub fn start_script(children: u32, script: &str) -> PhpFpm {
        let bin = php_fpm_binary().unwrap_or_else(|e| panic!("{e:#}"));
        let dir = tempfile::Builder::new()
            .prefix("loadlens-test-php")
            .tempdir()
            .expect("cannot make a temp dir");
        let d = dir.path();
        set_mode(d, 0o755);
        std::fs::write(d.join("app.php"), script).expect("cannot write app.php");
        set_mode(&d.join("app.php"), 0o644);
        let sock = d.join("php.sock").display().to_string();
        let conf = php_fpm_conf(
            &d.display().to_string(),
            &sock,
            &format!("pm = static\npm.max_children = {children}"),
        );
        std::fs::write(d.join("php-fpm.conf"), conf).expect("cannot write php-fpm.conf");
        let mut cmd = Command::new(bin);
        cmd.args(["-n", "-F", "-y"])
            .arg(d.join("php-fpm.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = spawn(cmd, "cannot start php-fpm");
        let t0 = Instant::now();
        while !d.join("php.sock").exists() {
            if t0.elapsed() > READY || matches!(child.try_wait(), Ok(Some(_))) {
                let log = std::fs::read_to_string(d.join("error.log")).unwrap_or_default();
                stop_child(&mut child);
                panic!("php-fpm did not start:\n{log}");
            }
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

/// Starts `cmd` so that it gets SIGTERM if this process dies (a master takes its
/// workers down with it).
pub(super) fn spawn(mut cmd: Command, what: &str) -> Child {
    // SAFETY: prctl in the child before exec; async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    cmd.spawn().unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// SIGTERM (a fast shutdown of a master and its workers), then SIGKILL after 5 s.
pub(super) fn stop_child(child: &mut Child) {
    // SAFETY: kill(2) on a child this process started and has not reaped.
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

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode));
}
