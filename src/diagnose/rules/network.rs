//! The network: a saturated link, retransmits.

use super::{fact, finding, ramp, Ctx};
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
pub(super) fn retransmits(c: &Ctx) -> Option<Finding> {
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
}
