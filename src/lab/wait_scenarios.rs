//! Tails with nothing saturated: the requests wait somewhere that uses no CPU, no link,
//! no queue's room — a worker in state D behind a slow disk, an upstream that stops for
//! a moment (a garbage collector's pause), a link that loses segments. Each fault's
//! parameter comes from a range where it is decisive (`--param KEY=N`), and each fix is
//! one a user can make.

use std::time::Duration;

use super::scenario::{url, Beside, Key, Moves, Scenario, Setup};
use super::scenarios::start_front;
use super::servers::{children, start_upstream, Nginx};
use super::world::World;
use crate::run::Run;

/// Responses slower than `ms`, counted in the Run's histogram.
fn slower_than(r: &Run, ms: u64) -> Option<f64> {
    let h = r.results.latency.decode().ok()?;
    let lo = ms * 1000;
    Some(h.count_between(lo, h.max().max(lo)) as f64)
}

/// Responses of the endpoint `name` slower than `ms`, counted in its histogram.
fn endpoint_slower_than(r: &Run, name: &str, ms: u64) -> Option<f64> {
    let e = r.results.endpoints.iter().find(|e| e.name == name)?;
    let h = e.latency.decode().ok()?;
    let lo = ms * 1000;
    Some(h.count_between(lo, h.max().max(lo)) as f64)
}

/// The disk scenario's targets: nine requests for nginx's 1 KiB file from the docroot
/// (in the page cache) to one for a 32 KiB file on the slow disk.
const DISK_MIX: &str = "{\"name\":\"GET /1k.bin\",\"url\":\"/1k.bin\",\"weight\":9}\n{\"name\":\"GET /disk/32k.bin\",\"url\":\"/disk/32k.bin\",\"weight\":1}\n";

/// Drops `per_mille` ‰ of the TCP segments of port 8080 as they arrive, each way: the
/// server's in the client's namespace, the client's in the server's (an `nft` table of
/// each namespace, gone with it). On arrival, not on output, where a drop is a local
/// send error that TCP retries at once without counting a loss.
fn lossy_world(w: &World, per_mille: u32) -> anyhow::Result<()> {
    if super::world::which("nft").is_none() {
        anyhow::bail!("`nft` not found: apt-get install nftables (make test installs it)");
    }
    for (ns, side) in [(w.client(), "sport"), (w.server(), "dport")] {
        w.ns_cmd(&ns, &["nft", "add", "table", "inet", "loss"])?;
        w.ns_cmd(
            &ns,
            &[
                "nft",
                "add chain inet loss in { type filter hook input priority 0; }",
            ],
        )?;
        w.ns_cmd(
            &ns,
            &[
                "nft",
                &format!("add rule inet loss in tcp {side} 8080 numgen random mod 1000 < {per_mille} drop"),
            ],
        )?;
    }
    Ok(())
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "slow-disk",
            summary: "nginx reads a file from a slow disk with `directio` and no `aio`: its worker waits in state D (--param read_ms=5..100)",
            source: "issue 41 (a worker blocked in disk reads, state D: a tail with nothing saturated, read as concurrency-bound)",
            fault: "one request in ten for a 32 KiB file on a loop device whose reads the world's blkio cgroup holds to one every `read_ms` (default 20), served with `directio 4k;` and without `aio`: the worker waits in each read, and every other request with it",
            fix: "`aio threads;`: the reads wait in nginx's thread pool while the worker serves the rest",
            expected_finding: "worker-blocked",
            key: Key {
                // Counted, not timed: the cached file's requests (9 in 10) wait behind
                // the worker's reads, held by the cgroup's throttle in bursts of up to
                // ~100 ms whatever `read_ms` (p50 barely moves at 5 ms: 1.0 → 0.8 ms,
                // while p99 went 92 → 2.7 ms); with `aio threads` they no longer wait.
                label: "cached-file responses slower than 20 ms",
                read: |r| endpoint_slower_than(r, "GET /1k.bin", 20),
                moves: Moves::Down(5.0),
            },
            build: |w, fixed| {
                let read_ms = w.param("read_ms", 20, 5..=100)?;
                w.two_hosts()?;
                let disk = w.slow_disk("disk", read_ms)?;
                std::fs::write(disk.dir.join("32k.bin"), [b'd'; 32768])?;
                let root = w.dir.display();
                let aio = if fixed { "aio threads;" } else { "" };
                // Only nginx reads slowly: it runs in the disk's cgroup.
                w.spawn_cgroup = Some(disk.procs.clone());
                let pid = start_front(
                    w,
                    Nginx {
                        server_extra: format!(
                            "location /disk/ {{ root {root}; directio 4k; {aio} }}"
                        ),
                        ..Nginx::default()
                    },
                );
                w.spawn_cgroup = None;
                let pid = pid?;
                let targets = w.write("mix/targets.jsonl", DISK_MIX.as_bytes())?;
                let targets = targets.display().to_string();
                Ok(Setup::new(
                    url("/"),
                    &["-c", "20", "--targets", &targets],
                    vec![pid],
                ))
            },
        },
        Scenario {
            name: "upstream-pause",
            summary: "nginx in front of an upstream that stops for `pause_ms` every second, as a garbage collector's pause would (--param pause_ms=50..300)",
            source: "issue 41 (an upstream that pauses: a tail with nothing saturated, read as concurrency-bound)",
            fault: "the upstream (a second nginx on 127.0.0.1:8081) stopped with SIGSTOP for `pause_ms` (default 150) once a second; 2000 requests/s (`-R 2000`, at most 20 connections) through the front, which keeps its upstream connections",
            fix: "the upstream no longer pauses (its collector tuned, or its work moved out of the pauses)",
            expected_finding: "upstream-paused",
            key: Key {
                // Counted, not timed: every pause holds each connection's request, so
                // 3 s hold 2-3 pauses of 20 slow responses each; the bar sits under the
                // shortest pause and above what a busy host adds on its own.
                label: "responses slower than 40 ms",
                read: |r| slower_than(r, 40),
                moves: Moves::Down(5.0),
            },
            build: |w, fixed| {
                let pause_ms = w.param("pause_ms", 150, 50..=300)?;
                w.two_hosts()?;
                let up = start_upstream(w)?;
                let pid = start_front(
                    w,
                    Nginx {
                        // Upstream connections kept: the single upstream worker then
                        // has room (no accept and close per request), so between the
                        // pauses nothing is near its limit.
                        server_extra: "location / { proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection \"\"; }".into(),
                        http_extra: "upstream app { server 127.0.0.1:8081; keepalive 32; keepalive_requests 1000000; }".into(),
                        ..Nginx::default()
                    },
                )?;
                let beside = (!fixed).then(|| {
                    let mut procs = vec![up];
                    procs.extend(children(up));
                    let pause = Duration::from_millis(pause_ms as u64);
                    Beside::every(Duration::from_millis(1000 - pause_ms as u64), move || {
                        for &p in &procs {
                            // SAFETY: kill(2) on processes of the world's own.
                            unsafe { libc::kill(p, libc::SIGSTOP) };
                        }
                        std::thread::sleep(pause);
                        for &p in &procs {
                            unsafe { libc::kill(p, libc::SIGCONT) };
                        }
                    })
                });
                Ok(Setup {
                    beside,
                    ..Setup::new(url("/1k.bin"), &["-c", "20", "-R", "2000"], vec![pid])
                })
            },
        },
        Scenario {
            name: "lossy-link",
            summary: "a link that loses segments: the slow requests sit at TCP's 200 ms minimum retransmission timeout (--param loss_permille=5..50)",
            source: "issue 41 (a lossy link whose p99 sat at the 200 ms minimum RTO while `retransmits` came second as a warning)",
            fault: "`loss_permille` ‰ (default 10, 1%) of the segments of port 8080 dropped on arrival each way (nft in each namespace), 10 connections to nginx",
            fix: "no loss (the faulty link, cable or NIC replaced)",
            expected_finding: "retransmits",
            key: Key {
                // A lost segment's request waits ≥ 200 ms (the minimum RTO), a
                // delivered one well under a millisecond: counted, not timed.
                label: "responses slower than 150 ms",
                read: |r| slower_than(r, 150),
                moves: Moves::Down(5.0),
            },
            build: |w, fixed| {
                let per_mille = w.param("loss_permille", 10, 5..=50)?;
                w.two_hosts()?;
                let pid = start_front(w, Nginx::default())?;
                if !fixed {
                    lossy_world(w, per_mille)?;
                }
                Ok(Setup::new(url("/1k.bin"), &["-c", "10"], vec![pid]))
            },
        },
    ]
}
