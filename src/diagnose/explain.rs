//! `loadlens explain ID`: the long form of each finding — mechanism, how to confirm it
//! by hand with standard tools, fixes, sources.

/// (id, one line for the README, long text).
pub const FINDINGS: &[(&str, &str, &str)] = &[
    ("client-saturated", "the load generator was CPU-bound or starved of CPU: results are a floor",
     "Mechanism: a closed-loop load generator sends the next request only after a response; if its threads are busy (or wait for a CPU) the request rate is the client's, not the server's.\nConfirm: `top -H -p $(pgrep loadlens)` shows the loadlens-w threads at ~100%, or `cat /proc/PID/task/TID/schedstat` (second field) growing fast.\nFix: more -t threads, pin loadlens to its own cores (taskset) away from the server and other busy processes, or run it on another machine.\nSource: dragonflybsd-nginx-study.txt (a modified wrk so the client is never the limit)."),
    ("listen-queue-overflow", "accept queue full: handshakes dropped (TcpExt.ListenOverflows)",
     "Mechanism: completed connections wait in the listen socket's accept queue until the server calls accept(); its size is min(listen backlog, net.core.somaxconn). When full, the kernel drops the final ACK (ListenOverflows, ListenDrops) and the client retransmits after ≥ 1 s.\nConfirm: `nstat -az TcpExtListenOverflows TcpExtListenDrops` rising; `ss -ltn` Recv-Q reaching Send-Q on the port.\nFix: `listen 80 backlog=4096;` in nginx and `sysctl -w net.core.somaxconn=4096`; make sure workers accept fast enough.\nSource: throughput-drop-case-study.txt (backlog=10, somaxconn=10)."),
    ("syn-queue-overflow", "SYN queue full: SYNs dropped or answered with cookies",
     "Mechanism: half-open connections (SYN received, SYN-ACK sent) wait in the SYN queue; when it is full new SYNs are dropped (TCPReqQFullDrop) or answered with SYN cookies (TCPReqQFullDoCookies), which lose TCP options.\nConfirm: `nstat -az TcpExtTCPReqQFullDrop TcpExtTCPReqQFullDoCookies TcpExtSyncookiesSent`.\nFix: raise net.ipv4.tcp_max_syn_backlog and the listen backlog; keep tcp_syncookies=1."),
    ("conntrack-full", "netfilter's connection table full: packets dropped",
     "Mechanism: with conntrack loaded every connection takes an entry until it times out; at nf_conntrack_max new connections are dropped.\nConfirm: `sysctl net.netfilter.nf_conntrack_count net.netfilter.nf_conntrack_max`; dmesg \"nf_conntrack: table full, dropping packet\"; `conntrack -S`.\nFix: raise net.netfilter.nf_conntrack_max (and the hash size), shorten timeouts, or NOTRACK the server's port in the raw table.\nSource: throughput-drop-case-study.txt (nf_conntrack_max = 200)."),
    ("ephemeral-ports-exhausted", "no local port left to connect from (EADDRNOTAVAIL; 502 from a proxy)",
     "Mechanism: each outgoing connection needs a local port from net.ipv4.ip_local_port_range; the side that closes first keeps it in TIME_WAIT for 60 s. A proxy opening one upstream connection per request runs out: connect() fails with EADDRNOTAVAIL and nginx answers 502.\nConfirm: nginx error log \"connect() failed (99: Cannot assign requested address)\"; `ss -tan state time-wait | wc -l` ≈ the range size.\nFix: upstream keep-alive (`keepalive 32;` in the upstream block, `proxy_http_version 1.1; proxy_set_header Connection \"\";`, or `fastcgi_keep_conn on;`); widen ip_local_port_range.\nSource: throughput-drop-case-study.txt (ip_local_port_range 20000 20050)."),
    ("time-wait-connect-cost", "a new upstream connection per request: connect() pays for thousands of TIME_WAIT entries",
     "Mechanism: with many sockets in TIME_WAIT and tcp_tw_reuse=0, each connect() searches for a free port past them (inet_hash_connect, __inet_check_established): the proxy's CPU goes to the kernel.\nConfirm: `ss -s` timewait in the tens of thousands; `perf top` shows inet_hash_connect / __inet_check_established.\nFix: upstream keep-alive (with a high `keepalive_requests` in the upstream block), or net.ipv4.tcp_tw_reuse=1.\nSource: throughput-drop-case-study.txt (timewait 32768, tcp_tw_reuse=0)."),
    ("upstream-saturated", "the upstream (e.g. php-fpm) is full: requests queue, clients time out (499/502/504)",
     "Mechanism: the front server forwards to a pool of upstream workers; when all are busy, requests wait in the upstream's accept queue until someone gives up.\nConfirm: php-fpm log \"server reached pm.max_children setting\"; `ss -lx` Recv-Q on its socket; nginx access log 499.\nFix: raise pm.max_children (memory permitting), make requests faster, add upstream servers.\nSource: throughput-drop-case-study.txt (max_children 5, 499s)."),
    ("small-proxy-buffers", "the proxy reads responses in pieces far smaller than they are",
     "Mechanism: nginx reads an upstream response into proxy_buffer_size + proxy_buffers; 4k/8k buffers for 91 KiB responses mean ~20 readv/writev per response.\nConfirm: `strace -c -p WORKER` and `strace -e readv,writev -p WORKER`: most readv return 4096.\nFix: `proxy_buffer_size 128k; proxy_buffers 8 128k; proxy_busy_buffers_size 128k;`.\nSource: reverse-proxy-throughput-halved.zh.txt."),
    ("server-cpu-saturated", "the server's workers at ~100% of a core (fewer workers than CPUs?)",
     "Mechanism: an nginx worker is one event loop on one core; at 100% it is the limit. With fewer workers than CPUs some cores idle.\nConfirm: `pidstat -u -p $(pgrep -d, nginx) 1`.\nFix: `worker_processes auto;`; then profile (`perf top -p PID`) for TLS, gzip, logging, malloc (jemalloc gave +8% in the published evaluation).\nSource: nginx-evaluation-jemalloc-dpdk.txt."),
    ("worker-imbalance", "workers unevenly loaded: one shared accept queue",
     "Mechanism: without reuseport all workers wait on one listen socket; the kernel wakes some more than others.\nConfirm: `pidstat -u` per worker; `ss -ltn` shows one listener.\nFix: `listen ... reuseport;`.\nSource: dragonflybsd-nginx-study.txt."),
    ("new-connection-cost", "few requests per connection: connection set-up dominates",
     "Mechanism: handshake, accept, socket set-up and teardown cost more than a small response; several workers on one listen socket also contend for it.\nConfirm: `nstat -az TcpPassiveOpens` ≈ requests; compare with keep-alive.\nFix: `reuseport` (3× in the DragonFlyBSD study at 1 request/connection), keep-alive, more workers.\nSource: dragonflybsd-nginx-study.txt."),
    ("softirq-concentrated", "network softirq piled on one CPU",
     "Mechanism: packets are processed in NET_RX softirq on the CPU that took the interrupt; one queue or one IRQ CPU saturates it.\nConfirm: `mpstat -P ALL 1` %soft; `/proc/softirqs` NET_RX per CPU; `/proc/interrupts`.\nFix: more NIC queues (`ethtool -L`), IRQ affinity, RPS/RFS."),
    ("link-saturated", "an interface (or a shaped link) at ≥ 90% of its capacity",
     "Mechanism: the wire is full; responses queue behind each other while CPUs idle.\nConfirm: `sar -n DEV 1` rx/tx kB/s against `ethtool IF` speed; `tc -s qdisc` overlimits.\nFix: fewer bytes (gzip, caching, image sizes) or more bandwidth.\nSource: nginx-evaluation-jemalloc-dpdk.txt (98% of the NIC)."),
    ("run-queue-delay", "server workers waiting for a CPU (another process on it)",
     "Mechanism: a runnable worker waits in the CPU's run queue while another task runs; every connection it holds waits too.\nConfirm: `pidstat -w` nvcswch/s; `/proc/PID/schedstat` second field; `perf sched latency`.\nFix: move the other process (taskset), lower its priority (nice, chrt --idle), pin workers (`worker_cpu_affinity`).\nSource: nginx-tail-latencies.txt."),
    ("event-loop-stall", "the event loop stops: many connections delayed at once",
     "Mechanism: one worker serves thousands of connections in one loop; one blocking call (log reopen, disk read, a stop) delays all of them by the same amount.\nConfirm: latency spikes in the per-second timeline; `strace -T -p WORKER` for slow syscalls; offcputime.\nFix: buffered access logs, `aio threads`, remove the blocking work.\nSource: nginx-tail-latencies.txt (a blocking log reopen)."),
    ("fd-limit", "a process at its open-files limit",
     "Mechanism: every connection is a descriptor; at RLIMIT_NOFILE accept()/connect() fail with EMFILE.\nConfirm: `ls /proc/PID/fd | wc -l` vs `grep 'open files' /proc/PID/limits`; nginx \"Too many open files\".\nFix: `worker_rlimit_nofile`, LimitNOFILE=, ulimit -n."),
    ("connection-limit", "the server at its own connection limit (nginx worker_connections, Apache MaxRequestWorkers, HAProxy maxconn)",
     "Mechanism: a server serves at most a configured number of connections or requests at once (an nginx worker: worker_connections, clients and upstreams together; Apache: MaxRequestWorkers threads; HAProxy: maxconn); past it the server stops accepting, logs it (\"worker_connections are not enough\", \"server reached MaxRequestWorkers setting\"), and new connections wait in the accept queue or are dropped.\nConfirm: `ls /proc/WORKER/fd | wc -l` vs `nginx -T | grep worker_connections`; Apache's error log; `ss -ltn` Recv-Q at the backlog.\nFix: raise the limit (worker_connections with worker_rlimit_nofile; MaxRequestWorkers with ServerLimit × ThreadsPerChild; maxconn)."),
    ("retransmits", "TCP retransmitting a noticeable share of segments",
     "Mechanism: a lost segment stalls its connection for an RTT or an RTO.\nConfirm: `nstat -az TcpRetransSegs TcpExtTCPTimeouts`; `ss -ti` retrans.\nFix: find the drop (qdisc, NIC, softnet backlog, network)."),
    ("nagle-delayed-ack", "a ~40 ms latency mode: Nagle + delayed ACK",
     "Mechanism: a message split in two writes waits for the ACK of the first, which the peer delays ~40 ms.\nConfirm: a latency histogram peak at 40 ms; `ss -ti`.\nFix: `tcp_nodelay on;`, one write per message."),
    ("http-errors", "most responses were errors: requests/s counts failures",
     "Mechanism: error responses are cheap; a run full of them measures the error path.\nConfirm: `--latency` status codes; the server's error log.\nFix: fix the errors, then measure again."),
    ("kernel-network-stack", "the profile: most of the workers' CPU is the kernel's TCP/IP stack",
     "Mechanism: once the server's own code is cheap, each request's cost is the system calls and packet processing in the kernel (tcp_sendmsg, tcp_recvmsg, ip_output, netif_receive_skb…).\nConfirm: `perf top -p WORKER` shows tcp_*/ip_*/skb_* functions on top.\nFix: `sendfile on; tcp_nopush on;`, keep-alive, `reuseport` with one worker per core; beyond that more cores, NIC queues (RSS) or a kernel-bypass stack.\nSource: nginx-evaluation-jemalloc-dpdk.txt (the bottleneck becomes the kernel TCP stack; DPDK)."),
    ("allocator-hot", "the profile: malloc/free take a visible share of the workers' CPU",
     "Mechanism: glibc's malloc serialises and fragments under many small allocations; jemalloc or tcmalloc are faster for servers.\nConfirm: `perf top -p WORKER` shows malloc, _int_malloc, _int_free, free.\nFix: LD_PRELOAD libjemalloc.so.2 (Debian: libjemalloc2) into the server and compare.\nSource: nginx-evaluation-jemalloc-dpdk.txt (jemalloc +8%)."),
    ("compression-cpu", "the profile: compressing responses (deflate) takes the workers' CPU",
     "Mechanism: gzip on the fly costs CPU per response, steeply more at high gzip_comp_level for little size gain.\nConfirm: `perf top -p WORKER` shows deflate_slow/longest_match in libz.\nFix: `gzip_comp_level 1`–4, `gzip_static on;` with precompressed files, or cache compressed responses.\nSource: nginx-evaluation-jemalloc-dpdk.txt (gzip in the evaluated config)."),
    ("tls-cpu", "the profile: TLS handshakes and crypto take the workers' CPU",
     "Mechanism: each full TLS handshake costs public-key operations; short connections pay it per request.\nConfirm: `perf top -p WORKER` shows libcrypto (BN_*, ecp_nistz256_*, EVP_*).\nFix: keep-alive, session resumption (`ssl_session_cache`, tickets), ECDSA certificates, AES-GCM with AES-NI."),
    ("syscall-bound", "the profile: most worker CPU is system calls each moving a fraction of a response",
     "Mechanism: every read/write/readv/writev costs a kernel entry and exit; small buffers multiply the calls per response.\nConfirm: `strace -c -p WORKER` (calls per second), `strace -e readv,writev -p WORKER` (bytes per call).\nFix: larger proxy_buffers/proxy_buffer_size or output_buffers, sendfile, upstream keep-alive.\nSource: reverse-proxy-throughput-halved.zh.txt (readv of 4096 bytes)."),
];

/// The long explanation of `id`, or `None` for an unknown id.
pub fn explain(id: &str) -> Option<String> {
    FINDINGS
        .iter()
        .find(|(i, _, _)| *i == id)
        .map(|(i, line, long)| format!("{i}: {line}\n\n{long}\n"))
}
