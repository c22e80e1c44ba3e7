//! What was watched on the machine during the load: facts read once, timestamped
//! samples (rates over each interval, gauges at its end) and the deltas over exactly the
//! load window. Filled by `watch`, read by `diagnose` and the views.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{OffCpu, Profile, Role, ServerKind, ServerLog, Tier, Topology};

/// Everything watched during a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Evidence {
    /// Sampling interval, seconds.
    pub sample_interval_s: f64,
    /// What was watched.
    pub topology: Topology,
    /// Facts read once: sysctls, kernel, CPUs, cgroup limits.
    pub host: HostFacts,
    /// Timestamped samples: rates over each interval and gauges at its end.
    pub samples: Vec<Sample>,
    /// Deltas over exactly the load window.
    pub window: Window,
    /// The servers' error logs over the window, classified (nginx, php-fpm).
    #[serde(default)]
    pub logs: Vec<ServerLog>,
    /// On-CPU stacks of the server processes over the window (`--profile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
    /// Off-CPU time of the server threads over the window (with `--profile`): where
    /// they slept, for how long, and in which calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offcpu: Option<OffCpu>,
    /// Sources that could not be read, and why (the run went on without them).
    pub warnings: Vec<String>,
    /// The sampler thread's own CPU use over the window, percent of one core: the cost
    /// of watching (target ≤ 1% at 1 s samples). Discovery before the load is not
    /// included.
    pub sampler_cpu_pct: f64,
    /// Where the evidence was gathered when not on this machine (`--watch ssh://…`):
    /// the host, the transport and the clocks. Absent for loadlens's own watch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<EvidenceSource>,
    /// When the watch took its `before` snapshot, seconds since the Unix epoch on the
    /// watching machine's clock: where its samples' `t_s` count from. Written by a
    /// watch run alone (`loadlens watch URL --duration D --json FILE`), which
    /// `loadlens attach` places on a Run's time line; absent in a Run's evidence
    /// (there `t_s` counts from the load's start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_unix_s: Option<f64>,
}

/// A watch on another machine (`--watch ssh://HOST`): where it ran and how its samples
/// were placed on this machine's clock.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct EvidenceSource {
    /// How the evidence came: `ssh`.
    pub transport: String,
    /// The destination as given (`ssh://user@host:port`).
    pub destination: String,
    /// The watched machine's host name (its `/proc/sys/kernel/hostname`).
    pub hostname: String,
    /// The remote loadlens's version (the same as this one's: a different one is
    /// refused).
    pub remote_version: String,
    /// The watched machine's clock minus this one's, seconds, NTP-style over the
    /// channel (the exchange with the shortest round trip, the mean of the one before
    /// the load and the one after it); subtracted from the remote times.
    pub clock_offset_s: f64,
    /// How far `clock_offset_s` may be off, seconds: half the round trip plus half the
    /// change between the two measurements.
    pub clock_uncertainty_s: f64,
    /// Round trip of the best exchange before and after the load, seconds.
    pub clock_rtt_s: [f64; 2],
    /// The offset measured before and after the load, seconds.
    pub clock_offsets_s: [f64; 2],
    /// The remote watch's start minus the load's start on this machine's clock,
    /// seconds: what was added to each sample's `t_s`.
    pub shift_s: f64,
    /// The remote loadlens process's CPU over the window, percent of one core (its
    /// sampler, the channel, the encoding; `sampler_cpu_pct` is the sampler alone).
    pub remote_cpu_pct: f64,
    /// The same as time: the remote process's user + system CPU seconds (every
    /// thread, `getrusage`) from the watch's start to its stop. 0 when the channel was
    /// lost before the stop.
    #[serde(default)]
    pub remote_cpu_s: f64,
    /// Bytes the remote watch sent over the channel for this window, and per second
    /// of it.
    pub bytes_received: u64,
    pub bytes_per_s: f64,
    /// When the channel to the remote watch was lost during this load, seconds from
    /// the load's start on this machine's clock (when ssh's output ended, or the wait
    /// for the evidence gave up). The samples received until then are kept; the
    /// window is rebuilt from them (means of its rates, highest gauges) and covers
    /// only that time; the window's kernel counters (drops, overflows, retransmits),
    /// the error logs, the profile and the off-CPU watch are missing. Absent when the
    /// watch answered the stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_at_s: Option<f64>,
}

/// Read once before the load.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostFacts {
    /// `uname -r`.
    pub kernel: String,
    /// CPUs online.
    pub cpus: u32,
    /// CPUs loadlens may run on (its affinity mask).
    pub loadgen_cpus: Vec<u32>,
    /// CPUs the watched server processes may run on (the union of their affinity,
    /// /proc/PID/status `Cpus_allowed_list`); empty when unknown (nothing watched).
    #[serde(default)]
    pub server_cpus: Vec<u32>,
    /// Sysctl name (dotted, `net.core.somaxconn`) → value, from the server's network
    /// namespace for per-namespace ones.
    pub sysctls: BTreeMap<String, String>,
    /// Interfaces backed by a device (`/sys/class/net/IF/device`: a NIC with its own
    /// interrupts and queues), as opposed to virtual ones (lo, veth, bridges); read in
    /// loadlens's own namespace.
    #[serde(default)]
    pub physical_ifaces: Vec<String>,
    /// Interface → link speed in Mbit/s, where the link reports one.
    pub link_speed_mbps: BTreeMap<String, u64>,
    /// Interface → rate of a token-bucket qdisc (`tc ... tbf rate`) on it, bytes/s: an
    /// emulated or shaped link, whatever the interface's own speed.
    #[serde(default)]
    pub qdisc_rate_bytes_per_s: BTreeMap<String, u64>,
    /// CPU quota of loadlens's cgroup: v2 `cpu.max` (`max 100000` = none) or v1
    /// `cfs_quota_us cfs_period_us` (`-1 100000` = none).
    pub cgroup_cpu_max: Option<String>,
}

/// CPU time shares over an interval, percent of that CPU.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct CpuPct {
    pub cpu: u32,
    pub user: f64,
    pub system: f64,
    pub irq: f64,
    pub softirq: f64,
    pub iowait: f64,
    pub steal: f64,
    pub idle: f64,
}

/// One interface over an interval.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct IfaceRate {
    pub name: String,
    pub rx_bytes_per_s: f64,
    pub tx_bytes_per_s: f64,
    pub rx_packets_per_s: f64,
    pub tx_packets_per_s: f64,
    /// Packets dropped (rx + tx) over the interval.
    pub drops: u64,
    /// max(rx, tx) bits/s ÷ link speed, percent; `None` when the link has no speed
    /// (loopback, veth).
    pub util_pct: Option<f64>,
}

/// A listening socket's accept queue at one moment.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct QueueGauge {
    pub addr: String,
    pub queue: u32,
    pub backlog: u32,
}

/// One server process over an interval (or over the window).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct ProcRates {
    pub pid: i32,
    pub comm: String,
    /// Which server (see `ServerProcess::kind`).
    #[serde(default)]
    pub kind: ServerKind,
    pub role: Role,
    /// `front` or `upstream` (see `ServerProcess::tier`); empty in older Runs.
    #[serde(default)]
    pub tier: Tier,
    /// CPU use, percent of one core (user + system), and its parts.
    pub cpu_pct: f64,
    /// For a process of several threads, the CPU use of its busiest thread, percent of
    /// one core: one thread at 100% is the limit of an event loop (Node's main thread)
    /// however many cores the process could use. `None` for one thread (= `cpu_pct`).
    #[serde(default)]
    pub busiest_thread_pct: Option<f64>,
    pub user_pct: f64,
    pub system_pct: f64,
    /// Time spent runnable but waiting for a CPU, ms per second (schedstat).
    pub run_delay_ms_per_s: Option<f64>,
    pub voluntary_ctxt_switches_per_s: f64,
    pub nonvoluntary_ctxt_switches_per_s: f64,
    /// Read-like syscalls per second and bytes per such syscall (/proc/PID/io rchar and
    /// syscr). The kernel counts read/readv/pread here, socket reads through them too,
    /// but not recv/recvfrom; likewise write/writev/sendfile but not send/sendto. nginx
    /// reads upstream responses with readv and writes responses with writev, so these
    /// show its proxy buffer sizes. `None` when io is unreadable or no call was made.
    pub reads_per_s: Option<f64>,
    pub bytes_per_read: Option<f64>,
    pub writes_per_s: Option<f64>,
    pub bytes_per_write: Option<f64>,
    pub minor_faults_per_s: f64,
    /// State at the end (R, S, D, T, …) and the CPU it last ran on.
    pub state: String,
    pub last_cpu: u32,
    pub threads: u64,
    pub rss_kb: u64,
    /// Open file descriptors at the end, and the soft limit.
    pub fds: Option<u64>,
    /// The most open file descriptors seen in any sample of the window (in the
    /// window's entry only): a limit reached mid-run shows here even if the last
    /// sample is quiet.
    #[serde(default)]
    pub fds_max: Option<u64>,
    pub fd_limit: Option<u64>,
}

/// One sample: rates over the interval that ended at `t_s`, gauges at `t_s`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Sample {
    /// Seconds from the start of the load window.
    pub t_s: f64,
    pub cpus: Vec<CpuPct>,
    pub ifaces: Vec<IfaceRate>,
    /// Selected TCP counters as per-second rates.
    pub tcp_per_s: BTreeMap<String, f64>,
    /// `TCP.tw`, `TCP.inuse`, `TCP.orphan`, `TCP.alloc`, `TCP.mem` (pages).
    pub sockstat: BTreeMap<String, u64>,
    pub conntrack_count: Option<u64>,
    pub listen_queues: Vec<QueueGauge>,
    pub processes: Vec<ProcRates>,
    /// /proc/pressure/cpu `some avg10`.
    pub cpu_pressure_avg10: Option<f64>,
    /// Load average (1 min) and runnable tasks.
    pub load1: Option<f64>,
    pub runnable: Option<u64>,
    /// Established TCP connections on the upstreams' listening ports (the front's
    /// requests in them), when upstream listeners were watched and read at this sample
    /// (the connections are read about once a second).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_connections: Option<u32>,
}

/// Deltas over exactly the load window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Window {
    pub duration_s: f64,
    /// CPU shares per CPU over the window.
    pub cpus: Vec<CpuPct>,
    pub ifaces: Vec<IfaceRate>,
    /// Every Tcp/TcpExt/Ip/IpExt/Udp… counter that moved: `TcpExt.ListenOverflows` → Δ.
    pub counters: BTreeMap<String, u64>,
    /// Per CPU: NET_RX softirqs, and softnet packets processed / dropped / squeezed.
    pub net_rx_softirqs: Vec<u64>,
    pub softnet_dropped: u64,
    pub softnet_time_squeeze: u64,
    /// sockstat gauges at the end of the window.
    pub sockstat_end: BTreeMap<String, u64>,
    /// Highest `TCP.tw` seen in any sample.
    pub time_wait_max: u64,
    pub conntrack: Option<Conntrack>,
    /// Each listener: highest accept queue seen, its backlog, and in how many samples
    /// the queue was at the backlog.
    pub listen_queues: Vec<QueueMax>,
    pub processes: Vec<ProcRates>,
    /// CPU pressure stall time over the window, ms.
    pub cpu_pressure_stall_ms: Option<f64>,
    /// Time loadlens's cgroup was throttled by its CPU quota over the window, ms
    /// (cgroup v2 `throttled_usec` or v1 `throttled_time`); `None` where unreadable.
    pub cgroup_throttled_ms: Option<f64>,
    /// The CPU cgroups of the watched server processes that have a quota (a
    /// container's CPU limit, systemd's `CPUQuota=`), over the window.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cgroup_quotas: Vec<CgroupQuota>,
    /// Interface → packets a rate-limiting qdisc delayed (overlimits) and dropped.
    #[serde(default)]
    pub qdisc_overlimits: BTreeMap<String, u64>,
    #[serde(default)]
    pub qdisc_drops: BTreeMap<String, u64>,
    /// The busiest other processes on the machine over the window (not the watched
    /// server, not loadlens): who else competed for the CPUs.
    #[serde(default)]
    pub other_processes: Vec<OtherProcess>,
    /// The server's side of its clients' connections (sock_diag): their buffers and
    /// what held their sending back. `None` where sock_diag could not be read, and in
    /// Runs recorded before it was watched.
    #[serde(default)]
    pub server_connections: Option<ConnWindow>,
    /// UDP over the window: the kernel's counters and the server's own UDP sockets (a
    /// QUIC server's). `None` where /proc/net/snmp was unreadable, and in Runs recorded
    /// before UDP was watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpWindow>,
}

/// The `Udp` counters of `/proc/net/snmp` (or `Udp6…` of `/proc/net/snmp6`), by name:
/// cumulative in a snapshot, a delta over the window in the Run. udp(7): a datagram that
/// finds its socket's receive buffer full is dropped and counted in `RcvbufErrors`
/// (and `InErrors`), never delivered.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct UdpCounters {
    /// Datagrams delivered to sockets (`InDatagrams`).
    pub in_datagrams: u64,
    /// Datagrams sent (`OutDatagrams`).
    pub out_datagrams: u64,
    /// Datagrams received and not delivered, whatever the reason (`InErrors`).
    pub in_errors: u64,
    /// Of them, dropped because the socket's receive buffer was full (`RcvbufErrors`).
    pub rcvbuf_errors: u64,
    /// Sends refused because the socket's send buffer was full (`SndbufErrors`).
    pub sndbuf_errors: u64,
}

impl UdpCounters {
    /// What moved from `before` to `self` (a counter reset counts as 0).
    pub fn delta(&self, before: &UdpCounters) -> UdpCounters {
        UdpCounters {
            in_datagrams: self.in_datagrams.saturating_sub(before.in_datagrams),
            out_datagrams: self.out_datagrams.saturating_sub(before.out_datagrams),
            in_errors: self.in_errors.saturating_sub(before.in_errors),
            rcvbuf_errors: self.rcvbuf_errors.saturating_sub(before.rcvbuf_errors),
            sndbuf_errors: self.sndbuf_errors.saturating_sub(before.sndbuf_errors),
        }
    }

    /// IPv4 and IPv6 together.
    pub fn plus(&self, o: &UdpCounters) -> UdpCounters {
        UdpCounters {
            in_datagrams: self.in_datagrams + o.in_datagrams,
            out_datagrams: self.out_datagrams + o.out_datagrams,
            in_errors: self.in_errors + o.in_errors,
            rcvbuf_errors: self.rcvbuf_errors + o.rcvbuf_errors,
            sndbuf_errors: self.sndbuf_errors + o.sndbuf_errors,
        }
    }
}

/// UDP over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UdpWindow {
    /// `/proc/net/snmp` `Udp`, and `/proc/net/snmp6` `Udp6` (zero where IPv6 is off).
    pub v4: UdpCounters,
    pub v6: UdpCounters,
    /// The watched server's UDP sockets (sock_diag), each over the window.
    pub sockets: Vec<UdpSocketWindow>,
}

impl UdpWindow {
    /// Both families' counters added.
    pub fn total(&self) -> UdpCounters {
        self.v4.plus(&self.v6)
    }

    /// Datagrams the server's own sockets dropped over the window (sock_diag's
    /// `skmem d`).
    pub fn socket_drops(&self) -> u64 {
        self.sockets.iter().map(|s| s.drops).sum()
    }
}

/// One of the server's UDP sockets over the window (`ss -uamn`: Recv-Q, Send-Q and
/// `skmem:(r…,rb…,t…,tb…,…,d…)`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UdpSocketWindow {
    /// Local address and port (`0.0.0.0:443`, `[::]:443`).
    pub addr: String,
    pub port: u16,
    /// The socket's receive buffer (`sk_rcvbuf`, `skmem rb`), bytes: what it may hold
    /// of datagrams not yet read, twice what the server asked with SO_RCVBUF, capped at
    /// twice `net.core.rmem_max`.
    pub rcvbuf_bytes: u32,
    /// The socket's send buffer (`sk_sndbuf`, `skmem tb`), bytes.
    pub sndbuf_bytes: u32,
    /// The most bytes seen waiting to be read (`skmem r`) in any sample, and to be sent.
    pub receive_queue_max_bytes: u32,
    pub send_queue_max_bytes: u32,
    /// Datagrams it dropped over the window (`sk_drops`, `skmem d`).
    pub drops: u64,
    /// Snapshots in which it was read (the window's first and last among them).
    pub samples: u32,
}

/// The server's side of its clients' TCP connections over the window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConnWindow {
    /// Samples taken during the load with connections open, and the most connections
    /// seen in one.
    pub samples: u32,
    pub sockets_max: u32,
    /// Medians over the connections of a sample, then over the samples: the socket
    /// send buffer (`sk_sndbuf`), the peer's advertised receive window (0 where the
    /// kernel does not report it, before 6.2), the smoothed round-trip time.
    pub send_buffer_bytes: u32,
    pub peer_window_bytes: u32,
    pub rtt_us: u32,
    /// Time the connections had data to send, summed over connections, ms
    /// (`tcpi_busy_time`); of it, held by the peer's receive window
    /// (`tcpi_rwnd_limited`) and by the socket's own send buffer
    /// (`tcpi_sndbuf_limited`).
    pub busy_ms: f64,
    pub rwnd_limited_ms: f64,
    pub sndbuf_limited_ms: f64,
}

/// A process that is neither the server nor loadlens, with its CPU use over the window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OtherProcess {
    pub pid: i32,
    pub comm: String,
    /// Percent of one core.
    pub cpu_pct: f64,
    /// The CPU it last ran on.
    pub last_cpu: u32,
    /// Its nice value (0 in Runs recorded before it was kept).
    #[serde(default)]
    pub nice: i64,
    /// It runs under SCHED_IDLE: only on an otherwise idle CPU.
    #[serde(default)]
    pub sched_idle: bool,
}

impl OtherProcess {
    /// The least CPU (percent of one core) a process needs over the window to be listed.
    pub const MIN_PCT: f64 = 1.0;
    /// How many are listed at most, the busiest first.
    pub const LISTED: usize = 5;
}

/// Conntrack over the window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Conntrack {
    pub count_max_seen: u64,
    pub max: u64,
    /// Δ of `/proc/net/stat/nf_conntrack` drop, early_drop, insert_failed.
    pub drop: u64,
    pub early_drop: u64,
    pub insert_failed: u64,
}

/// A listener's accept queue over the window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueueMax {
    pub addr: String,
    pub max_queue: u32,
    pub backlog: u32,
    /// Samples in which the queue was at (or past) the backlog.
    pub samples_full: u32,
    /// Samples in which connections were waiting in it at all.
    #[serde(default)]
    pub samples_queued: u32,
    pub samples: u32,
}

impl ProcRates {
    /// CPU it ran plus CPU it waited for (run-queue delay as percent of a core): what
    /// it would have used with a CPU free whenever it was runnable.
    pub fn cpu_demand_pct(&self) -> f64 {
        self.cpu_pct + self.run_delay_ms_per_s.unwrap_or(0.0) / 10.0
    }

    /// How a title names it: "nginx worker 4122", or "gosrv 812" for a server that is
    /// one process.
    pub fn label(&self) -> String {
        if self.role == Role::Worker {
            format!("{} worker {}", self.comm, self.pid)
        } else {
            format!("{} {}", self.comm, self.pid)
        }
    }

    /// Whether it serves the URL (the front), or is in a Run recorded before tiers.
    pub fn is_front(&self) -> bool {
        self.tier != Tier::Upstream
    }

    /// The most open fds over the run where known (the window's `fds_max`), else the
    /// count at the end.
    pub fn fds_peak(&self) -> Option<u64> {
        self.fds_max.or(self.fds)
    }
}

impl QueueMax {
    /// A TCP listener (address:port) rather than a unix socket path.
    pub fn port_is_tcp(&self) -> bool {
        !self.addr.starts_with('/') && !self.addr.starts_with('@')
    }
}

/// A CPU cgroup with a quota, holding watched server processes, over the window
/// (cgroup v2 `cpu.max`/`cpu.stat`, v1 `cpu.cfs_quota_us`/`cpu.stat`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct CgroupQuota {
    /// The cgroup's directory (`/sys/fs/cgroup/system.slice/nginx.service`).
    pub path: String,
    /// The watched processes in it.
    pub pids: Vec<i32>,
    /// The quota, in cores (quota ÷ period).
    pub cores: f64,
    /// Enforcement periods over the window (`nr_periods`).
    pub periods: u64,
    /// Periods in which the quota ran out and the cgroup's tasks were stopped until the
    /// next (`nr_throttled`).
    pub throttled_periods: u64,
    /// Time its tasks were throttled over the window, ms (summed over CPUs).
    pub throttled_ms: f64,
}

impl CgroupQuota {
    /// Share of the window's periods in which the quota ran out, percent.
    pub fn throttled_pct(&self) -> f64 {
        100.0 * self.throttled_periods as f64 / self.periods.max(1) as f64
    }
}
