//! The table of findings: one row per finding, in the order the rules run (ties in
//! confidence keep this order) — its id, the rule that makes it, its texts (one line for
//! `loadlens explain list` and docs/findings.md, the long form for `loadlens explain ID`),
//! and its relations to the others: the consequences it explains when it is a
//! bottleneck, whether it describes a capacity, whether it is the consequence of a queue
//! in front of a saturated tier, which tier of the request path its resource is in.
//!
//! The enum of ids, [`FindingId`], is made from the rows (`findings!`, with what a row
//! holds, in `rules/mod.rs`): adding a rule is its function in its file and one row here
//! (a new file: its `mod` line in `rules/mod.rs` too; the row's `check: file::function`
//! finds both the function and, for docs/findings.md, the file's text).
//! `diagnose` ranks by the rows, `explain` prints them, `catalog` writes
//! docs/findings.md from them.
//!
//! The Run keeps a finding's id as its string ([`FindingId::as_str`], the JSON's and
//! `loadlens explain`'s): a Run saved by another version of loadlens, with a rule added
//! or gone since, still reads. Code compares it with a `FindingId` (`f.id == FindingId::X`).

use super::{Explains, Row, Tier};

findings! {
    ClientSaturated = "client-saturated" {
        check: client::client_saturated,
        means: "the load generator was CPU-bound, starved of CPU or held back by its cgroup's CPU quota: results are a floor",
        long: "Mechanism: a closed-loop load generator sends the next request only after a response; if its threads are busy (or wait for a CPU) the request rate is the client's, not the server's.\n\
            Confirm: `top -H -p $(pgrep loadlens)` shows the loadlens-w threads at ~100%, or `cat /proc/PID/task/TID/schedstat` (second field) growing fast; in a container, its cgroup's `cpu.stat` (`nr_throttled`, `throttled_usec`) growing.\n\
            Fix: more -t threads, pin loadlens to its own cores (taskset) away from the server and other busy processes, or run it on another machine.\n\
            Source: dragonflybsd-nginx-study.txt (a modified wrk so the client is never the limit).",
        tier: Tier::Client,
    }
    ConcurrencyBound = "concurrency-bound" {
        check: client::concurrency_bound,
        means: "the load's own concurrency set the rate (Little's law), with nothing saturated: not the server's capacity",
        long: "Mechanism: a closed-loop load of N connections sends a request only when the last is answered, so it completes N ÷ (mean latency) requests per second whatever the server could do. When neither the server's processes nor the CPUs nor the client are busy, the rate measured is the latency of one request, repeated N at a time — a slow handler, an upstream that waits, a sleep — not a capacity.\n\
            Confirm: requests/s ≈ connections ÷ mean latency; `pidstat -u 1` shows the server mostly idle; a run with 4× the connections gives ~4× the rate.\n\
            Fix: load harder (-c, -R, `loadlens sweep -c 10,40,160`) to find the capacity; or work on the latency itself.\n\
            Source: Little's law (L = λW); peers-and-techniques.md (closed vs open loop).",
        tier: Tier::Client,
    }
    PoolLimit = "pool-limit" {
        check: pool::pool_limit,
        means: "a concurrency limit inside a tier (a pool of threads, workers or connections), sized by Little's law from a probe",
        long: "Mechanism: a tier that serves at most N requests at once (a servlet container's maxThreads, php-fpm's pm.max_children, Apache's MaxRequestWorkers, a connection pool) holds the rate at N ÷ (service time) whatever the load's connections: the rest wait in a queue inside it, and with nothing saturated the run looks like the load's own concurrency. A probe tells them apart: at 1 connection it measures the unloaded service time S, at more connections the rate stays put; then rate × S = N servers busy all the time (Little's law applied to the servers).\n\
            Confirm: a run with 4× the connections gives the same rate and 4× the latency; a thread dump (`jstack PID`) shows N request threads busy and the rest of the requests queued; php-fpm's status page shows `active processes` = `max children`.\n\
            Fix: raise the pool (Tomcat `maxThreads`, `pm.max_children`, `MaxRequestWorkers`) while the CPUs have room, or make each request shorter.\n\
            Source: Little's law (L = λW); the issue's servlet container with 4 threads × 50 ms = 80/s.",
        tier: Tier::UpstreamIfNamed,
        explains: &[POOL_THREADS_BLOCKED],
    }
    ListenQueueOverflow = "listen-queue-overflow" {
        check: accept::listen_queue_overflow,
        means: "accept queue full: handshakes dropped (TcpExt.ListenOverflows)",
        long: "Mechanism: completed connections wait in the listen socket's accept queue until the server calls accept(); its size is min(listen backlog, net.core.somaxconn). When full, the kernel drops the final ACK (ListenOverflows, ListenDrops) and the client retransmits after ≥ 1 s.\n\
            Confirm: `nstat -az TcpExtListenOverflows TcpExtListenDrops` rising; `ss -ltn` Recv-Q reaching Send-Q on the port.\n\
            Fix: `listen 80 backlog=4096;` in nginx and `sysctl -w net.core.somaxconn=4096`; make sure workers accept fast enough.\n\
            Source: throughput-drop-case-study.txt (backlog=10, somaxconn=10).",
        tier: Tier::UpstreamIfNamed,
        queue_consequence: Some("the requests the saturated tier could not take queued in front of it until its accept queue overflowed"),
    }
    SynQueueOverflow = "syn-queue-overflow" {
        check: accept::syn_queue_overflow,
        means: "SYN queue full: SYNs dropped or answered with cookies",
        long: "Mechanism: half-open connections (SYN received, SYN-ACK sent) wait in the SYN queue; when it is full new SYNs are dropped (TCPReqQFullDrop) or answered with SYN cookies (TCPReqQFullDoCookies), which lose TCP options.\n\
            Confirm: `nstat -az TcpExtTCPReqQFullDrop TcpExtTCPReqQFullDoCookies TcpExtSyncookiesSent`.\n\
            Fix: raise net.ipv4.tcp_max_syn_backlog and the listen backlog; keep tcp_syncookies=1.",
        tier: Tier::UpstreamIfNamed,
        queue_consequence: Some("the handshakes of connections retried after the accept queue's drops filled the SYN queue"),
    }
    ConntrackFull = "conntrack-full" {
        check: conntrack::conntrack_full,
        means: "netfilter's connection table full: packets dropped",
        long: "Mechanism: with conntrack loaded every connection takes an entry until it times out; at nf_conntrack_max new connections are dropped.\n\
            Confirm: `sysctl net.netfilter.nf_conntrack_count net.netfilter.nf_conntrack_max`; dmesg \"nf_conntrack: table full, dropping packet\"; `conntrack -S`.\n\
            Fix: raise net.netfilter.nf_conntrack_max (and the hash size), shorten timeouts, or NOTRACK the server's port in the raw table.\n\
            Source: throughput-drop-case-study.txt (nf_conntrack_max = 200).",
        tier: Tier::Network,
    }
    EphemeralPortsExhausted = "ephemeral-ports-exhausted" {
        check: ports::ephemeral_ports_exhausted,
        means: "no local port left to connect from (EADDRNOTAVAIL; 502 from a proxy)",
        long: "Mechanism: each outgoing connection needs a local port from net.ipv4.ip_local_port_range; the side that closes first keeps it in TIME_WAIT for 60 s. A proxy opening one upstream connection per request runs out: connect() fails with EADDRNOTAVAIL and nginx answers 502.\n\
            Confirm: nginx error log \"connect() failed (99: Cannot assign requested address)\"; `ss -tan state time-wait | wc -l` ≈ the range size.\n\
            Fix: upstream keep-alive (`keepalive 32;` in the upstream block, `proxy_http_version 1.1; proxy_set_header Connection \"\";`, or `fastcgi_keep_conn on;`); widen ip_local_port_range.\n\
            Source: throughput-drop-case-study.txt (ip_local_port_range 20000 20050).",
        tier: Tier::Upstream,
        queue_consequence: Some("the front opened a connection per request to the slow tier faster than TIME_WAIT freed its ports"),
        explains: &[
            // Out of ports, connect() first searches the whole range: the search's cost is
            // part of running out.
            Explains {
                consequence: FindingId::TimeWaitConnectCost,
                why: "with every local port in TIME_WAIT, each connect() searched the whole range before failing",
                unless: None,
            },
        ],
    }
    TimeWaitConnectCost = "time-wait-connect-cost" {
        check: ports::time_wait_connect_cost,
        means: "a new upstream connection per request: connect() pays for thousands of TIME_WAIT entries",
        long: "Mechanism: with many sockets in TIME_WAIT and tcp_tw_reuse=0, each connect() searches for a free port past them (inet_hash_connect, __inet_check_established): the proxy's CPU goes to the kernel.\n\
            Confirm: `ss -s` timewait in the tens of thousands; `perf top` shows inet_hash_connect / __inet_check_established.\n\
            Fix: upstream keep-alive (with a high `keepalive_requests` in the upstream block), or net.ipv4.tcp_tw_reuse=1.\n\
            Source: throughput-drop-case-study.txt (timewait 32768, tcp_tw_reuse=0).",
        tier: Tier::Upstream,
        queue_consequence: Some("each request the front passed to the slow tier on a new connection left a TIME_WAIT socket, and connect() searched past them"),
        explains: &[
            // The time-wait lab scenario: the proxy's worker busy in connect()'s port search
            // delays every connection it holds at once — the latency spikes of a stall.
            Explains {
                consequence: FindingId::EventLoopStall,
                why: "the worker was busy in connect()'s search for a free local port past thousands of TIME_WAIT sockets, and every connection it holds waited meanwhile",
                unless: Some(super::worker_seen_blocked),
            },
        ],
    }
    UpstreamSaturated = "upstream-saturated" {
        check: upstream::upstream_saturated,
        means: "the upstream (e.g. php-fpm) is full: requests queue, clients time out (499/502/504)",
        long: "Mechanism: the front server forwards to a pool of upstream workers; when all are busy, requests wait in the upstream's accept queue until someone gives up.\n\
            Confirm: php-fpm log \"server reached pm.max_children setting\"; `ss -lx` Recv-Q on its socket; nginx access log 499.\n\
            Fix: raise pm.max_children (memory permitting), make requests faster, add upstream servers.\n\
            Source: throughput-drop-case-study.txt (max_children 5, 499s).",
        tier: Tier::Upstream,
        queue_consequence: Some("the requests the upstream's pool could not take waited in its accept queue"),
        explains: &[
            // Connections queued for a few busy upstream workers wait about the same time each:
            // N requests ahead of a few ms each make a latency mode that can sit at 40 ms
            // (CI, tests/upstream.rs: 12 connections over 2 php-fpm children computing, 66% of
            // the requests at 36-48 ms, `nagle-delayed-ack` ranked first).
            Explains {
                consequence: FindingId::NagleDelayedAck,
                why: "every request waited in the upstream's queue behind the same number of others, each a few ms of a busy worker: a latency mode of the queue, not of a delayed ACK (whose mark, bodies ~40 ms after their heads, is absent)",
                unless: Some(super::body_after_head),
            },
        ],
    }
    SmallProxyBuffers = "small-proxy-buffers" {
        check: buffers::small_proxy_buffers,
        means: "the proxy reads responses in pieces far smaller than they are",
        long: "Mechanism: nginx reads an upstream response into proxy_buffer_size + proxy_buffers; 4k/8k buffers for 91 KiB responses mean ~20 readv/writev per response.\n\
            Confirm: `strace -c -p WORKER` and `strace -e readv,writev -p WORKER`: most readv return 4096.\n\
            Fix: `proxy_buffer_size 128k; proxy_buffers 8 128k; proxy_busy_buffers_size 128k;`.\n\
            Source: reverse-proxy-throughput-halved.zh.txt.",
        tier: Tier::Upstream,
    }
    SendfileOff = "sendfile-off" {
        check: buffers::sendfile_off,
        means: "nginx copies static files through user space in small pieces (`sendfile` off)",
        long: "Mechanism: with `sendfile off` (nginx's compiled-in default; Debian's nginx.conf turns it on) nginx reads each file into its output buffers (`output_buffers`, 2 × 32 KiB) and writes them to the socket: a read and a write per piece, each copying the data. `sendfile` lets the kernel send the file's pages directly.\n\
            Confirm: `strace -c -p WORKER` (pread64/readv and writev per request); `/proc/WORKER/io` rchar ÷ syscr = bytes per read; `nginx -T | grep -E 'sendfile|output_buffers'`.\n\
            Fix: `sendfile on; tcp_nopush on;`; where sendfile cannot work (some network or FUSE filesystems), `output_buffers 2 256k;`.",
    }
    SmallSendBuffer = "small-send-buffer" {
        check: sockbuf::small_send_buffer,
        means: "the server's socket send buffers are far smaller than its responses: each waits for ACKs",
        long: "Mechanism: a TCP socket holds at most its send buffer (`sk_sndbuf`) of data not yet acknowledged. The kernel sizes it from net.ipv4.tcp_wmem and grows it with the connection, unless the server fixes it with SO_SNDBUF (nginx `listen ... sndbuf=`). A buffer far smaller than the responses sends each one in buffer-sized pieces, each waiting a round trip; on loopback (64 KiB segments) a piece smaller than a segment waits for a delayed ACK, and throughput collapses while the CPUs idle.\n\
            Confirm: `ss -tim state established '( sport = :PORT )'`: `skmem:(...,tb8192,...)`, a busy time near the run's length, an rtt of tens of ms on loopback; `sysctl net.ipv4.tcp_wmem`; `nginx -T | grep sndbuf`.\n\
            Fix: remove `sndbuf=` from `listen` (or size it above the responses); `sysctl -w net.ipv4.tcp_wmem=\"4096 16384 4194304\"` (the kernel's default).",
    }
    ClientReceiveWindow = "client-receive-window" {
        check: sockbuf::client_receive_window,
        means: "the client's receive window held the server's sending back: the load generator's buffers are too small",
        long: "Mechanism: a sender may have at most the receiver's advertised window in flight; the window is the receiving socket's free buffer (net.ipv4.tcp_rmem, SO_RCVBUF). With a small one the server waits for the client to read and acknowledge, however fast both are. The client in a load test is the load generator: the run measured its limit.\n\
            Confirm: `ss -ti` on the server's side: `rwnd_limited:...ms(NN%)` of `busy`, a small `snd_wnd`; `sysctl net.ipv4.tcp_rmem` on the client.\n\
            Fix: `sysctl -w net.ipv4.tcp_rmem=\"4096 131072 6291456\"` (the kernel's default) on the load generator's machine or namespace.",
        tier: Tier::Client,
    }
    CpuQuota = "cpu-quota" {
        check: quota::cpu_quota,
        means: "the server's cgroup CPU quota (a container's limit) ran out: its processes stopped until the next period",
        long: "Mechanism: CFS bandwidth control gives a cgroup a quota of CPU time per period (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us`/`cpu.cfs_period_us`; 100 ms by default). Once its processes have used it, all of them are stopped until the next period, however idle the machine's CPUs are. Workers look saturated or waiting for a CPU; more workers, or a cheaper request, share the same quota.\n\
            Confirm: `cat /proc/PID/cgroup`, then that cgroup's `cpu.max` (or `cpu.cfs_quota_us`) and `cpu.stat`: `nr_throttled` and `throttled_usec` (`throttled_time`) growing during the load.\n\
            Fix: raise or remove the limit (docker `--cpus`, Kubernetes `resources.limits.cpu`, systemd `CPUQuota=`); run no more workers than the quota has cores.\n\
            Source: Documentation/scheduler/sched-bwc.rst.",
        explains: &[
            // A throttled task is runnable and not running: the scheduler counts the quota's
            // stops as run-queue delay, and no other process is to blame.
            Explains {
                consequence: FindingId::RunQueueDelay,
                why: "a task stopped by its cgroup's quota waits as if for a CPU, with the machine's CPUs idle",
                unless: None,
            },
        ],
    }
    RunQueueDelay = "run-queue-delay" {
        check: cpu::run_queue_delay,
        means: "server workers waiting for a CPU, with the process on it named",
        long: "Mechanism: a runnable worker waits in the CPU's run queue while another task runs; every connection it holds waits too.\n\
            Confirm: `pidstat -w` nvcswch/s; `/proc/PID/schedstat` second field; `perf sched latency`.\n\
            Fix: move the other process (taskset), lower its priority (nice, chrt --idle), pin workers (`worker_cpu_affinity`).\n\
            Source: nginx-tail-latencies.txt.",
        latency_only: true,
        explains: &[
            // Workers waiting for a CPU (pinned together, or beside a busy process) leave every
            // connection they hold waiting at once: the spikes of a stall, none of them blocked.
            Explains {
                consequence: FindingId::EventLoopStall,
                why: "the workers were runnable and waiting for a CPU, and every connection a waiting worker holds waited with it; no sample caught a worker stopped or in disk wait",
                unless: Some(super::worker_seen_blocked),
            },
            // A lock's holder waiting for a CPU keeps the lock's waiters blocked: their
            // waits are the run queue's. A wait in I/O (a pipe's reader lagging, a disk) is
            // a limit of its own beside it.
            Explains {
                consequence: FindingId::WorkerBlocked,
                why: "the workers waited for a lock whose holder was itself waiting for a CPU",
                unless: Some(super::blocked_in_io),
            },
        ],
    }
    WorkerBlocked = "worker-blocked" {
        check: stalls::worker_blocked,
        means: "the server's workers blocked in a call (a log write into a slow pipe, a disk, a kernel lock) for ≥ 10% of their time, named with the call, the file and the kernel function",
        long: "Mechanism: an event-driven worker (nginx, HAProxy, a Node process) serves every connection it holds from one thread; a call that sleeps — a write into a pipe or FIFO whose reader lags, a log on a slow or network disk, a file read from a cold disk, a lock — stops all of them until it returns. Throughput falls to what the blocking allows and latency gets the spikes of the waits.\n\
            Confirm: the off-CPU block \"Where the server's time went\" (the call, the file, the kernel function); `cat /proc/WORKER/wchan`, `strace -T -e trace=write,fsync -p WORKER`; `offcputime` from bcc.\n\
            Fix: move the blocking work off the worker: `access_log FILE combined buffer=64k flush=1s`, logs to a file on a local disk or to syslog over UDP rather than a pipe; `aio threads` for file reads; `open_file_cache`.\n\
            Source: nginx-tail-latencies.txt (workers blocked reopening logs; the off-CPU flame graph).",
        explains: &[
            // A worker blocked in a call for a share of its time stalls its connections each
            // time: the spikes are the blocking, named with its call and file.
            Explains {
                consequence: FindingId::EventLoopStall,
                why: "the worker blocked in the call named above, and every connection it holds waited meanwhile",
                unless: None,
            },
            // Blocked workers serve fewer requests than the connections ask for, with no
            // resource saturated: the rate is the blocking's, not the load's concurrency.
            Explains {
                consequence: FindingId::ConcurrencyBound,
                why: "the workers spent that time blocked in the call named above, not waiting for requests: the rate is set by the blocking",
                unless: None,
            },
            // The gaps in the responses are the blocking's, seen from the client's side.
            Explains {
                consequence: FindingId::ServerStalled,
                why: "the worker was blocked in the call named above, and answered nobody meanwhile",
                unless: None,
            },
        ],
    }
    EventLoopStall = "event-loop-stall" {
        check: stalls::event_loop_stall,
        means: "the event loop stops: many connections delayed at once",
        long: "Mechanism: one worker serves thousands of connections in one loop; one blocking call (log reopen, disk read, a stop) delays all of them by the same amount.\n\
            Confirm: latency spikes in the per-second timeline; `strace -T -p WORKER` for slow syscalls; offcputime.\n\
            Fix: buffered access logs, `aio threads`, remove the blocking work.\n\
            Source: nginx-tail-latencies.txt (a blocking log reopen).",
        latency_only: true,
        queue_consequence: Some("the front's workers waited on the slow tier"),
        explains: &[
            Explains {
                consequence: FindingId::ServerStalled,
                why: "the stalls above emptied those slices",
                unless: None,
            },
            // A loop that stops holds the rate whatever the connections, and Little's law
            // on its short unloaded time counts "servers" that are the stops' backlog
            // (lab event-loop-stall on a quiet host: nginx's one worker read as a pool of 3).
            Explains {
                consequence: FindingId::PoolLimit,
                why: "the rate stayed put because the loop stopped, whatever the connections: the requests waited for the stops, not for a pool's free server",
                unless: None,
            },
        ],
    }
    ServerStalled = "server-stalled" {
        check: stalls::server_stalled,
        means: "the server answered nobody for whole 100 ms slices while requests were in flight: a stall, whatever its period",
        long: "Mechanism: a server that stops — a worker blocked in a call, a stopped or frozen process — answers no request until it resumes; the requests caught in the gap wait for it, the others are served at once. The latency is then two modes, and its mean describes no request. loadlens keeps the load's responses per 100 ms slice: a slice without any while the load kept requests in flight, when a typical slice has dozens, is the server stopped, not slow. The slices are lined up with the server threads' waits (the off-CPU watch, on by default) to name the call.\n\
            Confirm: the slices in the JSON (`results.slices`, `responses: 0`) or the HTML's time chart; `cat /proc/WORKER/wchan` and `/proc/WORKER/syscall` while it happens; `strace -T -p WORKER`.\n\
            Fix: move the blocking work off the worker (buffered logs to a local file, `aio threads`), or stop what stops the process.\n\
            Source: nginx-tail-latencies.txt (workers blocked writing and reopening their logs).",
        explains: &[
            // A stalled server serves fewer requests than the connections ask for: the rate
            // is the stalls', and the mean latency of two modes describes no request.
            Explains {
                consequence: FindingId::ConcurrencyBound,
                why: "the server stopped answering for whole slices of the run: the rate is set by the stalls, and the mean latency the arithmetic uses is of two modes",
                unless: None,
            },
            Explains {
                consequence: FindingId::PoolLimit,
                why: "the server stopped answering for whole slices of the run: the rate stayed put because of the stops, not a pool's count",
                unless: None,
            },
        ],
    }
    UpstreamPaused = "upstream-paused" {
        check: tails::upstream_paused,
        means: "the upstream stopped for moments (state T: a stop signal, a collector's pause, a frozen cgroup) while the front's requests waited for it: the tail is its pauses",
        long: "Mechanism: a process that stops — SIGSTOP, a stop-the-world garbage collection, a frozen cgroup, a VM paused — serves nothing until it resumes. Behind a front server the requests passed to it during a stop wait for its end while the front's workers sit idle: no CPU is busy, no queue overflows, and the latency has two modes (the requests that missed the stops, and those caught by one at about the stop's length). Its mean describes no request, and the closed loop's arithmetic (`concurrency-bound`) would call the tail the load's. loadlens samples the upstream's threads' states with the front's (the /proc sampler of every run) and lines the stops up with the 100 ms slices of the load.\n\
            Confirm: `cat /proc/UPSTREAM/stat` (state T) or `ps -o stat,pid -p UPSTREAM` during a pause; a JVM's GC log (`-Xlog:gc`) with pauses of the tail's length; `results.slices` in the JSON, fewer responses in the slices of a stop.\n\
            Fix: remove the pauses at their source (a collector with a pause-time goal or a concurrent one: `-XX:MaxGCPauseMillis=`, ZGC, Shenandoah; whatever stops or freezes the process); or two upstreams with `proxy_next_upstream timeout;` and a `proxy_read_timeout` under the pause, so a stalled one is skipped.\n\
            Source: issue 41 (an upstream that pauses: a tail read as concurrency-bound).",
        tier: Tier::Upstream,
        latency_only: true,
        explains: &[
            // An upstream that stops holds every request passed to it: the front's
            // responses stop too, and look like the front's own stall.
            Explains {
                consequence: FindingId::EventLoopStall,
                why: "the requests held at once were those waiting for the stopped upstream, not for the front's event loop",
                unless: None,
            },
            Explains {
                consequence: FindingId::ServerStalled,
                why: "the slices without a response lie inside the upstream's stops",
                unless: None,
            },
            // A probe that caught a stop measured a rate that did not grow with the
            // connections: the pauses', read as a pool (tests/diagnose_tails: upstream
            // stopped 50 ms a second, `pool-limit` first once in a run beside builds).
            Explains {
                consequence: FindingId::PoolLimit,
                why: "the rate stayed put while the upstream was stopped, whatever the connections: the requests waited for the stops, not for a pool's free worker",
                unless: None,
            },
        ],
    }
    LatencyTail = "latency-tail" {
        check: tails::latency_tail,
        means: "p99 (or p99.9) far above p50 with nothing saturated, and no rule naming why: the tail said with its distribution's numbers, not as the load's concurrency",
        long: "Mechanism: a latency of two modes — most requests fast, a share of them slow — comes from something other than saturation: a stall now and then, a slow path taken by some requests (a cache miss, a query, a retry), a pause. Its mean describes neither mode, so the closed loop's arithmetic (in flight ÷ mean latency) names no capacity. loadlens says the two modes, how many requests are in the slow one, and whether they come in bursts (a few 100 ms slices) or all through the run (a share of every moment's requests).\n\
            Confirm: the latency distribution (`--latency`, the HTML's histogram), `results.slices` in the JSON; the server's request log with its times (nginx `$request_time`, `$upstream_response_time`).\n\
            Fix: find the slow requests' path (per-endpoint results with `--targets`, the upstream's log, `--profile`'s off-CPU stacks) and work on it; more connections will not lower it.\n\
            Source: issue 41 (a tail is a finding; never summarise a bimodal latency by its mean).",
        latency_only: true,
    }
    LinkSaturated = "link-saturated" {
        check: network::link_saturated,
        means: "an interface (or a `tc tbf`-shaped link) at ≥ 90% of its capacity",
        long: "Mechanism: the wire is full; responses queue behind each other while CPUs idle.\n\
            Confirm: `sar -n DEV 1` rx/tx kB/s against `ethtool IF` speed; `tc -s qdisc` overlimits.\n\
            Fix: fewer bytes (gzip, caching, image sizes) or more bandwidth.\n\
            Source: nginx-evaluation-jemalloc-dpdk.txt (98% of the NIC).",
        tier: Tier::Network,
        capacity: true,
        explains: &[
            // A link at its capacity drops what its queue cannot hold: the retransmissions and
            // their timeouts are the full link's.
            Explains {
                consequence: FindingId::Retransmits,
                why: "a link at its capacity drops what its queue cannot hold, and the requests whose segments were dropped waited for their retransmission",
                unless: None,
            },
        ],
    }
    SoftirqConcentrated = "softirq-concentrated" {
        check: cpu::softirq_concentrated,
        means: "network softirq piled on one CPU",
        long: "Mechanism: packets are processed in NET_RX softirq on the CPU that took the interrupt; one queue or one IRQ CPU saturates it.\n\
            Confirm: `mpstat -P ALL 1` %soft; `/proc/softirqs` NET_RX per CPU; `/proc/interrupts`.\n\
            Fix: more NIC queues (`ethtool -L`), IRQ affinity, RPS/RFS.",
        tier: Tier::Network,
    }
    FdLimit = "fd-limit" {
        check: limits::fd_limit,
        means: "a process at its open-files limit",
        long: "Mechanism: every connection is a descriptor; at RLIMIT_NOFILE accept()/connect() fail with EMFILE.\n\
            Confirm: `ls /proc/PID/fd | wc -l` vs `grep 'open files' /proc/PID/limits`; nginx \"Too many open files\".\n\
            Fix: `worker_rlimit_nofile`, LimitNOFILE=, ulimit -n.",
    }
    ConnectionLimit = "connection-limit" {
        check: limits::connection_limit,
        means: "the server at its own connection limit (nginx `worker_connections`, Apache `MaxRequestWorkers`, HAProxy `maxconn`)",
        long: "Mechanism: a server serves at most a configured number of connections or requests at once (an nginx worker: worker_connections, clients and upstreams together; Apache: MaxRequestWorkers threads; HAProxy: maxconn); past it the server stops accepting, logs it (\"worker_connections are not enough\", \"server reached MaxRequestWorkers setting\"), and new connections wait in the accept queue or are dropped.\n\
            Confirm: `ls /proc/WORKER/fd | wc -l` vs `nginx -T | grep worker_connections`; Apache's error log; `ss -ltn` Recv-Q at the backlog.\n\
            Fix: raise the limit (worker_connections with worker_rlimit_nofile; MaxRequestWorkers with ServerLimit × ThreadsPerChild; maxconn).",
        explains: &[
            POOL_THREADS_BLOCKED,
            // At its limit a server makes room by closing kept-alive connections (Apache's
            // event MPM past MaxRequestWorkers' share; nginx's idle keep-alive connections
            // at worker_connections): lab apache-workers at 16 threads, 2.5 requests per
            // connection before the fix, none closed after it.
            Explains {
                consequence: FindingId::NewConnectionCost,
                why: "at its limit the server closed kept-alive connections to make room for the waiting ones, and each reconnection paid for its set-up",
                unless: Some(super::client_chose_few_requests),
            },
            // A pool whose every thread is held by a connection answers nobody until one is
            // let go (lab apache-workers at 2 threads: whole seconds of 100 ms slices without a
            // response, then a burst when the client's timeout closed the holders).
            Explains {
                consequence: FindingId::ServerStalled,
                why: "every thread the limit allows was held by a connection, and the requests waiting behind them were answered by nobody until one was let go; no blocked wait of a worker lines up with the gaps",
                unless: Some(super::stall_lined_up),
            },
        ],
    }
    UdpReceiveBufferDrops = "udp-receive-buffer-drops" {
        check: udp::udp_receive_buffer_drops,
        means: "the server's UDP (QUIC) socket dropped datagrams at its full receive buffer",
        long: "Mechanism: a datagram arriving at a socket whose receive queue is full is dropped by the kernel (udp(7)), counted in Udp RcvbufErrors and InErrors and in the socket's drop count; QUIC sees loss, retransmits after its probe timeout and halves its congestion window. The buffer is what the server asked with SO_RCVBUF (doubled), capped at net.core.rmem_max: quic-go (Caddy) asks for 7 MB, nginx keeps net.core.rmem_default unless `listen ... rcvbuf=`.\n\
            Confirm: `nstat -az UdpRcvbufErrors Udp6RcvbufErrors`; `ss -uamn 'sport = :443'`: `skmem:(r…,rb…,…,d…)`, d growing; `sysctl net.core.rmem_max`; Caddy's log \"failed to sufficiently increase receive buffer size\".\n\
            Fix: `sysctl -w net.core.rmem_max=7500000` and restart the server (Caddy asks for it itself); nginx: `listen 443 quic reuseport rcvbuf=8m;`.",
        explains: &[
            // A dropped datagram holds every stream whose frames it carried until QUIC's
            // probe timeout and the retransmission: many requests slow at once, with no
            // worker blocked — the spikes and the empty slices of a stall (tests/udp.rs,
            // an h3 load through a 4 KiB buffer: 154 requests ≥ 112 ms at once).
            Explains {
                consequence: FindingId::EventLoopStall,
                why: "the slow requests waited for QUIC to find their dropped datagrams lost (its probe timeout) and send them again, many streams at once; no sample caught a worker stopped or blocked",
                unless: Some(super::worker_seen_blocked),
            },
            Explains {
                consequence: FindingId::ServerStalled,
                why: "the streams were each waiting for a dropped datagram's retransmission, all at once in those slices; no blocked wait of a worker lines up with them",
                unless: Some(super::stall_lined_up),
            },
        ],
    }
    QuicServerCpuBound = "quic-server-cpu-bound" {
        check: udp::quic_server_cpu_bound,
        means: "a UDP (QUIC) server at its CPU's limit; with a profile, its share in crypto",
        long: "Mechanism: a QUIC server does in user space what the kernel does for TCP: it encrypts and decrypts every packet, acknowledges, paces and recovers losses, and makes a system call per datagram where it cannot batch them (UDP GSO/GRO). Per byte it costs several times TCP with TLS, so its CPU is its limit first.\n\
            Confirm: `pidstat -u -p PID 1` near 100% of its cores; `perf top -p PID`: crypto (`crypto/…` in Go, libcrypto in nginx) and `sendmsg`/`recvmsg`.\n\
            Fix: more cores for it (Caddy: `GOMAXPROCS`; nginx: `worker_processes auto;`), long-lived QUIC connections (handshakes are public-key crypto), AES-GCM with AES-NI, UDP GSO/GRO.",
        explains: &[
            // The same CPU seen twice: a QUIC server's busy process is the general rule's
            // saturated worker.
            Explains {
                consequence: FindingId::ServerCpuSaturated,
                why: "the server's CPU went to serving QUIC: per-packet crypto, acknowledgements and system calls",
                unless: None,
            },
        ],
    }
    ServerCpuSaturated = "server-cpu-saturated" {
        check: cpu::server_cpu_saturated,
        means: "the server's workers at ~100% of a core (fewer workers than CPUs?)",
        long: "Mechanism: an nginx worker is one event loop on one core; at 100% it is the limit. With fewer workers than CPUs some cores idle.\n\
            Confirm: `pidstat -u -p $(pgrep -d, nginx) 1`.\n\
            Fix: `worker_processes auto;`; then profile (`perf top -p PID`) for TLS, gzip, logging, malloc (jemalloc gave +8% in the published evaluation).\n\
            Source: nginx-evaluation-jemalloc-dpdk.txt.",
        capacity: true,
    }
    WorkerImbalance = "worker-imbalance" {
        check: cpu::worker_imbalance,
        means: "workers unevenly loaded: one shared accept queue",
        long: "Mechanism: without reuseport all workers wait on one listen socket; the kernel wakes some more than others.\n\
            Confirm: `pidstat -u` per worker; `ss -ltn` shows one listener.\n\
            Fix: `listen ... reuseport;`.\n\
            Source: dragonflybsd-nginx-study.txt.",
    }
    NewConnectionCost = "new-connection-cost" {
        check: cpu::new_connection_cost,
        means: "few requests per connection: connection set-up dominates",
        long: "Mechanism: handshake, accept, socket set-up and teardown cost more than a small response; several workers on one listen socket also contend for it.\n\
            Confirm: `nstat -az TcpPassiveOpens` ≈ requests; compare with keep-alive.\n\
            Fix: `reuseport` (3× in the DragonFlyBSD study at 1 request/connection), keep-alive, more workers.\n\
            Source: dragonflybsd-nginx-study.txt.",
    }
    Retransmits = "retransmits" {
        check: network::retransmits,
        means: "TCP retransmitting a noticeable share of segments",
        long: "Mechanism: a lost segment stalls its connection for an RTT or an RTO.\n\
            Confirm: `nstat -az TcpRetransSegs TcpExtTCPTimeouts`; `ss -ti` retrans.\n\
            Fix: find the drop (qdisc, NIC, softnet backlog, network).",
        tier: Tier::Network,
        queue_consequence: Some("the handshakes dropped by the full queue were retransmitted"),
        explains: &[
            // Each lost segment holds its request for a retransmission timeout; with a few
            // connections, several held at once leave the server nothing to answer: the
            // spikes and the empty slices of a stall, with no worker blocked.
            Explains {
                consequence: FindingId::EventLoopStall,
                why: "the slow requests waited for their lost segments' retransmission timeout (200 ms), several connections at once; no sample caught a worker stopped or blocked",
                unless: Some(super::worker_seen_blocked),
            },
            Explains {
                consequence: FindingId::ServerStalled,
                why: "the connections were each waiting for a lost segment's retransmission (200 ms), all at once in those slices; no blocked wait of a worker lines up with them",
                unless: Some(super::stall_lined_up),
            },
        ],
    }
    NagleDelayedAck = "nagle-delayed-ack" {
        check: http::nagle_delayed_ack,
        means: "a ~40 ms latency mode: Nagle + delayed ACK; read from the phases when the bodies arrive ~40 ms after their heads (a response written in two pieces), with the fix in the server's words (the JDK's `-Dsun.net.httpserver.nodelay=true`, nginx `tcp_nodelay on`)",
        long: "Mechanism: a message split in two writes waits for the ACK of the first, which the peer delays ~40 ms.\n\
            Confirm: a latency histogram peak at 40 ms; `ss -ti`.\n\
            Fix: `tcp_nodelay on;`, one write per message.",
        latency_only: true,
    }
    RateLimited = "rate-limited" {
        check: http::rate_limited,
        means: "the server's own rate or connection limit set the rate (429/503, nginx `limit_req`)",
        long: "Mechanism: a rate limit (nginx `limit_req`, `limit_conn`, a proxy or API gateway) refuses requests beyond its rate with 429 or 503, or (nginx `limit_req` without `nodelay`) queues them and releases them at its rate. A limit kept per client address sees a load generator on one machine as one client, so the run measures the limit, not the server.\n\
            Confirm: the status codes (`--latency`); nginx's error log \"limiting requests, excess: ... by zone\"; `nginx -T | grep limit_req`; requests/s equal to the zone's `rate=`.\n\
            Fix: to measure the server, exempt the load generator's address (`geo`/`map` to an empty key, which nginx does not limit) or raise `rate=`/`burst=`; to test the limit, load below it with `-R`.",
    }
    HttpErrors = "http-errors" {
        check: http::http_errors,
        means: "most responses were errors: requests/s counts failures",
        long: "Mechanism: error responses are cheap; a run full of them measures the error path.\n\
            Confirm: `--latency` status codes; the server's error log.\n\
            Fix: fix the errors, then measure again.",
    }
    KernelNetworkStack = "kernel-network-stack" {
        check: profile::kernel_network_stack,
        means: "the profile: most of the workers' CPU is the kernel's TCP/IP stack",
        long: "Mechanism: once the server's own code is cheap, each request's cost is the system calls and packet processing in the kernel (tcp_sendmsg, tcp_recvmsg, ip_output, netif_receive_skb…).\n\
            Confirm: `perf top -p WORKER` shows tcp_*/ip_*/skb_* functions on top.\n\
            Fix: `sendfile on; tcp_nopush on;`, keep-alive, `reuseport` with one worker per core; beyond that more cores, NIC queues (RSS) or a kernel-bypass stack.\n\
            Source: nginx-evaluation-jemalloc-dpdk.txt (the bottleneck becomes the kernel TCP stack; DPDK).",
    }
    AllocatorHot = "allocator-hot" {
        check: profile::allocator_hot,
        means: "the profile: malloc/free take a visible share of the workers' CPU",
        long: "Mechanism: glibc's malloc serialises and fragments under many small allocations; jemalloc or tcmalloc are faster for servers.\n\
            Confirm: `perf top -p WORKER` shows malloc, _int_malloc, _int_free, free.\n\
            Fix: LD_PRELOAD libjemalloc.so.2 (Debian: libjemalloc2) into the server and compare.\n\
            Source: nginx-evaluation-jemalloc-dpdk.txt (jemalloc +8%).",
    }
    CompressionCpu = "compression-cpu" {
        check: profile::compression_cpu,
        means: "the profile: compressing responses (deflate) takes the workers' CPU",
        long: "Mechanism: gzip on the fly costs CPU per response, steeply more at high gzip_comp_level for little size gain.\n\
            Confirm: `perf top -p WORKER` shows deflate_slow/longest_match in libz.\n\
            Fix: `gzip_comp_level 1`–4, `gzip_static on;` with precompressed files, or cache compressed responses.\n\
            Source: nginx-evaluation-jemalloc-dpdk.txt (gzip in the evaluated config).",
    }
    TlsCpu = "tls-cpu" {
        check: profile::tls_cpu,
        means: "the profile: TLS handshakes and crypto take the workers' CPU",
        long: "Mechanism: each full TLS handshake costs public-key operations; short connections pay it per request.\n\
            Confirm: `perf top -p WORKER` shows libcrypto (BN_*, ecp_nistz256_*, EVP_*).\n\
            Fix: keep-alive, session resumption (`ssl_session_cache`, tickets), ECDSA certificates, AES-GCM with AES-NI.",
    }
    SyscallBound = "syscall-bound" {
        check: profile::syscall_bound,
        means: "the profile: most worker CPU is system calls each moving a fraction of a response",
        long: "Mechanism: every read/write/readv/writev costs a kernel entry and exit; small buffers multiply the calls per response.\n\
            Confirm: `strace -c -p WORKER` (calls per second), `strace -e readv,writev -p WORKER` (bytes per call).\n\
            Fix: larger proxy_buffers/proxy_buffer_size or output_buffers, sendfile, upstream keep-alive.\n\
            Source: reverse-proxy-throughput-halved.zh.txt (readv of 4096 bytes).",
    }
}

/// A pool at its limit (Apache's MaxRequestWorkers, a servlet container's threads)
/// whose threads were also seen blocked in a call: each thread holds one request, so the
/// block lengthens each request's time in the pool, and the limit is what held the
/// rest waiting (CI, tests/lab.rs apache-workers at 16 threads: the threads 40–50% in
/// the mmap lock, worker-blocked chosen over connection-limit). An event loop's block
/// (every connection it holds waits) stands beside the limit.
const POOL_THREADS_BLOCKED: Explains = Explains {
    consequence: FindingId::WorkerBlocked,
    why: "each of the pool's threads serves one request: a blocked thread holds only its own, and the requests waiting for a free thread waited for the limit named above",
    unless: Some(super::event_loop_blocked),
};
