//! The scenarios: each a published setup, its fault, its fix, and the counter that shows
//! both. Sources are the write-ups in `shared/reading/`.

use super::scenario::{args, counter, listen, url, Key, Moves, Scenario, Setup};
use super::servers::{start_nginx, start_php_fpm, start_upstream, Nginx};
use super::world::World;
use crate::run::{Role, Run};

/// Starts the front nginx (`n`, its `listen` set to the server address) inside the
/// server namespace, ready once the client namespace can connect. Returns its pid.
pub(super) fn start_front(w: &mut World, n: Nginx) -> anyhow::Result<i32> {
    let (c, s) = (w.client(), w.server());
    start_nginx(
        w,
        &s,
        &c,
        &Nginx {
            listen: listen(),
            ..n
        },
    )
}

/// The busiest process of the front whose role is `role`.
fn proc_max(run: &Run, role: Role, f: fn(&crate::run::ProcRates) -> Option<f64>) -> Option<f64> {
    let e = run.evidence.as_ref()?;
    e.window
        .processes
        .iter()
        .filter(|p| p.role == role && p.is_front())
        .filter_map(f)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
}

fn non_2xx_and_timeouts(run: &Run) -> Option<f64> {
    Some((run.results.non_2xx_3xx + run.results.errors.timeout) as f64)
}

pub fn all() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "healthy",
            summary: "static nginx, well configured: the control, limited only by CPU (--param connections=20..200)",
            source: "nginx-evaluation-jemalloc-dpdk.txt (static serving baseline)",
            fault: "none",
            fix: "none (the same world again)",
            expected_finding: "server-cpu-saturated",
            key: Key {
                label: "nginx worker CPU %",
                read: |r| proc_max(r, Role::Worker, |p| Some(p.cpu_pct)),
                moves: Moves::Holds,
            },
            build: |w, _fixed| {
                let conns = w.param("connections", 50, 20..=200)?.to_string();
                w.two_hosts()?;
                let pid = start_front(w, Nginx::default())?;
                Ok(Setup::unprobed(url("/1k.bin"), &["-c", &conns], vec![pid]))
            },
        },
        Scenario {
            name: "listen-backlog",
            summary: "listen backlog and somaxconn of 10 under many new connections (--param backlog=5..32)",
            source: "throughput-drop-case-study.txt (`listen 80 backlog=10`, somaxconn = 10)",
            fault: "nginx `listen ... backlog=N`, net.core.somaxconn=N (`backlog`, default 10; at 64 the 300 connections' SYNs fit often enough that nginx's worker, at its CPU, was the limit and server-cpu-saturated came first, 3 runs of 3 beside two compilers), 300 connections opening one connection per request",
            fix: "`backlog=4096` and net.core.somaxconn=4096",
            expected_finding: "listen-queue-overflow",
            key: Key {
                label: "TcpExt.ListenOverflows",
                read: |r| counter(r, "TcpExt.ListenOverflows"),
                // measured 1,969 → 0 on a 2-core machine.
                moves: Moves::Down(10.0),
            },
            build: |w, fixed| {
                w.two_hosts()?;
                let c = w.client();
                let s = w.server();
                let backlog = w.param("backlog", 10, 5..=32)?;
                let n = if fixed { 4096 } else { backlog };
                w.sysctl(&s, "net.core.somaxconn", &n.to_string())?;
                let opts = format!("backlog={n}");
                let pid = start_nginx(
                    w,
                    &s,
                    &c,
                    &Nginx {
                        listen: listen(),
                        listen_opts: &opts,
                        ..Nginx::default()
                    })?;
                Ok(Setup::unprobed(url("/1k.bin"), &["-c", "300", "--connreqs", "1", "--timeout", "3s"], vec![pid]))
            },
        },
        Scenario {
            name: "php-fpm-children",
            summary: "nginx in front of php-fpm with pm.max_children=5 and a 200 ms script (--param max_children=2..5, script_ms=200..400)",
            source: "throughput-drop-case-study.txt (499s, \"server reached max_children setting (5)\")",
            fault: "php-fpm pm.max_children = N (`max_children`, default 5); the script sleeps `script_ms` (default 200); 10 connections per child, each request given 5 × the script's time: a request waits 10 × the script's time for a child, twice its timeout (above 5 children the load's 10 per child outnumbers the fix's 60: at 8, 80 connections kept the 60 children saturated after the fix, which the diagnosis rightly said)",
            fix: "pm.max_children = 60",
            expected_finding: "upstream-saturated",
            key: Key {
                label: "non-2xx + timeouts",
                read: non_2xx_and_timeouts,
                // measured 33 → 0 on a 2-core machine.
                moves: Moves::Down(10.0),
            },
            build: |w, fixed| {
                let children = w.param("max_children", 5, 2..=5)?;
                let script_ms = w.param("script_ms", 200, 200..=400)?;
                w.two_hosts()?;
                let s = w.server();
                let sock = w.dir.join("php/fpm.sock").display().to_string();
                let pm = if fixed {
                    "pm = static\npm.max_children = 60".to_string()
                } else {
                    format!("pm = dynamic\npm.max_children = {children}\npm.start_servers = 2\npm.min_spare_servers = 1\npm.max_spare_servers = {}", children.min(3))
                };
                let fpm = start_php_fpm(w, &s, &sock, &pm, script_ms)?;
                let app = w.dir.join("php/app.php").display().to_string();
                let pid = start_front(w, Nginx {
                        server_extra: format!(
                            "location / {{ fastcgi_pass unix:{sock}; include /etc/nginx/fastcgi_params; fastcgi_param SCRIPT_FILENAME {app}; fastcgi_read_timeout 60s; }}"
                        ),
                        ..Nginx::default()
                    })?;
                // Ten connections per child: each request waits ten scripts' time for
                // one, twice the timeout of five scripts' time whatever the script's
                // (a timeout of 2 s equal to the wait at 200 ms made the timeouts chance:
                // 0 of 20 connections at max_children=2 beside two compilers). Fixed,
                // a request takes one script's time, a fifth of the timeout.
                let conns = (10 * children).to_string();
                let timeout = format!("{}ms", 5 * script_ms);
                Ok(Setup::unprobed(url("/"), &["-c", &conns, "--timeout", &timeout], vec![pid, fpm]))
            },
        },
        Scenario {
            name: "php-fpm-socket",
            summary: "Debian's layout: nginx → php-fpm on a unix socket, 4 children, 504s (--param max_children=2..4)",
            source: "throughput-drop-case-study.txt (\"server reached max_children setting\", nginx 5xx); Debian's `fastcgi_pass unix:/run/php/php8.2-fpm.sock`",
            fault: "pm.max_children = N (`max_children`, default 4; all started; above 4 the load's 12.5 connections per child near or outnumber the fix's 64: at 8, 100 connections kept the 64 children saturated after the fix, which the diagnosis rightly said); a 100 ms script; `fastcgi_read_timeout 1s`; 12.5 connections per child (a request waits 1.25 s for one); only nginx named to loadlens",
            fix: "pm.max_children = 64",
            expected_finding: "upstream-saturated",
            key: Key {
                label: "504 responses",
                read: |r| Some(r.results.status_codes.get(&504).copied().unwrap_or(0) as f64),
                // measured 100 → 0 on a 2-core machine.
                moves: Moves::Down(10.0),
            },
            build: |w, fixed| {
                w.two_hosts()?;
                let s = w.server();
                let php = w.dir.join("php").display().to_string();
                let sock = format!("{php}/php8.2-fpm.sock");
                let children = w.param("max_children", 4, 2..=4)?;
                let n = if fixed { 64 } else { children };
                let pm = format!("pm = dynamic\npm.max_children = {n}\npm.start_servers = {n}\npm.min_spare_servers = 1\npm.max_spare_servers = {n}");
                start_php_fpm(w, &s, &sock, &pm, 100)?;
                // Debian's site config: a PHP location through the packaged snippet
                // (which includes `fastcgi.conf` beside the config file).
                let fastcgi = std::fs::read("/etc/nginx/fastcgi.conf")?;
                w.write("nginx/fastcgi.conf", &fastcgi)?;
                let pid = start_front(w, Nginx {
                        server_extra: format!(
                            "location ~ \\.php$ {{ root {php}; include /etc/nginx/snippets/fastcgi-php.conf; fastcgi_pass unix:{sock}; fastcgi_read_timeout 1s; }}"
                        ),
                        ..Nginx::default()
                    })?;
                // Only nginx is named: php-fpm must be found from nginx's config. 12.5
                // connections per child: a request waits 1.25 s for a child, beyond
                // nginx's 1 s.
                let conns = (50 * children / 4).to_string();
                Ok(Setup::unprobed(url("/app.php"), &["-c", &conns, "--timeout", "3s"], vec![pid]))
            },
        },
        Scenario {
            name: "gzip-cpu",
            summary: "text compressed on the fly at gzip_comp_level 9 (--param level=6..9)",
            source: "nginx-evaluation-jemalloc-dpdk.txt (`gzip on; gzip_comp_level 4;` in the evaluated config; a CPU-bound worker)",
            fault: "`gzip on; gzip_comp_level N;` (`level`, default 9) for a 64 KiB text file; clients accept gzip",
            fix: "`gzip_comp_level 1;`: nearly the same bytes for a fraction of the CPU",
            expected_finding: "server-cpu-saturated",
            key: Key {
                label: "requests/s",
                read: |r| Some(r.results.requests_per_s),
                // measured 156 → 2,621 req/s: ×16.8 on a 2-core machine.
                moves: Moves::Up(3.0),
            },
            build: |w, fixed| {
                let level = w.param("level", 9, 6..=9)?;
                w.two_hosts()?;
                let level = if fixed { 1 } else { level };
                let pid = start_front(w, Nginx {
                        http_extra: format!("gzip on; gzip_types text/plain; gzip_comp_level {level};"),
                        ..Nginx::default()
                    })?;
                Ok(Setup::unprobed(url("/words.txt"), &["-c", "20", "-H", "Accept-Encoding: gzip"], vec![pid]))
            },
        },
        Scenario {
            name: "ephemeral-ports",
            summary: "reverse proxy without upstream keep-alive, 50 local ports, tw_reuse off (--param ports=50..500)",
            source: "throughput-drop-case-study.txt (connect() failed (99: Cannot assign requested address), ip_local_port_range 20000 20050)",
            fault: "ip_local_port_range of N ports from 20000 (`ports`, default 50; below 50 the fix's own cache of 32 connections and those in flight need more ports than the range: at 20, 2,780 502s after the fix), tcp_tw_reuse=0, no upstream keep-alive",
            fix: "`keepalive 32; keepalive_requests 1000000;` in the upstream block: connections reused",
            expected_finding: "ephemeral-ports-exhausted",
            key: Key {
                label: "502 responses",
                read: |r| Some(r.results.status_codes.get(&502).copied().unwrap_or(0) as f64),
                // measured 85,274 → 0 on a 2-core machine.
                moves: Moves::Down(10.0),
            },
            build: |w, fixed| {
                let ports = w.param("ports", 50, 50..=500)?;
                proxy_no_keepalive(w, fixed, Ports::Few(ports))
            },
        },
        Scenario {
            name: "time-wait",
            summary: "reverse proxy opening a new upstream connection per request (--param ports=4000..10000)",
            source: "throughput-drop-case-study.txt (timewait 32768, inet_hash_connect hot, tcp_tw_reuse = 0)",
            fault: "tcp_tw_reuse=0, no upstream keep-alive: every request leaves a TIME_WAIT; N local ports (`ports`, default 10,000), TIME_WAIT kept at 99% of them (tcp_max_tw_buckets) after a warm-up",
            fix: "`keepalive 32; keepalive_requests 1000000;` in the upstream block: connections reused",
            expected_finding: "time-wait-connect-cost",
            key: Key {
                label: "TIME_WAIT max",
                read: |r| r.evidence.as_ref().map(|e| e.window.time_wait_max as f64),
                // measured 9,900 → 1 on a 2-core machine (the port search: 81–88% of the
                // worker's samples; 1,154–1,363 → 19,219–22,260 req/s).
                moves: Moves::Down(10.0),
            },
            build: |w, fixed| {
                let ports = w.param("ports", 10_000, 4_000..=10_000)?;
                proxy_no_keepalive(w, fixed, Ports::HeldInTimeWait(ports))
            },
        },
        Scenario {
            name: "proxy-buffers",
            summary: "reverse proxy of a 91 KiB body with proxy_buffers 8 4k (--param buffer_kb=4..5)",
            source: "reverse-proxy-throughput-halved.zh.txt (readv returns 4096 bytes, writev 8192)",
            fault: "`proxy_buffer_size Nk; proxy_buffers 8 Nk` (`buffer_kb`, default 4: the default on 4 KiB pages; at 8 beside two compilers the CPU came first and the fix gained no rate; at 6 it gained 4% (3,942 → 4,097 req/s) with small-proxy-buffers first once, server-cpu-saturated first in 3 test runs of 3; at 16 the reads were 15 KiB against 33 KiB fixed, inside the ×2 margin)",
            fix: "`proxy_buffer_size 128k; proxy_buffers 8 128k; proxy_busy_buffers_size 128k`",
            expected_finding: "small-proxy-buffers",
            key: Key {
                label: "proxy bytes per read",
                read: |r| proc_max(r, Role::Worker, |p| p.bytes_per_read),
                // measured 8,935 → 36,284 bytes per read: ×4.1 on a 2-core machine.
                moves: Moves::Up(2.0),
            },
            build: |w, fixed| {
                let kb = w.param("buffer_kb", 4, 4..=5)?;
                w.two_hosts()?;
                start_upstream(w)?;
                let buffers = if fixed {
                    "proxy_buffer_size 128k; proxy_buffers 8 128k; proxy_busy_buffers_size 128k;".to_string()
                } else {
                    format!("proxy_buffer_size {kb}k; proxy_buffers 8 {kb}k; proxy_busy_buffers_size {}k;", 2 * kb)
                };
                let pid = start_front(w, Nginx {
                        http_extra: "upstream app { server 127.0.0.1:8081; keepalive 32; }".into(),
                        server_extra: format!(
                            "location / {{ proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection \"\"; {buffers} }}"
                        ),
                        ..Nginx::default()
                    })?;
                Ok(Setup::unprobed(url("/91k.bin"), &["-c", "20"], vec![pid]))
            },
        },
        Scenario {
            name: "conn-per-request",
            summary: "one request per connection, 2 workers, without then with reuseport (--param connections=50..200)",
            source: "dragonflybsd-nginx-study.txt (1/4/14 requests per connection, reuseport on/off)",
            fault: "a new TCP connection for every request (`connections` at once, default 100); one shared listen socket",
            fix: "`listen ... reuseport` (one accept queue per worker)",
            expected_finding: "new-connection-cost",
            key: Key {
                label: "requests/s",
                read: |r| Some(r.results.requests_per_s),
                moves: Moves::Holds,
            },
            build: |w, fixed| {
                let conns = w.param("connections", 100, 50..=200)?.to_string();
                w.two_hosts()?;
                let c = w.client();
                let s = w.server();
                let pid = start_nginx(
                    w,
                    &s,
                    &c,
                    &Nginx {
                        workers: "2",
                        listen: listen(),
                        listen_opts: if fixed { "backlog=4096 reuseport" } else { "backlog=4096" },
                        ..Nginx::default()
                    },
                )?;
                Ok(Setup::unprobed(url("/1k.bin"), &["-c", &conns, "--connreqs", "1"], vec![pid]))
            },
        },
        Scenario {
            name: "slow-link",
            summary: "a 1 MiB text file over a 100 Mbit/s link (--param mbit=50..200)",
            source: "nginx-evaluation-jemalloc-dpdk.txt (bound by the NIC at 98% link utilisation)",
            fault: "`tc tbf rate Nmbit` on the server's link (`mbit`, default 100; at 400 the link carried as many pages as a busy 2-core machine's worker could compress at gzip level 1: no fault left to fix)",
            fix: "`gzip on` for text: the same pages in a fraction of the bytes",
            expected_finding: "link-saturated",
            key: Key {
                // The pages the link carried (its Mbit/s is the finding's evidence; a
                // faster machine may fill the link again with compressed pages).
                label: "requests/s",
                read: |r| Some(r.results.requests_per_s),
                // measured 9 → 772 req/s: ×85 on a 2-core machine at 100 Mbit/s; at 200
                // (the range's high end) the link carries twice the pages and the fix is
                // the CPU's: 21 → 192 req/s (×9.2) in a fresh clone's lab.
                moves: Moves::Up(5.0),
            },
            build: |w, fixed| {
                let mbit = w.param("mbit", 100, 50..=200)?;
                w.two_hosts()?;
                let c = w.client();
                let s = w.server();
                w.rate_limit(&s, &format!("{mbit}mbit"))?;
                let gzip = if fixed {
                    "gzip on; gzip_types text/plain; gzip_comp_level 1;"
                } else {
                    ""
                };
                let pid = start_nginx(
                    w,
                    &s,
                    &c,
                    &Nginx {
                        listen: listen(),
                        http_extra: gzip.into(),
                        ..Nginx::default()
                    })?;
                Ok(Setup::unprobed(url("/1m.txt"), &["-c", "10", "-H", "Accept-Encoding: gzip", "--timeout", "5s"], vec![pid]))
            },
        },
        Scenario {
            name: "client-bound",
            summary: "the load generator in a container-like CPU limit: it, not the server, sets the pace (--param quota_pct=5..10)",
            source: "dragonflybsd-nginx-study.txt (the modified wrk: a client that must never be the bottleneck)",
            fault: "loadlens in a CPU cgroup with a quota of `quota_pct` hundredths of a core (default 10: a container's `--cpus 0.1`; at 15 a client beside two compilers drove 9,071 req/s throttled and 9,280 without the quota: nginx's worker, waiting for its CPU, set the pace; at 25 it was never throttled), pinned to CPU 0; nginx (1 worker) on CPU 1",
            fix: "the quota removed: loadlens has CPU 0 to itself",
            expected_finding: "client-saturated",
            key: Key {
                label: "client throttled ms/s",
                read: |r| {
                    let q = r.client.quota.as_ref();
                    Some(q.map_or(0.0, |q| q.throttled_ms) / r.results.duration_s.max(1e-9))
                },
                moves: Moves::Down(10.0),
            },
            build: |w, fixed| {
                let pct = w.param("quota_pct", 10, 5..=10)?;
                w.two_hosts()?;
                let pid = start_front(w, Nginx {
                        main_extra: "worker_cpu_affinity 10;".into(),
                        ..Nginx::default()
                    })?;
                // A tenth of a core: whatever the client's cost per response, nginx's
                // worker (which costs about as much per response) is left mostly idle.
                let cgroup = if fixed { None } else { Some(w.cpu_quota("client", f64::from(pct) / 100.0)?) };
                Ok(Setup {
                    client_prefix: args(&["taskset", "-c", "0"]),
                    client_cgroup: cgroup,
                    ..Setup::unprobed(url("/1k.bin"), &["-c", "40", "-t", "1"], vec![pid])
                })
            },
        },
        Scenario {
            name: "cpu-quota",
            summary: "nginx in a container-like CPU limit of 0.3 cores, a worker per CPU (--param quota_pct=20..30)",
            source: "nginx-tail-latencies.txt (time the worker waited for a CPU it did not get); a container's `--cpus`",
            fault: "nginx (`worker_processes auto`: 2 workers) in a CPU cgroup with a quota of `quota_pct` hundredths of a core (default 30; at 40 a 2-core machine busy with two compilers throttled the workers in only 15 of 30 periods, and at 50 never: the host, not the quota, left them short)",
            fix: "the quota raised to 2 cores (the machine's)",
            expected_finding: "cpu-quota",
            key: Key {
                label: "server throttled ms/s",
                read: |r| {
                    let e = r.evidence.as_ref()?;
                    let ms: f64 = e.window.cgroup_quotas.iter().map(|q| q.throttled_ms).sum();
                    Some(ms / e.window.duration_s.max(1e-9))
                },
                // A quota of 0.3 cores against 2 workers: throttled in nearly every
                // period; with 2 cores, never (2 CPUs cannot use more).
                moves: Moves::Down(10.0),
            },
            build: |w, fixed| {
                let pct = w.param("quota_pct", 30, 20..=30)?;
                w.two_hosts()?;
                let cores = if fixed { 2.0 } else { f64::from(pct) / 100.0 };
                w.spawn_cgroup = Some(w.cpu_quota("server", cores)?);
                let pid = start_front(w, Nginx {
                        workers: "auto",
                        ..Nginx::default()
                    })?;
                w.spawn_cgroup = None;
                Ok(Setup::unprobed(url("/1k.bin"), &["-c", "20"], vec![pid]))
            },
        },
        Scenario {
            name: "few-connections",
            summary: "4 connections to a PHP page that takes 50 ms, the server idle: the load's own concurrency sets the rate (--param connections=2..4, script_ms=30..100)",
            source: "peers-and-techniques.md (closed loop: the rate is the client's concurrency over the latency, not the server's capacity)",
            fault: "`-c N` (`connections`, default 4; at 6 the fix's 16 children give only ×2.7 the rate, inside the ×2.5 margin) against nginx → php-fpm (16 children) with a script of `script_ms` (default 50)",
            fix: "`-c 64`: the load finds the server's limit (its 16 children)",
            expected_finding: "concurrency-bound",
            key: Key {
                label: "requests/s",
                read: |r| Some(r.results.requests_per_s),
                // 4 ÷ 50 ms = 80/s against 16 children ÷ 50 ms = 320/s: ×4.
                moves: Moves::Up(2.5),
            },
            build: |w, fixed| {
                let conns = w.param("connections", 4, 2..=4)?;
                let script_ms = w.param("script_ms", 50, 30..=100)?;
                w.two_hosts()?;
                let s = w.server();
                let sock = w.dir.join("php/fpm.sock").display().to_string();
                let fpm = start_php_fpm(w, &s, &sock, "pm = static\npm.max_children = 16", script_ms)?;
                let app = w.dir.join("php/app.php").display().to_string();
                let pid = start_front(w, Nginx {
                        server_extra: format!(
                            "location / {{ fastcgi_pass unix:{sock}; include /etc/nginx/fastcgi_params; fastcgi_param SCRIPT_FILENAME {app}; }}"
                        ),
                        ..Nginx::default()
                    })?;
                let c = if fixed { 64 } else { conns }.to_string();
                Ok(Setup::unprobed(url("/"), &["-c", &c, "--timeout", "5s", "--probe"], vec![pid, fpm]))
            },
        },
        Scenario {
            name: "fd-limit",
            summary: "an nginx worker whose open-files limit is far below the connections (--param nofile=32..128)",
            source: "throughput-drop-case-study.txt (accept4() failed (24: Too many open files))",
            fault: "`worker_rlimit_nofile N;` (`nofile`, default 64) with 200 keep-alive connections, or 3 × N when more",
            fix: "`worker_rlimit_nofile 8192;`",
            expected_finding: "fd-limit",
            key: Key {
                label: "worker open fds (most)",
                read: |r| proc_max(r, Role::Worker, |p| p.fds_peak().map(|v| v as f64)),
                // measured 64 → 212 fds: ×3.3 on a 2-core machine.
                moves: Moves::Up(2.0),
            },
            build: |w, fixed| {
                let nofile = w.param("nofile", 64, 32..=128)?;
                w.two_hosts()?;
                let limit = if fixed { 8192 } else { nofile };
                let pid = start_front(w, Nginx {
                        main_extra: format!("worker_rlimit_nofile {limit};"),
                        ..Nginx::default()
                    })?;
                let conns = (3 * nofile).max(200).to_string();
                Ok(Setup::unprobed(url("/1k.bin"), &["-c", &conns, "--timeout", "1s"], vec![pid]))
            },
        },
        Scenario {
            name: "worker-connections",
            summary: "nginx worker_connections below the connections the clients open (--param worker_connections=32..96)",
            source: "throughput-drop-case-study.txt (\"worker_connections are not enough\")",
            fault: "`worker_connections N;` (`worker_connections`, default 64; at 128 the fix moved the fds ×2.0 only, on the margin) with 200 keep-alive connections, or 3 × N when more",
            fix: "`worker_connections 4096;`",
            expected_finding: "connection-limit",
            key: Key {
                label: "worker open fds (most)",
                read: |r| proc_max(r, Role::Worker, |p| p.fds_peak().map(|v| v as f64)),
                // measured 69 → 212 fds: ×3.1 on a 2-core machine.
                moves: Moves::Up(2.0),
            },
            build: |w, fixed| {
                let n = w.param("worker_connections", 64, 32..=96)?;
                w.two_hosts()?;
                let limit = if fixed { 4096 } else { n }.to_string();
                let pid = start_front(w, Nginx {
                        worker_connections: &limit,
                        ..Nginx::default()
                    })?;
                let conns = (3 * n).max(200).to_string();
                Ok(Setup::unprobed(url("/1k.bin"), &["-c", &conns, "--timeout", "1s"], vec![pid]))
            },
        },
    ]
    .into_iter()
    .chain(super::other_servers::scenarios())
    .chain(super::time_scenarios::scenarios())
    .chain(super::path_scenarios::scenarios())
    .chain(super::wait_scenarios::scenarios())
    .chain(super::quic::scenarios())
    .collect()
}

/// The local ports of [`proxy_no_keepalive`]'s server namespace.
#[derive(Clone, Copy)]
enum Ports {
    /// So few that TIME_WAIT holds them all (ephemeral-ports).
    Few(u32),
    /// This many, 99% of them held in TIME_WAIT (time-wait).
    HeldInTimeWait(u32),
}

/// nginx as a reverse proxy to an upstream nginx on loopback in the server namespace,
/// asking for keep-alive (`proxy_http_version 1.1`, empty `Connection`) but — the
/// fault — with no `keepalive` cache in the `upstream` block, so the proxy closes every
/// upstream connection after one request and keeps its TIME_WAIT. The fix adds the cache.
fn proxy_no_keepalive(w: &mut World, fixed: bool, ports: Ports) -> anyhow::Result<Setup> {
    w.two_hosts()?;
    let s = w.server();
    w.sysctl(&s, "net.ipv4.tcp_tw_reuse", "0")?;
    if let Ports::Few(n) = ports {
        let range = format!("20000 {}", 20_000 + n - 1);
        w.sysctl(&s, "net.ipv4.ip_local_port_range", &range)?;
    } else if let Ports::HeldInTimeWait(n) = ports {
        // TIME_WAIT held at 99% of the local port range (the kernel closes a socket at
        // once rather than keep more than tcp_max_tw_buckets): each connect() searches
        // ~100 ports on average before a free one, yet never runs out — the published
        // "timewait 32768, inet_hash_connect hot", at any request rate.
        let range = format!("30000 {}", 30_000 + n - 1);
        w.sysctl(&s, "net.ipv4.ip_local_port_range", &range)?;
        w.sysctl(
            &s,
            "net.ipv4.tcp_max_tw_buckets",
            &(n * 99 / 100).to_string(),
        )?;
    }
    start_upstream(w)?;
    // The upstream block's own keepalive_requests (default 1000) makes the proxy close
    // each cached connection after 1000 requests: at tens of thousands of requests per
    // second that alone churns ports, so the fix raises it too.
    let upstream = if fixed {
        "upstream app { server 127.0.0.1:8081; keepalive 32; keepalive_requests 1000000; }"
    } else {
        "upstream app { server 127.0.0.1:8081; }"
    };
    let pid = start_front(w, Nginx {
            http_extra: upstream.into(),
            server_extra: "location / { proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection \"\"; }".into(),
            ..Nginx::default()
        })?;
    if let Ports::HeldInTimeWait(n) = ports {
        // The proxy has served a while before the measured run: TIME_WAIT at its
        // steady state from the first second, whatever the machine's speed.
        warm_up(w, &url("/1k.bin"), u64::from(n) * 6 / 5)?;
    }
    Ok(Setup::unprobed(url("/1k.bin"), &["-c", "20"], vec![pid]))
}

/// `requests` requests from the client namespace before the measured run (loadlens
/// itself, nothing recorded).
fn warm_up(w: &World, url: &str, requests: u64) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let exe = exe.display().to_string();
    let n = requests.to_string();
    w.ns_cmd(
        &w.client(),
        &[&exe, "run", url, "-n", &n, "-c", "20", "--no-watch", "-q"],
    )
    .map(|_| ())
}
