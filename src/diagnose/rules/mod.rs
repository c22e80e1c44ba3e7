//! The rules, grouped by resource: client, accept queues, ports, conntrack, upstream,
//! proxy buffers, socket buffers, CPU, CPU quotas, network, stalls, limits, HTTP. Each is
//! `fn(&Ctx) -> Option<Finding>`; thresholds are named where they are used and explained
//! there.

mod accept;
mod buffers;
mod client;
mod conntrack;
mod cpu;
mod http;
mod limits;
mod network;
mod pool;
mod ports;
pub mod profile;
mod quota;
mod sockbuf;
mod stalls;
mod tails;
mod udp;
mod upstream;

pub(super) use super::{fact, ramp, Ctx};
use crate::run::{Fact, Finding, Kind};

/// A rule: the id of the finding it makes and the check that makes it.
pub(super) struct Rule {
    pub id: &'static str,
    pub check: fn(&Ctx) -> Option<Finding>,
}

/// Every rule, in the order they run (ties in confidence keep this order).
pub(super) const ALL: &[Rule] = &[
    Rule {
        id: "client-saturated",
        check: client::client_saturated,
    },
    Rule {
        id: "concurrency-bound",
        check: client::concurrency_bound,
    },
    Rule {
        id: "pool-limit",
        check: pool::pool_limit,
    },
    Rule {
        id: "listen-queue-overflow",
        check: accept::listen_queue_overflow,
    },
    Rule {
        id: "syn-queue-overflow",
        check: accept::syn_queue_overflow,
    },
    Rule {
        id: "conntrack-full",
        check: conntrack::conntrack_full,
    },
    Rule {
        id: "ephemeral-ports-exhausted",
        check: ports::ephemeral_ports_exhausted,
    },
    Rule {
        id: "time-wait-connect-cost",
        check: ports::time_wait_connect_cost,
    },
    Rule {
        id: "upstream-saturated",
        check: upstream::upstream_saturated,
    },
    Rule {
        id: "small-proxy-buffers",
        check: buffers::small_proxy_buffers,
    },
    Rule {
        id: "sendfile-off",
        check: buffers::sendfile_off,
    },
    Rule {
        id: "small-send-buffer",
        check: sockbuf::small_send_buffer,
    },
    Rule {
        id: "client-receive-window",
        check: sockbuf::client_receive_window,
    },
    Rule {
        id: "cpu-quota",
        check: quota::cpu_quota,
    },
    Rule {
        id: "run-queue-delay",
        check: cpu::run_queue_delay,
    },
    Rule {
        id: "worker-blocked",
        check: stalls::worker_blocked,
    },
    Rule {
        id: "event-loop-stall",
        check: stalls::event_loop_stall,
    },
    Rule {
        id: "server-stalled",
        check: stalls::server_stalled,
    },
    Rule {
        id: "upstream-paused",
        check: tails::upstream_paused,
    },
    Rule {
        id: "latency-tail",
        check: tails::latency_tail,
    },
    Rule {
        id: "link-saturated",
        check: network::link_saturated,
    },
    Rule {
        id: "softirq-concentrated",
        check: cpu::softirq_concentrated,
    },
    Rule {
        id: "fd-limit",
        check: limits::fd_limit,
    },
    Rule {
        id: "connection-limit",
        check: limits::connection_limit,
    },
    Rule {
        id: "udp-receive-buffer-drops",
        check: udp::udp_receive_buffer_drops,
    },
    Rule {
        id: "quic-server-cpu-bound",
        check: udp::quic_server_cpu_bound,
    },
    Rule {
        id: "server-cpu-saturated",
        check: cpu::server_cpu_saturated,
    },
    Rule {
        id: "worker-imbalance",
        check: cpu::worker_imbalance,
    },
    Rule {
        id: "new-connection-cost",
        check: cpu::new_connection_cost,
    },
    Rule {
        id: "retransmits",
        check: network::retransmits,
    },
    Rule {
        id: "nagle-delayed-ack",
        check: http::nagle_delayed_ack,
    },
    Rule {
        id: "rate-limited",
        check: http::rate_limited,
    },
    Rule {
        id: "http-errors",
        check: http::http_errors,
    },
    Rule {
        id: "kernel-network-stack",
        check: profile::kernel_network_stack,
    },
    Rule {
        id: "allocator-hot",
        check: profile::allocator_hot,
    },
    Rule {
        id: "compression-cpu",
        check: profile::compression_cpu,
    },
    Rule {
        id: "tls-cpu",
        check: profile::tls_cpu,
    },
    Rule {
        id: "syscall-bound",
        check: profile::syscall_bound,
    },
];

/// A cause and a consequence of it: when both fire and the cause is a bottleneck, the
/// consequence is demoted to info and says which cause explains it — so a symptom is
/// never ranked above what made it, whatever their confidences.
pub(super) struct Explains {
    pub cause: &'static str,
    pub consequence: &'static str,
    /// Why the cause produces the consequence's evidence (appended to its explanation).
    pub why: &'static str,
    /// Evidence of the consequence's own that the cause cannot produce: when it holds,
    /// the consequence stands beside the cause.
    pub unless: Option<fn(&Finding) -> bool>,
}

/// Bodies arriving ~40 ms after their heads: Nagle's own signature (a queue delays a
/// response's head, not the gap between its head and its body).
fn body_after_head(nagle: &Finding) -> bool {
    nagle
        .evidence
        .iter()
        .any(|e| e.name == http::BODY_AFTER_HEAD && e.value > 0.0)
}

/// A stall whose samples caught a worker stopped or in disk wait was a worker blocked,
/// whatever else the machine did meanwhile.
fn worker_seen_blocked(stall: &Finding) -> bool {
    stall.evidence.iter().any(|e| {
        (e.name == stalls::SEEN_BLOCKED || e.name == stalls::BLOCKED_STALLS) && e.value > 0.0
    })
}

/// Gaps in the responses that lie inside a worker's blocked wait: a stall of the
/// server's own, whatever the network lost meanwhile.
fn stall_lined_up(stall: &Finding) -> bool {
    stall
        .evidence
        .iter()
        .any(|e| e.name == stalls::LINED_UP && e.value > 0.0)
}

pub(super) const EXPLAINS: &[Explains] = &[
    // An upstream that stops holds every request passed to it: the front's responses
    // stop too, and look like the front's own stall.
    Explains {
        cause: "upstream-paused",
        consequence: "event-loop-stall",
        why: "the requests held at once were those waiting for the stopped upstream, not for the front's event loop",
        unless: None,
    },
    Explains {
        cause: "upstream-paused",
        consequence: "server-stalled",
        why: "the slices without a response lie inside the upstream's stops",
        unless: None,
    },
    // The same CPU seen twice: a QUIC server's busy process is the general rule's
    // saturated worker.
    Explains {
        cause: "quic-server-cpu-bound",
        consequence: "server-cpu-saturated",
        why: "the server's CPU went to serving QUIC: per-packet crypto, acknowledgements and system calls",
        unless: None,
    },
    // A throttled task is runnable and not running: the scheduler counts the quota's
    // stops as run-queue delay, and no other process is to blame.
    Explains {
        cause: "cpu-quota",
        consequence: "run-queue-delay",
        why: "a task stopped by its cgroup's quota waits as if for a CPU, with the machine's CPUs idle",
        unless: None,
    },
    // The time-wait lab scenario: the proxy's worker busy in connect()'s port search
    // delays every connection it holds at once — the latency spikes of a stall.
    Explains {
        cause: "time-wait-connect-cost",
        consequence: "event-loop-stall",
        why: "the worker was busy in connect()'s search for a free local port past thousands of TIME_WAIT sockets, and every connection it holds waited meanwhile",
        unless: Some(worker_seen_blocked),
    },
    // Workers waiting for a CPU (pinned together, or beside a busy process) leave every
    // connection they hold waiting at once: the spikes of a stall, none of them blocked.
    Explains {
        cause: "run-queue-delay",
        consequence: "event-loop-stall",
        why: "the workers were runnable and waiting for a CPU, and every connection a waiting worker holds waited with it; no sample caught a worker stopped or in disk wait",
        unless: Some(worker_seen_blocked),
    },
    // A worker blocked in a call for a share of its time stalls its connections each
    // time: the spikes are the blocking, named with its call and file.
    Explains {
        cause: "worker-blocked",
        consequence: "event-loop-stall",
        why: "the worker blocked in the call named above, and every connection it holds waited meanwhile",
        unless: None,
    },
    // Blocked workers serve fewer requests than the connections ask for, with no
    // resource saturated: the rate is the blocking's, not the load's concurrency.
    Explains {
        cause: "worker-blocked",
        consequence: "concurrency-bound",
        why: "the workers spent that time blocked in the call named above, not waiting for requests: the rate is set by the blocking",
        unless: None,
    },
    // The gaps in the responses are the blocking's, seen from the client's side.
    Explains {
        cause: "worker-blocked",
        consequence: "server-stalled",
        why: "the worker was blocked in the call named above, and answered nobody meanwhile",
        unless: None,
    },
    Explains {
        cause: "event-loop-stall",
        consequence: "server-stalled",
        why: "the stalls above emptied those slices",
        unless: None,
    },
    // A stalled server serves fewer requests than the connections ask for: the rate
    // is the stalls', and the mean latency of two modes describes no request.
    Explains {
        cause: "server-stalled",
        consequence: "concurrency-bound",
        why: "the server stopped answering for whole slices of the run: the rate is set by the stalls, and the mean latency the arithmetic uses is of two modes",
        unless: None,
    },
    // Each lost segment holds its request for a retransmission timeout; with a few
    // connections, several held at once leave the server nothing to answer: the
    // spikes and the empty slices of a stall, with no worker blocked.
    Explains {
        cause: "retransmits",
        consequence: "event-loop-stall",
        why: "the slow requests waited for their lost segments' retransmission timeout (200 ms), several connections at once; no sample caught a worker stopped or blocked",
        unless: Some(worker_seen_blocked),
    },
    Explains {
        cause: "retransmits",
        consequence: "server-stalled",
        why: "the connections were each waiting for a lost segment's retransmission (200 ms), all at once in those slices; no blocked wait of a worker lines up with them",
        unless: Some(stall_lined_up),
    },
    // A link at its capacity drops what its queue cannot hold: the retransmissions and
    // their timeouts are the full link's.
    Explains {
        cause: "link-saturated",
        consequence: "retransmits",
        why: "a link at its capacity drops what its queue cannot hold, and the requests whose segments were dropped waited for their retransmission",
        unless: None,
    },
    // Connections queued for a few busy upstream workers wait about the same time each:
    // N requests ahead of a few ms each make a latency mode that can sit at 40 ms
    // (CI, tests/upstream.rs: 12 connections over 2 php-fpm children computing, 66% of
    // the requests at 36-48 ms, `nagle-delayed-ack` ranked first).
    Explains {
        cause: "upstream-saturated",
        consequence: "nagle-delayed-ack",
        why: "every request waited in the upstream's queue behind the same number of others, each a few ms of a busy worker: a latency mode of the queue, not of a delayed ACK (whose mark, bodies ~40 ms after their heads, is absent)",
        unless: Some(body_after_head),
    },
    // Out of ports, connect() first searches the whole range: the search's cost is
    // part of running out.
    Explains {
        cause: "ephemeral-ports-exhausted",
        consequence: "time-wait-connect-cost",
        why: "with every local port in TIME_WAIT, each connect() searched the whole range before failing",
        unless: None,
    },
];

/// Findings that describe capacity (what the limit was) rather than a fault: demoted to
/// info when a fault explains the run. (new-connection-cost is a cause: a busy CPU is
/// its consequence.)
pub(super) const CAPACITY: &[&str] = &["server-cpu-saturated", "link-saturated"];

pub(super) fn finding(id: &str, kind: Kind, confidence: f64, title: String) -> Finding {
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

/// What a server's error log said, for a finding: the count as a fact and one line
/// quoting it for the explanation. `None` when the class was not logged.
pub(super) fn logged(c: &Ctx, class: &str) -> Option<(u64, Fact, String)> {
    let (n, example) = c.log(class)?;
    let quote: String = example.chars().take(160).collect();
    Some((
        n,
        fact(&format!("error log lines \"{class}\""), n as f64, "lines"),
        match n {
            1 => format!(" The error log said so: `{quote}`."),
            _ => format!(" The error log said so {n} times, e.g. `{quote}`."),
        },
    ))
}

/// Busy processes that are neither the server nor loadlens on `cpu` (any CPU if None).
pub(super) fn competitors(c: &Ctx, cpu: Option<u32>) -> Vec<String> {
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

/// The busy processes on `cpu` when every one of them is already niced (and none is
/// SCHED_IDLE, which would not have delayed the worker): "sh (pid 12, nice 19)".
pub(super) fn already_niced(c: &Ctx, cpu: u32) -> Option<String> {
    let busy: Vec<_> = c
        .ev?
        .window
        .other_processes
        .iter()
        .filter(|o| o.cpu_pct >= 20.0 && o.last_cpu == cpu)
        .collect();
    (!busy.is_empty() && busy.iter().all(|o| o.nice > 0 && !o.sched_idle)).then(|| {
        busy.iter()
            .map(|o| format!("{} (pid {}, nice {})", o.comm, o.pid, o.nice))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::fixture;

    /// Regression (healthy beside `nice -n 19` busy loop, kernel 6.18): the niced loop
    /// still took 73% of the worker's CPU and delayed it 209 ms/s; the fix said "lower
    /// its priority (nice)", which it already was. A niced competitor gets SCHED_IDLE.
    #[test]
    fn a_niced_competitor_is_told_sched_idle() {
        let mut run = fixture("cpu-contention-before");
        let find = |run: &crate::run::Run| {
            crate::diagnose::diagnose(run)
                .into_iter()
                .find(|f| f.id == "run-queue-delay")
                .unwrap()
        };
        assert!(find(&run).fix.contains("lower its priority"));
        for o in run
            .evidence
            .as_mut()
            .unwrap()
            .window
            .other_processes
            .iter_mut()
        {
            o.nice = 19;
        }
        let f = find(&run);
        assert!(f.fix.contains("SCHED_IDLE"), "{}", f.fix);
        assert!(f.fix.contains("nice 19"), "{}", f.fix);
    }
}
