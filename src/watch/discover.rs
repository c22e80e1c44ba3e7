//! Target discovery: from the URL's address (or `--server-pid` / `--server-name`) to the
//! listening socket and the processes that hold it — the nginx master, its workers —
//! plus the unix listeners those processes own (an upstream such as php-fpm's socket).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};

use crate::run::{Listener, Role, ServerProcess, Tier, Topology};
use crate::sys::procfs::all_pid_stats;
use crate::sys::sockdiag::Diag;

/// What the user told loadlens about the server.
#[derive(Debug, Clone, Default)]
pub struct Hints {
    pub pids: Vec<i32>,
    pub names: Vec<String>,
}

/// Discovery result: the topology and warnings.
pub struct Found {
    pub topology: Topology,
    pub warnings: Vec<String>,
}

/// The processes named by `--server-pid` / `--server-name`, with a warning for each
/// hint that matched nothing. The first one's namespace is where counters are read.
pub fn hinted(hints: &Hints, warnings: &mut Vec<String>) -> BTreeSet<i32> {
    let procs = all_processes();
    let mut chosen: BTreeSet<i32> = BTreeSet::new();
    for p in &hints.pids {
        if procs.contains_key(p) {
            chosen.insert(*p);
        } else {
            warnings.push(format!("--server-pid {p}: no such process"));
        }
    }
    for n in &hints.names {
        let before = chosen.len();
        chosen.extend(procs.iter().filter(|(_, (_, c))| c == n).map(|(p, _)| *p));
        if chosen.len() == before {
            warnings.push(format!("--server-name {n}: no process with that name"));
        }
    }
    chosen
}

/// Every process: pid → (ppid, comm).
pub(super) fn all_processes() -> BTreeMap<i32, (i32, String)> {
    all_pid_stats()
        .into_iter()
        .map(|(pid, s)| (pid, (s.ppid, s.comm)))
        .collect()
}

/// Socket inodes held by `pid` (from its fd links `socket:[INODE]`); `None` when the
/// fd directory cannot be read (another user's process without root).
pub fn socket_inodes(pid: i32) -> Option<BTreeSet<u64>> {
    let rd = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    Some(
        rd.flatten()
            .filter_map(|e| {
                let l = std::fs::read_link(e.path()).ok()?;
                let s = l.to_str()?;
                s.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
            })
            .collect(),
    )
}

/// Whether `ip` is an address of this host (loopback, or one a socket can bind to).
pub fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback() || std::net::TcpListener::bind(SocketAddr::new(ip, 0)).is_ok()
}

///
/// Addresses are compared in their canonical form: a socket of the IPv6 family bound to
/// the IPv4-mapped `[::ffff:127.0.0.1]` (the JVM's default, and any server opening one
/// dual-stack socket) serves `127.0.0.1`. A wildcard (`0.0.0.0`, `[::]`) serves any
/// address of its family, and `[::]` IPv4 ones too unless it is `IPV6_V6ONLY`.
pub(super) fn listener_matches(l: &Listener, target: SocketAddr) -> bool {
    let Ok(a) = l.addr.parse::<SocketAddr>() else {
        return false;
    };
    let (ip, want) = (a.ip().to_canonical(), target.ip().to_canonical());
    let wildcard = match (ip, want) {
        (std::net::IpAddr::V6(_), std::net::IpAddr::V4(_)) => ip.is_unspecified() && !l.v6only,
        (std::net::IpAddr::V4(_), std::net::IpAddr::V6(_)) => false,
        _ => ip.is_unspecified(),
    };
    a.port() == target.port() && (ip == want || wildcard)
}

/// Finds the server behind `target`. Runs in the thread that will sample, after it has
/// joined the server's network namespace (`netns` names it for people: `loadlens` or
/// `pid N`); `diag` is a sock_diag socket of that namespace, if one could be opened.
pub fn discover(
    target: SocketAddr,
    hinted: &BTreeSet<i32>,
    netns: &str,
    diag: Option<&mut Diag>,
) -> Found {
    let mut warnings = Vec::new();
    let procs = all_processes();
    let local = !hinted.is_empty() || is_local(target.ip());
    let mut topo = Topology {
        netns: netns.to_string(),
        ..Topology::default()
    };
    if !local {
        topo.summary = format!(
            "not watching the server: {} is not an address of this machine (give --server-pid if it runs here in another namespace)",
            target.ip()
        );
        return Found {
            topology: topo,
            warnings,
        };
    }
    let mut diag = diag;
    if let Some(d) = diag.as_deref_mut() {
        match d.tcp_listeners(Some(target.port())) {
            Ok(ls) => {
                topo.listeners = ls
                    .into_iter()
                    .filter(|l| listener_matches(l, target))
                    .collect()
            }
            Err(e) => warnings.push(format!("listen queues not watched: sock_diag failed ({e})")),
        }
    }

    // Processes holding the listening socket: the front, with its children.
    let wanted: BTreeSet<u64> = topo.listeners.iter().map(|l| l.inode).collect();
    let mut holders = Holders::default();
    let mut front = holders.holding(&wanted);
    let mut upstream = BTreeSet::new();
    if front.is_empty() {
        front = hinted.clone();
    } else {
        // A named parent of a holder is the front's master (its own fds may be
        // unreadable to a non-root user); other named processes are the front's
        // upstreams (php-fpm, a backend).
        let parents: BTreeSet<i32> = front
            .iter()
            .filter_map(|p| procs.get(p).map(|(ppid, _)| *ppid))
            .collect();
        for &h in hinted.difference(&front.clone()) {
            if parents.contains(&h) {
                front.insert(h);
            } else {
                upstream.insert(h);
            }
        }
    }
    let front = with_children(&front, &procs);
    push_processes(&mut topo, &front, Tier::Front, &procs);
    read_config(&mut topo, &mut warnings);

    // Upstreams named in the front's configuration: who listens there.
    let mut upstream_unix: Vec<Listener> = Vec::new();
    if let (Some(cfg), Some(d)) = (topo.config.clone(), diag.as_deref_mut()) {
        let mut inodes = BTreeSet::new();
        for addr in &cfg.upstreams {
            match upstream_listeners(d, addr) {
                Ok(ls) => {
                    inodes.extend(ls.iter().map(|l| l.inode));
                    if addr.starts_with("unix:") {
                        upstream_unix.extend(ls);
                    } else {
                        for l in ls {
                            let known = |t: &[Listener]| t.iter().any(|x| x.inode == l.inode);
                            if !known(&topo.listeners) && !known(&topo.upstream_listeners) {
                                topo.upstream_listeners.push(l);
                            }
                        }
                    }
                }
                Err(e) => warnings.push(format!("upstream {addr} not found: {e}")),
            }
        }
        upstream.extend(holders.holding(&inodes));
    }
    let upstream: BTreeSet<i32> = with_children(&upstream, &procs)
        .difference(&front)
        .copied()
        .collect();
    push_processes(&mut topo, &upstream, Tier::Upstream, &procs);
    let unreadable = holders.unreadable;
    let chosen: BTreeSet<i32> = front.union(&upstream).copied().collect();

    // Unix listeners the watched processes hold (php-fpm's socket, for example).
    if let (Some(d), false) = (diag.as_deref_mut(), topo.processes.is_empty()) {
        let mut held = BTreeSet::new();
        for p in &chosen {
            held.extend(socket_inodes(*p).unwrap_or_default());
        }
        if let Ok(us) = d.unix_listeners() {
            topo.unix_listeners = us.into_iter().filter(|u| held.contains(&u.inode)).collect();
        }
    }
    for u in upstream_unix {
        if !topo.unix_listeners.iter().any(|l| l.inode == u.inode) {
            topo.unix_listeners.push(u);
        }
    }

    // Upstreams the front is connected to now, whatever its kind and configuration.
    if let (Some(d), false) = (diag, topo.processes.is_empty()) {
        super::reached::add_reached(&mut topo, d, target.port());
    }

    read_upstream_config(&mut topo, &mut warnings);
    topo.summary = summarize(&topo, target);
    if topo.processes.is_empty() {
        let why = if topo.listeners.is_empty() {
            format!("no listening socket on port {} found", target.port())
        } else if unreadable > 0 && unsafe { libc::geteuid() } != 0 {
            "the processes holding it belong to another user (run as root, or give --server-pid)"
                .to_string()
        } else {
            "no process holding it was found".to_string()
        };
        topo.summary = format!("not watching server processes: {why}");
    }
    Found {
        topology: topo,
        warnings,
    }
}

/// Which processes hold which sockets, read once per process on first use.
#[derive(Default)]
pub(super) struct Holders {
    inodes: Option<BTreeMap<i32, BTreeSet<u64>>>,
    unreadable: usize,
}

impl Holders {
    /// The processes holding any of `wanted`.
    pub(super) fn holding(&mut self, wanted: &BTreeSet<u64>) -> BTreeSet<i32> {
        if wanted.is_empty() {
            return BTreeSet::new();
        }
        let unreadable = &mut self.unreadable;
        let all = self.inodes.get_or_insert_with(|| {
            let mut m = BTreeMap::new();
            for pid in all_pid_stats().into_keys() {
                match socket_inodes(pid) {
                    Some(i) => {
                        m.insert(pid, i);
                    }
                    None => *unreadable += 1,
                }
            }
            m
        });
        all.iter()
            .filter(|(_, i)| !i.is_disjoint(wanted))
            .map(|(p, _)| *p)
            .collect()
    }
}

/// `roots` and their children (a master's workers: nginx workers, php-fpm children).
pub(super) fn with_children(
    roots: &BTreeSet<i32>,
    procs: &BTreeMap<i32, (i32, String)>,
) -> BTreeSet<i32> {
    let mut out = roots.clone();
    out.extend(
        procs
            .iter()
            .filter(|(_, (ppid, _))| roots.contains(ppid))
            .map(|(p, _)| *p),
    );
    out
}

pub(super) fn push_processes(
    topo: &mut Topology,
    pids: &BTreeSet<i32>,
    tier: Tier,
    procs: &BTreeMap<i32, (i32, String)>,
) {
    for pid in pids {
        let Some((ppid, comm)) = procs.get(pid) else {
            continue;
        };
        let has_children = pids
            .iter()
            .any(|c| procs.get(c).is_some_and(|(pp, _)| pp == pid));
        let role = if pids.contains(ppid) {
            Role::Worker
        } else if has_children {
            Role::Master
        } else {
            Role::Server
        };
        // The executable says which server it is; its link is unreadable for another
        // user's process without root, then the command name stands in.
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| comm.clone());
        topo.processes.push(ServerProcess {
            pid: *pid,
            ppid: *ppid,
            comm: comm.clone(),
            kind: crate::kinds::recognise(
                &exe,
                &crate::sys::procfs::read_cmdline(*pid).unwrap_or_default(),
            ),
            role,
            tier,
        });
    }
}

/// The front server's configuration, from its master (or its only process), when
/// loadlens has a reader for its kind.
fn read_config(topo: &mut Topology, warnings: &mut Vec<String>) {
    let Some(m) = topo
        .processes
        .iter()
        .find(|p| p.role != Role::Worker && super::configs::readable(p.kind))
    else {
        return;
    };
    match super::configs::read(m.kind, m.pid) {
        Ok(cfg) => topo.config = Some(cfg),
        Err(e) => warnings.push(format!("{} configuration not read: {e}", m.kind.name())),
    }
}

/// The upstream's configuration, from its master (or its only process), when loadlens
/// has a reader for its kind.
pub fn read_upstream_config(topo: &mut Topology, warnings: &mut Vec<String>) {
    if topo.upstream_config.is_some() {
        return;
    }
    let Some(m) = topo.processes.iter().find(|p| {
        p.tier == Tier::Upstream && p.role != Role::Worker && super::configs::readable(p.kind)
    }) else {
        return;
    };
    match super::configs::read(m.kind, m.pid) {
        Ok(cfg) => topo.upstream_config = Some(cfg),
        Err(e) => warnings.push(format!("{} configuration not read: {e}", m.kind.name())),
    }
}

/// The listening sockets behind an upstream address as nginx writes it:
/// `unix:/run/php/php8.2-fpm.sock` or `host:port` (a name is resolved; no port is 80).
fn upstream_listeners(d: &mut Diag, addr: &str) -> std::io::Result<Vec<Listener>> {
    if let Some(path) = addr.strip_prefix("unix:") {
        let path = path.split(':').next().unwrap_or(path);
        return Ok(d
            .unix_listeners()?
            .into_iter()
            .filter(|l| l.addr == path)
            .collect());
    }
    let with_port = if addr
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        addr.to_string()
    } else {
        format!("{addr}:80")
    };
    use std::net::ToSocketAddrs;
    let targets: Vec<SocketAddr> = with_port.to_socket_addrs()?.collect();
    let Some(port) = targets.first().map(|t| t.port()) else {
        return Ok(Vec::new());
    };
    Ok(d.tcp_listeners(Some(port))?
        .into_iter()
        .filter(|l| targets.iter().any(|t| listener_matches(l, *t)))
        .collect())
}

pub(super) fn summarize(t: &Topology, target: SocketAddr) -> String {
    let describe = |tier: Tier| -> String {
        let mut by_comm: BTreeMap<&str, (Vec<i32>, usize)> = BTreeMap::new();
        for p in t.processes.iter().filter(|p| p.tier == tier) {
            let e = by_comm.entry(p.comm.as_str()).or_default();
            match p.role {
                Role::Worker => e.1 += 1,
                _ => e.0.push(p.pid),
            }
        }
        by_comm
            .iter()
            .map(|(comm, (masters, workers))| {
                let m = masters
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(",");
                let ws = if *workers == 1 { "" } else { "s" };
                match (*workers, masters.is_empty()) {
                    (0, _) => format!("{comm} {m}"),
                    (w, true) => format!("{w} {comm} worker{ws}"),
                    (w, false) => format!("{comm} master {m} + {w} worker{ws}"),
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let parts = describe(Tier::Front);
    let upstream = describe(Tier::Upstream);
    let on = t
        .listeners
        .first()
        .map(|l| l.addr.clone())
        .unwrap_or_else(|| target.to_string());
    let mut s = format!("watching {parts} on {on}");
    if !upstream.is_empty() {
        s.push_str(&format!(", upstream {upstream}"));
    }
    if t.netns != "loadlens" {
        s.push_str(&format!(" (network namespace of {})", t.netns));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener(addr: &str) -> Listener {
        Listener {
            addr: addr.into(),
            port: addr.rsplit(':').next().unwrap().parse().unwrap(),
            inode: 0,
            queue: 0,
            backlog: 0,
            v6only: false,
        }
    }

    /// How sock_diag shows listeners of each family, against the address a URL or a
    /// `proxy_pass` names (issue: the JVM's upstream on `[::ffff:127.0.0.1]:8080` was
    /// not found from `proxy_pass http://127.0.0.1:8080`).
    #[test]
    fn listeners_of_either_family() {
        let v4: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let v6: SocketAddr = "[::1]:8080".parse().unwrap();
        let yes = |l: &str, t: SocketAddr| assert!(listener_matches(&listener(l), t), "{l} {t}");
        let no = |l: &str, t: SocketAddr| assert!(!listener_matches(&listener(l), t), "{l} {t}");
        yes("127.0.0.1:8080", v4);
        yes("[::ffff:127.0.0.1]:8080", v4);
        yes("0.0.0.0:8080", v4);
        yes("[::]:8080", v4);
        yes("[::1]:8080", v6);
        yes("[::]:8080", v6);
        no("[::ffff:127.0.0.2]:8080", v4);
        no("[::ffff:127.0.0.1]:8081", v4);
        no("127.0.0.1:8080", v6);
        no("[::1]:8080", v4);
        // A V6ONLY wildcard serves no IPv4 client; an IPv4 wildcard no IPv6 one.
        let v6only = Listener {
            v6only: true,
            ..listener("[::]:8080")
        };
        assert!(!listener_matches(&v6only, v4));
        assert!(listener_matches(&v6only, v6));
        no("0.0.0.0:8080", v6);
        // The mapped form named in a URL is the same address.
        yes("127.0.0.1:8080", "[::ffff:127.0.0.1]:8080".parse().unwrap());
    }
}
