//! The request path and its probes, against real servers: a thread pool inside a JVM
//! upstream found by a probe and sized by Little's law, a single-threaded upstream at
//! its CPU's limit named as the one bottleneck with its queue's overflow beneath it
//! (both lab scenarios, each at the low and high ends of its parameter's range, before
//! and after the fix), a probe that confirms `concurrency-bound`, and `--no-probe`
//! sending nothing beyond the load (counted in the server's own log).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

use serde_json::Value;

/// Lab worlds one at a time: two loads at once on a 2-core machine measure each other.
static SERIAL: Mutex<()> = Mutex::new(());

fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

/// Findings of the host rather than the world: a busy host (other builds) delays the
/// world's workers or loadlens itself.
const HOST_FINDINGS: &[&str] = &["run-queue-delay", "client-saturated"];

/// `lab run NAME --fix` with `params`, 3 s loads: (before, after). When the host's own
/// load made the first bottleneck (see [`HOST_FINDINGS`]), the world is built and run
/// again, at most twice more, saying why.
fn lab(name: &str, params: &[&str]) -> Option<(Value, Value)> {
    for attempt in 1..=3 {
        let (before, after) = lab_once(name, params)?;
        let b = bottlenecks(&before);
        match b.first() {
            Some(id) if HOST_FINDINGS.contains(&id.as_str()) && attempt < 3 => {
                eprintln!("{name} {params:?}: {id} (the host's load), run again");
            }
            _ => return Some((before, after)),
        }
    }
    None
}

fn lab_once(name: &str, params: &[&str]) -> Option<(Value, Value)> {
    if !is_root() {
        common::skip_or_fail("the lab needs root (network namespaces)");
        return None;
    }
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut flags = vec!["--no-profile"];
    for p in params {
        flags.extend(["--param", p]);
    }
    Some(common::lab_pair(name, "3s", &flags))
}

fn findings(run: &Value) -> &Vec<Value> {
    run["findings"].as_array().unwrap()
}

fn bottlenecks(run: &Value) -> Vec<String> {
    findings(run)
        .iter()
        .filter(|f| f["kind"] == "bottleneck")
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect()
}

fn finding<'a>(run: &'a Value, id: &str) -> Option<&'a Value> {
    findings(run).iter().find(|f| f["id"] == id)
}

fn rps(run: &Value) -> f64 {
    run["results"]["requests_per_s"].as_f64().unwrap()
}

/// The number in a finding's title after `limit of `.
fn limit_size(title: &str) -> f64 {
    let rest = title.split("limit of ").nth(1).expect(title);
    rest.split_whitespace()
        .next()
        .unwrap()
        .parse()
        .expect(title)
}

/// The JVM's pool at 2 threads × 80 ms (25/s) and 8 threads × 20 ms (400/s), 40
/// connections: the probe at 1 connection gives the unloaded time, the one at 160
/// connections the same rate, so the finding is a pool sized rate × unloaded time ≈
/// the threads; 64 threads lift the rate and the finding goes.
#[test]
fn a_thread_pool_in_the_upstream_is_a_pool_limit_of_its_size() {
    if which("java").is_none() {
        common::skip_or_fail("java not installed (scripts/install-deps.sh test)");
        return;
    }
    for (threads, handler_ms) in [(2u32, 80u32), (8, 20)] {
        let Some((before, after)) = lab(
            "thread-pool",
            &[
                &format!("threads={threads}"),
                &format!("handler_ms={handler_ms}"),
            ],
        ) else {
            return;
        };
        let b = bottlenecks(&before);
        assert_eq!(
            b,
            vec!["pool-limit".to_string()],
            "{threads} threads: {b:?}"
        );
        let f = finding(&before, "pool-limit").unwrap();
        let title = f["title"].as_str().unwrap();
        let size = limit_size(title);
        assert!(
            (size - threads as f64).abs() <= (0.25 * threads as f64).max(1.0),
            "{threads} threads: {title}"
        );
        assert!(title.contains("upstream"), "{title}");
        assert!(f["fix"].as_str().unwrap().contains("maxThreads"), "{f}");
        // The probes are in the Run and cited.
        let probes = before["probes"].as_array().unwrap();
        assert_eq!(probes.len(), 2, "{probes:?}");
        assert_eq!(probes[0]["connections"], 1);
        assert!(f["explanation"]
            .as_str()
            .unwrap()
            .contains("160 connections"));
        // concurrency-bound is not claimed: the probe showed the rate flat.
        assert!(finding(&before, "concurrency-bound").is_none_or(|c| c["kind"] != "bottleneck"));
        // The path: the upstream holds the time and the queue.
        let path = &before["path"];
        assert_eq!(path["bottleneck"], "upstream", "{path}");
        let up = path["tiers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["role"] == "upstream")
            .unwrap();
        // Most of the time: the requests in it are read from a few sock_diag snapshots
        // of connections opened per request, and 1 run in ~9 here fell under 70% right
        // after a build (the value was not kept).
        assert!(up["share_pct"].as_f64().unwrap() >= 60.0, "{up}");
        assert!(up["waiting"].as_f64().unwrap() >= 10.0, "{up}");
        // The fix helps, and the finding goes.
        assert!(
            rps(&after) >= 2.0 * rps(&before),
            "{} → {}",
            rps(&before),
            rps(&after)
        );
        assert!(
            finding(&after, "pool-limit").is_none(),
            "{:?}",
            bottlenecks(&after)
        );
    }
}

/// Python's single-threaded http.server at 2 and 20 ms of CPU a request behind nginx
/// without upstream keep-alive: one bottleneck, the upstream's CPU; its queue's
/// overflow and the rest beneath it as consequences. A tenth of the work lifts the rate.
#[test]
fn a_single_threaded_upstream_is_one_bottleneck_with_its_consequences() {
    for work_ms in [2u32, 20] {
        let Some((before, after)) =
            lab("single-threaded-upstream", &[&format!("work_ms={work_ms}")])
        else {
            return;
        };
        let b = bottlenecks(&before);
        assert_eq!(
            b,
            vec!["upstream-saturated".to_string()],
            "{work_ms} ms: {b:?}"
        );
        let f = finding(&before, "upstream-saturated").unwrap();
        assert!(
            f["title"].as_str().unwrap().contains("its CPU the limit"),
            "{}",
            f["title"]
        );
        // Whatever else fired is beneath it: consequences say so.
        for other in findings(&before)
            .iter()
            .filter(|x| x["id"] != "upstream-saturated")
        {
            if [
                "listen-queue-overflow",
                "syn-queue-overflow",
                "time-wait-connect-cost",
            ]
            .contains(&other["id"].as_str().unwrap())
            {
                assert_eq!(other["kind"], "info", "{other}");
                assert!(
                    other["explanation"]
                        .as_str()
                        .unwrap()
                        .contains("upstream-saturated"),
                    "{other}"
                );
            }
        }
        assert_eq!(
            before["path"]["bottleneck"], "upstream",
            "{}",
            before["path"]
        );
        assert!(
            rps(&after) >= 2.0 * rps(&before),
            "{} → {}",
            rps(&before),
            rps(&after)
        );
        // (A tenth of the work can leave one Python thread still the upstream's limit
        // at the low end: the fix is judged by the rate it gives.)
    }
}

/// A threaded Python server sleeping 20 ms a request on a loopback port, writing one
/// line per request to its log (the server's own count of what it was sent).
struct Sleepy {
    child: Child,
    port: u16,
    log: tempfile::NamedTempFile,
}

impl Sleepy {
    fn start() -> Option<Sleepy> {
        let python = which("python3")?;
        let log = tempfile::NamedTempFile::new().unwrap();
        let script = format!(
            r#"
import http.server, sys, time
LOG = open({log:?}, "a", buffering=1)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Head and body go in two writes: without TCP_NODELAY the body waits for the
    # head's delayed ACK (~40 ms), and Nagle, not the load, would set the rate.
    disable_nagle_algorithm = True
    def do_GET(self):
        time.sleep(0.02)
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\n")
    def log_message(self, fmt, *a):
        LOG.write("%s\n" % self.path)
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
s.daemon_threads = True
print(s.server_address[1], flush=True)
s.serve_forever()
"#,
            log = log.path().display().to_string()
        );
        let mut child = Command::new(python)
            .args(["-c", &script])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().unwrap();
        Some(Sleepy { child, port, log })
    }

    fn lines(&self) -> u64 {
        std::fs::read_to_string(self.log.path())
            .unwrap()
            .lines()
            .count() as u64
    }
}

impl Drop for Sleepy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A mix of /static (nginx's own) and /api (a single-threaded Python upstream) at
/// 4 and 40 ms of CPU per /api request: the one bottleneck is the upstream, and its
/// finding names `GET /api` (not `GET /static`) with its share of the requests' time;
/// a tenth of the work lifts the mix's rate.
#[test]
fn a_mix_names_the_slow_endpoint_in_the_bottleneck() {
    for api_ms in [4u32, 40] {
        let Some((before, after)) = lab("slow-endpoint", &[&format!("api_ms={api_ms}")]) else {
            return;
        };
        let b = bottlenecks(&before);
        assert_eq!(
            b,
            vec!["upstream-saturated".to_string()],
            "{api_ms} ms: {b:?}"
        );
        let f = finding(&before, "upstream-saturated").unwrap();
        let title = f["title"].as_str().unwrap();
        assert!(title.contains("the requests of `GET /api`"), "{title}");
        assert!(!title.contains("/static"), "{title}");
        let share = f["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "slow endpoints: share of the requests' time")
            .expect("the share in the evidence")["value"]
            .as_f64()
            .unwrap();
        assert!(share >= 50.0, "{api_ms} ms: {share}%");
        // The per-endpoint results say the same: /api's requests far slower.
        let eps = before["results"]["endpoints"].as_array().unwrap();
        let mean = |name: &str| {
            eps.iter().find(|e| e["name"] == name).unwrap()["latency"]["mean_us"]
                .as_f64()
                .unwrap()
        };
        assert!(
            mean("GET /api") >= 3.0 * mean("GET /static"),
            "{api_ms} ms: {eps:?}"
        );
        assert!(
            rps(&after) >= 2.0 * rps(&before),
            "{api_ms} ms: {} → {}",
            rps(&before),
            rps(&after)
        );
    }
}

fn which(name: &str) -> Option<String> {
    loadlens::lab::world::which(name).map(|p| p.display().to_string())
}

/// 4 connections on a 20 ms handler with threads to spare: the rate is the load's.
/// Probing (the default for a closed loop bounded by time), the rate grows ×4 with 16
/// connections and `concurrency-bound` is claimed, citing it; with `--no-probe` it is
/// a warning, and the server saw exactly the load's requests, as it does for `-n 40`
/// (no probe by default under a count).
#[test]
fn a_probe_confirms_concurrency_bound_and_no_probe_sends_nothing_extra() {
    let Some(server) = Sleepy::start() else {
        common::skip_or_fail("python3 not installed");
        return;
    };
    let url = format!("http://127.0.0.1:{}/", server.port);
    let before = server.lines();
    let quiet = common::run_json(&[&url, "-c", "4", "-d", "2s", "--no-probe"]);
    let sent = quiet["results"]["responses"].as_u64().unwrap()
        + quiet["results"]["errors"]
            .as_object()
            .unwrap()
            .values()
            .filter_map(Value::as_u64)
            .sum::<u64>();
    // The last requests in flight when the load stopped may have reached the server
    // unanswered: at most one per connection.
    let seen = server.lines() - before;
    assert!(
        (sent..=sent + 4).contains(&seen),
        "sent {sent}, server saw {seen}"
    );
    assert!(quiet.get("probes").is_none(), "{}", quiet["probes"]);
    if let Some(c) = finding(&quiet, "concurrency-bound") {
        // A warning, or info beneath a bottleneck that explains it (the JDK server's
        // two writes can make Nagle's delay that bottleneck).
        assert_ne!(c["kind"], "bottleneck", "{c}");
        assert!(
            c["title"].as_str().unwrap().contains("not confirmed"),
            "{c}"
        );
    }

    // A count (-n) is exactly what reaches the server: no probe unless asked.
    let before = server.lines();
    let counted = common::run_json(&[&url, "-c", "4", "-n", "40"]);
    assert!(counted.get("probes").is_none(), "{}", counted["probes"]);
    assert_eq!(server.lines() - before, 40, "-n 40 sent exactly 40");

    // Probes are on by default in a closed loop bounded by time.
    let before = server.lines();
    let probed = common::run_json(&[&url, "-c", "4", "-d", "2s"]);
    let f = finding(&probed, "concurrency-bound").expect("concurrency-bound");
    // Confirmed by the probe; a bottleneck unless the busy host starved loadlens
    // itself, which then comes first and makes the rest info.
    let client_bound =
        finding(&probed, "client-saturated").is_some_and(|c| c["kind"] == "bottleneck");
    if !client_bound {
        assert_eq!(f["kind"], "bottleneck", "{f}");
    }
    assert!(
        f["explanation"]
            .as_str()
            .unwrap()
            .contains("grows with the connections"),
        "{f}"
    );
    let probes = probed["probes"].as_array().expect("probes ran");
    assert_eq!(probes.len(), 2);
    assert_eq!(probes[1]["connections"], 16);
    let grew = probes[1]["requests_per_s"].as_f64().unwrap() / rps(&probed);
    assert!(grew >= 1.25, "×{grew}");
    assert!(
        f["explanation"]
            .as_str()
            .unwrap()
            .contains("16 connections"),
        "{f}"
    );
    // The probes' requests reached the server too: it saw more than the load.
    let seen = server.lines() - before;
    let load = probed["results"]["responses"].as_u64().unwrap();
    let probe_responses: u64 = probes
        .iter()
        .map(|p| p["responses"].as_u64().unwrap())
        .sum();
    assert!(
        seen >= load + probe_responses,
        "{seen} < {load} + {probe_responses}"
    );
}
