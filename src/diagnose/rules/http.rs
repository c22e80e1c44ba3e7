//! HTTP behaviour: Nagle and delayed ACK, error responses.

use super::{fact, finding, logged, ramp, Ctx, FindingId};
use crate::run::{Finding, Kind};

/// Share of the responses in a ~40 ms mode from which the mode is what the load
/// measured (a bottleneck), not a tail beside it (a warning).
const NAGLE_DOMINANT: f64 = 0.5;

/// The evidence that responses' bodies came ~40 ms after their heads.
pub(super) const BODY_AFTER_HEAD: &str = "bodies 36-48 ms after their heads";

/// A ~40 ms latency mode on keep-alive: Nagle's algorithm waiting for a delayed ACK.
/// Read from the phases when the Run has them: a body arriving ~40 ms after its head is
/// a response written in two pieces (head, then body), the second held by Nagle until
/// the client's delayed ACK of the first.
pub(super) fn nagle_delayed_ack(c: &Ctx) -> Option<Finding> {
    let r = &c.run.results;
    let h = r.latency.decode().ok()?;
    // Where the 40 ms sits: between the head and the body (a response in two writes),
    // or before the head (a request in two writes, or the server's own). The gap
    // between head and body is read first and alone: it is ~40 ms whatever the handler
    // took before the head (a 20 ms handler makes totals of ~63 ms, with no 40 ms mode
    // of their own).
    let body = r
        .phases
        .as_ref()
        .and_then(|p| p.body.decode().ok())
        .and_then(|b| mode_40ms(&b));
    let (in_mode, share) = match body {
        Some(b) => b,
        None => {
            let (in_mode, share) = mode_40ms(&h)?;
            if h.value_at_quantile(0.5) >= 30_000 && share < NAGLE_DOMINANT {
                return None;
            }
            (in_mode, share)
        }
    };
    // The client timed its phases and the bodies came with their heads: the response
    // left in one piece, and the 40 ms were spent before its head — the server's own
    // time (a handler that takes ~40 ms: thread-pool at handler_ms=40, after its fix,
    // 90% of the requests at 36-48 ms behind nginx) or a hop behind the front. Nothing
    // here tells those apart from Nagle: said, not named the bottleneck.
    let before_head = body.is_none()
        && r.phases
            .as_ref()
            .is_some_and(|p| p.body.count > 0 && p.ttfb.count > 0);
    let kind = if share >= NAGLE_DOMINANT && !before_head {
        Kind::Bottleneck
    } else {
        Kind::Warning
    };
    let title = match body {
        Some(_) => "responses' bodies arrive ~40 ms after their heads: Nagle holding the body until the client's delayed ACK",
        None if before_head => "a ~40 ms latency mode before the responses' heads: the server's own time, or Nagle waiting for a delayed ACK behind it",
        None => "a ~40 ms latency mode: Nagle waiting for a delayed ACK",
    };
    let mut f = finding(
        FindingId::NagleDelayedAck,
        kind,
        ramp(share, 0.05, 0.3),
        title.into(),
    );
    f.evidence = match body {
        Some((n, _)) => {
            let ttfb = r
                .phases
                .as_ref()
                .map(|p| p.ttfb.mean_us / 1e3)
                .unwrap_or(0.0);
            vec![
                fact(BODY_AFTER_HEAD, n as f64, "responses"),
                fact("share of responses", share * 100.0, "%"),
                fact("time to first byte (mean)", ttfb, "ms"),
                fact(
                    "response size with its head (mean)",
                    r.bytes_read as f64 / r.responses.max(1) as f64,
                    "bytes",
                ),
            ]
        }
        None => vec![
            fact("requests between 36 and 48 ms", in_mode as f64, "requests"),
            fact("share of requests", share * 100.0, "%"),
        ],
    };
    f.explanation = match body {
        Some(_) => format!("The server writes each response in two pieces — the head, then the body — on a socket with Nagle's algorithm on (no TCP_NODELAY): the body waits until the head is acknowledged, and the client delays that ACK by ~40 ms because it has nothing to send. The phases show it: the body of {:.0}% of the responses came 36-48 ms after its head, whatever the body's size and whatever the handler took before the head.", share * 100.0),
        None if before_head => "When a response (or request) leaves in two writes, Nagle's algorithm holds the second until the first is ACKed, and the peer delays that ACK by ~40 ms. Here the bodies came with their heads (the phases): the 40 ms were spent before the head, where a hop behind the front written in two pieces would hold them — or the server's own handler simply takes ~40 ms, which the totals cannot tell apart.".into(),
        None => "When a response (or request) leaves in two writes, Nagle's algorithm holds the second until the first is ACKed, and the peer delays that ACK by ~40 ms.".into(),
    };
    f.fix = nagle_fix(c);
    Some(f)
}

/// The ~40 ms window of a histogram: (count, share) when it is a mode that stands well
/// above its neighbours and holds at least 5% of the values.
fn mode_40ms(h: &hdrhistogram::Histogram<u64>) -> Option<(u64, f64)> {
    if h.is_empty() {
        return None;
    }
    let count = |lo: u64, hi: u64| -> u64 {
        h.iter_recorded()
            .filter(|v| (lo..=hi).contains(&v.value_iterated_to()))
            .map(|v| v.count_since_last_iteration())
            .sum()
    };
    let in_mode = count(36_000, 48_000);
    let around = count(24_000, 35_999).max(count(48_001, 60_000));
    let share = in_mode as f64 / h.len() as f64;
    (share >= 0.05 && in_mode >= 3 * around).then_some((in_mode, share))
}

/// TCP_NODELAY in the front server's words.
fn nagle_fix(c: &Ctx) -> String {
    let java = c.ev.is_some_and(|e| {
        e.topology
            .processes
            .iter()
            .any(|p| p.tier != crate::run::Tier::Upstream && p.comm == "java")
    });
    match c.front_kind() {
        crate::kinds::nginx::KIND => "`tcp_nodelay on;` (nginx's default, for keep-alive connections) and send each message in one write (`postpone_output`, `tcp_nopush` with `sendfile`)".into(),
        crate::kinds::node::KIND => "`socket.setNoDelay(true)` (Node ≥ 18 sets it on HTTP sockets by default: check `noDelay` in `http.createServer` options)".into(),
        _ if java => "set TCP_NODELAY on the accepted sockets: for the JDK's built-in HttpServer (com.sun.net.httpserver) start the JVM with `-Dsun.net.httpserver.nodelay=true`; Tomcat, Jetty and Netty servers set it by default (`tcpNoDelay`); or write the head and body in one write".into(),
        _ => "set TCP_NODELAY on the server's sockets (`setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, 1)`), or write each response in one piece (head and body together)".into(),
    }
}

/// Responses refused by a rate or connection limit of the server's own (nginx
/// `limit_req`/`limit_conn`; any server's 429): the limit, not a resource, set the rate.
pub(super) fn rate_limited(c: &Ctx) -> Option<Finding> {
    let r = &c.run.results;
    let status = |code: u16| r.status_codes.get(&code).copied().unwrap_or(0);
    let log = logged(c, "limiting-requests").or_else(|| logged(c, "limiting-connections"));
    // 429 says "rate limited" by definition; a 503 only when the log says why (it is
    // nginx's default `limit_req_status`, and every overloaded server's answer too).
    let refused = status(429) + if log.is_some() { status(503) } else { 0 };
    let share = refused as f64 / r.responses.max(1) as f64;
    // A twentieth of the responses: a limit that bites, not a stray refusal.
    if refused == 0 || share < 0.05 {
        return paced_by_limit_req(c);
    }
    let zone = log.as_ref().and_then(|(_, _, quote)| {
        let z = quote.split("by zone \"").nth(1)?.split('"').next()?;
        Some(z.to_string())
    });
    let served = (r.responses - refused) as f64 / c.duration_s();
    let what = match (&log, &zone) {
        (Some((_, f, _)), Some(z)) if f.name.contains("connections") => {
            format!("nginx's `limit_conn` (zone \"{z}\")")
        }
        (Some(_), Some(z)) => format!("nginx's `limit_req` (zone \"{z}\")"),
        _ => "the server's rate limit".to_string(),
    };
    let mut f = finding(
        FindingId::RateLimited,
        Kind::Bottleneck,
        ramp(share, 0.05, 0.5),
        format!(
            "{what} refused {:.0}% of requests: it, not a resource, set the rate",
            share * 100.0
        ),
    );
    f.evidence = vec![
        fact("responses refused (429/503)", refused as f64, "responses"),
        fact("share of responses", share * 100.0, "%"),
        fact("responses served per second", served, "/s"),
    ];
    let mut said = String::new();
    if let Some((_, fact, quote)) = log {
        f.evidence.push(fact);
        said = quote;
    }
    // The zone's own definition, e.g. `$binary_remote_addr zone=one:1m rate=100r/s`.
    let zone_def = zone.as_deref().and_then(|z| {
        let all = c
            .nginx("limit_req_zone")
            .flatten()
            .into_iter()
            .chain(c.nginx("limit_conn_zone").flatten());
        all.flat_map(|v| v.split(" | ").map(String::from).collect::<Vec<_>>())
            .find(|v| v.contains(&format!("zone={z}:")))
    });
    f.explanation = format!(
        "The server refused requests beyond a configured limit ({}), so the request rate measured is the limit's, not the server's capacity; the refusals are cheap and inflate requests/s. A limit kept per client address sees all of this load as one client.{said}",
        zone_def.as_deref().map_or("per client, per zone or per server".to_string(), |d| format!("`{d}`"))
    );
    f.fix = match zone {
        Some(_) => "to measure the server, exempt the load generator's address from the limit (`geo $limit { default 1; 10.0.0.5 0; }` and `map $limit $limit_key { 0 \"\"; 1 $binary_remote_addr; }`, the zone keyed on `$limit_key`: an empty key is not limited) or raise `rate=`/`burst=`; to test the limit itself, load below it (`-R`)".into(),
        None => "to measure the server, exempt the load generator's address from the rate limit (in the server or a proxy in front of it) or raise the limit; to test the limit itself, load below it (`-R`)".into(),
    };
    Some(f)
}

/// nginx's `limit_req` without `nodelay` holds requests beyond its rate and lets them
/// through at that rate: nothing is refused or logged (the delays are logged at `info`),
/// the server idles, and the run measures the zone's `rate=`.
fn paced_by_limit_req(c: &Ctx) -> Option<Finding> {
    let served = c.responses() as f64 / c.duration_s();
    let zones = c.nginx("limit_req_zone")??;
    let uses = c.nginx("limit_req")??;
    let (def, rate, how) = uses.split(" | ").find_map(|u| {
        let name = u.split_whitespace().find_map(|w| w.strip_prefix("zone="))?;
        if u.split_whitespace().any(|w| w == "nodelay") {
            return None;
        }
        let def = zones.split(" | ").find(|z| {
            z.split_whitespace()
                .any(|w| w.starts_with(&format!("zone={name}:")))
        })?;
        let rate = zone_rate(def)?;
        // Within a tenth of the rate (or a little above it: the burst drains too).
        (served >= 0.9 * rate && served <= 1.15 * rate).then_some((def, rate, u))
    })?;
    let mut f = finding(
        FindingId::RateLimited,
        Kind::Bottleneck,
        ramp(1.0 - (served / rate - 1.0).abs(), 0.9, 0.99),
        format!("nginx's `limit_req` held requests to its rate: {served:.0} req/s against `rate={rate:.0}r/s`"),
    );
    f.evidence = vec![
        fact("responses per second", served, "/s"),
        fact("the zone's rate", rate, "/s"),
    ];
    f.explanation = format!(
        "`limit_req {how}` without `nodelay` queues requests beyond the zone's rate (`limit_req_zone {def}`) and releases them at that rate: nothing is refused and the server idles, so this run measured the limit, with its queueing in the latency. A limit kept per client address sees all of this load as one client."
    );
    f.fix = "to measure the server, exempt the load generator's address from the limit (`geo`/`map` to an empty key: it is not limited) or raise `rate=`; to test the limit itself, this is it working".into();
    Some(f)
}

/// Requests per second from a `limit_req_zone` definition's `rate=` (`100r/s`, `30r/m`).
fn zone_rate(def: &str) -> Option<f64> {
    let r = def
        .split_whitespace()
        .find_map(|w| w.strip_prefix("rate="))?;
    let (n, per) = r.split_once("r/")?;
    let n: f64 = n.parse().ok()?;
    match per {
        "s" => Some(n),
        "m" => Some(n / 60.0),
        _ => None,
    }
}

/// Non-2xx/3xx responses dominate: requests/s counts failures.
pub(super) fn http_errors(c: &Ctx) -> Option<Finding> {
    let r = &c.run.results;
    let share = r.non_2xx_3xx as f64 / r.responses.max(1) as f64;
    if r.responses == 0 || share < 0.5 {
        return None;
    }
    let top = r
        .status_codes
        .iter()
        .filter(|(k, _)| !(200..400).contains(*k))
        .max_by_key(|(_, v)| **v)
        .map(|(k, _)| *k)
        .unwrap_or(0);
    let mut f = finding(
        FindingId::HttpErrors,
        Kind::Warning,
        ramp(share, 0.5, 0.95),
        format!(
            "{:.0}% of responses were errors (mostly {top}): requests/s counts failures",
            share * 100.0
        ),
    );
    f.evidence = vec![
        fact("non-2xx/3xx responses", r.non_2xx_3xx as f64, "responses"),
        fact("share", share * 100.0, "%"),
        fact("most common error status", top as f64, "status"),
    ];
    f.explanation = "Error responses are usually cheaper than real ones, so the request rate of this run overstates what the server can do for real requests.".into();
    f.fix = "fix the errors first (the server's error log says why), then measure again".into();
    // What the server's error log said most often over the run, quoted.
    let top_class =
        c.ev.iter()
            .flat_map(|e| e.logs.iter().flat_map(|l| l.classes.iter()))
            .filter(|k| k.class != "upstream-buffered-to-file")
            .max_by_key(|k| k.count);
    if let Some((_, fact, quote)) = top_class.and_then(|k| logged(c, &k.class)) {
        f.evidence.push(fact);
        f.explanation.push_str(&quote);
        f.fix =
            "fix the errors first (the error log line above names the cause), then measure again"
                .into();
    }
    Some(f)
}

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{fires, fixture, histogram};

    #[test]
    fn nagle_delayed_ack() {
        let mut run = fixture("healthy-before");
        let with_mode = |share_40ms: f64| {
            let mut h = histogram();
            let n = 10_000u64;
            let slow = (n as f64 * share_40ms) as u64;
            h.record_n(500, n - slow).unwrap();
            if slow > 0 {
                h.record_n(40_000, slow).unwrap();
            }
            crate::run::LatencySummary::from_histogram(&h, false)
        };
        run.results.latency = with_mode(0.2);
        assert!(fires(&run, "nagle-delayed-ack"));
        run.results.latency = with_mode(0.02);
        assert!(!fires(&run, "nagle-delayed-ack"));
    }

    #[test]
    fn rate_limited_needs_a_twentieth_refused_and_a_503_needs_the_log() {
        let mut run = fixture("healthy-before");
        let n = run.results.responses;
        run.results.status_codes.insert(429, n / 50);
        assert!(
            !fires(&run, "rate-limited"),
            "2% of 429s is not a limit that bites"
        );
        run.results.status_codes.insert(429, n / 5);
        assert!(fires(&run, "rate-limited"));
        // A 503 is every overloaded server's answer: not a rate limit by itself.
        run.results.status_codes.remove(&429);
        run.results.status_codes.insert(503, n / 5);
        assert!(!fires(&run, "rate-limited"));
    }

    #[test]
    fn zone_rates_per_second_and_per_minute() {
        assert_eq!(
            super::zone_rate("$binary_remote_addr zone=one:10m rate=100r/s"),
            Some(100.0)
        );
        assert_eq!(
            super::zone_rate("$server_name zone=m:1m rate=30r/m"),
            Some(0.5)
        );
        assert_eq!(super::zone_rate("$binary_remote_addr zone=x:1m"), None);
    }

    #[test]
    fn a_broad_tail_is_not_a_nagle_mode() {
        let mut run = fixture("healthy-before");
        let mut h = histogram();
        h.record_n(1_000, 8_000).unwrap();
        // 20–80 ms spread evenly: 10% of requests fall near 40 ms, but there is no peak.
        for ms in 20..80u64 {
            h.record_n(ms * 1000, 33).unwrap();
        }
        run.results.latency = crate::run::LatencySummary::from_histogram(&h, false);
        assert!(!fires(&run, "nagle-delayed-ack"));
    }

    /// Regression (lab thread-pool at 3 threads and a 40 ms handler, after its fix):
    /// behind nginx, 90% of the requests took the handler's 40 ms, the client's phases
    /// showing every body with its head, and `nagle-delayed-ack` was the bottleneck. A
    /// 40 ms mode before the heads is told (a warning), not the bottleneck; with the
    /// bodies ~40 ms after their heads it is Nagle's mark, and the bottleneck. The lab's
    /// nagle at a 40 ms handler, after its fix (TCP_NODELAY), was the same.
    #[test]
    fn a_40_ms_mode_before_the_heads_is_no_bottleneck() {
        let nagle = crate::diagnose::diagnose(&fixture("nagle-40-after"));
        assert!(
            nagle.iter().all(|f| f.kind != crate::run::Kind::Bottleneck),
            "{nagle:?}"
        );
        let mut run = fixture("thread-pool-3-40-after");
        // (Without the host's builds, which made nginx's worker wait for its CPU: a
        // run-queue-delay of the host's, beside the point.)
        let ev = run.evidence.as_mut().unwrap();
        ev.window.other_processes.clear();
        let found = crate::diagnose::diagnose(&run);
        let kind = |found: &[crate::run::Finding]| {
            found
                .iter()
                .find(|f| f.id == "nagle-delayed-ack")
                .map(|f| f.kind)
        };
        assert_eq!(kind(&found), Some(crate::run::Kind::Warning), "{found:?}");
        assert!(
            found
                .iter()
                .all(|f| f.kind != crate::run::Kind::Bottleneck || f.id == "concurrency-bound"),
            "{found:?}"
        );
        // The same run with the bodies held ~40 ms after their heads.
        let mut split = run.clone();
        let phases = split.results.phases.as_mut().unwrap();
        let mut h = histogram();
        h.record_n(41_000, phases.body.count).unwrap();
        phases.body = crate::run::LatencySummary::from_histogram(&h, false);
        let found = crate::diagnose::diagnose(&split);
        assert_eq!(
            kind(&found),
            Some(crate::run::Kind::Bottleneck),
            "{found:?}"
        );
    }

    /// The nagle Run with a 20 ms handler before every head: the totals move to ~60 ms
    /// (no 40 ms mode of their own) and the bodies still come ~40 ms after their heads.
    #[test]
    fn nagle_is_read_from_the_gap_whatever_the_handler_took() {
        let mut run = crate::diagnose::testutil::fixture("nagle-before");
        let h = run.results.latency.decode().unwrap();
        let mut later = hdrhistogram::Histogram::<u64>::new_from(&h);
        for v in h.iter_recorded() {
            later
                .record_n(v.value_iterated_to() + 20_000, v.count_at_value())
                .unwrap();
        }
        run.results.latency = crate::run::LatencySummary::from_histogram(&later, false);
        assert!(super::mode_40ms(&later).is_none());
        let found = crate::diagnose::diagnose(&run);
        let f = found.iter().find(|f| f.id == "nagle-delayed-ack").unwrap();
        assert_eq!(f.kind, crate::run::Kind::Bottleneck);
        assert!(f.title.contains("after their heads"));
    }
}
