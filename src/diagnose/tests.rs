//! Rules on Runs recorded from the lab (`tests/data/runs/<scenario>-{before,after}.json`,
//! written by `loadlens lab run NAME --fix --json-dir tests/data/runs`), plus near
//! misses: the same Runs with the key counter nudged just under the threshold.

use super::*;
use crate::lab::scenarios;

fn fixture(name: &str) -> Run {
    let p = format!("{}/tests/data/runs/{name}.json", env!("CARGO_MANIFEST_DIR"));
    Run::from_json(&std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))).unwrap()
}

fn first_bottleneck(f: &[Finding]) -> Option<&str> {
    f.iter()
        .find(|f| f.kind == Kind::Bottleneck)
        .map(|f| f.id.as_str())
}

fn ids(f: &[Finding]) -> Vec<String> {
    f.iter()
        .map(|f| format!("{}:{:?}:{}", f.id, f.kind, f.confidence))
        .collect()
}

#[test]
fn every_scenario_names_its_fault_and_the_fix_removes_it() {
    for sc in scenarios::all() {
        let before = diagnose(&fixture(&format!("{}-before", sc.name)));
        assert_eq!(
            first_bottleneck(&before),
            Some(sc.expected_finding),
            "{}: {:?}",
            sc.name,
            ids(&before)
        );
        let top = before.iter().find(|f| f.kind == Kind::Bottleneck).unwrap();
        assert!(!top.evidence.is_empty() && !top.fix.is_empty() && !top.explanation.is_empty());
        assert!((0.0..=1.0).contains(&top.confidence));
        if sc.name == "healthy" {
            continue; // nothing to fix: the control
        }
        let after = diagnose(&fixture(&format!("{}-after", sc.name)));
        assert!(
            !after
                .iter()
                .any(|f| f.id == sc.expected_finding && f.kind == Kind::Bottleneck),
            "{} after fix: {:?}",
            sc.name,
            ids(&after)
        );
    }
}

#[test]
fn healthy_has_no_false_alarm() {
    for w in ["before", "after"] {
        let f = diagnose(&fixture(&format!("healthy-{w}")));
        for x in f.iter().filter(|f| f.kind == Kind::Bottleneck) {
            assert!(
                ["server-cpu-saturated", "link-saturated"].contains(&x.id.as_str()),
                "{:?}",
                ids(&f)
            );
        }
    }
}

#[test]
fn findings_are_sorted_bottlenecks_first() {
    let f = diagnose(&fixture("ephemeral-ports-before"));
    let kinds: Vec<Kind> = f.iter().map(|f| f.kind).collect();
    let mut sorted = kinds.clone();
    sorted.sort();
    assert_eq!(kinds, sorted);
    assert!(f.iter().any(|f| f.id == "http-errors"), "{:?}", ids(&f));
}

#[test]
fn near_miss_listen_overflows() {
    let mut run = fixture("listen-backlog-before");
    let ev = run.evidence.as_mut().unwrap();
    // A few overflows (a restart, a burst) are not a pattern.
    ev.window
        .counters
        .insert("TcpExt.ListenOverflows".into(), 5);
    assert!(!diagnose(&run)
        .iter()
        .any(|f| f.id == "listen-queue-overflow"));
    run.evidence
        .as_mut()
        .unwrap()
        .window
        .counters
        .insert("TcpExt.ListenOverflows".into(), 500);
    assert!(diagnose(&run)
        .iter()
        .any(|f| f.id == "listen-queue-overflow"));
}

#[test]
fn near_miss_time_wait_and_ports() {
    let mut run = fixture("time-wait-before");
    run.evidence.as_mut().unwrap().window.time_wait_max = 900;
    assert!(!diagnose(&run)
        .iter()
        .any(|f| f.id == "time-wait-connect-cost"));
    let mut run = fixture("time-wait-before");
    run.evidence
        .as_mut()
        .unwrap()
        .host
        .sysctls
        .insert("net.ipv4.tcp_tw_reuse".into(), "1".into());
    assert!(!diagnose(&run)
        .iter()
        .any(|f| f.id == "time-wait-connect-cost"));
    // 502s with TIME_WAIT well under the port range: not port exhaustion.
    let mut run = fixture("ephemeral-ports-before");
    run.evidence.as_mut().unwrap().window.time_wait_max = 30;
    assert!(!diagnose(&run)
        .iter()
        .any(|f| f.id == "ephemeral-ports-exhausted"));
}

#[test]
fn near_miss_cpu_contention_and_buffers() {
    let mut run = fixture("cpu-contention-before");
    for p in run.evidence.as_mut().unwrap().window.processes.iter_mut() {
        p.run_delay_ms_per_s = Some(90.0);
    }
    assert!(!diagnose(&run).iter().any(|f| f.id == "run-queue-delay"));
    // Reads of a third of the response: not "far smaller".
    let mut run = fixture("proxy-buffers-before");
    let size = run.results.bytes_read as f64 / run.results.responses as f64;
    for p in run.evidence.as_mut().unwrap().window.processes.iter_mut() {
        p.bytes_per_read = Some(size / 3.0);
    }
    assert!(!diagnose(&run).iter().any(|f| f.id == "small-proxy-buffers"));
}

#[test]
fn near_miss_link_and_client() {
    let mut run = fixture("slow-link-before");
    for i in run.evidence.as_mut().unwrap().window.ifaces.iter_mut() {
        i.tx_bytes_per_s *= 0.85;
        i.rx_bytes_per_s *= 0.85;
    }
    assert!(!diagnose(&run).iter().any(|f| f.id == "link-saturated"));
    let mut run = fixture("client-bound-before");
    for t in run.client.threads.iter_mut() {
        t.run_delay_ms = Some(0.2 * run.results.duration_s * 1000.0);
    }
    assert!(!diagnose(&run).iter().any(|f| f.id == "client-saturated"));
}

#[test]
fn explain_covers_every_rule_id() {
    let mut all = Vec::new();
    for sc in scenarios::all() {
        for w in ["before", "after"] {
            all.extend(diagnose(&fixture(&format!("{}-{w}", sc.name))));
        }
    }
    for f in &all {
        assert!(explain(&f.id).is_some(), "no explanation for {}", f.id);
    }
    assert!(explain("nope").is_none());
}

/// The rules no lab scenario triggers, on a recorded Run with the one signal changed:
/// each fires past its threshold and stays quiet just under it.
mod synthetic {
    use super::*;
    use crate::run::Conntrack;

    fn fires(run: &Run, id: &str) -> bool {
        diagnose(run).iter().any(|f| f.id == id)
    }

    fn with_counters(kv: &[(&str, u64)]) -> Run {
        let mut run = fixture("healthy-before");
        let c = &mut run.evidence.as_mut().unwrap().window.counters;
        for (k, v) in kv {
            c.insert(k.to_string(), *v);
        }
        run
    }

    #[test]
    fn syn_queue_overflow() {
        assert!(fires(
            &with_counters(&[("TcpExt.TCPReqQFullDrop", 500)]),
            "syn-queue-overflow"
        ));
        assert!(!fires(
            &with_counters(&[("TcpExt.TCPReqQFullDrop", 5)]),
            "syn-queue-overflow"
        ));
    }

    #[test]
    fn retransmits() {
        let out = [("Tcp.OutSegs", 100_000)];
        assert!(fires(
            &with_counters(&[out[0], ("Tcp.RetransSegs", 5_000)]),
            "retransmits"
        ));
        assert!(!fires(
            &with_counters(&[out[0], ("Tcp.RetransSegs", 500)]),
            "retransmits"
        ));
    }

    #[test]
    fn conntrack_full() {
        let mut run = fixture("healthy-before");
        let ct = |count, drop| Conntrack {
            count_max_seen: count,
            max: 1000,
            drop,
            ..Conntrack::default()
        };
        run.evidence.as_mut().unwrap().window.conntrack = Some(ct(990, 0));
        assert!(fires(&run, "conntrack-full"));
        run.evidence.as_mut().unwrap().window.conntrack = Some(ct(800, 0));
        assert!(!fires(&run, "conntrack-full"));
        run.evidence.as_mut().unwrap().window.conntrack = Some(ct(800, 3));
        assert!(fires(&run, "conntrack-full"), "drops alone are enough");
    }

    #[test]
    fn fd_limit_and_worker_connections() {
        let mut run = fixture("healthy-before");
        let set_fds = |run: &mut Run, fds: u64| {
            for p in run.evidence.as_mut().unwrap().window.processes.iter_mut() {
                p.fds = Some(fds);
                p.fd_limit = Some(1024);
            }
        };
        set_fds(&mut run, 1000);
        assert!(fires(&run, "fd-limit"));
        set_fds(&mut run, 800);
        assert!(!fires(&run, "fd-limit"));
        let mut cfg = crate::run::NginxConfig::default();
        cfg.directives
            .insert("worker_connections".into(), vec!["850".into()]);
        run.evidence.as_mut().unwrap().topology.nginx = Some(cfg);
        assert!(fires(&run, "worker-connections-exhausted"));
        set_fds(&mut run, 700);
        assert!(!fires(&run, "worker-connections-exhausted"));
    }

    #[test]
    fn worker_imbalance() {
        let mut run = fixture("conn-per-request-before");
        let set = |run: &mut Run, a: f64, b: f64| {
            let ws: Vec<&mut crate::run::ProcRates> = run
                .evidence
                .as_mut()
                .unwrap()
                .window
                .processes
                .iter_mut()
                .filter(|p| p.role == "worker")
                .collect();
            for (p, v) in ws.into_iter().zip([a, b]) {
                p.cpu_pct = v;
            }
        };
        set(&mut run, 90.0, 20.0);
        assert!(fires(&run, "worker-imbalance"));
        set(&mut run, 45.0, 40.0);
        assert!(!fires(&run, "worker-imbalance"));
    }

    #[test]
    fn softirq_concentrated() {
        let mut run = fixture("healthy-before");
        let set = |run: &mut Run, hot: f64| {
            let cpus = &mut run.evidence.as_mut().unwrap().window.cpus;
            cpus[0].softirq = hot;
            cpus[0].idle = 0.0;
            cpus[1].softirq = 3.0;
            cpus[1].idle = 70.0;
        };
        set(&mut run, 65.0);
        assert!(fires(&run, "softirq-concentrated"));
        set(&mut run, 30.0);
        assert!(!fires(&run, "softirq-concentrated"));
    }

    #[test]
    fn nagle_delayed_ack() {
        let mut run = fixture("healthy-before");
        let with_mode = |share_40ms: f64| {
            let mut h = crate::engine::stats::latency_histogram(std::time::Duration::from_secs(5));
            let n = 10_000u64;
            let slow = (n as f64 * share_40ms) as u64;
            h.record_n(500, n - slow).unwrap();
            if slow > 0 {
                h.record_n(40_000, slow).unwrap();
            }
            crate::run::LatencySummary::from_histogram(&h, false)
        };
        run.results.latency = with_mode(0.2);
        assert!(fires(&run, "nagle-delayed-ack"));
        run.results.latency = with_mode(0.02);
        assert!(!fires(&run, "nagle-delayed-ack"));
    }
}

#[test]
fn a_broad_tail_is_not_a_nagle_mode() {
    let mut run = fixture("healthy-before");
    let mut h = crate::engine::stats::latency_histogram(std::time::Duration::from_secs(5));
    h.record_n(1_000, 8_000).unwrap();
    // 20–80 ms spread evenly: 10% of requests fall near 40 ms, but there is no peak.
    for ms in 20..80u64 {
        h.record_n(ms * 1000, 33).unwrap();
    }
    run.results.latency = crate::run::LatencySummary::from_histogram(&h, false);
    assert!(!diagnose(&run).iter().any(|f| f.id == "nagle-delayed-ack"));
}

#[test]
fn connection_cost_outranks_the_busy_cpu_it_causes() {
    let mut run = fixture("conn-per-request-before");
    for p in run.evidence.as_mut().unwrap().window.processes.iter_mut() {
        p.cpu_pct = 99.0;
    }
    let f = diagnose(&run);
    assert_eq!(
        first_bottleneck(&f),
        Some("new-connection-cost"),
        "{:?}",
        ids(&f)
    );
    let cpu = f.iter().find(|x| x.id == "server-cpu-saturated").unwrap();
    assert_eq!(cpu.kind, Kind::Info);
}
