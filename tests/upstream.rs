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
    assert_eq!(first["id"], "upstream-saturated", "{}", run["findings"]);
    assert!(
        first["title"].as_str().unwrap().contains(&sock),
        "{}",
        first["title"]
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
