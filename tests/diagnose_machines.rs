//! The diagnosis on machines larger than the 2-CPU one the lab runs on: the healthy
//! lab Run (`tests/data/runs/healthy-before.json`) rewritten as if taken on an 8-CPU
//! machine shared by client and server, and on a 32-CPU machine where the server is
//! pinned to CPUs 0–15 and loadlens to 16–31. Texts that depend on the machine are
//! worded from the Run's facts; thresholds scale with the CPUs a worker may use.

use loadlens::diagnose::diagnose;
use loadlens::run::{Finding, Run};

fn fixture(name: &str) -> Run {
    let p = format!("{}/tests/data/runs/{name}.json", env!("CARGO_MANIFEST_DIR"));
    Run::from_json(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

/// The healthy Run on a machine of `cpus` CPUs, the server allowed `server`, loadlens
/// `client`.
fn on_machine(cpus: u32, server: std::ops::Range<u32>, client: std::ops::Range<u32>) -> Run {
    let mut run = fixture("healthy-before");
    let h = &mut run.evidence.as_mut().unwrap().host;
    h.cpus = cpus;
    h.server_cpus = server.collect();
    h.loadgen_cpus = client.collect();
    run
}

fn find<'a>(f: &'a [Finding], id: &str) -> &'a Finding {
    f.iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no {id}: {:?}", f.iter().map(|f| &f.id).collect::<Vec<_>>()))
}

fn set_worker(run: &mut Run, cpu_pct: f64, threads: u64, run_delay_ms_per_s: f64) {
    for p in run.evidence.as_mut().unwrap().window.processes.iter_mut() {
        if p.role == loadlens::run::Role::Worker {
            p.cpu_pct = cpu_pct;
            p.threads = threads;
            p.run_delay_ms_per_s = Some(run_delay_ms_per_s);
        }
    }
}

#[test]
fn one_worker_of_sixteen_cpus_is_told_to_use_them_all() {
    let run = on_machine(32, 0..16, 16..32);
    let found = diagnose(&run);
    let f = find(&found, "server-cpu-saturated");
    assert!(
        f.explanation.contains("can use 1 of the 16 CPUs"),
        "{}",
        f.explanation
    );
    assert!(f.fix.contains("worker_processes auto"), "{}", f.fix);
    assert!(f
        .evidence
        .iter()
        .any(|e| e.name == "CPUs the server may use" && e.value == 16.0));
}

#[test]
fn run_queue_text_says_whether_the_client_shares_the_cpus() {
    // 8 CPUs, client and server everywhere: they share them.
    let mut run = on_machine(8, 0..8, 0..8);
    set_worker(&mut run, 60.0, 1, 300.0);
    let found = diagnose(&run);
    let f = find(&found, "run-queue-delay");
    assert!(
        f.explanation.contains("share 8 of the server's 8 CPUs"),
        "{}",
        f.explanation
    );
    assert!(
        f.fix.contains("`taskset` the load generator elsewhere"),
        "{}",
        f.fix
    );

    // 32 CPUs, kept apart: the client is not blamed.
    let mut run = on_machine(32, 0..16, 16..32);
    set_worker(&mut run, 60.0, 1, 300.0);
    let found = diagnose(&run);
    let f = find(&found, "run-queue-delay");
    assert!(
        f.explanation
            .contains("the load generator runs on other CPUs"),
        "{}",
        f.explanation
    );
    assert!(!f.explanation.contains("share"), "{}", f.explanation);
    assert!(!f.fix.contains("load generator"), "{}", f.fix);
}

#[test]
fn a_threaded_worker_is_saturated_only_when_its_threads_are() {
    // One process of 16 threads (Apache's mpm_event, HAProxy's nbthread) at 150%: it
    // could use 16 cores; far from saturated.
    let mut run = on_machine(32, 0..16, 16..32);
    set_worker(&mut run, 150.0, 16, 0.0);
    let found = diagnose(&run);
    assert!(!found.iter().any(|f| f.id == "server-cpu-saturated"));
    // At 1,500% of 16 cores it is.
    set_worker(&mut run, 1500.0, 16, 0.0);
    for p in run.evidence.as_mut().unwrap().topology.processes.iter_mut() {
        p.kind = loadlens::kinds::apache::KIND;
    }
    let found = diagnose(&run);
    let f = find(&found, "server-cpu-saturated");
    assert!(
        f.title.contains("of the 16 cores its threads may use"),
        "{}",
        f.title
    );
    assert!(!f.fix.contains("worker_processes"), "{}", f.fix);
}

#[test]
fn one_busy_thread_of_many_is_an_event_loop_at_its_limit() {
    // Node: 7 threads, the main one at 98% of a core, the process at 102%, on 16 CPUs.
    let mut run = on_machine(32, 0..16, 16..32);
    set_worker(&mut run, 102.0, 7, 0.0);
    for p in run.evidence.as_mut().unwrap().window.processes.iter_mut() {
        p.busiest_thread_pct = Some(98.0);
        p.kind = loadlens::kinds::node::KIND;
    }
    for p in run.evidence.as_mut().unwrap().topology.processes.iter_mut() {
        p.kind = loadlens::kinds::node::KIND;
    }
    let found = diagnose(&run);
    let f = find(&found, "server-cpu-saturated");
    assert!(
        f.title.contains("its busiest thread at 98% of a core"),
        "{}",
        f.title
    );
    assert!(f.fix.contains("`cluster` module"), "{}", f.fix);
    // Connections waiting in its accept queue: the thread's CPU, not a connection
    // limit, is why they wait.
    for q in run
        .evidence
        .as_mut()
        .unwrap()
        .window
        .listen_queues
        .iter_mut()
    {
        q.samples_queued = q.samples;
        q.max_queue = 40;
    }
    let ids: Vec<String> = diagnose(&run).into_iter().map(|f| f.id).collect();
    assert!(ids.contains(&"server-cpu-saturated".to_string()), "{ids:?}");
    assert!(!ids.contains(&"connection-limit".to_string()), "{ids:?}");
    // The same CPU spread over its threads (busiest 30%): far from any CPU limit, so
    // the waiting connections point at a connection limit.
    for p in run.evidence.as_mut().unwrap().window.processes.iter_mut() {
        p.busiest_thread_pct = Some(30.0);
    }
    let ids: Vec<String> = diagnose(&run).into_iter().map(|f| f.id).collect();
    assert!(
        !ids.contains(&"server-cpu-saturated".to_string()),
        "{ids:?}"
    );
    assert!(ids.contains(&"connection-limit".to_string()), "{ids:?}");
}
