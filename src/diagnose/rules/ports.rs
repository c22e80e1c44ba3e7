//! Local ports and TIME_WAIT: running out of ports to connect from, and the cost of finding
//! one.

use super::{fact, finding, logged, ramp, Ctx, FindingId};
use crate::diagnose::kinds::Knob;
use crate::run::{Finding, Kind};

/// The front worker's system CPU from which connect()'s port search past TIME_WAIT
/// entries is a cost that limits the rate (the published case: 96%, 88% of its
/// samples in the search); below it the TIME_WAIT pile is told as a warning.
const COSTLY_SYS_PCT: f64 = 50.0;

/// Size of net.ipv4.ip_local_port_range.
fn port_range(c: &Ctx) -> Option<(u64, String)> {
    let s = c.sysctl("net.ipv4.ip_local_port_range")?;
    let mut it = s.split_whitespace().filter_map(|x| x.parse::<u64>().ok());
    let (lo, hi) = (it.next()?, it.next()?);
    Some((hi.saturating_sub(lo) + 1, s.to_string()))
}

/// No local port left to connect from: loadlens's own EADDRNOTAVAIL connect errors, or
/// a proxying server answering 502 with TIME_WAIT ≈ the whole local port range.
pub(super) fn ephemeral_ports_exhausted(c: &Ctx) -> Option<Finding> {
    let r = &c.run.results;
    let own = r.connect_errors.get("EADDRNOTAVAIL").copied().unwrap_or(0);
    let bad_gateway = r.status_codes.get(&502).copied().unwrap_or(0)
        + r.status_codes.get(&504).copied().unwrap_or(0);
    let tw = c.ev.map(|e| e.window.time_wait_max).unwrap_or(0);
    let (range, range_s) = port_range(c).unwrap_or((28232, "?".into()));
    // "connect() to 127.0.0.1:8081 failed (99: Cannot assign requested address)"
    let log = logged(c, "cannot-assign-address");
    // Without that line, TIME_WAIT and 502s say it only when no error log was read: a
    // log that was read and is silent on it means the 502s came from elsewhere (and
    // TIME_WAIT counts every destination of the namespace, ports run out per one).
    let log_read =
        c.ev.is_some_and(|e| e.logs.iter().any(|l| l.bytes_read > 0));
    let server_side = (bad_gateway as f64 >= 0.1 * r.responses.max(1) as f64
        && tw as f64 >= 0.8 * range as f64
        && !log_read)
        || log.is_some();
    if own == 0 && !server_side {
        return None;
    }
    let conf = if log.is_some() {
        0.95
    } else if server_side {
        ramp(tw as f64 / range as f64, 0.8, 1.0).max(ramp(
            bad_gateway as f64 / r.responses.max(1) as f64,
            0.1,
            0.5,
        ))
    } else {
        ramp(own as f64, 1.0, 100.0)
    };
    let mut f = finding(
        FindingId::EphemeralPortsExhausted,
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
    if let Some((_, fact, quote)) = log {
        f.evidence.push(fact);
        f.explanation.push_str(&quote);
    }
    f.fix = format!(
        "reuse upstream connections ({}), and widen net.ipv4.ip_local_port_range (now {range_s}), e.g. \"10000 65535\"",
        reuse_upstream(c)
    );
    Some(f)
}

/// A proxying server opening a connection per request, with TIME_WAIT piling up and
/// tcp_tw_reuse off: connect() scans thousands of TIME_WAIT entries for a free port.
pub(super) fn time_wait_connect_cost(c: &Ctx) -> Option<Finding> {
    // Only a proxy opens upstream connections: a front whose configuration passes
    // nowhere shares the namespace's counters with someone else's.
    if !c.proxies() {
        return None;
    }
    let active = c.upstream_opens();
    let responses = c.responses().max(1);
    let tw = c.ev?.window.time_wait_max;
    let reuse = c.sysctl("net.ipv4.tcp_tw_reuse").unwrap_or("?");
    // At least one upstream connection for every other response, and enough TIME_WAIT
    // for the port search to cost.
    if (active as f64) < 0.5 * responses as f64 || tw < 1000 || reuse == "1" {
        return None;
    }
    // A proxy opens one connection per request, a few when it retries the next
    // upstream; many more means other processes of the namespace opened them (the
    // counter is the namespace's), and the upstream's share is unknown.
    let attempts = responses + c.run.results.errors.total();
    if active > 4 * attempts {
        return None;
    }
    // A front that passes only to unix sockets (php-fpm's) opens no TCP connection
    // upstream: the machine's TCP opens and TIME_WAIT are someone else's.
    let ups = c
        .ev?
        .topology
        .config
        .as_ref()
        .map(|cfg| cfg.upstreams.as_slice())
        .unwrap_or(&[]);
    if !ups.is_empty() && ups.iter().all(|u| u.starts_with("unix:")) {
        return None;
    }
    let sys = c
        .front_workers()
        .iter()
        .map(|p| p.system_pct)
        .fold(0.0, f64::max);
    let conf = ramp(tw as f64, 1000.0, 20000.0).max(if sys >= 70.0 { 0.85 } else { 0.0 });
    // TIME_WAIT alone is not a cost: the port search shows as the worker's time in
    // the kernel (or on its profiled stacks, below). A worker mostly idle in both is
    // told, not named the bottleneck.
    let kind = if sys >= COSTLY_SYS_PCT {
        Kind::Bottleneck
    } else {
        Kind::Warning
    };
    let mut f = finding(
        FindingId::TimeWaitConnectCost,
        kind,
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
    // The profile confirms it: the port search itself, on the workers' stacks.
    if let Some((p, pids)) = super::profile::profiled(c) {
        let share = p.share(&pids, super::profile::connect_port_search);
        f.evidence.push(fact(
            "profile: worker samples in connect()'s port search (inet_hash_connect, __inet_check_established)",
            share,
            "%",
        ));
        if share >= 10.0 {
            f.kind = Kind::Bottleneck;
            f.confidence = f.confidence.max(ramp(share, 10.0, 40.0).max(0.9));
            f.explanation.push_str(&format!(
                " The profile shows it: {share:.0}% of the worker's samples were in that search."
            ));
        }
    }
    if f.kind == Kind::Warning {
        f.explanation.push_str(&format!(
            " Not yet a limit: the busiest worker spent {sys:.0}% of its time in the kernel (a cost would show as {COSTLY_SYS_PCT:.0}% or more)."
        ));
    }
    f.fix = format!(
        "reuse upstream connections: {}; or set net.ipv4.tcp_tw_reuse=1 (now {reuse})",
        reuse_upstream(c)
    );
    Some(f)
}

/// How the front server keeps its upstream connections open, in its own words.
fn reuse_upstream(c: &Ctx) -> String {
    match c.knob(Knob::UpstreamReuse) {
        Some(k) if c.front_kind() == crate::kinds::nginx::KIND => {
            format!("{k}{}", c.now("keepalive"))
        }
        Some(k) => k,
        None => "keep-alive connections from the proxy to its upstream".into(),
    }
}

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{fires, fixture};

    #[test]
    fn near_miss_time_wait_and_ports() {
        let mut run = fixture("time-wait-before");
        run.evidence.as_mut().unwrap().window.time_wait_max = 900;
        assert!(!fires(&run, "time-wait-connect-cost"));
        let mut run = fixture("time-wait-before");
        run.evidence
            .as_mut()
            .unwrap()
            .host
            .sysctls
            .insert("net.ipv4.tcp_tw_reuse".into(), "1".into());
        assert!(!fires(&run, "time-wait-connect-cost"));
        // 502s with TIME_WAIT well under the port range: not port exhaustion.
        let mut run = fixture("ephemeral-ports-before");
        run.evidence.as_mut().unwrap().window.time_wait_max = 30;
        assert!(!fires(&run, "ephemeral-ports-exhausted"));
    }

    /// TIME_WAIT past a thousand with the worker nearly idle in the kernel (the thread
    /// pool's run, 4% system CPU) is told, not the bottleneck; the published case (96%,
    /// its profile in the port search) is.
    #[test]
    fn time_wait_without_kernel_time_is_a_warning() {
        use crate::run::Kind;
        let kind = |name: &str| {
            crate::diagnose::diagnose(&fixture(name))
                .into_iter()
                .find(|f| f.id == "time-wait-connect-cost")
                .map(|f| f.kind)
        };
        assert_eq!(kind("thread-pool-after"), Some(Kind::Warning));
        assert_eq!(kind("time-wait-before"), Some(Kind::Bottleneck));
    }

    /// A front that passes only to a unix socket opens no TCP connection upstream:
    /// TCP opens and TIME_WAIT from elsewhere on the machine are not its cost.
    #[test]
    fn unix_socket_upstreams_open_no_tcp_connections() {
        let mut run = fixture("time-wait-before");
        assert!(fires(&run, "time-wait-connect-cost"));
        let cfg = run
            .evidence
            .as_mut()
            .unwrap()
            .topology
            .config
            .get_or_insert_with(Default::default);
        cfg.upstreams = vec!["unix:/run/php/php8.2-fpm.sock".into()];
        assert!(!fires(&run, "time-wait-connect-cost"));
    }
}
