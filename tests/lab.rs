//! Every lab scenario, run for real (root, network namespaces, Debian's nginx and
//! php-fpm): the fault's counter moves in the Run's evidence and the fix removes it.
//! Afterwards no namespace, process or temp dir is left and host sysctls are unchanged.
//!
//! Scenarios run one at a time (a lock): several load tests at once on a 2-core machine
//! would measure each other.

mod common;

use std::process::Command;
use std::sync::Mutex;

use common::lab::{lab_namespaces, lab_processes};
use serde_json::Value;

static SERIAL: Mutex<()> = Mutex::new(());

/// The finding each scenario's fault must produce (issue: diagnose).
fn expected(name: &str) -> &'static str {
    match name {
        "healthy" => "server-cpu-saturated",
        "listen-backlog" => "listen-queue-overflow",
        "php-fpm-children" => "upstream-saturated",
        "ephemeral-ports" => "ephemeral-ports-exhausted",
        "time-wait" => "time-wait-connect-cost",
        "proxy-buffers" => "small-proxy-buffers",
        "conn-per-request" => "new-connection-cost",
        "cpu-contention" => "run-queue-delay",
        "event-loop-stall" => "event-loop-stall",
        "slow-link" => "link-saturated",
        "client-bound" => "client-saturated",
        "cpu-quota" => "cpu-quota",
        "few-connections" => "concurrency-bound",
        "blocking-log" => "worker-blocked",
        "nagle" => "nagle-delayed-ack",
        "fd-limit" => "fd-limit",
        "worker-connections" => "connection-limit",
        "php-fpm-socket" => "upstream-saturated",
        "gzip-cpu" => "server-cpu-saturated",
        "apache-workers" => "connection-limit",
        "haproxy-maxconn" => "listen-queue-overflow",
        other => panic!("no expectation for {other}"),
    }
}

/// Runs `lab run NAME --fix` at a point of the scenario's range (`params` as `--param
/// KEY=N`) and returns (before, after) Runs, after checking the diagnosis: the fault's
/// finding is the first bottleneck before, and gone after.
///
/// A scenario is its world's only load, but the host may not be quiet (a build, a
/// nice-19 job): what that load does to the world is the host's, and a finding that
/// names only it is set aside (see [`host_findings`]). When the diagnosis is still off
/// while a process outside the world took a CPU, the run measured the host, not the
/// scenario: it runs again, at most twice more, saying why. A wrong diagnosis on a
/// quiet host fails at once.
fn lab_at(name: &str, duration: &str, params: &[String]) -> (Value, Value) {
    let flags: Vec<&str> = params
        .iter()
        .flat_map(|p| ["--param", p.as_str()])
        .collect();
    lab_with(name, duration, &flags)
}

/// [`lab_at`] with any flags for `lab run` (`--watch-ssh`, `--param`).
fn lab_with(name: &str, duration: &str, flags: &[&str]) -> (Value, Value) {
    for attempt in 1.. {
        let (before, after) = lab_runs(name, duration, flags);
        // Whether the fault held (its key moved by the scenario's margin), and whether
        // the diagnosis named it; a weak fault is said first.
        let busy = outside_load(&before).or_else(|| outside_load(&after));
        let why = match (
            fault_held(name, &before, &after),
            diagnosis(name, &before, &after),
        ) {
            (Ok(()), Ok(())) => return (before, after),
            // Beside the host's own load a key can fall short of its margin while the
            // diagnosis holds (cpu-contention: a build on the client's CPU leaves the
            // worker idle gaps its SCHED_IDLE busy loop then fills): said, not failed.
            // On a quiet host the margin is enforced.
            (Err(weak), Ok(())) if busy.is_some() => {
                eprintln!(
                    "{weak}, beside the host's load ({}); the diagnosis held",
                    busy.unwrap()
                );
                return (before, after);
            }
            (Err(why), _) | (Ok(()), Err(why)) => why,
        };
        match busy {
            Some(busy) if attempt < 3 => {
                eprintln!("{name}: {why}, while the host was busy ({busy}): run again")
            }
            Some(busy) => panic!("{why} (the host was busy: {busy})"),
            None => panic!("{why}"),
        }
    }
    unreachable!()
}

/// The scenario's key moved by its margin: the fault was decisive on this machine.
fn fault_held(name: &str, before: &Value, after: &Value) -> Result<(), String> {
    let sc = loadlens::lab::find(name).unwrap();
    let run = |v: &Value| loadlens::run::Run::from_json(&v.to_string()).unwrap();
    sc.key
        .margin(&run(before), &run(after))
        .map(|_| ())
        .map_err(|why| format!("{name}: {why}"))
}

/// The bottlenecks of `run` that are the scenario's: without those naming the host's
/// load (said on stderr).
fn scenario_bottlenecks(name: &str, run: &Value) -> Vec<String> {
    let host = host_findings(run);
    if !host.is_empty() {
        eprintln!("{name}: set aside, the host's load: {host:?}");
    }
    scenario_findings(run)
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect()
}

/// The bottlenecks of `run` without [`host_findings`], with a capacity finding one of
/// those demoted to info (the CPU as the limit, see `CAPACITY` in the rules) counted as
/// a limit again — unless a cause of the scenario's own is there too, a bottleneck or
/// demoted by the host's finding ([`demoted_by_host`]): the worker's CPU spent in
/// connect()'s port search is time-wait-connect-cost's, not a limit beside it
/// (time_wait_high and worker_connections_low/high named the restored
/// server-cpu-saturated first beside compilers, above the cause the host had demoted).
fn without_host(run: &Value) -> Vec<&Value> {
    const CAPACITY: &[&str] = &["server-cpu-saturated", "link-saturated"];
    let host = host_findings(run);
    let all = run["findings"].as_array().unwrap();
    let hosts = |f: &Value| host.iter().any(|h| f["id"] == h.as_str());
    let demoted = demoted_by_host(run, &host);
    let cause = all
        .iter()
        .filter(|f| f["kind"] == "bottleneck" && !hosts(f))
        .chain(demoted.iter().copied())
        .any(|f| f["id"] != "client-saturated" && !CAPACITY.iter().any(|c| f["id"] == *c));
    all.iter()
        .filter(|f| {
            f["kind"] == "bottleneck"
                || (!host.is_empty()
                    && !cause
                    && f["kind"] == "info"
                    && CAPACITY.iter().any(|c| f["id"] == *c))
        })
        .filter(|f| !hosts(f))
        .collect()
}

/// The findings of `run` the host's finding demoted (their `because_of`: a worker
/// waiting for a CPU accepts slowly, and the listen queue of 10 overflowed because of
/// it too; a throttled client "beside" a server waiting for its CPU).
fn demoted_by_host<'a>(run: &'a Value, host: &[String]) -> Vec<&'a Value> {
    run["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] != "bottleneck" && host.iter().any(|h| f["because_of"] == h.as_str()))
        .collect()
}

/// The bottleneck findings of `run` that are the scenario's, in rank order:
/// [`without_host`], then what the host's finding demoted ([`demoted_by_host`]), the
/// scenario's again once the host's finding is set aside.
fn scenario_findings(run: &Value) -> Vec<&Value> {
    let host = host_findings(run);
    let first = without_host(run);
    let then: Vec<&Value> = demoted_by_host(run, &host)
        .into_iter()
        .filter(|f| !first.iter().any(|g| g["id"] == f["id"]))
        .collect();
    first.into_iter().chain(then).collect()
}

/// The scenario's fault is the first bottleneck before and gone after the fix; the
/// healthy control has nothing but its CPU (or link) as a limit.
fn diagnosis(name: &str, before: &Value, after: &Value) -> Result<(), String> {
    let want = expected(name);
    let b = scenario_bottlenecks(name, before);
    if b.first().map(String::as_str) != Some(want) {
        return Err(format!("{name} before: {b:?}, want {want} first"));
    }
    let top = before["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == want)
        .unwrap();
    assert!(
        !top["evidence"].as_array().unwrap().is_empty() && top["fix"].as_str().unwrap().len() > 10
    );
    // After the fix the scenario's finding must be no bottleneck; what the host's own
    // load demoted stays demoted (a client starved by a build beside the test is the
    // host's story, and the key's margin already said the fault went).
    let a: Vec<String> = without_host(after)
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect();
    // In healthy and gzip-cpu the CPU stays the limit after the fix (a cheaper one).
    if name != "healthy" && name != "gzip-cpu" && a.iter().any(|id| id == want) {
        return Err(format!("{name} after fix: {a:?}"));
    }
    if name == "healthy" {
        let allowed = ["server-cpu-saturated", "link-saturated"];
        if let Some(id) = b
            .iter()
            .chain(&a)
            .find(|id| !allowed.contains(&id.as_str()))
        {
            return Err(format!("healthy: false alarm {id}"));
        }
    }
    Ok(())
}

/// The `run-queue-delay` bottleneck of a run beside the host's own load (processes
/// outside the world at ≥ 20% of a CPU) that does not name the world's busy loop: a
/// nice-19 job still delays a waking worker under EEVDF, and with every CPU busy the
/// scheduler wakes the worker beside the load generator — a true finding of the host,
/// named by pid, not the scenario's diagnosis. Likewise a `client-saturated` whose
/// client no quota of its own held back: the host's load starved it.
fn host_findings(run: &Value) -> Vec<String> {
    if outside_load(run).is_none() {
        return Vec::new();
    }
    let busy_loop: Vec<i64> = run["evidence"]["window"]["other_processes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| o["comm"] == loadlens::lab::BUSY_LOOP)
        .filter_map(|o| o["pid"].as_i64())
        .collect();
    run["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "bottleneck")
        .filter(|f| {
            if f["id"] == "client-saturated" {
                // The load generator starved of CPU by the host's load, its own quota
                // (client-bound's fault) not spent: client_bound_low after the fix
                // beside chromium and rustfmt, 2 runs of 2.
                return !client_throttled(run);
            }
            let named = named_pids(f["explanation"].as_str().unwrap_or(""));
            f["id"] == "run-queue-delay" && !named.iter().any(|p| busy_loop.contains(p))
        })
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect()
}

/// The run's client ran under a CPU quota that stopped it in ≥ 30% of the periods.
fn client_throttled(run: &Value) -> bool {
    let q = &run["client"]["quota"];
    let periods = q["periods"].as_u64().unwrap_or(0);
    let throttled = q["throttled_periods"].as_u64().unwrap_or(0);
    periods > 0 && throttled * 10 >= 3 * periods
}

/// The first bottleneck of `run` that is the scenario's ([`scenario_findings`]).
fn first(run: &Value) -> &Value {
    scenario_findings(run)
        .first()
        .copied()
        .unwrap_or_else(|| panic!("no bottleneck: {}", run["findings"]))
}

/// How much of a core the busiest worker wanted: running, or runnable and waiting
/// (beside a nice-19 job it runs less and waits the rest).
fn wants_cpu(run: &Value) -> f64 {
    run["evidence"]["window"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["role"] == "worker" && p["tier"] == "front")
        .map(|p| {
            p["cpu_pct"].as_f64().unwrap_or(0.0)
                + p["run_delay_ms_per_s"].as_f64().unwrap_or(0.0) / 10.0
        })
        .fold(0.0, f64::max)
}

/// The pids an explanation names ("sh (pid 4855, 50% CPU)").
fn named_pids(text: &str) -> Vec<i64> {
    text.split("(pid ")
        .skip(1)
        .filter_map(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .collect()
}

/// Processes outside the lab's world that took at least a fifth of a CPU during the
/// run (the world: its servers, cpu-contention's busy loop, loadlens, the kernel's
/// threads).
/// Many processes each below that (a build's compilers and linkers, a test binary's
/// servers) that together took a quarter of a CPU are the host's load too.
fn outside_load(run: &Value) -> Option<String> {
    let busy: Vec<String> = outside(run, 20.0)
        .into_iter()
        .map(|(comm, pid)| format!("{comm} (pid {pid})"))
        .collect();
    if !busy.is_empty() {
        return Some(busy.join(", "));
    }
    let many = outside(run, 0.0);
    let pct: f64 = run["evidence"]["window"]["other_processes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| many.iter().any(|(_, pid)| o["pid"].as_i64() == Some(*pid)))
        .filter_map(|o| o["cpu_pct"].as_f64())
        .sum();
    (pct >= 25.0).then(|| {
        format!(
            "{} processes outside the world at {pct:.0}% of a CPU together",
            many.len()
        )
    })
}

/// (comm, pid) of the processes outside the world that took at least `pct` of a CPU.
fn outside(run: &Value, pct: f64) -> Vec<(String, i64)> {
    const WORLD: &[&str] = &[
        "nginx",
        "php-fpm",
        "apache2",
        "haproxy",
        "loadlens",
        loadlens::lab::BUSY_LOOP,
    ];
    const KERNEL: &[&str] = &["ksoftirqd", "kworker", "rcu", "migration", "irq/"];
    let Some(others) = run["evidence"]["window"]["other_processes"].as_array() else {
        return Vec::new();
    };
    others
        .iter()
        .filter(|o| o["cpu_pct"].as_f64().unwrap_or(0.0) >= pct)
        .filter_map(|o| {
            let comm = o["comm"].as_str()?;
            let ours = WORLD.iter().any(|w| comm.starts_with(w))
                || KERNEL.iter().any(|k| comm.starts_with(k));
            (!ours).then(|| (comm.to_string(), o["pid"].as_i64().unwrap_or(0)))
        })
        .collect()
}

/// Runs its closure when dropped (also when the test panics).
struct Said<F: FnMut()>(F);

impl<F: FnMut()> Drop for Said<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

fn lab_runs(name: &str, duration: &str, flags: &[&str]) -> (Value, Value) {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Each pair's own time, the lock held (the target's wall time includes the waits):
    // `cargo test --test lab -- --nocapture` prints them.
    let started = std::time::Instant::now();
    let _time = Said(move || {
        eprintln!(
            "lab-time {name} {}: {:.1} s",
            flags.join(" "),
            started.elapsed().as_secs_f64()
        )
    });
    let lab = common::lab_run(name, duration, flags);
    let (before, after, dir) = (lab.before, lab.after, lab.dir);
    // The lab profiles the server by default and draws its flame graph: a whole SVG
    // with the busiest worker's top function in it.
    let top = &before["evidence"]["profile"]["top"];
    if let Some(first) = top["functions"][0]["name"].as_str() {
        let svg = std::fs::read_to_string(dir.path().join(format!("{name}-before.svg")))
            .unwrap_or_else(|e| panic!("{name}: no flame graph: {e}"));
        assert!(svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"));
        let escaped = first
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        assert!(
            svg.contains(&escaped),
            "{name}: {first} not in the flame graph"
        );
    } else {
        assert!(
            before["evidence"]["profile"]["samples"].as_u64().is_some(),
            "{name}: no profile: {}",
            before["evidence"]["warnings"]
        );
    }
    (before, after)
}

/// A scenario watched over ssh (`lab run NAME --watch-ssh`: an sshd of the world's
/// own in its server namespace, the client running `--watch ssh://root@10.77.0.2`):
/// the same diagnosis as the local watch (the checks of [`lab_at`]), from evidence that
/// came over the channel, none of it lost.
fn over_ssh(name: &str, duration: &str) -> (Value, Value) {
    let (before, after) = lab_with(name, duration, &["--watch-ssh"]);
    for run in [&before, &after] {
        let source = &run["evidence"]["source"];
        assert_eq!(source["transport"], "ssh", "{name}: {source}");
        assert_eq!(source["destination"], "ssh://root@10.77.0.2");
        assert!(source["lost_at_s"].is_null(), "{name}: {source}");
        assert!(source["remote_cpu_s"].as_f64().unwrap() > 0.0, "{source}");
    }
    (before, after)
}

#[test]
fn healthy_over_ssh() {
    over_ssh("healthy", "2s");
}

#[test]
fn listen_backlog_over_ssh() {
    let (before, _) = over_ssh("listen-backlog", "2s");
    assert!(counter(&before, "TcpExt.ListenOverflows") > 0);
}

#[test]
fn php_fpm_children_over_ssh() {
    let (before, _) = over_ssh("php-fpm-children", "3s");
    // The upstream tier was found and watched on the server's side.
    let upstream = before["evidence"]["topology"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["tier"] == "upstream");
    assert!(upstream, "{}", before["evidence"]["topology"]);
}

#[test]
fn proxy_buffers_over_ssh() {
    over_ssh("proxy-buffers", "2s");
}

#[test]
fn worker_connections_over_ssh() {
    over_ssh("worker-connections", "2s");
}

/// The names in the top-10 table of the busiest worker's profile.
fn top10(run: &Value) -> Vec<String> {
    run["evidence"]["profile"]["top"]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .take(10)
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect()
}

fn finding<'a>(run: &'a Value, id: &str) -> Option<&'a Value> {
    run["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
}

fn counter(run: &Value, key: &str) -> u64 {
    run["evidence"]["window"]["counters"][key]
        .as_u64()
        .unwrap_or(0)
}

fn worker(run: &Value, field: &str) -> f64 {
    run["evidence"]["window"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["role"] == "worker" && p["tier"] == "front")
        .filter_map(|p| p[field].as_f64())
        .fold(0.0, f64::max)
}

fn pct(run: &Value, p: f64) -> f64 {
    common::percentile_us(run, p) as f64
}

fn rps(run: &Value) -> f64 {
    run["results"]["requests_per_s"].as_f64().unwrap()
}

fn errors(run: &Value) -> u64 {
    let e = &run["results"]["errors"];
    ["connect", "read", "write", "timeout", "parse"]
        .iter()
        .map(|k| e[*k].as_u64().unwrap())
        .sum()
}

#[test]
fn healthy_low() {
    healthy(20);
}

#[test]
fn healthy_high() {
    healthy(200);
}

fn healthy(connections: u32) {
    let (before, after) = lab_at("healthy", "2s", &[format!("connections={connections}")]);
    for r in [&before, &after] {
        assert_eq!(errors(r), 0);
        assert_eq!(r["results"]["non_2xx_3xx"], 0);
        // The worker is the limit: it runs, or waits to run, most of the time (a
        // nice-19 job beside it takes turns on its CPU under EEVDF: 49% CPU with 485
        // ms/s of run delay beside two nice-19 loops).
        assert!(
            wants_cpu(r) > 50.0,
            "the worker is the limit: {}%",
            wants_cpu(r)
        );
        assert_eq!(counter(r, "TcpExt.ListenOverflows"), 0);
    }
    // Where a healthy static server's CPU goes: the kernel (63% of the worker's samples
    // here). Its network-stack share sits at kernel-network-stack's own bar (40.5–46.4%
    // measured over 7 runs on this machine, at 99 and 499 Hz), so whether that finding
    // fires is chance: when it does, it cites its share.
    if let Some(k) = finding(&before, "kernel-network-stack") {
        assert!(k["evidence"][0]["value"].as_f64().unwrap() >= 40.0, "{k}");
    }
    assert!(
        before["evidence"]["profile"]["top"]["kernel_pct"]
            .as_f64()
            .unwrap()
            > 50.0
    );
}

#[test]
fn listen_backlog_low() {
    listen_backlog(5);
}

#[test]
fn listen_backlog_high() {
    listen_backlog(32);
}

fn listen_backlog(backlog: u32) {
    let (before, after) = lab_at("listen-backlog", "2s", &[format!("backlog={backlog}")]);
    assert!(counter(&before, "TcpExt.ListenOverflows") > 0);
    assert_eq!(
        before["evidence"]["host"]["sysctls"]["net.core.somaxconn"],
        backlog.to_string()
    );
    assert_eq!(
        before["evidence"]["window"]["listen_queues"][0]["backlog"],
        backlog
    );
    assert_eq!(counter(&after, "TcpExt.ListenOverflows"), 0);
    assert_eq!(
        after["evidence"]["window"]["listen_queues"][0]["backlog"],
        4096
    );
}

#[test]
fn php_fpm_children_low() {
    php_fpm_children(2, 200);
}

#[test]
fn php_fpm_children_high() {
    php_fpm_children(5, 400);
}

fn php_fpm_children(children: u32, script_ms: u32) {
    let (before, after) = lab_at(
        "php-fpm-children",
        "3s",
        &[
            format!("max_children={children}"),
            format!("script_ms={script_ms}"),
        ],
    );
    let bad = |r: &Value| {
        r["results"]["non_2xx_3xx"].as_u64().unwrap()
            + r["results"]["errors"]["timeout"].as_u64().unwrap()
    };
    assert!(bad(&before) > 0, "timeouts or 5xx with 5 children");
    // php-fpm's socket is watched: its accept queue filled up.
    let queues = before["evidence"]["window"]["listen_queues"]
        .as_array()
        .unwrap();
    let fpm = queues
        .iter()
        .find(|q| q["addr"].as_str().unwrap().ends_with("fpm.sock"))
        .expect("php-fpm's unix listener watched");
    assert!(fpm["max_queue"].as_u64().unwrap() > 10, "{fpm}");
    // php-fpm is watched as the upstream, nginx as the front.
    for p in before["evidence"]["topology"]["processes"]
        .as_array()
        .unwrap()
    {
        let want = if p["comm"] == "nginx" {
            "front"
        } else {
            "upstream"
        };
        assert_eq!(p["tier"], want, "{p}");
    }
    assert_eq!(bad(&after), 0);
    assert!(rps(&after) > 5.0 * rps(&before));
}

#[test]
fn ephemeral_ports_low() {
    ephemeral_ports(50);
}

#[test]
fn ephemeral_ports_high() {
    ephemeral_ports(500);
}

fn ephemeral_ports(ports: u32) {
    let (before, after) = lab_at("ephemeral-ports", "2s", &[format!("ports={ports}")]);
    let s502 = |r: &Value| r["results"]["status_codes"]["502"].as_u64().unwrap_or(0);
    let total = before["results"]["responses"].as_u64().unwrap();
    assert!(
        s502(&before) * 2 > total,
        "most responses are 502: {} of {total}",
        s502(&before)
    );
    assert_eq!(s502(&after), 0);
    assert_eq!(after["results"]["non_2xx_3xx"], 0);
    // "connect() to 127.0.0.1:8081 failed (99: Cannot assign requested address)"
    assert!(logged(&before, "cannot-assign-address") > 0);
    assert_eq!(logged(&after, "cannot-assign-address"), 0);
}

#[test]
fn time_wait_low() {
    time_wait(4_000);
}

#[test]
fn time_wait_high() {
    time_wait(10_000);
}

fn time_wait(ports: u64) {
    let (before, after) = lab_at("time-wait", "2s", &[format!("ports={ports}")]);
    let tw = |r: &Value| r["evidence"]["window"]["time_wait_max"].as_u64().unwrap();
    assert!(tw(&before) > ports / 2, "TIME_WAIT {}", tw(&before));
    assert!(
        tw(&after) * 10 < tw(&before),
        "{} vs {}",
        tw(&after),
        tw(&before)
    );
    assert!(rps(&after) > rps(&before));
    // The profile shows connect()'s port search, and the finding cites its share.
    let top = top10(&before);
    assert!(
        top.iter()
            .any(|f| f.contains("inet_hash_connect") || f == "__inet_check_established"),
        "{top:?}"
    );
    let f = finding(&before, "time-wait-connect-cost").unwrap();
    let share = f["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"].as_str().unwrap().contains("port search"))
        .expect("the profile's share cited")["value"]
        .as_f64()
        .unwrap();
    assert!(share >= 10.0, "{share}");
}

#[test]
fn proxy_buffers_low() {
    proxy_buffers(4);
}

#[test]
fn proxy_buffers_high() {
    proxy_buffers(5);
}

fn proxy_buffers(kb: u32) {
    let (before, after) = lab_at("proxy-buffers", "2s", &[format!("buffer_kb={kb}")]);
    let b = worker(&before, "bytes_per_read");
    let a = worker(&after, "bytes_per_read");
    assert!(b > 0.0 && a > 2.0 * b, "bytes per read {b} → {a}");
    // The rate gains little at 5k (the fix's reads are fewer, the CPU is still the
    // worker's): beside a build it fell once (proxy_buffers_high, 2 s runs). On a quiet
    // host the fix must not cost rate.
    match outside_load(&before).or_else(|| outside_load(&after)) {
        Some(busy) => eprintln!(
            "proxy-buffers: {:.0} → {:.0} req/s beside the host's load ({busy})",
            rps(&before),
            rps(&after)
        ),
        None => assert!(
            rps(&after) > rps(&before),
            "{} → {}",
            rps(&before),
            rps(&after)
        ),
    }
}

#[test]
fn conn_per_request_low() {
    conn_per_request(50);
}

#[test]
fn conn_per_request_high() {
    conn_per_request(200);
}

fn conn_per_request(connections: u64) {
    let (before, after) = lab_at(
        "conn-per-request",
        "2s",
        &[format!("connections={connections}")],
    );
    for r in [&before, &after] {
        assert_eq!(r["results"]["requests_per_connection"], 1);
        // One connection per response, plus those whose request was still in flight at
        // the deadline (at most -c).
        let opened = r["results"]["connections_opened"].as_u64().unwrap();
        let responses = r["results"]["responses"].as_u64().unwrap();
        assert!(
            opened >= responses && opened <= responses + connections,
            "{opened} vs {responses}"
        );
        assert!(
            counter(r, "Tcp.PassiveOpens") >= r["results"]["connections_opened"].as_u64().unwrap()
        );
        let workers = r["evidence"]["window"]["processes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["role"] == "worker")
            .count();
        assert_eq!(workers, 2);
    }
}

#[test]
fn cpu_contention_low() {
    cpu_contention(5);
}

#[test]
fn cpu_contention_high() {
    cpu_contention(40);
}

fn cpu_contention(connections: u32) {
    let (before, after) = lab_at(
        "cpu-contention",
        "2s",
        &[format!("connections={connections}")],
    );
    // The busy loop is named as what the worker waited for, by its pid.
    let top = first(&before);
    let text = top["explanation"].as_str().unwrap();
    let hog = before["evidence"]["window"]["other_processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["comm"] == loadlens::lab::BUSY_LOOP)
        .unwrap_or_else(|| panic!("no busy loop: {}", before["evidence"]["window"]));
    assert!(
        text.contains(&format!("{} (pid {}", loadlens::lab::BUSY_LOOP, hog["pid"])),
        "{text}"
    );
    // It made the worker wait; on a quiet host the fix took that wait away. Beside
    // the host's own load the worker still waits, for the host (a nice-19 job still
    // costs it its wakeups under EEVDF: 685 ms/s after the fix beside two nice-19
    // rustc and a nice-19 loop), which the after-run names by pid (set aside above).
    let d = |r: &Value| worker(r, "run_delay_ms_per_s");
    assert!(d(&before) > 200.0, "run delay {} ms/s", d(&before));
    match outside_load(&after) {
        None => {
            assert!(d(&after) < 100.0, "run delay {} ms/s after", d(&after));
            assert!(pct(&before, 99.0) > pct(&after, 99.0));
        }
        Some(busy) => eprintln!(
            "cpu-contention: run delay {:.0} → {:.0} ms/s beside the host's load ({busy})",
            d(&before),
            d(&after)
        ),
    }
}

#[test]
fn event_loop_stall_low() {
    event_loop_stall(150, 600);
}

#[test]
fn event_loop_stall_high() {
    event_loop_stall(400, 1200);
}

fn event_loop_stall(stall_ms: u64, period_ms: u64) {
    let (before, after) = lab_at(
        "event-loop-stall",
        "3s",
        &[
            format!("stall_ms={stall_ms}"),
            format!("period_ms={period_ms}"),
        ],
    );
    // Events, not times: each stop shows as a run of 100 ms slices holding a response
    // slower than 125 ms, the stops a period apart, and nearly every one of the 20
    // connections waited through each stop.
    let stops = |r: &Value| -> Vec<u64> {
        let mut starts: Vec<u64> = Vec::new();
        let mut last = None;
        for s in r["results"]["slices"].as_array().unwrap() {
            let t = s["t_ms"].as_u64().unwrap();
            if s["max_us"].as_u64().unwrap() >= 125_000 {
                if last.is_none_or(|l| t > l + 100 + stall_ms / 2) {
                    starts.push(t);
                }
                last = Some(t);
            }
        }
        starts
    };
    let count = |r: &Value| {
        let slow = loadlens::lab::find("event-loop-stall").unwrap().key.read;
        slow(&loadlens::run::Run::from_json(&r.to_string()).unwrap()).unwrap()
    };
    let b = stops(&before);
    assert!(b.len() >= 2, "stops before: {b:?}");
    for w in b.windows(2) {
        let apart = w[1] - w[0];
        assert!(
            (period_ms - 300..=period_ms + 300).contains(&apart),
            "stops at {b:?} ms, {period_ms} ms apart"
        );
    }
    assert!(
        count(&before) >= 15.0 * b.len() as f64,
        "{} slow responses in {} stops",
        count(&before),
        b.len()
    );
    // After the fix nothing recurs (one hiccup of a busy host is not a period).
    assert!(stops(&after).len() <= 1, "stops after: {:?}", stops(&after));
}

#[test]
fn slow_link_low() {
    slow_link(50);
}

#[test]
fn slow_link_high() {
    slow_link(200);
}

fn slow_link(mbit: u32) {
    let (before, after) = lab_at("slow-link", "3s", &[format!("mbit={mbit}")]);
    let tx = |r: &Value| {
        r["evidence"]["window"]["ifaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == "veth0")
            .unwrap()["tx_bytes_per_s"]
            .as_f64()
            .unwrap()
            * 8.0
            / 1e6
    };
    assert!(
        tx(&before) > 0.8 * f64::from(mbit),
        "link at {} of {mbit} Mbit/s",
        tx(&before)
    );
    // Compressed, the rate is the worker's CPU's: ×6.8 at 200 Mbit/s beside four
    // compilers (the scenario's margin said it). On a quiet host ×10 at least.
    match outside_load(&before).or_else(|| outside_load(&after)) {
        Some(busy) if rps(&after) <= 10.0 * rps(&before) => eprintln!(
            "slow-link: {:.0} → {:.0} req/s beside the host's load ({busy})",
            rps(&before),
            rps(&after)
        ),
        _ => assert!(
            rps(&after) > 10.0 * rps(&before),
            "{} → {}",
            rps(&before),
            rps(&after)
        ),
    }
}

#[test]
fn client_bound_low() {
    client_bound(5);
}

#[test]
fn client_bound_high() {
    client_bound(10);
}

fn client_bound(quota_pct: u32) {
    let (before, after) = lab_at("client-bound", "2s", &[format!("quota_pct={quota_pct}")]);
    let cores = f64::from(quota_pct) / 100.0;
    // The quota ran out in most periods and held the client back; without it, nothing.
    let q = &before["client"]["quota"];
    assert!((q["cores"].as_f64().unwrap() - cores).abs() < 1e-9, "{q}");
    let throttled = q["throttled_periods"].as_u64().unwrap();
    let periods = q["periods"].as_u64().unwrap();
    assert!(throttled * 2 > periods, "{throttled} of {periods} periods");
    // (A machine whose own cgroup has a quota reports it after the fix too, unspent.)
    let aq = &after["client"]["quota"];
    assert!(
        aq.is_null()
            || aq["throttled_periods"].as_u64().unwrap() * 10 <= aq["periods"].as_u64().unwrap(),
        "{aq}"
    );
    // The client, not nginx, set the pace: the worker had most of its CPU to spare
    // before, and served much more once the client could drive it (×8.8 on a quiet
    // machine, ×1.87 beside four nice-19 builds and a nice-19 loop, ×1.40 at
    // quota_pct=10 beside five compilers, which then starved the unthrottled client:
    // the host's, said).
    assert!(
        worker(&before, "cpu_pct") < 50.0,
        "{}",
        worker(&before, "cpu_pct")
    );
    match outside_load(&before).or_else(|| outside_load(&after)) {
        Some(busy) if rps(&after) <= 1.5 * rps(&before) => eprintln!(
            "client-bound: {:.0} → {:.0} req/s beside the host's load ({busy})",
            rps(&before),
            rps(&after)
        ),
        _ => assert!(
            rps(&after) > 1.5 * rps(&before),
            "{} → {}",
            rps(&before),
            rps(&after)
        ),
    }
    let f = finding(&before, "client-saturated").unwrap();
    assert!(
        f["fix"]
            .as_str()
            .unwrap()
            .contains(&format!("{cores:.2} cores")),
        "{f}"
    );
}

/// Waits until lab run `pid` has its load going: a process (loadlens) in its client
/// namespace. An event, not a time; the bound only keeps a broken lab from hanging.
fn wait_for_load(pid: u32) {
    let t0 = std::time::Instant::now();
    loop {
        let client = lab_namespaces(pid).into_iter().find(|n| n.ends_with("-c"));
        if let Some(ns) = client {
            let out = Command::new("ip")
                .args(["netns", "pids", &ns])
                .output()
                .unwrap();
            if !String::from_utf8_lossy(&out.stdout).trim().is_empty() {
                return;
            }
        }
        assert!(
            t0.elapsed().as_secs() < 120,
            "lab run {pid} never started its load"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn stale_world_from_a_killed_run_is_removed() {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut child = common::loadlens()
        .args(["lab", "run", "healthy", "-q", "-d", "20s"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let killed = child.id();
    wait_for_load(killed);
    child.kill().unwrap(); // SIGKILL: no cleanup runs
    child.wait().unwrap();
    assert_eq!(
        lab_namespaces(killed).len(),
        2,
        "the killed run left its world"
    );
    let out = common::loadlens()
        .args(["lab", "run", "healthy", "-q", "-d", "500ms"])
        .output()
        .unwrap();
    common::assert_ok(&out);
    assert!(String::from_utf8_lossy(&out.stderr).contains("left by a killed lab run"));
    assert_eq!(lab_namespaces(killed), Vec::<String>::new());
    assert_eq!(lab_processes(killed), Vec::<String>::new());
}

#[test]
fn interrupt_cleans_up() {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t0 = std::time::Instant::now();
    let child = common::loadlens()
        .args(["lab", "run", "healthy", "-q", "-d", "120s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    wait_for_load(pid);
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    // Ended by Ctrl-C, not by its duration (120 s: far beyond any set-up time).
    assert!(t0.elapsed().as_secs() < 120, "Ctrl-C did not end the run");
    assert!(String::from_utf8_lossy(&out.stderr).contains("interrupted"));
    assert_eq!(lab_namespaces(pid), Vec::<String>::new());
    assert_eq!(lab_processes(pid), Vec::<String>::new());
}

#[test]
fn lab_needs_root_and_says_so() {
    // A copy the unprivileged user can reach, wherever the checkout lives (/root is 0700).
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("loadlens");
    std::fs::copy(env!("CARGO_BIN_EXE_loadlens"), &bin).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&bin)
        .args(["lab", "run", "healthy"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("loadlens lab needs root"));
    let out = common::loadlens()
        .args(["lab", "run", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no scenario `nope`"));
}

/// Lines of a class in the servers' error logs over the run.
fn logged(run: &Value, class: &str) -> u64 {
    run["evidence"]["logs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["classes"].as_array().unwrap())
        .filter(|c| c["class"] == class)
        .map(|c| c["count"].as_u64().unwrap())
        .sum()
}

fn worker_fds(run: &Value, field: &str) -> u64 {
    run["evidence"]["window"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["role"] == "worker" && p["tier"] == "front")
        .filter_map(|p| p[field].as_u64())
        .max()
        .unwrap_or(0)
}

#[test]
fn fd_limit_low() {
    fd_limit(32);
}

#[test]
fn fd_limit_high() {
    fd_limit(128);
}

fn fd_limit(nofile: u64) {
    let (before, after) = lab_at("fd-limit", "2s", &[format!("nofile={nofile}")]);
    // The worker held every fd its limit allowed, and the rest waited or failed.
    assert_eq!(worker_fds(&before, "fd_limit"), nofile);
    assert!(
        worker_fds(&before, "fds_max") >= nofile - 4,
        "{}",
        worker_fds(&before, "fds_max")
    );
    assert!(
        errors(&before) + before["results"]["non_2xx_3xx"].as_u64().unwrap() > 0,
        "connections beyond the limit fail"
    );
    assert_eq!(worker_fds(&after, "fd_limit"), 8192);
    // Fixed, no connection fails for want of a descriptor (nginx answers 500 when
    // open() gets EMFILE, resets what it cannot take) and every connection was held.
    held_or_timed_out("fd-limit", &after, (3 * nofile).max(200));
    // nginx said so in its error log, and stopped saying it once fixed.
    assert!(logged(&before, "too-many-open-files") > 0);
    assert_eq!(logged(&after, "too-many-open-files"), 0);
}

/// After a connection-limit fix (fd-limit, worker-connections): no request failed for
/// want of a descriptor or a connection slot — no 5xx, no reset, no refused connect —
/// and every one of the `conns` connections was held by the worker, or was still
/// waiting in its accept queue when its request timed out. Timeouts are time, not the
/// fault's events: the worker accepts one connection a loop, and the 3 × N connections
/// opening at once waited up to 1 s at the start (fresh-clone CI on a quiet host: 73
/// timeouts of 384 at nofile=128, 32 of 288 at worker_connections=96; no error logged):
/// said, never a failure.
fn held_or_timed_out(name: &str, after: &Value, conns: u64) {
    assert_eq!(after["results"]["non_2xx_3xx"], 0);
    let timeouts = after["results"]["errors"]["timeout"].as_u64().unwrap();
    assert_eq!(
        errors(after) - timeouts,
        0,
        "{name}: {}",
        after["results"]["errors"]
    );
    if timeouts > 0 {
        eprintln!("{name}: {timeouts} requests timed out after the fix, waiting to be accepted");
    }
    assert!(
        worker_fds(after, "fds_max") + timeouts > conns,
        "{name}: all {conns} connections held: {} fds, {timeouts} timeouts",
        worker_fds(after, "fds_max"),
    );
}

#[test]
fn worker_connections_low() {
    worker_connections(32);
}

#[test]
fn worker_connections_high() {
    worker_connections(96);
}

fn worker_connections(n: u64) {
    let (before, after) = lab_at(
        "worker-connections",
        "2s",
        &[format!("worker_connections={n}")],
    );
    assert_eq!(
        before["evidence"]["topology"]["config"]["directives"]["worker_connections"][0],
        n.to_string()
    );
    // nginx closes connections to reuse them ("worker_connections are not enough").
    assert!(errors(&before) > 0);
    assert!(worker_fds(&before, "fds_max") <= n + 16);
    held_or_timed_out("worker-connections", &after, (3 * n).max(200));
    assert!(logged(&before, "worker-connections-not-enough") > 0);
    assert_eq!(logged(&after, "worker-connections-not-enough"), 0);
}

#[test]
fn php_fpm_socket_low() {
    php_fpm_socket(2);
}

#[test]
fn php_fpm_socket_high() {
    php_fpm_socket(4);
}

fn php_fpm_socket(children: u32) {
    let (before, after) = lab_at(
        "php-fpm-socket",
        "3s",
        &[format!("max_children={children}")],
    );
    let s504 = |r: &Value| r["results"]["status_codes"]["504"].as_u64().unwrap_or(0);
    assert!(s504(&before) > 0, "nginx times out waiting for php-fpm");
    // Only nginx was named: php-fpm was found through nginx's fastcgi_pass, on its
    // unix socket, and watched as the upstream.
    let procs = before["evidence"]["topology"]["processes"]
        .as_array()
        .unwrap();
    assert!(
        procs
            .iter()
            .any(|p| p["tier"] == "upstream" && p["comm"].as_str().unwrap().starts_with("php-fpm")),
        "{procs:?}"
    );
    let top = first(&before);
    assert!(
        top["title"].as_str().unwrap().contains("php8.2-fpm.sock"),
        "{top}"
    );
    // php-fpm said it ran out of children, nginx that it timed out; the finding cites it.
    assert!(logged(&before, "max-children-reached") > 0);
    assert!(logged(&before, "upstream-timed-out") > 0);
    assert!(
        top["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["name"].as_str().unwrap().contains("max-children-reached")),
        "{top}"
    );
    assert!(
        top["fix"]
            .as_str()
            .unwrap()
            .contains(&format!("(now {children})")),
        "{top}"
    );
    assert_eq!(s504(&after), 0);
    assert_eq!(logged(&after, "max-children-reached"), 0);
    assert!(rps(&after) > 4.0 * rps(&before));
}

#[test]
fn gzip_cpu_low() {
    gzip_cpu(6);
}

#[test]
fn gzip_cpu_high() {
    gzip_cpu(9);
}

fn gzip_cpu(level: u32) {
    let (before, after) = lab_at("gzip-cpu", "2s", &[format!("level={level}")]);
    let fix = |r: &Value| first(r)["fix"].as_str().unwrap().to_string();
    // The honest answer is the worker's CPU; the fix names what spends it.
    assert!(
        fix(&before).contains(&format!("gzip_comp_level {level}")),
        "{}",
        fix(&before)
    );
    assert!(!fix(&after).contains("gzip_comp_level"), "{}", fix(&after));
    assert!(wants_cpu(&before) > 80.0, "{}%", wants_cpu(&before));
    // The profile puts deflate (libz) on top, and compression-cpu says so.
    let top = top10(&before);
    assert!(
        top[0].contains("libz") || top[0].starts_with("deflate"),
        "{top:?}"
    );
    // Beside the host's load the profile may hold too few of the worker's samples for
    // the profile's rules (43 at level 6 beside two rustc, libz 95% of them): said.
    let busy = outside_load(&before).or_else(|| outside_load(&after));
    match (&busy, finding(&before, "compression-cpu")) {
        (Some(busy), None) => {
            eprintln!("gzip-cpu: no compression-cpu beside the host's load ({busy})")
        }
        (_, f) => assert!(f.is_some()),
    }
    // At level 1 compression may still be the cost, but the fix no longer says lower.
    if let Some(f) = finding(&after, "compression-cpu") {
        assert!(f["fix"].as_str().unwrap().contains("gzip_static"), "{f}");
        assert!(!f["fix"].as_str().unwrap().contains("lower"), "{f}");
    }
    // Level 1 costs a fraction of level 6's or 9's CPU per response (×9.6 at level 6
    // measured; ×2.8 beside two rustc, which take the worker's CPU in both runs: the
    // scenario's margin, said by the harness, not failed there).
    assert!(
        busy.is_some() || rps(&after) > 3.0 * rps(&before),
        "{} → {}",
        rps(&before),
        rps(&after)
    );
}

/// The kind of the front's processes and the fix of the first bottleneck.
fn front_kind_and_fix(run: &Value) -> (String, String) {
    let kind = run["evidence"]["topology"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["tier"] == "front")
        .map(|p| p["kind"].as_str().unwrap().to_string())
        .unwrap_or_default();
    (kind, first(run)["fix"].as_str().unwrap().to_string())
}

#[test]
fn apache_workers_low() {
    apache_workers(2);
}

#[test]
fn apache_workers_high() {
    apache_workers(16);
}

fn apache_workers(threads: u32) {
    let (before, after) = lab_at("apache-workers", "3s", &[format!("threads={threads}")]);
    let (kind, fix) = front_kind_and_fix(&before);
    assert_eq!(kind, "apache");
    // Apache's own directive, its value read from Apache's own configuration.
    assert!(
        fix.contains(&format!("`MaxRequestWorkers {threads}`")),
        "{fix}"
    );
    assert!(!fix.contains("worker_connections"), "{fix}");
    assert!(logged(&before, "max-request-workers-reached") > 0);
    assert_eq!(logged(&after, "max-request-workers-reached"), 0);
    // Connections waited to be accepted before, not after.
    let queue = |r: &Value| {
        r["evidence"]["window"]["listen_queues"]
            .as_array()
            .unwrap()
            .iter()
            .map(|q| q["max_queue"].as_u64().unwrap())
            .max()
            .unwrap_or(0)
    };
    assert!(queue(&before) >= 50, "accept queue {}", queue(&before));
    // A worker of many threads: its busiest thread is measured too (/proc/PID/task).
    let busiest_thread = after["evidence"]["window"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["role"] == "worker")
        .filter_map(|p| p["busiest_thread_pct"].as_f64())
        .fold(0.0, f64::max);
    assert!(busiest_thread > 1.0, "busiest thread {busiest_thread}%");
    assert!(queue(&after) < 10, "accept queue {}", queue(&after));
    assert!(rps(&after) > rps(&before));
}

#[test]
fn haproxy_maxconn_low() {
    haproxy_maxconn(10);
}

#[test]
fn haproxy_maxconn_high() {
    haproxy_maxconn(40);
}

fn haproxy_maxconn(maxconn: u32) {
    let (before, after) = lab_at("haproxy-maxconn", "3s", &[format!("maxconn={maxconn}")]);
    let (kind, fix) = front_kind_and_fix(&before);
    assert_eq!(kind, "haproxy");
    assert!(fix.contains(&format!("maxconn global: {maxconn}")), "{fix}");
    assert!(!fix.contains("nginx"), "{fix}");
    assert!(counter(&before, "TcpExt.ListenOverflows") >= 10);
    assert_eq!(counter(&after, "TcpExt.ListenOverflows"), 0);
    // The nginx behind HAProxy was found from HAProxy's `server` line and watched as
    // its upstream.
    let upstream_nginx = before["evidence"]["topology"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["tier"] == "upstream" && p["kind"] == "nginx");
    assert!(upstream_nginx, "{}", before["evidence"]["topology"]);
}

#[test]
fn cpu_quota_low() {
    cpu_quota(20);
}

#[test]
fn cpu_quota_high() {
    cpu_quota(30);
}

fn cpu_quota(quota_pct: u32) {
    let (before, after) = lab_at("cpu-quota", "3s", &[format!("quota_pct={quota_pct}")]);
    let cores = f64::from(quota_pct) / 100.0;
    let quota = |r: &Value| r["evidence"]["window"]["cgroup_quotas"][0].clone();
    let q = quota(&before);
    assert!((q["cores"].as_f64().unwrap() - cores).abs() < 1e-9, "{q}");
    // Both workers and the master are in it.
    assert_eq!(q["pids"].as_array().unwrap().len(), 3, "{q}");
    let (throttled, periods) = (
        q["throttled_periods"].as_u64().unwrap(),
        q["periods"].as_u64().unwrap(),
    );
    assert!(throttled * 2 > periods, "{throttled} of {periods} periods");
    let top = first(&before);
    assert!(
        top["fix"]
            .as_str()
            .unwrap()
            .contains(&format!("now {cores:.2} cores")),
        "{top}"
    );
    assert!(
        top["fix"].as_str().unwrap().contains("worker_processes 1"),
        "{top}"
    );
    // Not "raise worker_processes": the quota, not the workers, is the limit.
    assert!(finding(&before, "server-cpu-saturated").is_none_or(|f| f["kind"] != "bottleneck"));
    assert_eq!(quota(&after)["throttled_periods"], 0, "{}", quota(&after));
    // The quota held the rate down (×2.9 without it on a quiet machine, ×1.83 beside a
    // nice-19 loop, which takes its turns on both CPUs once the quota is gone; ×1.07 at
    // quota_pct=30 beside chromium and two rustc, which left the workers no more than
    // the quota had: the host's, said).
    match outside_load(&before).or_else(|| outside_load(&after)) {
        Some(busy) if rps(&after) <= 1.3 * rps(&before) => eprintln!(
            "cpu-quota: {:.0} → {:.0} req/s beside the host's load ({busy})",
            rps(&before),
            rps(&after)
        ),
        _ => assert!(
            rps(&after) > 1.3 * rps(&before),
            "{} → {}",
            rps(&before),
            rps(&after)
        ),
    }
}

#[test]
fn few_connections_low() {
    few_connections(2, 30);
}

#[test]
fn few_connections_high() {
    few_connections(4, 100);
}

fn few_connections(connections: u32, script_ms: u32) {
    let (before, after) = lab_at(
        "few-connections",
        "3s",
        &[
            format!("connections={connections}"),
            format!("script_ms={script_ms}"),
        ],
    );
    // Little's law, measured: the connections in flight ÷ the mean latency is the rate.
    let mean_s = before["results"]["latency"]["mean_us"].as_f64().unwrap() / 1e6;
    let littles = f64::from(connections) / mean_s;
    assert!(
        (rps(&before) / littles - 1.0).abs() < 0.25,
        "{} vs {littles}",
        rps(&before)
    );
    assert!(
        mean_s >= f64::from(script_ms) / 1e3,
        "the script sleeps {script_ms} ms: {mean_s}"
    );
    let f = finding(&before, "concurrency-bound").unwrap();
    assert!(
        f["fix"]
            .as_str()
            .unwrap()
            .contains(&format!("-c, now {connections}")),
        "{f}"
    );
    assert_eq!(errors(&before), 0);
    assert_eq!(errors(&after), 0);
}

/// The worker blocked writing its access log into a FIFO whose reader lags: the off-CPU
/// watch names the call, the file and the kernel function, and the fix (a buffered log
/// in a file) removes the wait.
#[test]
fn blocking_log_low() {
    blocking_log(250);
}

#[test]
fn blocking_log_high() {
    blocking_log(500);
}

fn blocking_log(reader_ms: u32) {
    let (before, after) = lab_at("blocking-log", "3s", &[format!("reader_ms={reader_ms}")]);
    let f = finding(&before, "worker-blocked").unwrap();
    let title = f["title"].as_str().unwrap();
    assert!(
        title.contains("write() on ") && title.contains("access.fifo"),
        "{title}"
    );
    assert!(title.contains("pipe_write"), "{title}");
    assert!(f["fix"].as_str().unwrap().contains("buffer=64k"), "{f}");
    // The waits, one by one, on the watch's clock: the reader's period shows as waits
    // of a large part of it, one a period (less the first and the last).
    let stalls = before["evidence"]["offcpu"]["stalls"].as_array().unwrap();
    let long = stalls
        .iter()
        .filter(|s| s["class"] == "pipe" && s["ms"].as_f64().unwrap() >= 100.0)
        .count();
    assert!(long as u32 >= 3_000 / reader_ms - 2, "{stalls:?}");
    // The 100 ms slices line up with the waits: the one worker answers nobody while it
    // is blocked, so a slice with no response lies inside a wait (50 ms allowed at each
    // end for the watch's and the load's clocks, which start a few ms apart), and the
    // waits of ~200 ms each empty a slice.
    let slices = before["results"]["slices"].as_array().unwrap();
    let empty: Vec<f64> = slices
        .iter()
        .filter(|s| s["responses"] == 0)
        .map(|s| s["t_ms"].as_f64().unwrap() / 1e3)
        .filter(|t| t + 0.1 < before["results"]["duration_s"].as_f64().unwrap())
        .collect();
    assert!(empty.len() >= 3, "{empty:?} empty: {slices:?}");
    for t in &empty {
        let covered = stalls.iter().any(|s| {
            let at = s["t_s"].as_f64().unwrap();
            at - 0.05 <= *t && t + 0.1 <= at + s["ms"].as_f64().unwrap() / 1e3 + 0.05
        });
        // Beside the host's load the worker also waits for a CPU (runnable stints of
        // 10-20 ms before a pipe wait, at reader_ms=500): a slice it empties that way is
        // the host's, said, not failed. On a quiet host every empty slice is a wait's.
        match outside_load(&before) {
            Some(busy) if !covered => {
                eprintln!("blocking-log: the slice at {t} s is empty outside a wait, beside the host's load ({busy})")
            }
            _ => assert!(
                covered,
                "the slice at {t} s is empty outside any wait: {stalls:?}"
            ),
        }
    }
    // The slowest requests waited through most of a read's period (the held requests
    // are ~1.5% of all whatever the period: the reader passes ~680 lines a read, so p99
    // sits at their edge — 52.6 ms at 500 ms).
    let worst = slices.iter().map(|s| s["max_us"].as_u64().unwrap()).max();
    assert!(worst >= Some(600 * u64::from(reader_ms)), "{worst:?}");
    let waits = after["evidence"]["offcpu"]["waits"].as_array().unwrap();
    assert!(
        waits.iter().all(|w| w["class"] != "pipe"),
        "after the fix: {waits:?}"
    );
    assert_eq!(errors(&before), 0);
    assert_eq!(errors(&after), 0);
}

/// The JDK's HttpServer writes a response's head and body apart, without TCP_NODELAY:
/// the phases show the body ~40 ms after the head, and the fix is the JDK's own switch.
#[test]
fn nagle_low() {
    nagle(0);
}

#[test]
fn nagle_high() {
    nagle(80);
}

fn nagle(handler_ms: u32) {
    if loadlens::lab::world::which("java").is_none() {
        common::skip_or_fail("java not found (Debian: default-jre-headless)");
        return;
    }
    let (before, after) = lab_at("nagle", "3s", &[format!("handler_ms={handler_ms}")]);
    let f = finding(&before, "nagle-delayed-ack").unwrap();
    assert!(
        f["title"].as_str().unwrap().contains("after their heads"),
        "{f}"
    );
    assert!(
        f["fix"]
            .as_str()
            .unwrap()
            .contains("-Dsun.net.httpserver.nodelay=true"),
        "{f}"
    );
    // The body phase itself sits at the delayed ACK: the head arrives at once.
    let body_p50 = before["results"]["phases"]["body"]["percentiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["p"] == 50.0)
        .unwrap()["us"]
        .as_u64()
        .unwrap();
    assert!(
        (30_000..60_000).contains(&body_p50),
        "body p50 {body_p50}us"
    );
    assert!(finding(&after, "nagle-delayed-ack").is_none());
    assert_eq!(errors(&before), 0);
    assert_eq!(errors(&after), 0);
}
