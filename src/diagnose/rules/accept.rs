//! Accept queues: the listen queue and the SYN queue of the server's socket.

use super::{fact, finding, ramp, Ctx, FindingId};
use crate::diagnose::kinds::Knob;
use crate::run::Counter;
use crate::run::{Finding, Kind};

/// Connections dropped because the listen socket's accept queue was full.
pub(super) fn listen_queue_overflow(c: &Ctx) -> Option<Finding> {
    let overflows = c.counter(Counter::ListenOverflows);
    let drops = c.counter(Counter::ListenDrops);
    let opened = c.counter(Counter::PassiveOpens).max(1);
    // A handful over a run can be noise of a restart; one in a thousand is a pattern.
    if overflows < 10 || (overflows as f64) < 0.001 * opened as f64 {
        return None;
    }
    // The fullest queue: the front's, or an upstream's the front connects to.
    let fill =
        |q: &&crate::run::QueueMax| (q.max_queue as f64 / q.backlog.max(1) as f64, q.max_queue);
    let q = c.ev?.window.listen_queues.iter().max_by(|a, b| {
        fill(a)
            .partial_cmp(&fill(b))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let port = c.run.target_addr.rsplit(':').next().unwrap_or("");
    if let Some(q) = q.filter(|q| !q.addr.ends_with(&format!(":{port}")) && q.max_queue > 0) {
        return Some(upstream_queue_overflow(c, q, overflows));
    }
    let q = q.filter(|q| q.port_is_tcp());
    let somaxconn = c.sysctl("net.core.somaxconn").unwrap_or("?");
    let rate = overflows as f64 / c.duration_s();
    let mut conf = ramp(overflows as f64 / opened as f64, 0.001, 0.02);
    let mut f = finding(
        FindingId::ListenQueueOverflow,
        Kind::Bottleneck,
        0.0,
        format!(
            "listen queue overflow on {}",
            q.map(|q| q.addr.as_str()).unwrap_or("the server's port")
        ),
    );
    f.evidence = vec![
        Counter::ListenOverflows.fact(overflows as f64),
        fact("ListenOverflows rate", rate, "/s"),
        Counter::ListenDrops.fact(drops as f64),
        Counter::PassiveOpens.fact(opened as f64),
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
    // The backlog a server asks for is its own directive; whether it accepts fast
    // enough is its workers' or its connection limit's business (HAProxy stops
    // accepting at `maxconn`, and its backlog follows it).
    let backlog_knob = c
        .knob(Knob::Backlog)
        .unwrap_or_else(|| "the server's listen() backlog".into());
    let accepts = match c.knob(Knob::Connections) {
        Some(k) => format!("also check the server accepts fast enough: its workers and {k}"),
        None => {
            "also check the server accepts fast enough (its workers, its connection limit)".into()
        }
    };
    f.fix = format!(
        "raise {backlog_knob} (effective now {backlog}) and net.core.somaxconn (now {somaxconn}), e.g. 4096; {accepts}"
    );
    Some(f)
}

/// The accept queue that overflowed is an upstream's: the front (a proxy) connects to it
/// faster than it accepts.
fn upstream_queue_overflow(c: &Ctx, q: &crate::run::QueueMax, overflows: u64) -> Finding {
    let opened = c.counter(Counter::PassiveOpens).max(1);
    let comm = c
        .upstream_procs()
        .first()
        .map(|p| format!(" ({})", p.comm))
        .unwrap_or_default();
    let mut conf = ramp(overflows as f64 / opened as f64, 0.001, 0.02);
    if q.max_queue as f64 >= 0.5 * q.backlog as f64 {
        conf = (conf + 0.1).min(0.98);
    }
    let mut f = finding(
        FindingId::ListenQueueOverflow,
        Kind::Bottleneck,
        conf,
        format!("listen queue overflow on the upstream {}{comm}", q.addr),
    );
    f.evidence = vec![
        Counter::ListenOverflows.fact(overflows as f64),
        fact(
            "upstream accept queue max seen",
            q.max_queue as f64,
            "connections",
        ),
        fact(
            "upstream effective backlog",
            q.backlog as f64,
            "connections",
        ),
        Counter::PassiveOpens.fact(opened as f64),
    ];
    f.explanation = format!(
        "The front server opened connections to its upstream faster than the upstream accepted them; with the upstream's accept queue full (effective backlog {}) the kernel dropped the handshakes, and the front retried after a second or more — the latency spikes and lost throughput of the run. The upstream is the slower stage.",
        q.backlog
    );
    let backlog = crate::diagnose::kinds::knob(c.upstream_kind(), Knob::Backlog)
        .unwrap_or("the upstream's listen() backlog");
    f.fix = format!(
        "give the upstream capacity to accept faster (more worker processes or threads), raise {backlog} (effective now {}) and net.core.somaxconn (now {}), and keep connections to it alive so fewer are opened",
        q.backlog,
        c.sysctl("net.core.somaxconn").unwrap_or("?")
    );
    f
}

/// SYNs dropped or answered with cookies because the SYN queue was full.
pub(super) fn syn_queue_overflow(c: &Ctx) -> Option<Finding> {
    let drop = c.counter(Counter::ReqQFullDrop);
    let cookies = c.counter(Counter::ReqQFullDoCookies) + c.counter(Counter::SyncookiesSent);
    if drop + cookies < 10 {
        return None;
    }
    let mut f = finding(
        FindingId::SynQueueOverflow,
        Kind::Bottleneck,
        ramp((drop + cookies) as f64, 10.0, 1000.0),
        "SYN queue overflow on the server's listen socket".into(),
    );
    f.evidence = vec![
        Counter::ReqQFullDrop.fact(drop as f64),
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

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{fires, fixture, with_counters};

    #[test]
    fn near_miss_listen_overflows() {
        let mut run = fixture("listen-backlog-before");
        let ev = run.evidence.as_mut().unwrap();
        // A few overflows (a restart, a burst) are not a pattern.
        ev.window
            .counters
            .insert("TcpExt.ListenOverflows".into(), 5);
        assert!(!fires(&run, "listen-queue-overflow"));
        run.evidence
            .as_mut()
            .unwrap()
            .window
            .counters
            .insert("TcpExt.ListenOverflows".into(), 500);
        assert!(fires(&run, "listen-queue-overflow"));
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
}
