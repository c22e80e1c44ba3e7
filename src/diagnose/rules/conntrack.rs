//! The connection-tracking table.

use super::{fact, finding, ramp, Ctx, FindingId};
use crate::run::{Finding, Kind};

pub(super) fn conntrack_full(c: &Ctx) -> Option<Finding> {
    let ct = c.ev?.window.conntrack.as_ref()?;
    let fill = ct.count_max_seen as f64 / ct.max.max(1) as f64;
    let drops = ct.drop + ct.early_drop + ct.insert_failed;
    if fill < 0.9 && drops == 0 {
        return None;
    }
    let mut f = finding(
        FindingId::ConntrackFull,
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

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{fires, fixture};
    use crate::run::Conntrack;

    #[test]
    fn conntrack_full() {
        let mut run = fixture("healthy-before");
        let ct = |count, drop| Conntrack {
            count_max_seen: count,
            max: 1000,
            drop,
            ..Conntrack::default()
        };
        run.evidence.as_mut().unwrap().window.conntrack = Some(ct(990, 0));
        assert!(fires(&run, "conntrack-full"));
        run.evidence.as_mut().unwrap().window.conntrack = Some(ct(800, 0));
        assert!(!fires(&run, "conntrack-full"));
        run.evidence.as_mut().unwrap().window.conntrack = Some(ct(800, 3));
        assert!(fires(&run, "conntrack-full"), "drops alone are enough");
    }
}
