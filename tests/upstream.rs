//! Upstreams found without being named: php-fpm behind nginx on a unix socket (the
//! Debian default), discovered from nginx's `fastcgi_pass`, watched, and named as the
//! bottleneck when its pool is too small — or, when its children compute on every CPU,
//! named without the advice to add children.

mod common;

use common::{run_json, Nginx, PhpFpm};

#[test]
fn php_fpm_on_a_unix_socket_is_found_from_nginx_config_and_named() {
    // 2 children × 1 / 50 ms = 40 requests/s; 16 connections: 14 always wait at the
    // socket, however busy the machine is (the script sleeps, it does not compute).
    let php = PhpFpm::start(2, 50);
    let ng = Nginx::start("", &php.location());
    let run = run_json(&[&ng.url("/app.php"), "-c", "16", "-t", "1", "-d", "3s"]);
    let topo = &run["evidence"]["topology"];
    let procs = topo["processes"].as_array().unwrap();
    let tier = |pid: i32| {
        procs
            .iter()
            .find(|p| p["pid"] == pid)
            .map(|p| p["tier"].as_str().unwrap().to_string())
    };
    assert_eq!(tier(ng.pid()).as_deref(), Some("front"), "{topo}");
    assert_eq!(tier(php.pid()).as_deref(), Some("upstream"), "{topo}");
    assert!(
        procs
            .iter()
            .filter(|p| p["tier"] == "upstream" && p["role"] == "worker")
            .count()
            == 2,
        "both php-fpm children watched: {topo}"
    );
    let sock = php.socket().to_string();
    assert!(
        topo["config"]["upstreams"][0]
            .as_str()
            .unwrap()
            .ends_with("php.sock"),
        "{topo}"
    );
    let first = run["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "bottleneck")
        .unwrap_or_else(|| panic!("no bottleneck: {}", run["findings"]));
    // The probes (1 connection: the script's 50 ms; 64: the same rate) size the pool
    // as php-fpm's 2 children; the queue on its socket is named beneath it.
    match first["id"].as_str().unwrap() {
        "pool-limit" => {
            let title = first["title"].as_str().unwrap();
            assert!(
                title.contains("limit of 2 ") && title.contains("its 2 workers"),
                "{title}"
            );
        }
        "upstream-saturated" => {}
        _ => panic!("{}", run["findings"]),
    }
    let queue = run["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "upstream-saturated")
        .unwrap_or_else(|| panic!("{}", run["findings"]));
    assert!(
        queue["title"].as_str().unwrap().contains(&sock),
        "{}",
        queue["title"]
    );
    assert!(first["fix"].as_str().unwrap().contains("pm.max_children"));
}

#[test]
fn php_fpm_children_computing_on_every_cpu_are_not_told_to_multiply() {
    // One child per CPU, each script a few ms of arithmetic, four times as many
    // connections as children: every child always has a request, and runs or waits
    // for a CPU all the time however busy the machine is.
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get()) as u32;
    let php = PhpFpm::computing(cpus);
    let ng = Nginx::start("", &php.location());
    let conns = (4 * cpus + 4).to_string();
    let run = run_json(&[&ng.url("/app.php"), "-c", &conns, "-t", "1", "-d", "3s"]);
    let first = run["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "bottleneck")
        .unwrap_or_else(|| panic!("no bottleneck: {}", run["findings"]));
    assert_eq!(first["id"], "upstream-saturated", "{:#}", run["findings"]);
    let title = first["title"].as_str().unwrap();
    assert!(title.contains("workers computing on"), "{title}");
    let fix = first["fix"].as_str().unwrap();
    assert!(fix.contains("will not help"), "{fix}");
    assert!(!fix.contains("as far as memory allows"), "{fix}");
}

/// A JVM server: its listening socket is of the IPv6 family, bound to the IPv4-mapped
/// `[::ffff:127.0.0.1]` (Java's default unless `java.net.preferIPv4Stack=true`), as
/// Tomcat, Jetty and Spring Boot are. Killed on drop.
struct Jvm {
    child: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Jvm {
    /// `java Up.java PORT` (the single-file source launcher): an HttpServer on
    /// 127.0.0.1:PORT answering every request with 1 KiB after `sleep_ms`.
    fn start(sleep_ms: u32) -> Option<Jvm> {
        if loadlens::lab::world::which("java").is_none() {
            common::skip_or_fail("java not found (Debian: default-jre-headless)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let src = loadlens::lab::jvm::up_java(sleep_ms, 1024);
        std::fs::write(dir.path().join("Up.java"), src).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new("java")
            .arg(dir.path().join("Up.java"))
            .args(["127.0.0.1", &port.to_string()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let jvm = Jvm {
            child,
            port,
            _dir: dir,
        };
        common::wait_for("the JVM to listen", || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        Some(jvm)
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Issue: nginx in front of a JVM (`proxy_pass http://127.0.0.1:PORT`) watched nginx
/// only — the upstream's IPv4-mapped listener was compared with IPv4 ones alone.
#[test]
fn a_jvm_upstream_on_an_ipv4_mapped_socket_is_found_from_nginx_config() {
    let Some(jvm) = Jvm::start(20) else {
        return;
    };
    let ng = Nginx::start(
        &format!("upstream jvm {{ server 127.0.0.1:{}; keepalive 16; }}", jvm.port),
        "location / { proxy_pass http://jvm; proxy_http_version 1.1; proxy_set_header Connection \"\"; }",
    );
    let run = run_json(&[&ng.url("/"), "-c", "8", "-t", "1", "-d", "2s"]);
    assert_eq!(run["results"]["non_2xx_3xx"], 0, "{}", run["results"]);
    let topo = &run["evidence"]["topology"];
    // The case this guards: the JVM's listener is the mapped one.
    let mapped = format!("[::ffff:127.0.0.1]:{}", jvm.port);
    assert!(
        topo["upstream_listeners"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["addr"] == mapped.as_str()),
        "{topo}"
    );
    let java = topo["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == jvm.child.id())
        .unwrap_or_else(|| panic!("the JVM not watched: {topo}"));
    assert_eq!(java["tier"], "upstream", "{java}");
    // Its CPU in the window, as the "During the run" block shows it.
    let busy = run["evidence"]["window"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == jvm.child.id())
        .and_then(|p| p["cpu_pct"].as_f64())
        .unwrap_or_else(|| panic!("no CPU for the JVM: {}", run["evidence"]["window"]));
    assert!(busy > 0.0, "{busy}");
}
