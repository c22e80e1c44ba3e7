//! Pure parsers over the text of /proc files, one per source, each tested on real
//! captured files under `tests/data/` (named `host-…` or `netns-…` by where they came
//! from). The procfs crate covers some of these but not /proc/net/netstat, sockstat,
//! softnet_stat or nf_conntrack stats, and cannot read another network namespace's
//! files from a path; one small style for all of them keeps them testable the same way.
//!
//! Counter values are `u64`; a line that does not parse is skipped rather than
//! aborting the run (the caller warns once about a source that yields nothing).

use std::collections::BTreeMap;

/// `/proc/stat` per-CPU times, in clock ticks (USER_HZ).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuTimes {
    pub fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
    }
    pub fn delta(&self, before: &CpuTimes) -> CpuTimes {
        CpuTimes {
            user: self.user.saturating_sub(before.user),
            nice: self.nice.saturating_sub(before.nice),
            system: self.system.saturating_sub(before.system),
            idle: self.idle.saturating_sub(before.idle),
            iowait: self.iowait.saturating_sub(before.iowait),
            irq: self.irq.saturating_sub(before.irq),
            softirq: self.softirq.saturating_sub(before.softirq),
            steal: self.steal.saturating_sub(before.steal),
        }
    }
}

/// `/proc/PID/cmdline` as arguments (empty ones dropped; a process that rewrote its
/// title, as nginx and php-fpm masters do, shows the title as the first).
pub fn read_cmdline(pid: i32) -> std::io::Result<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline"))?;
    Ok(raw
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect())
}

/// `/proc/stat`: the per-CPU lines (`cpu0`, `cpu1`, …), indexed by CPU number.
pub fn parse_stat(text: &str) -> BTreeMap<u32, CpuTimes> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut f = line.split_ascii_whitespace();
        let Some(name) = f.next() else { continue };
        let Some(id) = name.strip_prefix("cpu").and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
        if v.len() < 8 {
            continue;
        }
        out.insert(
            id,
            CpuTimes {
                user: v[0],
                nice: v[1],
                system: v[2],
                idle: v[3],
                iowait: v[4],
                irq: v[5],
                softirq: v[6],
                steal: v[7],
            },
        );
    }
    out
}

/// `/proc/softirqs`: per-CPU counts for each softirq (`NET_RX`, `NET_TX`, …).
pub fn parse_softirqs(text: &str) -> BTreeMap<String, Vec<u64>> {
    let mut lines = text.lines();
    let ncpu = lines
        .next()
        .map(|h| h.split_ascii_whitespace().count())
        .unwrap_or(0);
    let mut out = BTreeMap::new();
    for line in lines {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let v: Vec<u64> = rest
            .split_ascii_whitespace()
            .take(ncpu)
            .filter_map(|x| x.parse().ok())
            .collect();
        out.insert(name.trim().to_string(), v);
    }
    out
}

/// One CPU's row of `/proc/net/softnet_stat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Softnet {
    /// Packets processed by the NET_RX softirq.
    pub processed: u64,
    /// Packets dropped because the backlog queue was full (netdev_max_backlog).
    pub dropped: u64,
    /// Times the softirq ran out of budget with work left (netdev_budget).
    pub time_squeeze: u64,
}

/// `/proc/net/softnet_stat`: hexadecimal columns, one row per CPU.
pub fn parse_softnet(text: &str) -> Vec<Softnet> {
    text.lines()
        .filter_map(|l| {
            let v: Vec<u64> = l
                .split_ascii_whitespace()
                .filter_map(|x| u64::from_str_radix(x, 16).ok())
                .collect();
            (v.len() >= 3).then(|| Softnet {
                processed: v[0],
                dropped: v[1],
                time_squeeze: v[2],
            })
        })
        .collect()
}

/// One interface's counters from `/proc/net/dev`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetDev {
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub rx_drops: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_drops: u64,
}

/// `/proc/net/dev`: interface name → counters.
pub fn parse_net_dev(text: &str) -> BTreeMap<String, NetDev> {
    let mut out = BTreeMap::new();
    for line in text.lines().skip(2) {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let v: Vec<u64> = rest
            .split_ascii_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        if v.len() < 12 {
            continue;
        }
        out.insert(
            name.trim().to_string(),
            NetDev {
                rx_bytes: v[0],
                rx_packets: v[1],
                rx_drops: v[3],
                tx_bytes: v[8],
                tx_packets: v[9],
                tx_drops: v[11],
            },
        );
    }
    out
}

/// `/proc/net/snmp` and `/proc/net/netstat`: pairs of lines `Prefix: names…` then
/// `Prefix: values…`. Parsed generically into `Prefix.Name → value`, e.g.
/// `Tcp.PassiveOpens`, `TcpExt.ListenOverflows`. Negative values (Tcp.MaxConn is -1)
/// are skipped: they are constants, not counters.
pub fn parse_snmp(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut lines = text.lines();
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        let (Some((p1, names)), Some((p2, values))) =
            (names.split_once(':'), values.split_once(':'))
        else {
            continue;
        };
        if p1 != p2 {
            // Out of step: resynchronise on the next pair.
            continue;
        }
        for (n, v) in names
            .split_ascii_whitespace()
            .zip(values.split_ascii_whitespace())
        {
            if let Ok(v) = v.parse::<u64>() {
                out.insert(format!("{p1}.{n}"), v);
            }
        }
    }
    out
}

/// `/proc/net/sockstat` (and `sockstat6`): `PROTO: key value key value…` into
/// `PROTO.key → value`, e.g. `TCP.tw`, `TCP.inuse`, `TCP.mem` (pages).
pub fn parse_sockstat(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((proto, rest)) = line.split_once(':') else {
            continue;
        };
        let f: Vec<&str> = rest.split_ascii_whitespace().collect();
        for kv in f.chunks(2) {
            if let [k, v] = kv {
                if let Ok(v) = v.parse() {
                    out.insert(format!("{proto}.{k}"), v);
                }
            }
        }
    }
    out
}

/// `/proc/net/stat/nf_conntrack`: a header row of names, then one hexadecimal row per
/// CPU; summed over CPUs (`entries` is a global gauge repeated on every row: kept once).
pub fn parse_nf_conntrack_stat(text: &str) -> BTreeMap<String, u64> {
    let mut lines = text.lines();
    let Some(header) = lines.next() else {
        return BTreeMap::new();
    };
    let names: Vec<&str> = header.split_ascii_whitespace().collect();
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    for line in lines {
        for (n, v) in names.iter().zip(line.split_ascii_whitespace()) {
            let Ok(v) = u64::from_str_radix(v, 16) else {
                continue;
            };
            let e = out.entry((*n).to_string()).or_default();
            if *n == "entries" {
                *e = v;
            } else {
                *e += v;
            }
        }
    }
    out
}

/// `/proc/pressure/cpu`: the `some` line's cumulative stall time (µs) and 10 s average.
pub fn parse_pressure(text: &str) -> Option<(f64, u64)> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    let mut avg10 = None;
    let mut total = None;
    for kv in line.split_ascii_whitespace().skip(1) {
        match kv.split_once('=') {
            Some(("avg10", v)) => avg10 = v.parse().ok(),
            Some(("total", v)) => total = v.parse().ok(),
            _ => {}
        }
    }
    Some((avg10?, total?))
}

/// `/proc/loadavg`: the 1-minute load and the number of runnable tasks.
pub fn parse_loadavg(text: &str) -> Option<(f64, u64)> {
    let mut f = text.split_ascii_whitespace();
    let load1 = f.next()?.parse().ok()?;
    let running = f.nth(2)?.split_once('/')?.0.parse().ok()?;
    Some((load1, running))
}

/// The fields of `/proc/PID/stat` loadlens uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PidStat {
    pub pid: i32,
    pub comm: String,
    /// R running, S sleeping, D uninterruptible, T stopped, Z zombie, …
    pub state: char,
    pub ppid: i32,
    pub minflt: u64,
    /// User and system time, clock ticks.
    pub utime: u64,
    pub stime: u64,
    pub num_threads: u64,
    /// The CPU the task last ran on.
    pub processor: u32,
    /// Its nice value (-20..19) and scheduling policy (`SCHED_IDLE` is 5).
    pub nice: i64,
    pub policy: u32,
}

/// `/proc/PID/stat`. `comm` may contain spaces and parentheses, so the fields after it
/// are found from the last `)`.
pub fn parse_pid_stat(text: &str) -> Option<PidStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let pid = text[..open].trim().parse().ok()?;
    let comm = text[open + 1..close].to_string();
    let f: Vec<&str> = text[close + 1..].split_ascii_whitespace().collect();
    // f[0] is field 3 (state); field N is f[N - 3].
    let get = |n: usize| f.get(n - 3).and_then(|x| x.parse::<u64>().ok());
    Some(PidStat {
        pid,
        comm,
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        minflt: get(10)?,
        utime: get(14)?,
        stime: get(15)?,
        num_threads: get(20)?,
        processor: get(39)? as u32,
        nice: f.get(19 - 3)?.parse().ok()?,
        policy: get(41).unwrap_or(0) as u32,
    })
}

/// `/proc/PID/stat` of every process (those that vanish while listed are skipped).
pub fn all_pid_stats() -> BTreeMap<i32, PidStat> {
    let mut out = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Some(s) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|t| parse_pid_stat(&t))
        {
            out.insert(pid, s);
        }
    }
    out
}

/// The fields of `/proc/PID/status` loadlens uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PidStatus {
    pub voluntary_ctxt_switches: u64,
    pub nonvoluntary_ctxt_switches: u64,
    pub vm_rss_kb: u64,
}

pub fn parse_pid_status(text: &str) -> PidStatus {
    let mut s = PidStatus::default();
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let n = || {
            v.split_ascii_whitespace()
                .next()
                .and_then(|x| x.parse().ok())
                .unwrap_or(0)
        };
        match k {
            "voluntary_ctxt_switches" => s.voluntary_ctxt_switches = n(),
            "nonvoluntary_ctxt_switches" => s.nonvoluntary_ctxt_switches = n(),
            "VmRSS" => s.vm_rss_kb = n(),
            _ => {}
        }
    }
    s
}

/// `/proc/PID/schedstat`: time on CPU (ns), time waiting on a run queue (ns), timeslices.
pub fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut f = text.split_ascii_whitespace();
    Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
}

/// The fields of `/proc/PID/io` loadlens uses: bytes and calls of read-like and
/// write-like syscalls (including socket I/O, which is what a web server does).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PidIo {
    pub rchar: u64,
    pub wchar: u64,
    pub syscr: u64,
    pub syscw: u64,
}

pub fn parse_pid_io(text: &str) -> Option<PidIo> {
    let mut io = PidIo::default();
    let mut seen = 0;
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let Ok(v) = v.trim().parse() else { continue };
        match k {
            "rchar" => io.rchar = v,
            "wchar" => io.wchar = v,
            "syscr" => io.syscr = v,
            "syscw" => io.syscw = v,
            _ => continue,
        }
        seen += 1;
    }
    (seen == 4).then_some(io)
}

/// `/proc/PID/limits`: the soft limit on open files.
pub fn parse_limits_nofile(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_ascii_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A kernel CPU list (`0-3,8,10-11`, as in `/sys/devices/system/cpu/online` and the
/// `Cpus_allowed_list` line of /proc/PID/status) → the CPU numbers, ascending.
pub fn parse_cpu_list(text: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(lo), Ok(hi)) = (lo.trim().parse::<u32>(), hi.trim().parse::<u32>()) {
            out.extend(lo..=hi.min(lo + 65_535));
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The `Cpus_allowed_list` of a /proc/PID/status text: the CPUs the process may run on.
pub fn parse_cpus_allowed(status: &str) -> Option<Vec<u32>> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(parse_cpu_list)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(name: &str) -> String {
        let p = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    #[test]
    fn stat_per_cpu() {
        let s = parse_stat(&data("host-proc-stat"));
        assert_eq!(s.len(), 2);
        assert_eq!(
            s[&0],
            CpuTimes {
                user: 39508,
                nice: 0,
                system: 26147,
                idle: 89027,
                iowait: 166,
                irq: 0,
                softirq: 6695,
                steal: 17
            }
        );
        let d = s[&1].delta(&s[&0]);
        assert_eq!(d.user, 41510 - 39508);
        assert_eq!(d.system, 0, "saturating");
    }

    #[test]
    fn softirqs_and_softnet() {
        let s = parse_softirqs(&data("host-proc-softirqs"));
        assert_eq!(s["NET_RX"], vec![23776192, 29963075]);
        assert_eq!(s["NET_TX"], vec![4, 0]);
        let n = parse_softnet(&data("host-proc-net-softnet_stat"));
        assert_eq!(n.len(), 2);
        assert_eq!(n[0].processed, 0x019525af);
        assert_eq!(n[0].time_squeeze, 2);
    }

    #[test]
    fn net_dev() {
        let d = parse_net_dev(&data("host-proc-net-dev"));
        assert_eq!(d["lo"].rx_bytes, 477709080687);
        assert_eq!(d["lo"].tx_packets, 62994347);
        assert!(d.contains_key("ifb0"));
        let n = parse_net_dev(&data("netns-proc-net-dev"));
        assert!(n.contains_key("lo"));
    }

    #[test]
    fn snmp_and_netstat_generic() {
        let s = parse_snmp(&data("host-proc-net-snmp"));
        assert!(s.contains_key("Tcp.PassiveOpens"));
        assert!(s.contains_key("Tcp.RetransSegs"));
        assert!(!s.contains_key("Tcp.MaxConn"), "-1 is not a counter");
        let n = parse_snmp(&data("host-proc-net-netstat"));
        assert_eq!(n["TcpExt.TW"], 2214049);
        for k in [
            "TcpExt.ListenOverflows",
            "TcpExt.ListenDrops",
            "TcpExt.TCPReqQFullDrop",
            "TcpExt.SyncookiesSent",
            "TcpExt.TCPTimeouts",
            "IpExt.InOctets",
        ] {
            assert!(n.contains_key(k), "{k}");
        }
        let ns = parse_snmp(&data("netns-proc-net-netstat"));
        assert_eq!(ns["TcpExt.ListenOverflows"], 0);
    }

    #[test]
    fn captured_in_a_network_namespace() {
        // A fresh namespace: its own counters, all zero, the same layout.
        let s = parse_snmp(&data("netns-proc-net-snmp"));
        assert_eq!(s["Tcp.PassiveOpens"], 0);
        assert_eq!(s["Tcp.ActiveOpens"], 0);
        let st = parse_sockstat(&data("netns-proc-net-sockstat"));
        assert_eq!(st["TCP.inuse"], 0);
        assert_eq!(st["TCP.tw"], 0);
    }

    #[test]
    fn sockstat() {
        let s = parse_sockstat(&data("host-proc-net-sockstat"));
        assert_eq!(s["TCP.tw"], 59);
        assert_eq!(s["TCP.inuse"], 2);
        assert_eq!(s["sockets.used"], 15);
        let s6 = parse_sockstat(&data("host-proc-net-sockstat6"));
        assert!(s6.contains_key("TCP6.inuse"));
    }

    #[test]
    fn conntrack_pressure_loadavg() {
        let c = parse_nf_conntrack_stat(&data("host-proc-net-stat-nf_conntrack"));
        assert_eq!(c["drop"], 0);
        assert!(c.contains_key("insert_failed") && c.contains_key("early_drop"));
        assert_eq!(
            parse_pressure(&data("host-proc-pressure-cpu")),
            Some((9.53, 38919261))
        );
        assert_eq!(parse_loadavg(&data("host-proc-loadavg")), Some((1.69, 3)));
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8,10-11\n"), [0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(parse_cpu_list("0"), [0]);
        assert_eq!(parse_cpu_list(""), Vec::<u32>::new());
        let status = data("host-proc-nginx-worker-status");
        assert_eq!(parse_cpus_allowed(&status), Some(vec![0, 1]));
    }

    #[test]
    fn pid_files() {
        let s = parse_pid_stat(&data("host-proc-nginx-worker-stat")).unwrap();
        assert_eq!(s.comm, "nginx");
        assert!(s.ppid > 1);
        let m = parse_pid_stat(&data("host-proc-nginx-master-stat")).unwrap();
        assert_eq!(s.ppid, m.pid, "the worker's parent is the master");
        let odd = parse_pid_stat("42 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 1 37").unwrap();
        assert_eq!(
            (odd.comm.as_str(), odd.state, odd.ppid),
            ("a (b) c", 'S', 1)
        );
        assert_eq!((odd.utime, odd.stime, odd.processor), (11, 12, 1));
        let st = parse_pid_status(&data("host-proc-nginx-worker-status"));
        assert!(st.vm_rss_kb > 0);
        // On CPU first, then waiting on a run queue: distinct values, each field named.
        assert_eq!(
            parse_schedstat(&data("host-proc-nginx-worker-schedstat")),
            Some((36_834_317_577, 938_859_690))
        );
        assert_eq!(parse_schedstat("12"), None);
        // Both sides, read and write (bytes per read is rchar / syscr), each field from
        // its own line.
        assert_eq!(
            parse_pid_io(&data("host-proc-nginx-worker-io")),
            Some(PidIo {
                rchar: 2_809_075_748,
                wchar: 3_466_986_620,
                syscr: 2_743_241,
                syscw: 2_743_235,
            })
        );
        // A file without one of the four is not read as zero.
        assert_eq!(parse_pid_io("rchar: 1\nwchar: 2\nsyscw: 3\n"), None);
        assert!(parse_limits_nofile(&data("host-proc-nginx-worker-limits")).unwrap() >= 1024);
    }
}
