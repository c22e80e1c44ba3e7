//! The terminal view: wrk's block, which people know how to read, plus what wrk leaves
//! out (status codes, connection reuse, the client self-check).

use std::fmt::Write as _;

use crate::run::{LatencySummary, Run};
use crate::units::{fmt_bytes, fmt_count, fmt_duration, fmt_us};

/// Renders the run as text. `latency` adds the percentile block and the details.
pub fn render(run: &Run, latency: bool) -> String {
    let mut o = String::new();
    let r = &run.results;
    let s = &run.spec;
    let window = match (s.duration_s, s.requests) {
        (Some(d), _) => format!(
            "{} test",
            fmt_duration(std::time::Duration::from_secs_f64(d))
        ),
        (None, Some(n)) => format!("{n} requests"),
        (None, None) => "test".to_string(),
    } + &match &s.stages {
        Some(st) => format!(" in {} stages ({})", st.stages.len(), st.text()),
        None => String::new(),
    };
    let _ = writeln!(o, "Running {window} @ {}", s.url);
    if let Some(seg) = &run.segment {
        let _ = writeln!(
            o,
            "  segment {}/{} of {} connections, on {}",
            seg.index, seg.count, seg.whole_connections, seg.host
        );
    }
    let _ = writeln!(
        o,
        "  {} threads and {} connections{}",
        s.threads,
        s.connections,
        match s.connreqs {
            Some(n) => format!(", {n} request{} per connection", plural(n as u64)),
            None => String::new(),
        } + &match s.rate {
            Some(r) => format!(", {r:.0} requests/s scheduled"),
            None => String::new(),
        } + &if r.protocol == "h2" || r.protocol == "h3" {
            format!(
                ", {} with {} stream{} per connection",
                if r.protocol == "h2" {
                    "HTTP/2"
                } else {
                    "HTTP/3 over QUIC"
                },
                r.streams_per_connection,
                plural(r.streams_per_connection as u64)
            )
        } else {
            String::new()
        }
    );
    if let Some(note) = &r.io_note {
        let _ = writeln!(o, "  {note}");
    }
    if let (Some(port), None) = (r.alt_svc_h3_port, &r.quic) {
        let _ = writeln!(
            o,
            "  The server offers HTTP/3 on UDP port {port} (Alt-Svc: h3=\":{port}\"): load it over QUIC with --h3"
        );
    }
    let _ = writeln!(
        o,
        "  Thread Stats{:>6}{:>11}{:>8}{:>12}",
        "Avg", "Stdev", "Max", "+/- Stdev"
    );
    let l = &r.latency;
    let _ = writeln!(
        o,
        "    {:<10}{:>8}{:>10}{:>9}{:>8.2}%",
        "Latency",
        fmt_us(l.mean_us),
        fmt_us(l.stdev_us),
        fmt_us(l.max_us as f64),
        l.within_stdev_pct
    );
    let t = &r.thread_requests_per_s;
    let _ = writeln!(
        o,
        "    {:<10}{:>8}{:>10}{:>9}{:>8.2}%",
        "Req/Sec",
        fmt_count(t.mean),
        fmt_count(t.stdev),
        fmt_count(t.max),
        t.within_stdev_pct
    );
    if latency {
        let _ = writeln!(o, "  Latency Distribution");
        percentile_lines(&mut o, l);
    }
    let _ = writeln!(
        o,
        "  {} requests in {:.2}s, {} read",
        r.responses,
        r.duration_s,
        fmt_bytes(r.bytes_read as f64)
    );
    if let Some(line) = phase_line(r) {
        let _ = writeln!(o, "{line}");
    }
    if let Some(line) = quic_line(r) {
        let _ = writeln!(o, "{line}");
    }
    if r.in_flight_at_end > 0 {
        let _ = writeln!(
            o,
            "  {} requests in flight when the run ended (not counted above)",
            r.in_flight_at_end
        );
    }
    if r.due_unsent_at_end > 0 {
        let _ = writeln!(
            o,
            "  {} requests due but not sent when the run ended: the client was behind its schedule",
            r.due_unsent_at_end
        );
    }
    if r.keepalive_closed > 0 {
        let _ = writeln!(
            o,
            "  {} keep-alive connections closed by the server before a response (sent again, not errors)",
            r.keepalive_closed
        );
    }
    if r.unsolicited > 0 {
        let _ = writeln!(
            o,
            "  {} responses followed by bytes nobody asked for (a second response?): counted, the connection reopened",
            r.unsolicited
        );
    }
    let e = &r.errors;
    if e.connect + e.read + e.write + e.timeout > 0 {
        let _ = writeln!(
            o,
            "  Socket errors: connect {}, read {}, write {}, timeout {}",
            e.connect, e.read, e.write, e.timeout
        );
    }
    if !r.connect_errors.is_empty() {
        let list: Vec<String> = r
            .connect_errors
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(o, "  Connect errors: {}", list.join(", "));
    }
    if e.parse > 0 {
        let _ = writeln!(o, "  Malformed or truncated responses: {}", e.parse);
    }
    if e.reset > 0 {
        let _ = writeln!(o, "  Streams reset by the server (RST_STREAM): {}", e.reset);
    }
    if r.goaway_received > 0 {
        let _ = writeln!(
            o,
            "  GOAWAY received: {} (connections replaced; unprocessed requests sent again, not errors)",
            r.goaway_received
        );
    }
    if r.non_2xx_3xx > 0 {
        let _ = writeln!(o, "  Non-2xx or 3xx responses: {}", r.non_2xx_3xx);
    }
    if latency {
        let codes: Vec<String> = r
            .status_codes
            .iter()
            .map(|(c, n)| format!("{c}: {n}"))
            .collect();
        let _ = writeln!(
            o,
            "  Status codes: {}",
            if codes.is_empty() {
                "none".to_string()
            } else {
                codes.join(", ")
            }
        );
        let per_conn = if r.connections_opened > 0 {
            r.responses as f64 / r.connections_opened as f64
        } else {
            0.0
        };
        let _ = writeln!(
            o,
            "  Connections: {} opened ({}; {:.1} responses each), connect time avg {} max {}",
            r.connections_opened,
            match r.requests_per_connection {
                Some(n) => format!("{n} request{} per connection", plural(n as u64)),
                None => "keep-alive".to_string(),
            },
            per_conn,
            fmt_us(r.connect_time.mean_us),
            fmt_us(r.connect_time.max_us as f64),
        );
        let _ = writeln!(
            o,
            "{}",
            if l.corrected_for_coordinated_omission {
                "  Latency measured from each request's scheduled time (corrected for coordinated omission)."
            } else {
                "  Latency measured closed-loop (not corrected for coordinated omission)."
            }
        );
    }
    let _ = writeln!(o, "Requests/sec: {:>10.2}", r.requests_per_s);
    if let Some(sig) = &run.interrupted {
        let _ = writeln!(
            o,
            "interrupted by {sig}: the load ended early; these are the numbers until then"
        );
    }
    let _ = writeln!(o, "Transfer/sec: {:>10}", fmt_bytes(r.bytes_per_s));
    stages(&mut o, run);
    o.push_str(&super::endpoints::render(run));
    o.push_str(&super::repeat::render(run));
    segments(&mut o, run);
    if let Some(e) = &run.evidence {
        o.push_str(&super::during::render(e, &r.iowait_cpus));
        o.push_str(&super::profile::render(e));
        o.push_str(&super::time::render(e));
    }
    o.push_str(&super::path::render(run));
    // Without the watch only client-side findings can exist; say nothing when none did.
    if run.evidence.is_some() || !run.findings.is_empty() {
        o.push_str(&super::findings::render(&run.findings));
    }
    let c = &run.client;
    if c.saturated && run.merged.is_none() {
        let _ = writeln!(
            o,
            "warning: the load generator was saturated (workers {:.0}% busy): results are a floor — add threads or another client machine",
            c.busy_pct_mean
        );
    }
    for w in &run.warnings {
        let _ = writeln!(o, "warning: {w}");
    }
    o.push_str(&super::objectives::render(run));
    o
}

/// `--stages`: each stage's target and what it achieved, one line each; then where
/// `--abort-if-behind` stopped the run.
fn stages(o: &mut String, run: &Run) {
    let r = &run.results;
    if !r.stages.is_empty() {
        let conns = r.stages.iter().all(|st| st.target_rps.is_none());
        let _ = writeln!(
            o,
            "{:<14}{:>16}{:>14}{:>11}{:>10}{:>8}{:>9}{:>9}{:>9}",
            "Stages:",
            if conns { "connections" } else { "target/s" },
            "achieved/s",
            "requests",
            "errors",
            "length",
            "p50",
            "p99",
            "max"
        );
        // A stage with no response has no latency: a dash, not 0.
        let ms = |us: u64| match us {
            0 => "-".to_string(),
            us => fmt_us(us as f64),
        };
        for st in &r.stages {
            let target = match st.target_rps {
                Some(t) if st.target_from == st.target_to => format!("{t:.1}"),
                Some(t) => format!("{t:.1} ({:.0}→{:.0})", st.target_from, st.target_to),
                None if st.target_from == st.target_to => format!("{:.0}", st.target_to),
                None => format!("{:.0}→{:.0}", st.target_from, st.target_to),
            };
            let _ = writeln!(
                o,
                "  {:<12}{:>16}{:>14.1}{:>11}{:>10}{:>8}{:>9}{:>9}{:>9}",
                st.stage,
                target,
                st.achieved_rps,
                st.requests,
                st.errors,
                format!("{:.1}s", st.end_s - st.start_s),
                ms(st.p50_us),
                ms(st.p99_us),
                ms(st.max_us)
            );
        }
    }
    if let Some(a) = &r.aborted {
        let _ = writeln!(
            o,
            "aborted at {:.1}s: {:.0} req/s completed over the last {:.1}s where the schedule asked {:.0} req/s ({:.0}% behind, more than --abort-if-behind {}%)",
            a.at_s, a.achieved_rps, a.window_s, a.scheduled_rps, a.behind_pct, a.limit_pct
        );
    }
}

/// A merged Run's segments, one line each, then a saturated client and any missing
/// segment named.
fn segments(o: &mut String, run: &Run) {
    let Some(m) = &run.merged else { return };
    let _ = writeln!(o, "Merged {} of {} segments:", m.segments.len(), m.count);
    for p in &m.segments {
        let _ = writeln!(
            o,
            "  {:>3}/{:<3} {:<24}{:>6} conns{:>12} requests{:>12.2} req/s{:>8} errors{:>5.0}% client busy",
            p.index,
            m.count,
            p.host,
            p.connections,
            p.responses,
            p.requests_per_s,
            p.errors,
            p.client.busy_pct_mean
        );
    }
    for p in m.segments.iter().filter(|p| p.client.saturated) {
        let _ = writeln!(
            o,
            "warning: segment {}/{}'s client ({}) was saturated (workers {:.0}% busy): its share, and so the total, is a floor",
            p.index, m.count, p.host, p.client.busy_pct_mean
        );
    }
    for (k, i) in m.missing.iter().enumerate() {
        let why = m
            .missing_reasons
            .get(k)
            .filter(|r| !r.is_empty())
            .map_or(String::new(), |r| format!(" ({r})"));
        let _ = writeln!(
            o,
            "warning: segment {i}/{} is missing{why}: these numbers are the other segments' only",
            m.count
        );
    }
}

fn percentile_lines(o: &mut String, l: &LatencySummary) {
    for p in &l.percentiles {
        let label = if p.p >= 100.0 {
            "   max".to_string()
        } else if p.p.fract() == 0.0 {
            format!("{:>6.0}%", p.p)
        } else {
            format!("{:>6}%", p.p)
        };
        let _ = writeln!(o, "  {label:>7}{:>10}", fmt_us(p.us as f64));
    }
}

/// The compact phase line: p50/p99 of each phase that has values, e.g.
/// `  Phases p50/p99  dns 3us  connect 41us/180us  tls 1.2ms/3.1ms  ttfb 80us/400us  body 0us/12us`
/// (and `held`, the wait of batching (io_uring; HTTP/2 on epoll), not part of the others).
pub fn phase_line(r: &crate::run::LoadResults) -> Option<String> {
    let p = r.phases.as_ref()?;
    let mut line = format!("  Phases p50/p99  dns {}", short_us(p.dns_us));
    let mut any = false;
    let named = [
        ("connect", Some(&p.connect)),
        (
            if r.quic.is_some() { "handshake" } else { "tls" },
            p.tls_handshake.as_ref(),
        ),
        ("ttfb", Some(&p.ttfb)),
        ("body", Some(&p.body)),
        ("held", p.held.as_ref()),
    ];
    for (name, l) in named {
        let Some(l) = l.filter(|l| l.count > 0) else {
            continue;
        };
        any = true;
        let at = |q| short_us(l.at(q).unwrap_or(0));
        let _ = write!(line, "  {name} {}/{}", at(50.0), at(99.0));
    }
    any.then_some(line)
}

/// HTTP/3: what the QUIC stack counted, e.g. `  QUIC  packets 4,210 sent, 0 lost
/// (0.00%)  RTT p50 180us  datagrams 4,210 in 2,105 send calls`.
fn quic_line(r: &crate::run::LoadResults) -> Option<String> {
    let q = r.quic.as_ref()?;
    let lost_pct = q.counts.packets_lost as f64 * 100.0 / q.counts.packets_sent.max(1) as f64;
    let c = &q.counts;
    // The handshakes by kind, when any resumed (`--resume`), with their median times.
    let mut kinds = String::new();
    if c.handshakes_resumed + c.handshakes_0rtt > 0 {
        kinds.push_str("\n  QUIC  handshakes");
        for (n, what, l) in [
            (c.handshakes_full, "full", &q.handshake_full),
            (c.handshakes_resumed, "resumed", &q.handshake_resumed),
            (c.handshakes_0rtt, "0-RTT", &q.handshake_0rtt),
        ] {
            let _ = write!(kinds, "  {n} {what}");
            if let Some(p50) = l.as_ref().and_then(|l| l.at(50.0)) {
                let _ = write!(kinds, " (p50 {})", short_us(p50));
            }
        }
    }
    Some(format!(
        "  QUIC  packets {} sent, {} lost ({lost_pct:.2}%)  RTT p50 {}  datagrams {} in {} send calls, {} in {} receive calls",
        q.counts.packets_sent,
        q.counts.packets_lost,
        short_us(q.rtt.at(50.0).unwrap_or(0)),
        q.counts.datagrams_sent,
        q.counts.send_calls,
        q.counts.datagrams_received,
        q.counts.receive_calls,
    ) + &kinds)
}

/// A phase time in few characters: `41us`, `1.2ms`, `2.31s`.
fn short_us(us: u64) -> String {
    if us < 1000 {
        format!("{us}us")
    } else if us < 1_000_000 {
        format!("{:.1}ms", us as f64 / 1e3)
    } else {
        format!("{:.2}s", us as f64 / 1e6)
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
