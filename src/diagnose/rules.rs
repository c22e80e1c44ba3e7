//! The rules, grouped by resource: client, accept queues, ports, conntrack, upstream,
//! buffers, CPU, network, stalls, limits, HTTP. Each is `fn(&Ctx) -> Option<Finding>`;
//! thresholds are named where they are used and explained there.

use super::{fact, ramp, Ctx, Finding, Kind};

pub(super) type Rule = fn(&Ctx) -> Option<Finding>;

pub(super) const ALL: &[Rule] = &[
    client_saturated,
    listen_queue_overflow,
    syn_queue_overflow,
    conntrack_full,
    ephemeral_ports_exhausted,
    time_wait_connect_cost,
    upstream_saturated,
    small_proxy_buffers,
    run_queue_delay,
    event_loop_stall,
    link_saturated,
    softirq_concentrated,
    fd_limit,
    worker_connections_exhausted,
    server_cpu_saturated,
    worker_imbalance,
    new_connection_cost,
    retransmits,
    nagle_delayed_ack,
    http_errors,
];

/// Findings that describe capacity (what the limit was) rather than a fault: demoted to
/// info when a fault explains the run. (new-connection-cost is a cause: a busy CPU is
/// its consequence.)
pub(super) const CAPACITY: &[&str] = &["server-cpu-saturated", "link-saturated"];

fn finding(id: &str, kind: Kind, confidence: f64, title: String) -> Finding {
    Finding {
        id: id.to_string(),
        kind,
        confidence: (confidence * 100.0).round() / 100.0,
        title,
        evidence: Vec::new(),
        explanation: String::new(),
        fix: String::new(),
    }
}

/// Busy processes that are neither the server nor loadlens on `cpu` (any CPU if None).
fn competitors(c: &Ctx, cpu: Option<u32>) -> Vec<String> {
    c.ev.map(|e| {
        e.window
            .other_processes
            .iter()
            .filter(|o| o.cpu_pct >= 20.0 && cpu.is_none_or(|x| x == o.last_cpu))
            .map(|o| format!("{} (pid {}, {:.0}% CPU)", o.comm, o.pid, o.cpu_pct))
            .collect()
    })
    .unwrap_or_default()
}

// --- client ---------------------------------------------------------------------------

/// The load generator set the pace: its workers were busy ≥ 90% of the run, or spent
/// ≥ 30% of it waiting for a CPU (schedstat run delay).
fn client_saturated(c: &Ctx) -> Option<Finding> {
    let cl = &c.run.client;
    let threads = cl.threads.len().max(1) as f64;
    let delay_ms_s = cl
        .threads
        .iter()
        .filter_map(|t| t.run_delay_ms)
        .sum::<f64>()
        / threads
        / c.duration_s();
    let busy = cl.busy_pct_mean;
    let starved = delay_ms_s >= 300.0;
    if busy < 90.0 && !starved {
        return None;
    }
    let others = competitors(c, None);
    // Starved by the server itself (client and server on the same CPUs) is a caveat of
    // the set-up, not something another process did.
    let kind = if busy >= 90.0 || !others.is_empty() {
        Kind::Bottleneck
    } else {
        Kind::Warning
    };
    let conf = ramp(busy, 90.0, 100.0).max(ramp(delay_ms_s, 300.0, 600.0));
    let mut f = finding(
        "client-saturated",
        kind,
        conf,
        format!(
            "the load generator was {}: results are a floor",
            if busy >= 90.0 {
                "CPU-bound"
            } else {
                "starved of CPU"
            }
        ),
    );
    f.evidence = vec![
        fact("loadlens worker busy", busy, "%"),
        fact("loadlens worker run-queue delay", delay_ms_s, "ms/s"),
        fact("loadlens worker threads", threads, "threads"),
    ];
    f.explanation = format!(
        "loadlens's own worker threads {} so the request rate measured is what the client could drive, not what the server can serve.{}",
        if busy >= 90.0 {
            "were busy nearly all the time,"
        } else {
            "waited for a CPU a large part of the time,"
        },
        if others.is_empty() {
            if kind == Kind::Warning {
                " They competed with the server for the same CPUs.".to_string()
            } else {
                String::new()
            }
        } else {
            format!(" Competing for CPU: {}.", others.join(", "))
        }
    );
    f.fix = "give the client more CPU: more threads (-t), its own cores (taskset, away from the server and from busy processes), or another machine".into();
    Some(f)
}

// --- accept queues --------------------------------------------------------------------

/// Connections dropped because the listen socket's accept queue was full.
fn listen_queue_overflow(c: &Ctx) -> Option<Finding> {
    let overflows = c.counter("TcpExt.ListenOverflows");
    let drops = c.counter("TcpExt.ListenDrops");
    let opened = c.counter("Tcp.PassiveOpens").max(1);
    // A handful over a run can be noise of a restart; one in a thousand is a pattern.
    if overflows < 10 || (overflows as f64) < 0.001 * opened as f64 {
        return None;
    }
    let q = c
        .ev?
        .window
        .listen_queues
        .iter()
        .filter(|q| q.port_is_tcp())
        .max_by_key(|q| q.max_queue);
    let somaxconn = c.sysctl("net.core.somaxconn").unwrap_or("?");
    let rate = overflows as f64 / c.duration_s();
    let mut conf = ramp(overflows as f64 / opened as f64, 0.001, 0.02);
    let mut f = finding(
        "listen-queue-overflow",
        Kind::Bottleneck,
        0.0,
        format!(
            "listen queue overflow on {}",
            q.map(|q| q.addr.as_str()).unwrap_or("the server's port")
        ),
    );
    f.evidence = vec![
        fact("TcpExt.ListenOverflows", overflows as f64, "connections"),
        fact("ListenOverflows rate", rate, "/s"),
        fact("TcpExt.ListenDrops", drops as f64, "connections"),
        fact("Tcp.PassiveOpens", opened as f64, "connections"),
    ];
    if let Some(q) = q {
        f.evidence.push(fact(
            "accept queue max seen",
            q.max_queue as f64,
            "connections",
        ));
        f.evidence
            .push(fact("effective backlog", q.backlog as f64, "connections"));
        if q.backlog > 0 && q.max_queue as f64 >= 0.5 * q.backlog as f64 {
            conf = (conf + 0.1).min(0.98);
        }
    }
    f.confidence = (conf * 100.0).round() / 100.0;
    let backlog = q.map(|q| q.backlog.to_string()).unwrap_or("?".into());
    f.explanation = format!(
        "The kernel completed handshakes faster than the server accepted them; with the accept queue full (effective backlog = min(listen backlog, net.core.somaxconn) = {backlog}) it drops the client's final ACK, and the client retransmits after a second or more — the latency spikes and lost throughput of the run."
    );
    f.fix = format!(
        "raise the nginx `listen ... backlog=` (effective now {backlog}){} and net.core.somaxconn (now {somaxconn}), e.g. 4096; also check the server accepts fast enough (workers, `multi_accept`)",
        c.now("listen")
    );
    Some(f)
}

/// SYNs dropped or answered with cookies because the SYN queue was full.
fn syn_queue_overflow(c: &Ctx) -> Option<Finding> {
    let drop = c.counter("TcpExt.TCPReqQFullDrop");
    let cookies = c.counter("TcpExt.TCPReqQFullDoCookies") + c.counter("TcpExt.SyncookiesSent");
    if drop + cookies < 10 {
        return None;
    }
    let mut f = finding(
        "syn-queue-overflow",
        Kind::Bottleneck,
        ramp((drop + cookies) as f64, 10.0, 1000.0),
        "SYN queue overflow on the server's listen socket".into(),
    );
    f.evidence = vec![
        fact("TcpExt.TCPReqQFullDrop", drop as f64, "SYNs"),
        fact("SYN cookies sent", cookies as f64, "SYNs"),
    ];
    f.explanation = "Half-open connections filled the SYN queue (sized by the listen backlog and net.ipv4.tcp_max_syn_backlog): new SYNs were dropped, or answered with SYN cookies, which lose TCP options such as window scaling.".into();
    f.fix = format!(
        "raise net.ipv4.tcp_max_syn_backlog (now {}) and the listen backlog; keep net.ipv4.tcp_syncookies=1 (now {})",
        c.sysctl("net.ipv4.tcp_max_syn_backlog").unwrap_or("?"),
        c.sysctl("net.ipv4.tcp_syncookies").unwrap_or("?")
    );
    Some(f)
}

// --- conntrack ------------------------------------------------------------------------

fn conntrack_full(c: &Ctx) -> Option<Finding> {
    let ct = c.ev?.window.conntrack.as_ref()?;
    let fill = ct.count_max_seen as f64 / ct.max.max(1) as f64;
    let drops = ct.drop + ct.early_drop + ct.insert_failed;
    if fill < 0.9 && drops == 0 {
        return None;
    }
    let mut f = finding(
        "conntrack-full",
        Kind::Bottleneck,
        ramp(fill, 0.9, 1.0).max(if drops > 0 { 0.9 } else { 0.0 }),
        "connection tracking table full".into(),
    );
    f.evidence = vec![
        fact(
            "nf_conntrack_count max seen",
            ct.count_max_seen as f64,
            "entries",
        ),
        fact("nf_conntrack_max", ct.max as f64, "entries"),
        fact("conntrack drops", drops as f64, "packets"),
    ];
    f.explanation = "Netfilter tracks every connection; when its table is full new connections' packets are dropped (dmesg: \"nf_conntrack: table full, dropping packet\"), which clients see as timeouts.".into();
    f.fix = format!(
        "raise net.netfilter.nf_conntrack_max (now {}), or exempt the server's port from tracking (`iptables -t raw -A PREROUTING -p tcp --dport PORT -j NOTRACK`)",
        ct.max
    );
    Some(f)
}

// --- ports ----------------------------------------------------------------------------

/// Size of net.ipv4.ip_local_port_range.
fn port_range(c: &Ctx) -> Option<(u64, String)> {
    let s = c.sysctl("net.ipv4.ip_local_port_range")?;
    let mut it = s.split_whitespace().filter_map(|x| x.parse::<u64>().ok());
    let (lo, hi) = (it.next()?, it.next()?);
    Some((hi.saturating_sub(lo) + 1, s.to_string()))
}

/// No local port left to connect from: loadlens's own EADDRNOTAVAIL connect errors, or
/// a proxying server answering 502 with TIME_WAIT ≈ the whole local port range.
fn ephemeral_ports_exhausted(c: &Ctx) -> Option<Finding> {
    let r = &c.run.results;
    let own = r.connect_errors.get("EADDRNOTAVAIL").copied().unwrap_or(0);
    let bad_gateway = r.status_codes.get(&502).copied().unwrap_or(0)
        + r.status_codes.get(&504).copied().unwrap_or(0);
    let tw = c.ev.map(|e| e.window.time_wait_max).unwrap_or(0);
    let (range, range_s) = port_range(c).unwrap_or((28232, "?".into()));
    let server_side =
        bad_gateway as f64 >= 0.1 * r.responses.max(1) as f64 && tw as f64 >= 0.8 * range as f64;
    if own == 0 && !server_side {
        return None;
    }
    let conf = if server_side {
        ramp(tw as f64 / range as f64, 0.8, 1.0).max(ramp(
            bad_gateway as f64 / r.responses.max(1) as f64,
            0.1,
            0.5,
        ))
    } else {
        ramp(own as f64, 1.0, 100.0)
    };
    let mut f = finding(
        "ephemeral-ports-exhausted",
        Kind::Bottleneck,
        conf,
        if server_side {
            "the proxying server ran out of local ports to its upstream".into()
        } else {
            "loadlens ran out of local ports (EADDRNOTAVAIL)".into()
        },
    );
    f.evidence = vec![
        fact("502/504 responses", bad_gateway as f64, "responses"),
        fact(
            "loadlens connect errors EADDRNOTAVAIL",
            own as f64,
            "connects",
        ),
        fact("TIME_WAIT max", tw as f64, "sockets"),
        fact("local port range size", range as f64, "ports"),
    ];
    f.explanation = "Every outgoing connection needs a local port, and a closed connection keeps its port in TIME_WAIT for 60 s; when all ports of net.ipv4.ip_local_port_range are taken, connect() fails with EADDRNOTAVAIL (nginx: \"connect() failed (99: Cannot assign requested address)\") and the proxy answers 502.".into();
    f.fix = format!(
        "reuse upstream connections (`keepalive 32;` in the upstream block{}, with `proxy_http_version 1.1; proxy_set_header Connection \"\";`), and widen net.ipv4.ip_local_port_range (now {range_s}), e.g. \"10000 65535\"",
        c.now("keepalive")
    );
    Some(f)
}

/// A proxying server opening a connection per request, with TIME_WAIT piling up and
/// tcp_tw_reuse off: connect() scans thousands of TIME_WAIT entries for a free port.
fn time_wait_connect_cost(c: &Ctx) -> Option<Finding> {
    let active = c.upstream_opens();
    let responses = c.responses().max(1);
    let tw = c.ev?.window.time_wait_max;
    let reuse = c.sysctl("net.ipv4.tcp_tw_reuse").unwrap_or("?");
    // At least one upstream connection for every other response, and enough TIME_WAIT
    // for the port search to cost.
    if (active as f64) < 0.5 * responses as f64 || tw < 1000 || reuse == "1" {
        return None;
    }
    let sys = c
        .front_workers()
        .iter()
        .map(|p| p.system_pct)
        .fold(0.0, f64::max);
    let conf = ramp(tw as f64, 1000.0, 20000.0).max(if sys >= 70.0 { 0.85 } else { 0.0 });
    let mut f = finding(
        "time-wait-connect-cost",
        Kind::Bottleneck,
        conf,
        "new upstream connection per request, TIME_WAIT piling up".into(),
    );
    f.evidence = vec![
        fact("upstream connections opened", active as f64, "connections"),
        fact("responses", responses as f64, "responses"),
        fact("TIME_WAIT max", tw as f64, "sockets"),
        fact("server worker system CPU", sys, "%"),
    ];
    f.explanation = format!(
        "The server opened a new connection to its upstream for almost every request and closed it, leaving it in TIME_WAIT; with net.ipv4.tcp_tw_reuse={reuse}, each connect() searches past those entries for a free port (inet_hash_connect, __inet_check_established), so the worker's CPU goes to the kernel."
    );
    f.fix = format!(
        "reuse upstream connections: `keepalive 32;`{} (and `keepalive_requests` high) in the upstream block with `proxy_http_version 1.1; proxy_set_header Connection \"\";` (FastCGI: `fastcgi_keep_conn on;`); or set net.ipv4.tcp_tw_reuse=1 (now {reuse})",
        c.now("keepalive")
    );
    Some(f)
}

// --- upstream -------------------------------------------------------------------------

/// The proxy answers 5xx or the client times out while an upstream's accept queue
/// (TCP or unix, e.g. php-fpm's socket) holds requests: the upstream is the limit.
fn upstream_saturated(c: &Ctx) -> Option<Finding> {
    let e = c.ev?;
    let r = &c.run.results;
    let failed = r.errors.timeout
        + r.status_codes
            .iter()
            .filter(|(k, _)| matches!(**k, 499 | 502 | 503 | 504))
            .map(|(_, v)| *v)
            .sum::<u64>();
    let port = c.run.target_addr.rsplit(':').next().unwrap_or("");
    let upstream_q = e
        .window
        .listen_queues
        .iter()
        .filter(|q| !q.addr.ends_with(&format!(":{port}")))
        .max_by_key(|q| q.max_queue)?;
    let attempts = (r.responses + failed).max(1);
    if failed == 0 || (failed as f64) < 0.01 * attempts as f64 || upstream_q.max_queue < 5 {
        return None;
    }
    let mut f = finding(
        "upstream-saturated",
        Kind::Bottleneck,
        ramp(upstream_q.max_queue as f64, 5.0, 50.0).max(ramp(
            failed as f64 / attempts as f64,
            0.01,
            0.3,
        )),
        format!("upstream saturated: requests queue at {}", upstream_q.addr),
    );
    f.evidence = vec![
        fact("timeouts and 499/502/503/504", failed as f64, "requests"),
        fact("responses", r.responses as f64, "responses"),
        fact(
            "upstream accept queue max",
            upstream_q.max_queue as f64,
            "connections",
        ),
        fact("upstream backlog", upstream_q.backlog as f64, "connections"),
    ];
    let busy: Vec<&str> = e
        .topology
        .processes
        .iter()
        .filter(|p| p.comm.starts_with("php-fpm"))
        .map(|p| p.comm.as_str())
        .collect();
    f.explanation = "Requests waited in the upstream's accept queue because all its workers were busy; the front server waited on them until the client gave up (nginx logs 499) or its own timeout answered 502/504. Throughput is set by upstream workers × 1/request time.".into();
    f.fix = if busy.is_empty() {
        "add upstream capacity (more worker processes or servers), or make the upstream's requests faster".into()
    } else {
        "raise php-fpm's `pm.max_children` (its log says \"server reached pm.max_children\") as far as memory allows, or make the script faster".into()
    };
    Some(f)
}

// --- buffers --------------------------------------------------------------------------

/// A proxying worker reads each response in many small pieces: proxy_buffers far
/// smaller than the responses (the published case: readv of 4 KiB for 91 KiB bodies).
fn small_proxy_buffers(c: &Ctx) -> Option<Finding> {
    let size = c.response_bytes();
    let rps = c.run.results.requests_per_s.max(1e-9);
    let w = c
        .front_workers()
        .into_iter()
        .filter(|p| p.bytes_per_read.is_some() && p.reads_per_s.is_some())
        .max_by(|a, b| {
            a.reads_per_s
                .unwrap_or(0.0)
                .total_cmp(&b.reads_per_s.unwrap_or(0.0))
        })?;
    let bpr = w.bytes_per_read?;
    let reads_per_response = w.reads_per_s? / rps;
    // Only a proxy: a static server reading a large file in output_buffers-sized pieces
    // is not this.
    if c.upstream_opens() == 0 {
        return None;
    }
    // Judged against the response: several reads per response, each a small part of it.
    if size < 16_384.0 || reads_per_response < 3.0 || bpr > size / 4.0 {
        return None;
    }
    let mut f = finding(
        "small-proxy-buffers",
        Kind::Bottleneck,
        ramp(size / bpr, 4.0, 16.0),
        format!(
            "{} worker {} reads responses in small pieces",
            w.comm, w.pid
        ),
    );
    f.evidence = vec![
        fact("response size", size, "bytes"),
        fact("bytes per read syscall", bpr, "bytes"),
        fact("reads per response", reads_per_response, "syscalls"),
        fact("worker CPU", w.cpu_pct, "%"),
    ];
    f.explanation = "The proxy reads the upstream response into its proxy buffers; buffers far smaller than the response mean one readv (and a matching writev to the client) per few KiB, so the worker spends its CPU on syscalls instead of moving data.".into();
    f.fix = format!(
        "size the buffers to the responses: `proxy_buffer_size 128k; proxy_buffers 8 128k; proxy_busy_buffers_size 128k;`{} (responses here average {:.0} KiB; now about {:.0} KiB per read)",
        c.now("proxy_buffers"),
        size / 1024.0,
        bpr / 1024.0
    );
    Some(f)
}

// --- CPU ------------------------------------------------------------------------------

/// Server workers waiting to run: another process on their CPU (or the machine
/// over-committed).
fn run_queue_delay(c: &Ctx) -> Option<Finding> {
    let w = c.front_workers().into_iter().max_by(|a, b| {
        a.run_delay_ms_per_s
            .unwrap_or(0.0)
            .total_cmp(&b.run_delay_ms_per_s.unwrap_or(0.0))
    })?;
    let delay = w.run_delay_ms_per_s?;
    // 100 ms per second: the worker waited a tenth of its time for a CPU.
    if delay < 100.0 {
        return None;
    }
    let others = competitors(c, Some(w.last_cpu));
    let kind = if others.is_empty() {
        Kind::Warning
    } else {
        Kind::Bottleneck
    };
    let mut f = finding(
        "run-queue-delay",
        kind,
        ramp(delay, 100.0, 500.0),
        format!("{} worker {} waits for CPU {}", w.comm, w.pid, w.last_cpu),
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
    f.explanation = if others.is_empty() {
        "The worker was runnable but waiting for a CPU a large part of the time: on this machine the load generator, softirq work and the server share the CPUs, so every request waits in a run queue too.".into()
    } else {
        format!(
            "The worker was runnable but waiting for its CPU while another process ran there: {}. Every request it handles waits too, which shows in p99 and max latency.",
            others.join(", ")
        )
    };
    f.fix = if others.is_empty() {
        "give the server its own CPUs (`worker_cpu_affinity`, taskset the load generator elsewhere, or load from another machine)".into()
    } else {
        format!(
            "move the other work off CPU {} (taskset), lower its priority (`nice`, `chrt --idle`), or pin the nginx workers elsewhere (`worker_cpu_affinity`)",
            w.last_cpu
        )
    };
    Some(f)
}

/// The server workers at ~100% of a core: the expected limit of a healthy server. A
/// worker that runs or waits to run (run-queue delay) nearly all the time wants a full
/// core too: it counts as saturated, with the wait named.
fn server_cpu_saturated(c: &Ctx) -> Option<Finding> {
    let workers = c.front_workers();
    let demand = |p: &crate::run::ProcRates| p.cpu_pct + p.run_delay_ms_per_s.unwrap_or(0.0) / 10.0;
    let busiest = workers.iter().map(|p| demand(p)).fold(0.0, f64::max);
    if workers.is_empty() || busiest < 90.0 {
        return None;
    }
    let running = workers.iter().map(|p| p.cpu_pct).fold(0.0, f64::max);
    let n = workers.len() as u32;
    let cpus = c.cpus();
    let comm = workers[0].comm.clone();
    let mut f = finding(
        "server-cpu-saturated",
        Kind::Bottleneck,
        ramp(busiest, 90.0, 99.0),
        format!("{comm} workers at {busiest:.0}% of a core (running or waiting to run)"),
    );
    f.evidence = vec![
        fact("busiest worker CPU", running, "%"),
        fact(
            "busiest worker CPU demand (running + run-queue wait)",
            busiest,
            "%",
        ),
        fact("workers", n as f64, "processes"),
        fact("CPUs", cpus as f64, "CPUs"),
    ];
    let sys = workers.iter().map(|p| p.system_pct).fold(0.0, f64::max);
    f.evidence.push(fact("busiest worker system CPU", sys, "%"));
    f.explanation = format!(
        "Each {comm} worker is one event loop on one core; at ~100% it cannot serve faster.{}",
        if n < cpus {
            format!(" There are fewer workers ({n}) than CPUs ({cpus}).")
        } else {
            String::new()
        }
    );
    f.fix = if n < cpus {
        format!("`worker_processes auto;` (now {n} worker{}{}) so every CPU serves; then profile where the CPU goes (`perf top -p PID`)", if n == 1 { "" } else { "s" }, c.now("worker_processes"))
    } else {
        "the CPU is the limit: profile where it goes (`perf top -p PID`): TLS, gzip, logging, syscalls; or add machines".into()
    };
    Some(f)
}

/// Workers very unevenly loaded (one shared accept queue without reuseport).
fn worker_imbalance(c: &Ctx) -> Option<Finding> {
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
        "worker-imbalance",
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
    f.fix =
        "`listen ... reuseport;` gives each worker its own accept queue, balanced by the kernel"
            .into();
    Some(f)
}

/// Few requests per connection: connection set-up dominates. Counted on the client's
/// side (responses per connection loadlens opened): the server's own PassiveOpens also
/// count an upstream's accepts when both share a namespace.
fn new_connection_cost(c: &Ctx) -> Option<Finding> {
    let opens = c.run.results.connections_opened;
    let responses = c.responses().max(1);
    let per_conn = responses as f64 / opens.max(1) as f64;
    // ≤ 4 requests per connection (the study's browser-like range starts at 1, 4, 14).
    if opens == 0 || per_conn > 4.0 {
        return None;
    }
    let e = c.ev?;
    let workers = c.front_workers().len();
    let listeners = e.topology.listeners.len();
    let reuseport = listeners > 1;
    let kind = if workers > 1 && !reuseport {
        Kind::Bottleneck
    } else {
        Kind::Info
    };
    let mut f = finding(
        "new-connection-cost",
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
        "`listen ... reuseport;` (one accept queue per worker; the DragonFlyBSD study measured up to 3× with 1 request per connection) and keep-alive on the clients".into()
    };
    Some(f)
}

/// One CPU's softirq time saturating while others are idle (one RX queue, no RPS).
fn softirq_concentrated(c: &Ctx) -> Option<Finding> {
    let cpus = &c.ev?.window.cpus;
    let hot = cpus.iter().max_by(|a, b| a.softirq.total_cmp(&b.softirq))?;
    let idle_elsewhere = cpus
        .iter()
        .filter(|x| x.cpu != hot.cpu)
        .any(|x| x.idle >= 30.0 && x.softirq <= 10.0);
    if hot.softirq < 40.0 || !idle_elsewhere {
        return None;
    }
    let mut f = finding(
        "softirq-concentrated",
        Kind::Bottleneck,
        ramp(hot.softirq, 40.0, 80.0),
        format!("network softirq concentrated on CPU {}", hot.cpu),
    );
    f.evidence = vec![
        fact("softirq share of the hot CPU", hot.softirq, "%"),
        fact("hot CPU", hot.cpu as f64, "CPU"),
    ];
    f.explanation = "Packet processing (NET_RX softirq) runs on the CPU that takes the NIC's interrupt; with one queue or all interrupts on one CPU, that CPU saturates while the others idle.".into();
    f.fix = "spread the work: more NIC queues (`ethtool -L`), IRQ affinity, or RPS (`/sys/class/net/IF/queues/rx-*/rps_cpus`)".into();
    Some(f)
}

// --- network --------------------------------------------------------------------------

/// An interface at ≥ 90% of its speed or of a rate-limiting qdisc.
fn link_saturated(c: &Ctx) -> Option<Finding> {
    let e = c.ev?;
    let mut best: Option<(f64, String, f64)> = None;
    for i in &e.window.ifaces {
        let rate_bits = e
            .host
            .qdisc_rate_bytes_per_s
            .get(&i.name)
            .map(|b| *b as f64 * 8.0)
            .or_else(|| e.host.link_speed_mbps.get(&i.name).map(|m| *m as f64 * 1e6));
        let Some(cap) = rate_bits else { continue };
        let used = i.rx_bytes_per_s.max(i.tx_bytes_per_s) * 8.0;
        let u = used / cap;
        if best.as_ref().is_none_or(|b| u > b.0) {
            best = Some((u, i.name.clone(), cap));
        }
    }
    let (u, name, cap) = best?;
    if u < 0.9 {
        return None;
    }
    let mut f = finding(
        "link-saturated",
        Kind::Bottleneck,
        ramp(u, 0.9, 0.98),
        format!("{name} at {:.0}% of its {:.0} Mbit/s", u * 100.0, cap / 1e6),
    );
    f.evidence = vec![
        fact("link utilisation", u * 100.0, "%"),
        fact("link capacity", cap / 1e6, "Mbit/s"),
        fact(
            "qdisc overlimits",
            e.window.qdisc_overlimits.get(&name).copied().unwrap_or(0) as f64,
            "packets",
        ),
    ];
    f.explanation = "The interface carried nearly all it can: responses queue behind each other on the wire, so latency grows with load while the server's CPU idles.".into();
    f.fix = "send fewer bytes (`gzip on;` for text, caching headers, smaller images) or get a faster link / more links".into();
    Some(f)
}

/// TCP retransmitting a noticeable share of segments.
fn retransmits(c: &Ctx) -> Option<Finding> {
    let re = c.counter("Tcp.RetransSegs");
    let out = c.counter("Tcp.OutSegs").max(1);
    if re < 100 || (re as f64) < 0.01 * out as f64 {
        return None;
    }
    let mut f = finding(
        "retransmits",
        Kind::Warning,
        ramp(re as f64 / out as f64, 0.01, 0.1),
        "TCP retransmissions".into(),
    );
    f.evidence = vec![
        fact("Tcp.RetransSegs", re as f64, "segments"),
        fact(
            "share of segments sent",
            re as f64 * 100.0 / out as f64,
            "%",
        ),
        fact(
            "TcpExt.TCPTimeouts",
            c.counter("TcpExt.TCPTimeouts") as f64,
            "timeouts",
        ),
    ];
    f.explanation = "Segments were lost and sent again (drops in a full queue, on a shaped link or in the network); each loss stalls a connection for a round trip or a retransmission timeout.".into();
    f.fix = "find the drop: `nstat`, qdisc drops (`tc -s qdisc`), NIC drops (`ip -s link`), softnet drops; raise net.core.netdev_max_backlog if softnet drops".into();
    Some(f)
}

// --- stalls ---------------------------------------------------------------------------

/// Latency spikes that hit many connections at once while the server is not overloaded:
/// the event loop stopped (a blocking call, a stopped process).
fn event_loop_stall(c: &Ctx) -> Option<Finding> {
    let r = &c.run.results;
    // Listen-queue drops and retransmissions also make slow requests; not a stall.
    if c.counter("TcpExt.ListenOverflows") > 0 || r.errors.timeout > 0 {
        return None;
    }
    let h = r.latency.decode().ok()?;
    let p50 = h.value_at_quantile(0.5) as f64;
    let p99 = h.value_at_quantile(0.99) as f64;
    // A spike far outside the normal spread: ≥ 50 ms, ≥ 20× the median and ≥ 10× p99.
    // (A busy server's slow tail — time-wait's expensive connects — is not a stall.)
    let threshold = (20.0 * p50).max(10.0 * p99).max(50_000.0);
    let slow: u64 = h
        .iter_recorded()
        .filter(|v| v.value_iterated_to() as f64 >= threshold)
        .map(|v| v.count_since_last_iteration())
        .sum();
    let conns = c.run.spec.connections as f64;
    // At least half the connections hit at once, yet a small share of all requests.
    if (slow as f64) < 0.5 * conns || slow as f64 > 0.02 * h.len() as f64 {
        return None;
    }
    let stalls = slow as f64 / conns;
    let stopped =
        c.ev.map(|e| {
            e.samples
                .iter()
                .flat_map(|s| s.processes.iter())
                .filter(|p| p.state == "T" || p.state == "D")
                .count()
        })
        .unwrap_or(0);
    let mut f = finding(
        "event-loop-stall",
        Kind::Bottleneck,
        ramp(stalls, 0.5, 3.0).max(if stopped > 0 { 0.9 } else { 0.0 }),
        format!(
            "server event loop stalls: {slow} requests ≥ {:.0} ms at once",
            threshold / 1e3
        ),
    );
    f.evidence = vec![
        fact("requests slower than threshold", slow as f64, "requests"),
        fact("threshold", threshold / 1e3, "ms"),
        fact("p50 latency", p50 / 1e3, "ms"),
        fact("max latency", r.latency.max_us as f64 / 1e3, "ms"),
        fact("connections", conns, "connections"),
        fact(
            "samples with a worker stopped or in disk wait",
            stopped as f64,
            "samples",
        ),
    ];
    f.explanation = "Many connections were delayed by the same long pause while the median stayed fast: the worker's event loop stopped serving every connection it holds at once — a blocking call (log reopen, disk read), a stopped or throttled process.".into();
    f.fix = "find what blocks the worker (`strace -T -p PID`, `perf trace`, off-CPU profile); buffer logs (`access_log ... buffer=64k flush=1s`), use `aio threads` for disk".into();
    Some(f)
}

// --- limits ---------------------------------------------------------------------------

fn fd_limit(c: &Ctx) -> Option<Finding> {
    let own = ["EMFILE", "ENFILE"]
        .iter()
        .filter_map(|k| c.run.results.connect_errors.get(*k))
        .sum::<u64>();
    let near = c
        .procs()
        .iter()
        .filter_map(|p| Some((p, p.fds? as f64 / p.fd_limit? as f64)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let (p, fill) = match near {
        Some((p, f)) if f >= 0.9 => (Some(p), f),
        _ if own > 0 => (None, 1.0),
        _ => return None,
    };
    let mut f = finding(
        "fd-limit",
        Kind::Bottleneck,
        ramp(fill, 0.9, 1.0),
        match p {
            Some(p) => format!("{} {} near its open-files limit", p.comm, p.pid),
            None => "loadlens hit its open-files limit".into(),
        },
    );
    if let Some(p) = p {
        f.evidence
            .push(fact("open fds", p.fds.unwrap_or(0) as f64, "fds"));
        f.evidence
            .push(fact("limit", p.fd_limit.unwrap_or(0) as f64, "fds"));
    }
    f.evidence
        .push(fact("loadlens EMFILE/ENFILE", own as f64, "connects"));
    f.explanation = "Every connection is a file descriptor; at the limit, accept() or connect() fails (EMFILE) and connections are refused or dropped.".into();
    f.fix = "raise the limit: `worker_rlimit_nofile 65535;` for nginx (and `LimitNOFILE=` in its unit), `ulimit -n` for loadlens".into();
    Some(f)
}

/// nginx workers holding nearly `worker_connections` connections (each one an fd).
fn worker_connections_exhausted(c: &Ctx) -> Option<Finding> {
    let limit: u64 = c
        .nginx("worker_connections")??
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let w = c
        .front_workers()
        .into_iter()
        .filter(|p| p.comm == "nginx")
        .max_by_key(|p| p.fds.unwrap_or(0))?;
    let fds = w.fds?;
    if (fds as f64) < 0.9 * limit as f64 {
        return None;
    }
    let mut f = finding(
        "worker-connections-exhausted",
        Kind::Bottleneck,
        ramp(fds as f64 / limit as f64, 0.9, 1.0),
        format!("nginx worker {} at its worker_connections ({limit})", w.pid),
    );
    f.evidence = vec![
        fact("worker open fds", fds as f64, "fds"),
        fact("worker_connections", limit as f64, "connections"),
    ];
    f.explanation = "Each worker handles at most worker_connections connections (client and upstream together); at the limit it stops accepting (error log: \"worker_connections are not enough\") and new connections wait in the accept queue or are dropped.".into();
    f.fix = format!(
        "raise `worker_connections` (now {limit}) in the events block, with `worker_rlimit_nofile` at least as high"
    );
    Some(f)
}

// --- HTTP -----------------------------------------------------------------------------

/// A ~40 ms latency mode on keep-alive: Nagle's algorithm waiting for a delayed ACK.
fn nagle_delayed_ack(c: &Ctx) -> Option<Finding> {
    let h = c.run.results.latency.decode().ok()?;
    if h.is_empty() {
        return None;
    }
    let count = |lo: u64, hi: u64| -> u64 {
        h.iter_recorded()
            .filter(|v| (lo..=hi).contains(&v.value_iterated_to()))
            .map(|v| v.count_since_last_iteration())
            .sum()
    };
    let in_mode = count(36_000, 48_000);
    // A mode, not a broad tail: the 40 ms window must stand well above its neighbours.
    let around = count(24_000, 35_999).max(count(48_001, 60_000));
    let share = in_mode as f64 / h.len() as f64;
    if share < 0.05 || in_mode < 3 * around || h.value_at_quantile(0.5) >= 30_000 {
        return None;
    }
    let mut f = finding(
        "nagle-delayed-ack",
        Kind::Warning,
        ramp(share, 0.05, 0.3),
        "a ~40 ms latency mode: Nagle waiting for a delayed ACK".into(),
    );
    f.evidence = vec![
        fact("requests between 36 and 48 ms", in_mode as f64, "requests"),
        fact("share of requests", share * 100.0, "%"),
    ];
    f.explanation = "When a response (or request) leaves in two writes, Nagle's algorithm holds the second until the first is ACKed, and the peer delays that ACK by ~40 ms.".into();
    f.fix = "`tcp_nodelay on;` (nginx default for keep-alive) and send each message in one write (`postpone_output`, `tcp_nopush` with `sendfile`)".into();
    Some(f)
}

/// Non-2xx/3xx responses dominate: requests/s counts failures.
fn http_errors(c: &Ctx) -> Option<Finding> {
    let r = &c.run.results;
    let share = r.non_2xx_3xx as f64 / r.responses.max(1) as f64;
    if r.responses == 0 || share < 0.5 {
        return None;
    }
    let top = r
        .status_codes
        .iter()
        .filter(|(k, _)| !(200..400).contains(*k))
        .max_by_key(|(_, v)| **v)
        .map(|(k, _)| *k)
        .unwrap_or(0);
    let mut f = finding(
        "http-errors",
        Kind::Warning,
        ramp(share, 0.5, 0.95),
        format!(
            "{:.0}% of responses were errors (mostly {top}): requests/s counts failures",
            share * 100.0
        ),
    );
    f.evidence = vec![
        fact("non-2xx/3xx responses", r.non_2xx_3xx as f64, "responses"),
        fact("share", share * 100.0, "%"),
        fact("most common error status", top as f64, "status"),
    ];
    f.explanation = "Error responses are usually cheaper than real ones, so the request rate of this run overstates what the server can do for real requests.".into();
    f.fix = "fix the errors first (the server's error log says why), then measure again".into();
    Some(f)
}
