//! Scenarios about where along the request path requests wait: a thread pool inside
//! the upstream that no saturated resource explains (found by a probe and sized by
//! Little's law), and a single-threaded upstream at its CPU's limit whose queue,
//! overflow and retries are consequences of that one cause, and a mix where one
//! endpoint (`/api`, behind that single-threaded upstream) is slow beside nginx's own
//! `/static`, whose bottleneck must name `/api`. Each takes its fault's parameter from
//! a range where the fault is decisive (`--param KEY=N`).

use super::jvm::up_java_pool;
use super::scenario::{Key, Moves, Scenario, Setup};
use super::scenarios::start_front;
use super::servers::Nginx;
use super::world::World;

/// Where the upstreams listen, inside the server namespace.
const UPSTREAM: &str = "127.0.0.1:8081";

/// nginx in front of `UPSTREAM`, one new upstream connection per request (nginx's
/// default: no `keepalive` cache), so the connections on the upstream's port are the
/// requests in it.
fn proxy_front(w: &mut World) -> anyhow::Result<i32> {
    start_front(
        w,
        Nginx {
            workers: "1",
            server_extra: format!("location / {{ proxy_pass http://{UPSTREAM}; }}"),
            ..Nginx::default()
        },
    )
}

/// The JDK's HttpServer on `UPSTREAM` with a pool of `threads`, each request
/// `handler_ms` asleep.
fn start_pool(w: &mut World, threads: u32, handler_ms: u32) -> anyhow::Result<i32> {
    if super::world::which("java").is_none() {
        anyhow::bail!(
            "java is not installed: apt-get install default-jre-headless (make test installs it)"
        );
    }
    let src = w.write(
        "jvm/Up.java",
        up_java_pool(handler_ms, 512, threads).as_bytes(),
    )?;
    let s = w.server();
    let src = src.display().to_string();
    let pid = w.spawn(&s, "jvm", &["java", "-Xss512k", &src, "127.0.0.1", "8081"])?;
    w.wait_tcp(&s, UPSTREAM, "jvm")?;
    Ok(pid)
}

/// A Python `http.server` on `UPSTREAM`: one thread, each request `work_ms` of CPU,
/// the listen backlog Python's default (`request_queue_size = 5`).
fn start_single_threaded(w: &mut World, work_ms: u32) -> anyhow::Result<i32> {
    start_python_upstream(w, work_ms, 0)
}

/// nginx serving `/static` itself and passing `/api` to `UPSTREAM` (a connection per
/// request), for a mix where one endpoint is slow.
fn mix_front(w: &mut World) -> anyhow::Result<i32> {
    start_front(
        w,
        Nginx {
            workers: "1",
            server_extra: format!(
                "location /static {{ return 200 \"static\\n\"; }} location /api {{ proxy_pass http://{UPSTREAM}; }}"
            ),
            ..Nginx::default()
        },
    )
}

/// The mix's targets: nine requests for `/static` (nginx's own) to one for `/api`.
const MIX: &str = "{\"name\":\"GET /static\",\"url\":\"/static\",\"weight\":9}\n{\"name\":\"GET /api\",\"url\":\"/api\",\"weight\":1}\n";

/// A Python `http.server` on `UPSTREAM` (one thread, backlog 5), each request
/// `work_ms` of CPU and then `sleep_ms` asleep.
fn start_python_upstream(w: &mut World, work_ms: u32, sleep_ms: u32) -> anyhow::Result<i32> {
    // The distribution's Python first: a user's shim may not run in the namespace.
    let python = if std::path::Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else if super::world::which("python3").is_some() {
        "python3"
    } else {
        anyhow::bail!("python3 is not installed: apt-get install python3");
    };
    let script = format!(
        r#"
import http.server, time
WORK = {work_ms} / 1000.0
SLEEP = {sleep_ms} / 1000.0
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        t = time.process_time()
        while time.process_time() - t < WORK:
            pass
        if SLEEP:
            time.sleep(SLEEP)
        body = b"ok\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", 8081), H).serve_forever()
"#
    );
    let src = w.write("up/single.py", script.as_bytes())?;
    let s = w.server();
    let src = src.display().to_string();
    let pid = w.spawn(&s, "single", &[python, &src])?;
    w.wait_tcp(&s, UPSTREAM, "single")?;
    Ok(pid)
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "thread-pool",
            summary: "a JVM upstream with a pool of a few threads behind nginx, 40 connections (--param threads=2..8, handler_ms=20..80)",
            source: "issue 41 (a servlet container with 4 threads, 50 ms a request: 77 req/s, 492 ms, CPUs idle)",
            fault: "the JDK HttpServer's executor with `threads` threads (default 4), each request asleep `handler_ms` (default 50): threads ÷ handler time requests a second, the rest wait inside the JVM",
            fix: "64 threads: the 40 connections are served at once",
            expected_finding: "pool-limit",
            key: Key {
                label: "requests/s",
                read: |r| Some(r.results.requests_per_s),
                // 4 threads × 50 ms: 80/s → 64 threads: 40 ÷ ~55 ms ≈ 700/s (×8); at
                // 8 threads × 80 ms (100/s) → 128: ~450/s (×4.5).
                moves: Moves::Up(2.0),
            },
            build: |w, fixed| {
                let threads = w.param("threads", 4, 2..=8)?;
                let handler_ms = w.param("handler_ms", 50, 20..=80)?;
                w.two_hosts()?;
                // 64 ≥ the 40 connections: every request served at once.
                let threads = if fixed { 64 } else { threads };
                start_pool(w, threads, handler_ms)?;
                let pid = proxy_front(w)?;
                // The queue is the fault, not lost requests: at 2 threads × 80 ms the
                // 40 connections wait 1.6 s each (6.4 s in the probe at 4× them), which
                // a starved host pushes past the default 2 s timeout — and timeouts are
                // errors, which no pool's arithmetic may rest on.
                Ok(Setup::new(
                    super::scenario::url("/"),
                    &["-c", "40", "--probe", "--timeout", "15s"],
                    vec![pid],
                ))
            },
        },
        Scenario {
            name: "single-threaded-upstream",
            summary: "a single-threaded upstream at 100% of a core behind nginx, no upstream keep-alive (--param work_ms=2..20)",
            source: "issue 41 (four BOTTLENECKs — listen-queue-overflow, upstream-saturated, time-wait-connect-cost, syn-queue-overflow — and none named the upstream's CPU)",
            fault: "Python's http.server (one thread, backlog 5), each request `work_ms` of CPU (default 5), 40 connections through nginx opening a connection per request",
            fix: "the handler's work cut tenfold (what the upstream's CPU limit asks for: less CPU per request)",
            expected_finding: "upstream-saturated",
            key: Key {
                label: "requests/s",
                read: |r| Some(r.results.requests_per_s),
                // 5 ms of CPU → 0.5 ms: ~190/s → ~900/s on a 2-core machine.
                moves: Moves::Up(2.0),
            },
            build: |w, fixed| {
                let work_ms = w.param("work_ms", 5, 2..=20)?;
                w.two_hosts()?;
                let work = if fixed { work_ms / 10 } else { work_ms };
                start_single_threaded(w, work)?;
                let pid = proxy_front(w)?;
                Ok(Setup::new(super::scenario::url("/"), &["-c", "40"], vec![pid]))
            },
        },
        Scenario {
            name: "slow-endpoint",
            summary: "a mix of /static (nginx's own, 9 in 10) and /api (a single-threaded upstream) where /api is slow (--param api_ms=4..40)",
            source: "issue 41 (a mix where one endpoint is slow: /api took 99.9% of the time and upstream-saturated named the upstream, but no finding said which endpoint)",
            fault: "/api passed to Python's http.server (one thread), each request `api_ms` of CPU (default 10); /static answered by nginx; 40 connections, the targets 9:1",
            fix: "the /api handler's work taken away (its answer kept, as a cache would)",
            expected_finding: "upstream-saturated",
            key: Key {
                label: "requests/s",
                read: |r| Some(r.results.requests_per_s),
                // The closed loop's connections wait on /api: the mix's rate is ten
                // times /api's (1 ÷ api_ms). Without the work the upstream is no longer
                // the limit at any api_ms (a tenth of it left 1-4 ms, still saturated at
                // the higher rate: 6,071/s at api_ms=10).
                moves: Moves::Up(2.0),
            },
            build: |w, fixed| {
                let api_ms = w.param("api_ms", 10, 4..=40)?;
                w.two_hosts()?;
                let work = if fixed { 0 } else { api_ms };
                start_python_upstream(w, work, 0)?;
                let pid = mix_front(w)?;
                let targets = w.write("mix/targets.jsonl", MIX.as_bytes())?;
                let targets = targets.display().to_string();
                Ok(Setup::new(
                    super::scenario::url("/"),
                    &["-c", "40", "--targets", &targets],
                    vec![pid],
                ))
            },
        },
    ]
}
