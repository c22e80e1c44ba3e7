//! The network: a saturated link, retransmits.

use super::{fact, finding, ramp, Ctx, FindingId};
use crate::run::Counter;
use crate::run::{Finding, Kind};

/// An interface at ≥ 90% of its speed or of a rate-limiting qdisc.
pub(super) fn link_saturated(c: &Ctx) -> Option<Finding> {
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
        FindingId::LinkSaturated,
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

/// TCP's minimum retransmission timeout (`TCP_RTO_MIN`, 200 ms in Linux; RFC 6298
/// says 1 s, every stack uses less): a segment lost where no later one can reveal the
/// loss — a request or a small response, alone in flight — is sent again only when it
/// expires, so each such loss adds ≥ 200 ms to one request.
const RTO_MIN_US: u64 = 200_000;
/// Share of the responses at the minimum RTO from which loss is the tail's cause
/// (above p99.5 it shapes the p99 and the max).
const RTO_MODE_SHARE: f64 = 0.005;

/// The latency mode at the minimum RTO: (responses in it, their share). The window is
/// 200 ms to 2 × 200 ms plus a margin (a second loss of the same segment doubles it);
/// it must stand far above the 100-199 ms just below it, where a slow server's own
/// tail would be, and hold ≥ `RTO_MODE_SHARE` of the responses.
pub(super) fn rto_mode(h: &hdrhistogram::Histogram<u64>) -> Option<(u64, f64)> {
    let count = |lo: u64, hi: u64| -> u64 {
        h.iter_recorded()
            .filter(|v| (lo..=hi).contains(&v.value_iterated_to()))
            .map(|v| v.count_since_last_iteration())
            .sum()
    };
    let at_rto = count(RTO_MIN_US, 2 * RTO_MIN_US + 50_000);
    let below = count(RTO_MIN_US / 2, RTO_MIN_US - 1);
    let share = at_rto as f64 / h.len().max(1) as f64;
    (share >= RTO_MODE_SHARE && at_rto >= 4 * below.max(1)).then_some((at_rto, share))
}

/// Responses at the minimum RTO per segment retransmitted, at most, for the mode to be
/// loss's.
const RTO_PER_RETRANSMIT: u64 = 4;

/// TCP retransmitting: a bottleneck of the tail when the latency has a mode at the
/// minimum RTO (loss's signature: the slow requests each waited for a retransmission
/// timer), a warning otherwise when a noticeable share of segments were sent again.
pub(super) fn retransmits(c: &Ctx) -> Option<Finding> {
    let re = c.counter(Counter::RetransSegs);
    let out = c.counter(Counter::OutSegs).max(1);
    let timeouts = c.counter(Counter::Timeouts) + c.counter(Counter::LossProbes);
    let h = c.run.results.latency.decode().ok();
    let mode = h
        .as_ref()
        .filter(|_| re > 0 && timeouts > 0)
        .and_then(rto_mode)
        // Each request held for a retransmission timeout had a segment sent again: far
        // more slow responses than retransmissions is another wait that happens to last
        // 200-450 ms (reads queued behind a slow disk: 135 at that time with 15
        // retransmits, against 105-126 with 97-117 on a lossy link). The client's own
        // retransmits are not counted here, hence the slack.
        .filter(|&(n, _)| n <= RTO_PER_RETRANSMIT * re);
    if let (Some((n, share)), Some(h)) = (mode, h.as_ref()) {
        return Some(loss_tail(c, h, n, share, re, out));
    }
    if re < 100 || (re as f64) < 0.01 * out as f64 {
        return None;
    }
    let mut f = finding(
        FindingId::Retransmits,
        Kind::Warning,
        ramp(re as f64 / out as f64, 0.01, 0.1),
        "TCP retransmissions".into(),
    );
    f.evidence = vec![
        Counter::RetransSegs.fact(re as f64),
        fact(
            "share of segments sent",
            re as f64 * 100.0 / out as f64,
            "%",
        ),
        Counter::Timeouts.fact(c.counter(Counter::Timeouts) as f64),
    ];
    f.explanation = "Segments were lost and sent again (drops in a full queue, on a shaped link or in the network); each loss stalls a connection for a round trip or a retransmission timeout.".into();
    f.fix = "find the drop: `nstat`, qdisc drops (`tc -s qdisc`), NIC drops (`ip -s link`), softnet drops; raise net.core.netdev_max_backlog if softnet drops".into();
    Some(f)
}

/// The evidence naming the responses at the minimum RTO.
pub(super) const AT_RTO: &str = "responses at the minimum RTO (200-450 ms)";

/// Loss made the tail: the slow requests sit at the minimum retransmission timeout.
fn loss_tail(
    c: &Ctx,
    h: &hdrhistogram::Histogram<u64>,
    n: u64,
    share: f64,
    re: u64,
    out: u64,
) -> Finding {
    let p50 = h.value_at_quantile(0.5) as f64 / 1e3;
    let p99 = h.value_at_quantile(0.99) as f64 / 1e3;
    let mut f = finding(
        FindingId::Retransmits,
        Kind::Bottleneck,
        ramp(share, RTO_MODE_SHARE, 0.02).max(0.6),
        format!(
            "the tail is lost segments: {:.1}% of requests waited for TCP's retransmission timeout (200 ms) — p50 {p50:.2} ms, p99 {p99:.0} ms",
            share * 100.0
        ),
    );
    f.evidence = vec![
        fact(AT_RTO, n as f64, "responses"),
        fact("share of responses", share * 100.0, "%"),
        fact("p50 latency", p50 * 1e3, "µs"),
        fact("p99 latency", p99, "ms"),
        Counter::RetransSegs.fact(re as f64),
        fact(
            "share of segments sent",
            re as f64 * 100.0 / out as f64,
            "%",
        ),
        Counter::Timeouts.fact(c.counter(Counter::Timeouts) as f64),
        Counter::LossProbes.fact(c.counter(Counter::LossProbes) as f64),
    ];
    f.explanation = format!(
        "Most requests took {p50:.2} ms and {:.1}% took 200 ms or more, with little between: a latency mode at TCP's minimum retransmission timeout (200 ms in Linux) is loss's signature. A request or a small response is alone in flight on its connection; when it is lost no later segment reveals the loss (no duplicate ACKs, no fast retransmit), so it is sent again only when the timer (or the tail-loss probe, which waits as long for a lone segment) expires. The server sent {re} segments again ({:.2}% of those it sent); nothing needed to saturate for the tail to be this long.",
        share * 100.0,
        re as f64 * 100.0 / out as f64
    );
    f.fix = "find and remove the loss: `tc -s qdisc` (drops), `ip -s link` (NIC errors and drops), `nstat -az TcpExtTCPTimeouts TcpRetransSegs`, firewall rules that drop (`nft list ruleset`), the network path (`mtr`); for a lossy link you cannot fix, keep connections alive and send fewer, larger messages — the timer cannot go below the kernel's 200 ms minimum except per route (`ip route change … rto_min 50ms`)".into();
    f
}

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{fires, fixture, with_counters};

    #[test]
    fn near_miss_link() {
        let mut run = fixture("slow-link-before");
        for i in run.evidence.as_mut().unwrap().window.ifaces.iter_mut() {
            i.tx_bytes_per_s *= 0.85;
            i.rx_bytes_per_s *= 0.85;
        }
        assert!(!fires(&run, "link-saturated"));
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

    /// Loss's mode: requests at 200+ ms with nothing just below, from 0.5% of them.
    #[test]
    fn a_mode_at_the_minimum_rto() {
        let h = |fast: u64, at: u64, slow: u64| {
            let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
            h.record_n(500, fast).unwrap();
            h.record_n(205_000, slow).unwrap();
            h.record_n(at, 0).unwrap();
            h
        };
        assert!(super::rto_mode(&h(980, 0, 20)).is_some());
        assert!(
            super::rto_mode(&h(997, 0, 3)).is_none(),
            "0.3%: not the tail's shape"
        );
        let mut queued = h(900, 0, 20);
        queued.record_n(150_000, 80).unwrap();
        assert!(
            super::rto_mode(&queued).is_none(),
            "a slow tail below 200 ms too"
        );
    }
}
