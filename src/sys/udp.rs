//! UDP's counters by name: `/proc/net/snmp`'s `Udp` lines and `/proc/net/snmp6`'s
//! `Udp6…` lines (udp(7): RcvbufErrors counts datagrams dropped at a full receive
//! buffer, InErrors every datagram received and not delivered).

use std::collections::BTreeMap;

use super::procfs::parse_snmp;
use crate::run::UdpCounters;

/// The `Udp` counters of `/proc/net/snmp` by name; `None` when the text has no `Udp`
/// lines.
pub fn parse_udp(text: &str) -> Option<UdpCounters> {
    udp_of(&parse_snmp(text))
}

/// The `Udp.*` counters among those [`parse_snmp`] read.
pub fn udp_of(all: &BTreeMap<String, u64>) -> Option<UdpCounters> {
    let get = |n: &str| all.get(&format!("Udp.{n}")).copied();
    Some(UdpCounters {
        in_datagrams: get("InDatagrams")?,
        out_datagrams: get("OutDatagrams").unwrap_or(0),
        in_errors: get("InErrors").unwrap_or(0),
        rcvbuf_errors: get("RcvbufErrors").unwrap_or(0),
        sndbuf_errors: get("SndbufErrors").unwrap_or(0),
    })
}

/// The `Udp6` counters of `/proc/net/snmp6` (one `Udp6Name value` per line) by name;
/// `None` when it has none (IPv6 off).
pub fn parse_udp6(text: &str) -> Option<UdpCounters> {
    let mut c = UdpCounters::default();
    let mut any = false;
    for line in text.lines() {
        let mut w = line.split_ascii_whitespace();
        let (Some(name), Some(Ok(v))) = (w.next(), w.next().map(str::parse::<u64>)) else {
            continue;
        };
        let field = match name {
            "Udp6InDatagrams" => &mut c.in_datagrams,
            "Udp6OutDatagrams" => &mut c.out_datagrams,
            "Udp6InErrors" => &mut c.in_errors,
            "Udp6RcvbufErrors" => &mut c.rcvbuf_errors,
            "Udp6SndbufErrors" => &mut c.sndbuf_errors,
            _ => continue,
        };
        *field = v;
        any = true;
    }
    any.then_some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(name: &str) -> String {
        let p = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    #[test]
    fn udp_counters_by_name() {
        let u = parse_udp(&data("host-proc-net-snmp")).unwrap();
        assert_eq!((u.in_datagrams, u.out_datagrams), (69, 70));
        assert_eq!((u.in_errors, u.rcvbuf_errors, u.sndbuf_errors), (0, 0, 0));
        // UdpLite's line has the same names: not mistaken for Udp's.
        let t = data("host-proc-net-snmp").replace("UdpLite: 0 0 0 0", "UdpLite: 5 5 5 5");
        assert_eq!(parse_udp(&t).unwrap().in_errors, 0);
        let u6 = parse_udp6(&data("host-proc-net-snmp6")).unwrap();
        assert_eq!(u6.rcvbuf_errors, 0);
        assert_eq!(parse_udp6("Ip6InReceives 3\n"), None);
        assert_eq!(parse_udp("Tcp: A\nTcp: 1\n"), None);
    }
}
