//! CPU and scheduling: saturated or unbalanced workers, run-queue wait, the cost of new
//! connections, softirq on one CPU.

use super::{already_niced, fact, finding, other_work, ramp, Ctx, FindingId};
use crate::diagnose::kinds::{self, Knob};
use crate::run::{Finding, Kind};

/// A worker that waited this long for a CPU (ms a second, a tenth of its time) shared
/// its CPU with work that wanted it.
pub(super) const RUN_DELAY_MS_PER_S: f64 = 100.0;

/// Server workers waiting to run: another process on their CPU (or the machine
/// over-committed).
pub(super) fn run_queue_delay(c: &Ctx) -> Option<Finding> {
    let w = c.front_workers().into_iter().max_by(|a, b| {
        a.run_delay_ms_per_s
            .unwrap_or(0.0)
            .total_cmp(&b.run_delay_ms_per_s.unwrap_or(0.0))
    })?;
    let delay = w.run_delay_ms_per_s?;
    // 100 ms per second: the worker waited a tenth of its time for a CPU.
    if delay < RUN_DELAY_MS_PER_S {
        return None;
    }
    // A load generator on the worker's CPU is the sharing the warning names.
    let others = other_work(c, Some(w.last_cpu));
    let kind = if others.is_empty() {
        Kind::Warning
    } else {
        Kind::Bottleneck
    };
    let mut f = finding(
        FindingId::RunQueueDelay,
        kind,
        ramp(delay, RUN_DELAY_MS_PER_S, 500.0),
        format!("{} waits for CPU {}", w.label(), w.last_cpu),
    );
    f.evidence = vec![
        fact("worker run-queue delay", delay, "ms/s"),
        fact("worker CPU", w.cpu_pct, "%"),
        fact(
            "involuntary context switches",
            w.nonvoluntary_ctxt_switches_per_s,
            "/s",
        ),
    ];
    let shared = c.shared_cpus();
    let sharing = shared.as_ref().is_none_or(|s| !s.is_empty());
    f.explanation = if others.is_empty() {
        format!(
            "The worker was runnable but waiting for a CPU a large part of the time: {}, so every request waits in a run queue too.",
            match &shared {
                _ if crowding(c).is_some() => format!(
                    "the server's {} workers take turns on its {} CPU{}{}",
                    c.front_workers().len(),
                    c.server_cpus(),
                    if c.server_cpus() == 1 { "" } else { "s" },
                    if sharing { ", with the load generator beside them" } else { "" }
                ),
                Some(s) if !s.is_empty() => format!(
                    "the load generator and the server share {} of the server's {} CPUs (with the softirq work of their traffic)",
                    s.len(),
                    c.server_cpus()
                ),
                Some(_) => format!(
                    "the server's {} CPUs have more runnable threads than they can run (the load generator runs on other CPUs)",
                    c.server_cpus()
                ),
                None => "the CPUs it may use are over-committed".into(),
            }
        )
    } else {
        format!(
            "The worker was runnable but waiting for its CPU while another process ran there: {}. Every request it handles waits too, which shows in p99 and max latency.",
            others.join(", ")
        )
    };
    let pin = c
        .knob(Knob::Affinity)
        .unwrap_or_else(|| "`taskset` on the server".into());
    f.fix = if let Some(fix) = crowding(c).filter(|_| others.is_empty()) {
        fix
    } else if others.is_empty() && sharing {
        format!("give the server its own CPUs ({pin}, `taskset` the load generator elsewhere, or load from another machine)")
    } else if others.is_empty() {
        format!("fewer runnable threads on the server's CPUs (its workers and what else runs there, {pin}), or more CPUs for it")
    } else if let Some(niced) = already_niced(c, w.last_cpu) {
        // nice alone does not keep a busy process out of the worker's way: under
        // EEVDF (Linux 6.6+) a waking worker does not always preempt it at once, and
        // it fills every gap the worker leaves. Only SCHED_IDLE yields at once.
        format!(
            "{niced} already runs at a low priority (nice), and still took turns on CPU {}: run it under SCHED_IDLE (`chrt --idle -p 0 PID`), move it off the CPU (taskset), or pin the server's workers elsewhere ({pin})",
            w.last_cpu
        )
    } else {
        format!(
            "move the other work off CPU {} (taskset), lower its priority (`nice`, `chrt --idle`), or pin the server's workers elsewhere ({pin}){}",
            w.last_cpu,
            crowding(c)
                .map(|fix| format!("; the workers also take turns among themselves: {fix}"))
                .unwrap_or_default()
        )
    };
    Some(f)
}

/// The server workers at ~100% of a core: the expected limit of a healthy server. A
/// worker that runs or waits to run (run-queue delay) nearly all the time wants a full
/// core too: it counts as saturated, with the wait named.
pub(super) fn server_cpu_saturated(c: &Ctx) -> Option<Finding> {
    let workers = c.front_workers();
    let cpus = c.server_cpus();
    // A process of many threads whose busiest thread is at a core's limit is held by
    // that thread (an event loop: Node's main thread), however idle the others are.
    let one_thread = |p: &crate::run::ProcRates| c.one_thread_bound(p);
    let share = |p: &crate::run::ProcRates| c.worker_load_pct(p);
    let w = workers
        .iter()
        .max_by(|a, b| share(a).total_cmp(&share(b)))
        .copied()?;
    let busiest = share(w);
    if busiest < 90.0 {
        return None;
    }
    let running = w.cpu_pct;
    let n = workers.len() as u32;
    let usable: f64 = workers
        .iter()
        .map(|p| {
            if one_thread(p).is_some() {
                1.0
            } else {
                c.worker_cores(p)
            }
        })
        .sum();
    let comm = w.comm.clone();
    let single = one_thread(w).is_some();
    let threaded = !single && c.worker_cores(w) > 1.0;
    // More single-threaded workers than the CPUs their affinity allows, on a machine
    // with CPUs closed to them: the workers take turns instead of serving side by side.
    let host_cpus = c.ev.map_or(0, |e| e.host.cpus);
    let crowded = !single && !threaded && crowding(c).is_some();
    let mut f = finding(
        FindingId::ServerCpuSaturated,
        Kind::Bottleneck,
        ramp(busiest, 90.0, 99.0),
        if crowded {
            format!(
                "{comm}'s {n} workers take turns on {cpus} CPU{} of the machine's {host_cpus} (their CPU affinity)",
                if cpus == 1 { "" } else { "s" }
            )
        } else if single {
            format!(
                "{}: its busiest thread at {busiest:.0}% of a core (one thread sets the pace)",
                w.label()
            )
        } else if threaded {
            format!(
                "{comm} at {busiest:.0}% of the {:.0} cores its threads may use (running or waiting to run)",
                c.worker_cores(w)
            )
        } else {
            format!("{comm} workers at {busiest:.0}% of a core (running or waiting to run)")
        },
    );
    f.evidence = vec![
        fact("busiest worker CPU", running, "%"),
        fact(
            "busiest worker CPU demand (running + run-queue wait)",
            w.cpu_demand_pct(),
            "%",
        ),
        fact("workers", n as f64, "processes"),
        fact("CPUs the server may use", cpus as f64, "CPUs"),
    ];
    if single || threaded {
        f.evidence
            .push(fact("busiest worker threads", w.threads as f64, "threads"));
    }
    if let Some(t) = w.busiest_thread_pct {
        f.evidence.push(fact("its busiest thread's CPU", t, "%"));
    }
    let sys = workers.iter().map(|p| p.system_pct).fold(0.0, f64::max);
    f.evidence.push(fact("busiest worker system CPU", sys, "%"));
    let short = usable < cpus as f64;
    f.explanation = format!(
        "{}{}",
        if crowded {
            format!(
                "Each {comm} worker is one event loop that wants a core, but the workers may run only on CPU {} ({n} workers, {cpus} CPU{}): they wait for each other in the run queue while the machine's other CPUs serve none of them.",
                list_cpus(c),
                if cpus == 1 { "" } else { "s" }
            )
        } else if single {
            format!("One thread of {comm} did nearly all its work and ran nearly all the time: an event loop (a single-threaded server, Node's main thread) at a core's limit, which more cores do not help.")
        } else if threaded {
            format!("{comm}'s worker threads together used nearly all the cores they may run on; it cannot serve faster.")
        } else {
            format!("Each {comm} worker is one event loop on one core; at ~100% it cannot serve faster.")
        },
        if short {
            format!(" Its workers can use {usable:.0} of the {cpus} CPUs it may run on.")
        } else {
            String::new()
        }
    );
    f.fix = if let Some(fix) = crowding(c).filter(|_| crowded) {
        fix
    } else if short {
        let now = match kinds::setting(c.front_kind(), Knob::Workers).map(|d| c.setting(d)) {
            Some(Some(_)) => String::new(),
            _ => format!(" (now {n} worker{})", if n == 1 { "" } else { "s" }),
        };
        let knob = c
            .knob(Knob::Workers)
            .unwrap_or_else(|| "more worker processes or threads".into());
        format!(
            "{knob}{now} so every CPU serves; then profile where the CPU goes (`perf top -p PID`)"
        )
    } else {
        "the CPU is the limit: profile where it goes (`perf top -p PID`): TLS, gzip, logging, syscalls; or add machines".into()
    };
    // With a profile, say where the CPU went instead of asking for one.
    if let Some((p, pids)) = super::profile::profiled(c) {
        let top = p.top_of(p.busiest(&pids).unwrap_or(pids[0]), 3);
        let names: Vec<String> = top
            .functions
            .iter()
            .map(|t| {
                format!(
                    "{:.0}% {}{}",
                    t.self_pct,
                    if t.kernel { "kernel " } else { "" },
                    t.name
                )
            })
            .collect();
        f.evidence.push(fact(
            "profile: busiest worker in the kernel",
            top.kernel_pct,
            "%",
        ));
        f.fix = f.fix.replace(
            "then profile where the CPU goes (`perf top -p PID`)",
            &format!("the profile's top functions: {}", names.join(", ")),
        );
        f.fix = f.fix.replace(
            "profile where it goes (`perf top -p PID`): TLS, gzip, logging, syscalls",
            &format!("the profile's top functions: {}", names.join(", ")),
        );
    }
    if let Some(level) = gzip_level(c).filter(|l| *l >= 5) {
        // Responses were compressed on the fly at a costly level: deflate's cost grows
        // fast with the level while the size barely shrinks past 4.
        f.fix = format!(
            "gzip compresses every response at `gzip_comp_level {level}`: lower it to 1–4 (nearly the same size for far less CPU) or serve precompressed files (`gzip_static on;`); {}",
            f.fix
        );
    }
    Some(f)
}

/// More single-threaded workers than the CPUs their affinity allows, on a machine with
/// CPUs closed to them: the workers take turns instead of serving side by side. The
/// fix, in the server's terms.
fn crowding(c: &Ctx) -> Option<String> {
    let host_cpus = c.ev?.host.cpus;
    let cpus = c.server_cpus();
    let workers = c.front_workers();
    let single = workers.iter().filter(|p| p.threads <= 1).count() as u32;
    if single <= cpus || cpus >= host_cpus {
        return None;
    }
    let mask = "the CPU mask the server was started with (`taskset`, systemd `CPUAffinity=`, a cgroup cpuset)";
    Some(match c.nginx("worker_cpu_affinity") {
        Some(Some(v)) => format!(
            "`worker_cpu_affinity auto;` (now `worker_cpu_affinity {v}`), or one mask per worker, each on its own CPU, so every worker has a core"
        ),
        _ => format!("lift {mask} so every worker has a CPU of its own"),
    })
}

/// The CPUs the server may use, as "0" or "0,2".
fn list_cpus(c: &Ctx) -> String {
    let cpus = c.ev.map(|e| e.host.server_cpus.clone()).unwrap_or_default();
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// nginx's `gzip_comp_level` when `gzip on` and the responses were compressed (the
/// client asked for it).
fn gzip_level(c: &Ctx) -> Option<u32> {
    let on = c.nginx("gzip")??.split(" | ").any(|v| v == "on");
    let asked = c
        .run
        .spec
        .headers
        .iter()
        .any(|h| h.to_ascii_lowercase().starts_with("accept-encoding:") && h.contains("gzip"));
    if !on || !asked {
        return None;
    }
    // nginx's default level is 1.
    Some(match c.nginx("gzip_comp_level")? {
        Some(v) => v.split(" | ").filter_map(|x| x.parse().ok()).max()?,
        None => 1,
    })
}

/// Workers very unevenly loaded (one shared accept queue without reuseport).
pub(super) fn worker_imbalance(c: &Ctx) -> Option<Finding> {
    let w = c.front_workers();
    if w.len() < 2 {
        return None;
    }
    let max = w.iter().map(|p| p.cpu_pct).fold(0.0, f64::max);
    let min = w.iter().map(|p| p.cpu_pct).fold(f64::MAX, f64::min);
    if max < 50.0 || max < 2.0 * min.max(1.0) {
        return None;
    }
    let mut f = finding(
        FindingId::WorkerImbalance,
        Kind::Warning,
        ramp(max / min.max(1.0), 2.0, 10.0),
        format!(
            "{} workers unevenly loaded ({max:.0}% vs {min:.0}% CPU)",
            w[0].comm
        ),
    );
    f.evidence = vec![
        fact("busiest worker CPU", max, "%"),
        fact("idlest worker CPU", min, "%"),
        fact("workers", w.len() as f64, "processes"),
    ];
    f.explanation = "All workers accept from one shared listen socket; whichever wakes first takes the connections, so a few workers do most of the work while others idle.".into();
    f.fix = match c.knob(Knob::Reuseport) {
        Some(k) => format!("{k} gives each worker its own accept queue, balanced by the kernel"),
        None => "one listen socket per worker (SO_REUSEPORT), balanced by the kernel".into(),
    };
    Some(f)
}

/// Few requests per connection: connection set-up dominates. Counted on the client's
/// side (responses per connection loadlens opened): the server's own PassiveOpens also
/// count an upstream's accepts when both share a namespace.
pub(super) fn new_connection_cost(c: &Ctx) -> Option<Finding> {
    let opens = c.run.results.connections_opened;
    let responses = c.responses().max(1);
    let per_conn = responses as f64 / opens.max(1) as f64;
    // ≤ 4 requests per connection (the study's browser-like range starts at 1, 4, 14).
    if opens == 0 || per_conn > 4.0 {
        return None;
    }
    let e = c.ev?;
    if c.run.spec.connreqs.is_none() {
        // Keep-alive: few requests per connection only matter when connections were
        // replaced (else the run was short, or its responses slow, for its -c).
        if opens <= 2 * c.run.spec.connections as u64 {
            return None;
        }
        // Replaced cleanly, not after errors (whose reconnections are the errors'
        // consequence): the server closed them.
        let r = &c.run.results;
        let failures = r.errors.total() + r.non_2xx_3xx;
        if (failures as f64) < 0.05 * responses as f64 {
            return server_closes_connections(c, opens, per_conn);
        }
    }
    let workers = c.front_workers().len();
    let listeners = e.topology.listeners.len();
    let reuseport = listeners > 1;
    let kind = if workers > 1 && !reuseport {
        Kind::Bottleneck
    } else {
        Kind::Info
    };
    let mut f = finding(
        FindingId::NewConnectionCost,
        kind,
        ramp(4.0 / per_conn, 1.0, 4.0),
        format!("{per_conn:.1} requests per connection: connection set-up dominates"),
    );
    f.evidence = vec![
        fact(
            "connections opened by loadlens",
            opens as f64,
            "connections",
        ),
        fact("requests per connection", per_conn, "requests"),
        fact("workers", workers as f64, "processes"),
        fact("listen sockets on the port", listeners as f64, "sockets"),
    ];
    f.explanation = "Each new connection costs a handshake, an accept, socket set-up and teardown — more than serving a small response. With several workers on one shared listen socket they also contend for its accept queue.".into();
    f.fix = if reuseport {
        "keep connections alive longer (client keep-alive, `keepalive_requests`, `keepalive_timeout`); reuseport is already on".into()
    } else {
        format!(
            "{} (one accept queue per worker; the DragonFlyBSD study measured up to 3× with 1 request per connection) and keep-alive on the clients",
            c.knob(Knob::Reuseport)
                .unwrap_or_else(|| "one listen socket per worker (SO_REUSEPORT)".into())
        )
    };
    Some(f)
}

/// The evidence saying the server, not the load, ended the connections after a few
/// requests (the load kept them alive).
pub(super) const SERVER_CLOSED: &str = "the server closed kept-alive connections";

/// The client kept its connections alive, yet the server closed them after a few
/// requests each: the server's keep-alive policy made every request pay for a
/// connection (nginx `keepalive_timeout 0`, `keepalive_requests 1`; Apache `KeepAlive
/// Off`).
fn server_closes_connections(c: &Ctx, opens: u64, per_conn: f64) -> Option<Finding> {
    let mut f = finding(
        FindingId::NewConnectionCost,
        Kind::Bottleneck,
        ramp(4.0 / per_conn, 1.0, 4.0),
        format!("the server closed each connection after {per_conn:.1} requests although the client kept it alive: connection set-up dominates"),
    );
    f.evidence = vec![
        fact(
            "connections opened by loadlens",
            opens as f64,
            "connections",
        ),
        fact("requests per connection", per_conn, "requests"),
        fact(SERVER_CLOSED, 1.0, "yes"),
    ];
    f.explanation = "loadlens kept every connection open for the next request (keep-alive), but the server ended it after a few responses, so each request paid for a handshake, an accept, socket set-up and teardown — more than serving a small response — and the server's side keeps a TIME_WAIT entry for each.".into();
    // nginx's other keep-alive limit, when it is set (its default is 1000).
    let also = match c.nginx("keepalive_requests") {
        Some(Some(_)) => c.now("keepalive_requests"),
        _ => String::new(),
    };
    f.fix = format!(
        "let the server keep connections open: {}{also}",
        c.knob(Knob::KeepAlive)
            .unwrap_or_else(|| "its keep-alive timeout and requests-per-connection limit (and no `Connection: close` in its responses)".into())
    );
    Some(f)
}

/// One CPU's softirq time saturating while others are idle (one RX queue, no RPS).
/// Only where the packets crossed a NIC: on loopback and veth the softirq work runs in
/// the context of the process that sends (it is that process's own cost, on its own
/// CPU), there are no interrupts to spread and no queues or RPS that would move it.
pub(super) fn softirq_concentrated(c: &Ctx) -> Option<Finding> {
    let e = c.ev?;
    let pkts = |i: &crate::run::IfaceRate| i.rx_packets_per_s + i.tx_packets_per_s;
    let total: f64 = e.window.ifaces.iter().map(pkts).sum();
    let nic: f64 = e
        .window
        .ifaces
        .iter()
        .filter(|i| e.host.physical_ifaces.contains(&i.name))
        .map(pkts)
        .sum();
    if total <= 0.0 || nic < 0.5 * total {
        return None;
    }
    let cpus = &e.window.cpus;
    let hot = cpus.iter().max_by(|a, b| a.softirq.total_cmp(&b.softirq))?;
    let idle_elsewhere = cpus
        .iter()
        .filter(|x| x.cpu != hot.cpu)
        .any(|x| x.idle >= 30.0 && x.softirq <= 10.0);
    if hot.softirq < 40.0 || !idle_elsewhere {
        return None;
    }
    let mut f = finding(
        FindingId::SoftirqConcentrated,
        Kind::Bottleneck,
        ramp(hot.softirq, 40.0, 80.0),
        format!("network softirq concentrated on CPU {}", hot.cpu),
    );
    f.evidence = vec![
        fact("softirq share of the hot CPU", hot.softirq, "%"),
        fact("hot CPU", hot.cpu as f64, "CPU"),
        fact("packets through a NIC", nic, "packets/s"),
    ];
    f.explanation = "Packet processing (NET_RX softirq) runs on the CPU that takes the NIC's interrupt; with one queue or all interrupts on one CPU, that CPU saturates while the others idle.".into();
    f.fix = "spread the work: more NIC queues (`ethtool -L`), IRQ affinity, or RPS (`/sys/class/net/IF/queues/rx-*/rps_cpus`)".into();
    Some(f)
}

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{fires, fixture};
    use crate::run::Run;

    #[test]
    fn near_miss_run_queue_delay() {
        let mut run = fixture("cpu-contention-before");
        for p in run.evidence.as_mut().unwrap().window.processes.iter_mut() {
            p.run_delay_ms_per_s = Some(90.0);
        }
        assert!(!fires(&run, "run-queue-delay"));
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
                .filter(|p| p.role == crate::run::Role::Worker)
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
        // Over veth (the lab) it never fires: no NIC, no interrupts to spread.
        let cpus = &mut run.evidence.as_mut().unwrap().window.cpus;
        cpus[0].softirq = 65.0;
        cpus[0].idle = 0.0;
        cpus[1].softirq = 3.0;
        cpus[1].idle = 70.0;
        assert!(!fires(&run, "softirq-concentrated"));
        // The same CPUs with the traffic on a NIC.
        let ev = run.evidence.as_mut().unwrap();
        let busiest = ev
            .window
            .ifaces
            .iter()
            .max_by(|a, b| a.rx_packets_per_s.total_cmp(&b.rx_packets_per_s))
            .unwrap()
            .name
            .clone();
        for i in ev.window.ifaces.iter_mut().filter(|i| i.name != busiest) {
            (i.rx_packets_per_s, i.tx_packets_per_s) = (0.0, 0.0);
        }
        ev.host.physical_ifaces = vec![busiest];
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

    /// A server busy compressing at a costly level: the fix names gzip.
    #[test]
    fn cpu_spent_on_gzip_names_gzip_in_the_fix() {
        let mut run = fixture("healthy-before");
        let fix = |run: &Run| {
            crate::diagnose::diagnose(run)
                .into_iter()
                .find(|f| f.id == "server-cpu-saturated")
                .unwrap()
                .fix
        };
        assert!(!fix(&run).contains("gzip_comp_level"));
        run.spec.headers = vec!["Accept-Encoding: gzip".into()];
        let nginx = run
            .evidence
            .as_mut()
            .unwrap()
            .topology
            .config
            .get_or_insert_with(|| crate::run::ServerConfig {
                kind: crate::kinds::nginx::KIND,
                ..Default::default()
            });
        nginx.directives.insert("gzip".into(), vec!["on".into()]);
        nginx
            .directives
            .insert("gzip_comp_level".into(), vec!["9".into()]);
        assert!(fix(&run).starts_with("gzip compresses every response at `gzip_comp_level 9`"));
    }
}
