//! The rules, grouped by resource: client, accept queues, ports, conntrack, upstream,
//! proxy buffers, socket buffers, CPU, network, stalls, limits, HTTP. Each is
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
mod ports;
pub mod profile;
mod sockbuf;
mod stalls;
mod upstream;

pub(super) use super::{fact, ramp, Ctx};
use crate::run::{Fact, Finding, Kind};

pub(super) type Rule = fn(&Ctx) -> Option<Finding>;

pub(super) const ALL: &[Rule] = &[
    client::client_saturated,
    accept::listen_queue_overflow,
    accept::syn_queue_overflow,
    conntrack::conntrack_full,
    ports::ephemeral_ports_exhausted,
    ports::time_wait_connect_cost,
    upstream::upstream_saturated,
    buffers::small_proxy_buffers,
    buffers::sendfile_off,
    sockbuf::small_send_buffer,
    sockbuf::client_receive_window,
    cpu::run_queue_delay,
    stalls::event_loop_stall,
    network::link_saturated,
    cpu::softirq_concentrated,
    limits::fd_limit,
    limits::connection_limit,
    cpu::server_cpu_saturated,
    cpu::worker_imbalance,
    cpu::new_connection_cost,
    network::retransmits,
    http::nagle_delayed_ack,
    http::rate_limited,
    http::http_errors,
    profile::kernel_network_stack,
    profile::allocator_hot,
    profile::compression_cpu,
    profile::tls_cpu,
    profile::syscall_bound,
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
