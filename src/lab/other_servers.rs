//! Servers other than nginx, from Debian's packages, and their scenarios: Apache httpd
//! (mpm_event) with `MaxRequestWorkers` far below the connections, and HAProxy with a
//! `maxconn` below the load in front of nginx. Each expects the generic finding, whose
//! fix names the server's own directive: the rules know resources, not names.

use super::scenario::{counter, listen, url, Key, Moves, Scenario, Setup, PORT};
use super::servers::{docroot, start_upstream};
use super::world::World;
use crate::run::Run;

/// An Apache httpd with the event MPM: `threads` per process, `processes` at most,
/// `MaxRequestWorkers` = their product. Returns the parent's pid.
///
/// `MinSpareThreads 2`: Apache's parent checks its workers once a second and logs
/// "server reached MaxRequestWorkers" (once) when fewer than `MinSpareThreads` are idle
/// and no more can start. A worker of the event MPM is busy only while it handles a
/// request (keep-alive waits are the listener's), so with one spare the check could find
/// a worker between two requests at every tick of a run on a loaded machine (1 of ~40
/// lab suites, other scenarios running beside it); with two it needs half the pool idle.
fn start_apache(w: &mut World, ns: &str, processes: u32, threads: u32) -> anyhow::Result<i32> {
    let root = docroot(w)?;
    let d = w.dir.join("apache");
    std::fs::create_dir_all(&d)?;
    let d = d.display().to_string();
    let modules = "/usr/lib/apache2/modules";
    let conf = format!(
        r#"ServerRoot {d}
PidFile {d}/httpd.pid
Mutex file:{d}
LoadModule mpm_event_module {modules}/mod_mpm_event.so
LoadModule authz_core_module {modules}/mod_authz_core.so
Listen {listen}
ListenBacklog 4096
ServerName lab
User nobody
Group nogroup
DocumentRoot {root}
ErrorLog {d}/error.log
LogLevel warn
KeepAlive On
MaxKeepAliveRequests 0
StartServers {processes}
ServerLimit {processes}
ThreadsPerChild {threads}
ThreadLimit {threads}
MinSpareThreads 2
MaxSpareThreads {max}
MaxRequestWorkers {max}
<Directory {root}>
  Require all granted
</Directory>
"#,
        root = root.display(),
        max = processes * threads,
        listen = listen(),
    );
    let conf_path = w.write("apache/httpd.conf", conf.as_bytes())?;
    let conf_path = conf_path.display().to_string();
    let bin = super::world::which("apache2")
        .or_else(|| super::world::which("httpd"))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "Apache is not installed: apt-get install apache2 (make test installs it)"
            )
        })?;
    let bin = bin.display().to_string();
    let pid = w.spawn(
        ns,
        "apache",
        &[&bin, "-d", &d, "-f", &conf_path, "-DFOREGROUND"],
    )?;
    let c = w.client();
    w.wait_tcp(&c, &listen(), "apache")?;
    Ok(pid)
}

/// HAProxy in HTTP mode with global `maxconn`, passing to `upstream`. Returns its pid.
fn start_haproxy(w: &mut World, ns: &str, maxconn: u32, upstream: &str) -> anyhow::Result<i32> {
    let conf = format!(
        r#"global
    maxconn {maxconn}
    nbthread 1
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend web
    bind {listen}
    default_backend app
backend app
    http-reuse always
    server s1 {upstream}
"#,
        listen = listen()
    );
    let conf_path = w.write("haproxy/haproxy.cfg", conf.as_bytes())?;
    let conf_path = conf_path.display().to_string();
    let bin = super::world::which("haproxy").ok_or_else(|| {
        anyhow::anyhow!("HAProxy is not installed: apt-get install haproxy (make test installs it)")
    })?;
    let bin = bin.display().to_string();
    let pid = w.spawn(ns, "haproxy", &[&bin, "-f", &conf_path, "-db"])?;
    let c = w.client();
    w.wait_tcp(&c, &listen(), "haproxy")?;
    Ok(pid)
}

/// The most connections seen waiting in the front's accept queue.
fn accept_queue_max(run: &Run) -> Option<f64> {
    let e = run.evidence.as_ref()?;
    let port = format!(":{PORT}");
    e.window
        .listen_queues
        .iter()
        .filter(|q| q.addr.ends_with(&port))
        .map(|q| q.max_queue as f64)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "apache-workers",
            summary: "Apache (mpm_event) with MaxRequestWorkers far below the connections (--param threads=2..16)",
            source: "throughput-drop-case-study.txt (a worker pool too small for the clients, as php-fpm's max_children), Apache's mpm_common docs",
            fault: "`ServerLimit 1`, `ThreadsPerChild N` (`threads`, default 4): `MaxRequestWorkers N` with 100 keep-alive connections",
            fix: "`ServerLimit 2`, `ThreadsPerChild 64`: `MaxRequestWorkers 128`",
            expected_finding: "connection-limit",
            key: Key {
                label: "accept queue max",
                read: accept_queue_max,
                // measured 96 → 0 on a 2-core machine.
                moves: Moves::Down(5.0),
            },
            build: |w, fixed| {
                let threads = w.param("threads", 4, 2..=16)?;
                w.two_hosts()?;
                let s = w.server();
                let pid = if fixed {
                    start_apache(w, &s, 2, 64)?
                } else {
                    start_apache(w, &s, 1, threads)?
                };
                Ok(Setup::unprobed(
                    url("/1k.bin"),
                    &["-c", "100", "--timeout", "2s"],
                    vec![pid],
                ))
            },
        },
        Scenario {
            name: "haproxy-maxconn",
            summary: "HAProxy in front of nginx with a global maxconn below the connections (--param maxconn=10..40)",
            source: "throughput-drop-case-study.txt (a listen queue overflowing: SYNs and ACKs dropped, clients retransmitting), HAProxy's configuration manual (maxconn, backlog)",
            fault: "HAProxy `maxconn N` (`maxconn`, default 20; its listen backlog follows it) with 100 keep-alive connections",
            fix: "`maxconn 4096`",
            expected_finding: "listen-queue-overflow",
            key: Key {
                label: "TcpExt.ListenOverflows",
                read: |r| counter(r, "TcpExt.ListenOverflows"),
                // measured 198 → 0 on a 2-core machine.
                moves: Moves::Down(10.0),
            },
            build: |w, fixed| {
                let maxconn = w.param("maxconn", 20, 10..=40)?;
                w.two_hosts()?;
                let s = w.server();
                start_upstream(w)?;
                let pid = start_haproxy(w, &s, if fixed { 4096 } else { maxconn }, "127.0.0.1:8081")?;
                Ok(Setup::unprobed(
                    url("/1k.bin"),
                    &["-c", "100", "--timeout", "2s"],
                    vec![pid],
                ))
            },
        },
    ]
}
