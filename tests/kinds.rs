//! Server kinds from their own file, against the real servers: lighttpd in front of
//! uWSGI (each started here with its own configuration in a temp dir), the upstream
//! found from lighttpd's own connections during the load — lighttpd's config file is
//! gone by then, so nothing else can name it — watched as uWSGI, and its `processes`
//! named as the pool that limits the rate, at 2 and 6 processes; more processes lift
//! the rate. Tomcat with a small `maxThreads` behind lighttpd's proxy: its JVM named
//! Tomcat and its pool named with `maxThreads`.

mod common;

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// One load at a time: two loads at once on a 2-core machine measure each other.
static SERIAL: Mutex<()> = Mutex::new(());

fn which(bin: &str) -> bool {
    loadlens::lab::world::which(bin).is_some()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed (its whole process group) and reaped on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        unsafe {
            libc::kill(-(self.0.id() as i32), libc::SIGKILL);
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(cmd: &mut Command) -> Proc {
    use std::os::unix::process::CommandExt;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    Proc(cmd.spawn().unwrap_or_else(|e| panic!("{cmd:?}: {e}")))
}

/// Waits until `GET url` answers 200 (a server starting), at most `limit`.
fn wait_ok(url_port: u16, path: &str, limit: Duration, p: &mut Proc) {
    let t0 = Instant::now();
    loop {
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", url_port)) {
            use std::io::Write;
            let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
            let _ = write!(
                s,
                "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
            );
            let mut r = String::new();
            let _ = s.read_to_string(&mut r);
            if r.starts_with("HTTP/1.1 200") {
                return;
            }
        }
        if let Ok(Some(st)) = p.0.try_wait() {
            let mut e = String::new();
            let _ = p.0.stderr.take().unwrap().read_to_string(&mut e);
            panic!("server exited ({st}): {e}");
        }
        assert!(
            t0.elapsed() < limit,
            "no 200 from 127.0.0.1:{url_port}{path} within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// uWSGI with `processes` workers serving a WSGI app that sleeps `app_ms` a request,
/// on a unix socket in `dir`.
fn uwsgi(dir: &Path, processes: u32, app_ms: u32) -> Proc {
    std::fs::write(
        dir.join("app.py"),
        format!(
            "import time\ndef application(env, start_response):\n    time.sleep({})\n    start_response('200 OK', [('Content-Type', 'text/plain'), ('Content-Length', '3')])\n    return [b'ok\\n']\n",
            app_ms as f64 / 1e3
        ),
    )
    .unwrap();
    let d = dir.display();
    std::fs::write(
        dir.join("uwsgi.ini"),
        format!(
            "[uwsgi]\nplugins = python3\nmaster = true\nprocesses = {processes}\nsocket = {d}/uwsgi.sock\nwsgi-file = {d}/app.py\nlisten = 256\ndisable-logging = true\ndie-on-term = true\n"
        ),
    )
    .unwrap();
    spawn(
        Command::new("uwsgi")
            .arg("--ini")
            .arg(dir.join("uwsgi.ini")),
    )
}

/// lighttpd on `port` passing every request to `backend` (a `scgi.server` or
/// `proxy.server` line), its config file removed once it runs.
fn lighttpd(dir: &Path, port: u16, modules: &str, backend: &str) -> Proc {
    let d = dir.display();
    let conf = dir.join("lighttpd.conf");
    std::fs::write(
        &conf,
        format!(
            "server.document-root = \"{d}\"\nserver.bind = \"127.0.0.1\"\nserver.port = {port}\nserver.errorlog = \"{d}/error.log\"\nserver.max-connections = 4096\nserver.modules = ( {modules} )\n{backend}\n"
        ),
    )
    .unwrap();
    let p = spawn(Command::new("lighttpd").arg("-D").arg("-f").arg(&conf));
    p
}

/// Findings of the host rather than the servers: a busy host (other builds) delays
/// the servers or loadlens itself.
const HOST_FINDINGS: &[&str] = &["run-queue-delay", "client-saturated"];

/// A 3 s load; run again (at most twice more, saying why) when the host's own load
/// made the first bottleneck.
fn run(url: &str, connections: u32) -> Value {
    for attempt in 1..=3 {
        let r = common::run_json(&[url, "-c", &connections.to_string(), "-t", "1", "-d", "3s"]);
        let first = r["findings"]
            .as_array()
            .and_then(|f| f.iter().find(|f| f["kind"] == "bottleneck"))
            .and_then(|f| f["id"].as_str())
            .unwrap_or("")
            .to_string();
        if attempt == 3 || !HOST_FINDINGS.contains(&first.as_str()) {
            return r;
        }
        eprintln!("{url}: {first} (the host's load), run again");
    }
    unreachable!()
}

fn bottleneck(run: &Value) -> &Value {
    run["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "bottleneck")
        .unwrap_or_else(|| panic!("no bottleneck: {:#}", run["findings"]))
}

fn rps(run: &Value) -> f64 {
    run["results"]["requests_per_s"].as_f64().unwrap()
}

/// The number in a finding's title after `limit of `.
fn limit_size(title: &str) -> f64 {
    let rest = title.split("limit of ").nth(1).expect(title);
    rest.split_whitespace()
        .next()
        .unwrap()
        .parse()
        .expect(title)
}

/// lighttpd → uWSGI (uwsgi protocol over a unix socket, a connection per request),
/// the app 20 ms a request, 40 connections: uWSGI's `processes` serve at most
/// `processes` requests at once, whatever the connections.
fn lighttpd_uwsgi(processes: u32) -> (Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let up = uwsgi(dir.path(), processes, 20);
    let mut front = lighttpd(
        dir.path(),
        port,
        "\"mod_scgi\"",
        &format!(
            "scgi.protocol = \"uwsgi\"\nscgi.server = ( \"/\" => (( \"socket\" => \"{}/uwsgi.sock\", \"check-local\" => \"disable\" )) )",
            dir.path().display()
        ),
    );
    wait_ok(port, "/", Duration::from_secs(30), &mut front);
    // Nothing but its connections can tell loadlens where lighttpd sends requests.
    std::fs::remove_file(dir.path().join("lighttpd.conf")).unwrap();
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let r = run(&format!("http://127.0.0.1:{port}/app"), 40);
    drop(front);
    drop(up);
    (r, dir.path().join("uwsgi.sock").display().to_string())
}

#[test]
fn uwsgi_behind_lighttpd_is_found_from_its_connections_and_its_processes_named() {
    if !which("lighttpd") || !which("uwsgi") {
        common::skip_or_fail("lighttpd or uwsgi not installed (scripts/install-deps.sh test)");
        return;
    }
    for processes in [2u32, 6] {
        let (before, sock) = lighttpd_uwsgi(processes);
        let topo = &before["evidence"]["topology"];
        let procs = topo["processes"].as_array().unwrap();
        let of =
            |tier: &str| -> Vec<&Value> { procs.iter().filter(|p| p["tier"] == tier).collect() };
        assert!(
            of("front").iter().all(|p| p["kind"] == "lighttpd"),
            "{topo:#}"
        );
        let ups = of("upstream");
        assert!(
            !ups.is_empty() && ups.iter().all(|p| p["kind"] == "uwsgi"),
            "{processes}: uWSGI found and named: {topo:#}"
        );
        assert_eq!(
            ups.iter().filter(|p| p["role"] == "worker").count(),
            processes as usize,
            "{topo:#}"
        );
        assert!(
            topo["unix_listeners"]
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l["addr"] == sock.as_str()),
            "{topo:#}"
        );
        // Found during the load, not from a configuration.
        assert!(topo["config"].is_null(), "{topo:#}");
        assert_eq!(
            topo["upstream_config"]["directives"]["processes"][0],
            processes.to_string(),
            "{topo:#}"
        );
        // The pool, named either from the probes (a limit of its size, with uWSGI's
        // knob and its value) or from the queue on its socket (as php-fpm's is).
        let f = bottleneck(&before);
        let title = f["title"].as_str().unwrap();
        match f["id"].as_str().unwrap() {
            "pool-limit" => {
                let size = limit_size(title);
                assert!(
                    (size - processes as f64).abs() <= (0.25 * processes as f64).max(1.0),
                    "{processes}: {title}"
                );
                assert!(title.contains("upstream"), "{title}");
                let fix = f["fix"].as_str().unwrap();
                assert!(
                    fix.contains("`processes` in uWSGI's ini")
                        && fix.contains(&format!("(now `processes {processes}`)")),
                    "{fix}"
                );
            }
            "upstream-saturated" => assert!(
                title.contains(&sock) && title.contains(&format!("(uwsgi, {processes} workers)")),
                "{title}"
            ),
            _ => panic!("{processes}: {:#}", before["findings"]),
        }
        // The fix helps: three times the processes, at least 1.5 times the rate.
        let (after, _) = lighttpd_uwsgi(3 * processes);
        eprintln!(
            "{processes} processes: {} ({title}), {:.0}/s; {} processes: {:.0}/s",
            f["id"],
            rps(&before),
            3 * processes,
            rps(&after)
        );
        assert!(
            rps(&after) >= 1.5 * rps(&before),
            "{processes} → {}: {:.0}/s → {:.0}/s",
            3 * processes,
            rps(&before),
            rps(&after)
        );
    }
}

/// Tomcat in `dir` on `port` with `maxThreads`, a JSP sleeping `app_ms` as its root
/// page (compiled by the first request, which this waits for): Debian's tomcat10
/// jars, a base of its own (never /var/lib/tomcat10), jar scanning off.
fn tomcat(dir: &Path, port: u16, max_threads: u32, app_ms: u32) -> Option<Proc> {
    let home = Path::new("/usr/share/tomcat10");
    let etc = Path::new("/etc/tomcat10");
    if !home.join("bin/bootstrap.jar").exists() || !etc.join("web.xml").exists() {
        common::skip_or_fail("tomcat10 not installed (scripts/install-deps.sh test)");
        return None;
    }
    for d in ["conf", "webapps/ROOT", "logs", "work", "temp"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    std::fs::copy(etc.join("web.xml"), dir.join("conf/web.xml")).unwrap();
    let props = std::fs::read_to_string(etc.join("catalina.properties")).unwrap();
    std::fs::write(
        dir.join("conf/catalina.properties"),
        format!("{props}\ntomcat.util.scan.StandardJarScanFilter.jarsToSkip=*\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("conf/server.xml"),
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Server port=\"-1\" shutdown=\"SHUTDOWN\">\n  <Service name=\"Catalina\">\n    <Connector port=\"{port}\" address=\"127.0.0.1\" protocol=\"HTTP/1.1\" maxThreads=\"{max_threads}\" minSpareThreads=\"1\" acceptCount=\"200\" />\n    <Engine name=\"Catalina\" defaultHost=\"localhost\">\n      <Host name=\"localhost\" appBase=\"webapps\" unpackWARs=\"false\" autoDeploy=\"false\" />\n    </Engine>\n  </Service>\n</Server>\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("webapps/ROOT/index.jsp"),
        format!("<% Thread.sleep({app_ms}); %>ok"),
    )
    .unwrap();
    let cp = format!(
        "{0}/bin/bootstrap.jar:{0}/bin/tomcat-juli.jar",
        home.display()
    );
    let mut p = spawn(
        Command::new("java")
            .arg("-cp")
            .arg(cp)
            .arg(format!("-Dcatalina.home={}", home.display()))
            .arg(format!("-Dcatalina.base={}", dir.display()))
            .arg(format!("-Djava.io.tmpdir={}/temp", dir.display()))
            .arg("org.apache.catalina.startup.Bootstrap")
            .arg("start"),
    );
    wait_ok(port, "/index.jsp", Duration::from_secs(120), &mut p);
    Some(p)
}

/// Tomcat with 2 request threads, a 50 ms page (40/s at most), behind lighttpd's proxy
/// (a connection per request), 40 connections: the JVM is named Tomcat, found from
/// lighttpd's connections, and the pool is `maxThreads`, with its value read from
/// server.xml. (Tomcat takes 5–25 s to start here and compile its page: the test
/// starts it once, without an after-fix run; the thread-pool lab scenario shows a
/// larger pool lifting the rate.)
#[test]
fn tomcat_behind_lighttpd_is_named_and_its_pool_is_max_threads() {
    if !which("lighttpd") || !which("java") {
        common::skip_or_fail("lighttpd or java not installed (scripts/install-deps.sh test)");
        return;
    }
    let t0 = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let tport = free_port();
    let Some(tc) = tomcat(&dir.path().join("tomcat"), tport, 2, 50) else {
        return;
    };
    let started = t0.elapsed();
    let port = free_port();
    let mut front = lighttpd(
        dir.path(),
        port,
        "\"mod_proxy\"",
        &format!("proxy.server = ( \"\" => (( \"host\" => \"127.0.0.1\", \"port\" => {tport} )) )"),
    );
    wait_ok(port, "/index.jsp", Duration::from_secs(30), &mut front);
    std::fs::remove_file(dir.path().join("lighttpd.conf")).unwrap();
    let r = {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        run(&format!("http://127.0.0.1:{port}/index.jsp"), 40)
    };
    drop(front);
    drop(tc);
    eprintln!(
        "Tomcat ready in {:.1} s, the test took {:.1} s",
        started.as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
    let topo = &r["evidence"]["topology"];
    let ups: Vec<&Value> = topo["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["tier"] == "upstream")
        .collect();
    assert!(
        !ups.is_empty() && ups.iter().all(|p| p["kind"] == "tomcat"),
        "{topo:#}"
    );
    assert_eq!(
        topo["upstream_config"]["directives"]["maxThreads"][0], "2",
        "{topo:#}"
    );
    let f = bottleneck(&r);
    assert_eq!(f["id"], "pool-limit", "{:#}", r["findings"]);
    let title = f["title"].as_str().unwrap();
    assert!((limit_size(title) - 2.0).abs() <= 1.0, "{title}");
    let fix = f["fix"].as_str().unwrap();
    assert!(
        fix.contains("`maxThreads` on Tomcat's Connector") && fix.contains("(now `maxThreads 2`)"),
        "{fix}"
    );
}
