//! HTTP/3 in the HTML report: what the client's QUIC stack counted (handshakes, packets
//! sent and lost, congestion events, datagrams per system call, the RTT it measured),
//! and the server's UDP side over the window (the kernel's `Udp` counters and each of
//! the server's UDP sockets: its buffers, the most it held, what it dropped).

use std::fmt::Write;

use crate::run::Run;
use crate::units::{fmt_bytes, fmt_us};

/// The "HTTP/3 (QUIC)" section: nothing for a run over TCP.
pub(super) fn quic(o: &mut String, run: &Run) {
    let r = &run.results;
    let Some(q) = &r.quic else {
        if let Some(port) = r.alt_svc_h3_port {
            let _ = write!(
                o,
                "<h2>HTTP/3 (QUIC)</h2><p>The server offers HTTP/3 on UDP port {port} \
                 (<code>Alt-Svc: h3=\":{port}\"</code> in its responses): load it over QUIC \
                 with <code>--h3</code>.</p>"
            );
        }
        return;
    };
    let lost_pct = q.counts.packets_lost as f64 * 100.0 / q.counts.packets_sent.max(1) as f64;
    let per_call = |d: u64, c: u64| {
        if c == 0 {
            "-".to_string()
        } else {
            format!("{:.2}", d as f64 / c as f64)
        }
    };
    let handshakes = r
        .phases
        .as_ref()
        .and_then(|p| p.tls_handshake.as_ref())
        .map_or(0, |l| l.count);
    o.push_str("<h2>HTTP/3 (QUIC)</h2><table>");
    let mut rows: Vec<(&str, String)> = vec![
        (
            "QUIC connections (handshakes completed)",
            format!("{} ({handshakes})", r.connections_opened),
        ),
        ("packets sent", q.counts.packets_sent.to_string()),
        (
            "packets lost (declared by the client's loss detection)",
            format!(
                "{} ({lost_pct:.2}%), {}",
                q.counts.packets_lost,
                fmt_bytes(q.counts.bytes_lost as f64)
            ),
        ),
        ("congestion events", q.counts.congestion_events.to_string()),
        (
            "datagrams sent / send calls",
            format!(
                "{} / {} ({} a call)",
                q.counts.datagrams_sent,
                q.counts.send_calls,
                per_call(q.counts.datagrams_sent, q.counts.send_calls)
            ),
        ),
        (
            "datagrams received / receive calls",
            format!(
                "{} / {} ({} a call)",
                q.counts.datagrams_received,
                q.counts.receive_calls,
                per_call(q.counts.datagrams_received, q.counts.receive_calls)
            ),
        ),
        (
            "RTT the QUIC stack measured, p50 / p99 / max",
            format!(
                "{} / {} / {}",
                fmt_us(q.rtt.at(50.0).unwrap_or(0) as f64),
                fmt_us(q.rtt.at(99.0).unwrap_or(0) as f64),
                fmt_us(q.rtt.max_us as f64)
            ),
        ),
        ("connections whose RTT was read", q.rtt.count.to_string()),
    ];
    // The handshakes by kind when any resumed (`--resume`): how many, their median time.
    let c = &q.counts;
    if c.handshakes_resumed + c.handshakes_0rtt > 0 {
        for (n, what, l) in [
            (
                c.handshakes_full,
                "full handshakes (1-RTT)",
                &q.handshake_full,
            ),
            (
                c.handshakes_resumed,
                "resumed handshakes (session ticket)",
                &q.handshake_resumed,
            ),
            (
                c.handshakes_0rtt,
                "0-RTT handshakes (early data accepted)",
                &q.handshake_0rtt,
            ),
        ] {
            let p50 = l.as_ref().and_then(|l| l.at(50.0));
            let time = p50.map_or(String::new(), |p| format!(", p50 {}", fmt_us(p as f64)));
            rows.push((what, format!("{n}{time}")));
        }
    }
    for (k, v) in rows {
        let _ = write!(o, "<tr><td>{k}</td><td>{v}</td></tr>");
    }
    o.push_str("</table>");
}

/// The "UDP" section: the server's UDP evidence over the window, whatever protocol the
/// load used (a QUIC server's drops show here with a TCP load too).
pub(super) fn udp(o: &mut String, run: &Run) {
    let Some(e) = &run.evidence else { return };
    let Some(u) = &e.window.udp else { return };
    let t = u.total();
    if t.in_datagrams + t.out_datagrams + t.in_errors == 0 && u.sockets.is_empty() {
        return;
    }
    let dt = e.window.duration_s.max(1e-9);
    let _ = write!(
        o,
        "<h2>UDP</h2><table><tr><th>counter (IPv4 + IPv6, over the {:.1} s window)</th><th>change</th><th>per second</th></tr>",
        e.window.duration_s
    );
    for (k, v) in [
        ("InDatagrams", t.in_datagrams),
        ("OutDatagrams", t.out_datagrams),
        ("InErrors", t.in_errors),
        (
            "RcvbufErrors (dropped at a full receive buffer)",
            t.rcvbuf_errors,
        ),
        ("SndbufErrors", t.sndbuf_errors),
    ] {
        let _ = write!(
            o,
            "<tr><td>{k}</td><td>{v}</td><td>{:.0}</td></tr>",
            v as f64 / dt
        );
    }
    o.push_str("</table>");
    if !u.sockets.is_empty() {
        o.push_str("<table><tr><th>server's UDP socket</th><th>receive buffer</th><th>receive queue, highest</th><th>send buffer</th><th>dropped</th></tr>");
        for s in &u.sockets {
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                super::esc(&s.addr),
                fmt_bytes(s.rcvbuf_bytes as f64),
                fmt_bytes(s.receive_queue_max_bytes as f64),
                fmt_bytes(s.sndbuf_bytes as f64),
                s.drops
            );
        }
        o.push_str("</table>");
    }
    let sysctls: Vec<String> = ["net.core.rmem_max", "net.core.rmem_default"]
        .iter()
        .filter_map(|k| Some(format!("{k} = {}", e.host.sysctls.get(*k)?)))
        .collect();
    if !sysctls.is_empty() {
        let _ = write!(o, "<p>{}</p>", super::esc(&sysctls.join(", ")));
    }
}
