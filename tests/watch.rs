//! The watch against real nginx: discovery by port, server process counters, listen
//! queues, and the server-side namespace's TCP counters.

mod common;

use common::{assert_ok, run_json, run_json_in, u, NetnsPair, Nginx};
use serde_json::Value;

fn processes(run: &Value) -> Vec<Value> {
    run["evidence"]["window"]["processes"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn discovers_nginx_by_port_and_reads_its_counters() {
    let ng = Nginx::start_with_listen("", "access_log off;", "backlog=77");
    let run = run_json(&[
        "-n",
        "3000",
        "-c",
        "20",
        "-t",
        "2",
        "--connreqs",
        "10",
        &ng.url("/1k.txt"),
    ]);
    let ev = &run["evidence"];
    let topo = &ev["topology"];
    let summary = topo["summary"].as_str().unwrap();
    assert!(
        summary.starts_with(&format!(
            "watching nginx master {} + 1 worker on 127.0.0.1:{}",
            ng.pid(),
            ng.port
        )),
        "{summary}"
    );
    // The listen socket's backlog is what the config set.
    let l = &topo["listeners"][0];
    assert_eq!(l["backlog"], 77, "{l}");
    // nginx's running configuration, read with `nginx -T` as the master was started.
    let listen = topo["config"]["directives"]["listen"][0].as_str().unwrap();
    assert!(listen.ends_with("backlog=77"), "{listen}");
    assert_eq!(topo["config"]["directives"]["worker_processes"][0], "1");

    // The kernel accepted at least as many connections as loadlens opened.
    let opened = u(&run, "results.connections_opened");
    // 3000 / 10 = 300, plus at most one cut-short connection per -c when -n runs out.
    assert!((300..320).contains(&opened), "{opened}");
    let accepted = ev["window"]["counters"]["Tcp.PassiveOpens"]
        .as_u64()
        .unwrap();
    assert!(accepted >= opened, "{}", ev["window"]["counters"]);

    let procs = processes(&run);
    let worker = procs
        .iter()
        .find(|p| p["role"] == "worker")
        .expect("a worker");
    assert!(worker["cpu_pct"].as_f64().unwrap() > 0.0, "{worker}");
    // nginx writes each response (headers + the 1024-byte file) with one writev.
    let bpw = worker["bytes_per_write"].as_f64().unwrap();
    assert!((1024.0..1600.0).contains(&bpw), "bytes per write {bpw}");
    let master = procs.iter().find(|p| p["role"] == "master").unwrap();
    assert_eq!(master["pid"], ng.pid());
    assert!(worker["fds"].as_u64().unwrap() > 0 && worker["fd_limit"].as_u64().unwrap() > 0);

    // The series and the per-CPU window.
    assert!(!ev["samples"].as_array().unwrap().is_empty());
    assert!(!ev["window"]["cpus"].as_array().unwrap().is_empty());
    assert!(ev["host"]["sysctls"]["net.core.somaxconn"].is_string());
}

#[test]
fn no_watch_and_text_block() {
    let ng = Nginx::start("", "");
    let run = run_json(&[
        "-n",
        "100",
        "-c",
        "2",
        "-t",
        "1",
        "--no-watch",
        &ng.url("/1k.txt"),
    ]);
    assert!(run["evidence"].is_null());

    let out = common::loadlens()
        .args(["run", &ng.url("/1k.txt"), "-n", "500", "-c", "2", "-t", "1"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "During the run (",
        "watching nginx master",
        "  CPU       %usr",
        "  TCP       ",
        "nginx worker",
    ] {
        assert!(text.contains(want), "`{want}` missing:\n{text}");
    }
}

#[test]
fn listen_overflows_counted_in_the_servers_namespace() {
    let ns = NetnsPair::new("backlog");
    ns.server_sysctl("net.core.somaxconn", "10");
    // No SYN cookies: a full queue then drops, as in the published case.
    ns.server_sysctl("net.ipv4.tcp_syncookies", "0");
    let ng = Nginx::start_opts(
        Some(&ns.server),
        ns.server_ip,
        "",
        "access_log off;",
        "",
        "backlog=10",
    );
    let url = format!("http://{}:{}/1k.txt", ns.server_ip, ng.port);
    // The worker is stopped before the load starts, so connections pile up in the accept
    // queue and the kernel must drop a burst, whatever the speed of this machine; it goes
    // on once the server's namespace has counted an overflow (and the 100 ms sampler has
    // had time to see the full queue), or when the run is over.
    let worker = *ng.workers().first().expect("nginx has a worker");
    let overflows_now = {
        let netstat = format!("/proc/{}/net/netstat", ng.pid());
        move || {
            let text = std::fs::read_to_string(&netstat).unwrap_or_default();
            loadlens::sys::procfs::parse_snmp(&text)
                .get("TcpExt.ListenOverflows")
                .copied()
                .unwrap_or(0)
        }
    };
    let before = overflows_now();
    // SAFETY: kill(2) on the worker of an nginx this test started.
    unsafe { libc::kill(worker, libc::SIGSTOP) };
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopper = {
        let done = done.clone();
        std::thread::spawn(move || {
            while overflows_now() == before && !done.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            std::thread::sleep(std::time::Duration::from_millis(500));
            // SAFETY: as above.
            unsafe { libc::kill(worker, libc::SIGCONT) };
        })
    };
    let pid = ng.pid().to_string();
    let run = run_json_in(
        &ns.client,
        &[
            "-d",
            "2s",
            "-c",
            "100",
            "-t",
            "2",
            "--connreqs",
            "1",
            "--timeout",
            "3s",
            "--sample",
            "100ms",
            "--server-pid",
            &pid,
            &url,
        ],
    );
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    stopper.join().unwrap();
    let ev = &run["evidence"];
    assert_eq!(ev["topology"]["netns"], format!("pid {pid}"));
    assert_eq!(
        ev["host"]["sysctls"]["net.core.somaxconn"], "10",
        "the server namespace's value"
    );
    let overflows = ev["window"]["counters"]["TcpExt.ListenOverflows"]
        .as_u64()
        .unwrap_or(0);
    assert!(overflows > 0, "counters: {}", ev["window"]["counters"]);
    let series: Vec<String> = ev["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            format!(
                "{:.1}s:{}",
                s["t_s"].as_f64().unwrap(),
                s["listen_queues"][0]["queue"]
            )
        })
        .collect();
    eprintln!("accept queue: {}", series.join(" "));
    let q = &ev["window"]["listen_queues"][0];
    assert_eq!(q["backlog"], 10, "{q}");
    // The accept queue plus the SYN queue share the backlog of 10, so the accept queue
    // alone levels off below it (seen here: 6-8) while ACKs overflow.
    assert!(q["max_queue"].as_u64().unwrap() >= 5, "{q}");
}

/// A client pinned to one CPU records the machine's online CPUs, not its own affinity,
/// and where the server's workers may run (nginx `worker_cpu_affinity`).
#[test]
fn pinned_client_records_the_machines_cpus_and_the_servers() {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let online: Vec<u32> = online
        .trim()
        .split(',')
        .flat_map(|r| {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap()
        })
        .collect();
    assert!(online.len() >= 2, "needs 2 CPUs: {online:?}");
    let last = *online.last().unwrap();
    // nginx's mask: rightmost bit is CPU 0; pin the worker to the last online CPU.
    let mask = format!("1{}", "0".repeat(last as usize));
    let ng = Nginx::start_opts(
        None,
        "127.0.0.1",
        &format!("worker_cpu_affinity {mask};"),
        "",
        "",
        "",
    );
    let out = std::process::Command::new("taskset")
        .args([
            "-c",
            "0",
            env!("CARGO_BIN_EXE_loadlens"),
            "run",
            "-n",
            "500",
            "-c",
            "2",
        ])
        .arg(ng.url("/1k.txt"))
        .args(["--json", "-"])
        .output()
        .unwrap();
    assert_ok(&out);
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    let host = &run["evidence"]["host"];
    assert_eq!(host["cpus"], online.len(), "{host}");
    assert_eq!(host["loadgen_cpus"], serde_json::json!([0]), "{host}");
    assert_eq!(host["server_cpus"], serde_json::json!([last]), "{host}");
}
