//! The upstreams a front is connected to, found from its own sockets whatever its kind
//! and configuration: its established TCP connections to an address of this host, and
//! its connected unix sockets whose peer a server accepted (`ss -tp`, `ss -xp` read
//! through sock_diag and the processes' fd links).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use super::discover::{
    all_processes, is_local, listener_matches, push_processes, with_children, Holders,
};
use crate::run::{Listener, ServerProcess, Tier, Topology};
use crate::sys::sockdiag::Diag;

/// What the front's own connections lead to: the processes at their other end and the
/// listeners they reached there.
#[derive(Debug, Default)]
pub struct Reached {
    pub pids: BTreeSet<i32>,
    pub tcp: Vec<Listener>,
    pub unix: Vec<Listener>,
}

/// The sockets `pid` holds past its standard input, output and error (a server started
/// by systemd writes those to journald's stream socket: not an upstream).
fn sockets_past_stdio(pid: i32) -> BTreeSet<u64> {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return BTreeSet::new();
    };
    rd.flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
                .is_some_and(|fd| fd > 2)
        })
        .filter_map(|e| {
            let l = std::fs::read_link(e.path()).ok()?;
            let s = l.to_str()?;
            s.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect()
}

/// The upstreams the processes `front` are connected to now, from their own sockets:
/// each established TCP connection not on the front's `port` (those are its clients)
/// to an address of this host leads to the listener there and the processes holding
/// it; each connected unix socket whose peer was accepted on a listening socket leads
/// to that listener (the peer carries its path) and the processes holding it or the
/// peer. The front's own processes are never its upstreams.
pub fn reached(d: &mut Diag, front: &BTreeSet<i32>, port: u16) -> Reached {
    let mut out = Reached::default();
    let mine: BTreeSet<u64> = front.iter().flat_map(|p| sockets_past_stdio(*p)).collect();
    if mine.is_empty() {
        return out;
    }
    let mut holders = Holders::default();
    let mut wanted = BTreeSet::new();
    let mut remotes: BTreeSet<SocketAddr> = BTreeSet::new();
    if let Ok(conns) = d.tcp_connections_of(&mine) {
        remotes.extend(
            conns
                .into_iter()
                .filter(|(local, remote)| local.port() != port && is_local(remote.ip()))
                .map(|(_, remote)| remote),
        );
    }
    for r in &remotes {
        let Ok(ls) = d.tcp_listeners(Some(r.port())) else {
            continue;
        };
        for l in ls.into_iter().filter(|l| listener_matches(l, *r)) {
            if !out.tcp.iter().any(|x| x.inode == l.inode) {
                wanted.insert(l.inode);
                out.tcp.push(l);
            }
        }
    }
    if let Ok(all) = d.unix_connected() {
        let names: BTreeMap<u64, &str> = all.iter().map(|(i, _, n)| (*i, n.as_str())).collect();
        let peers: BTreeSet<u64> = all
            .iter()
            .filter(|(i, p, _)| mine.contains(i) && *p != 0 && !mine.contains(p))
            .map(|(_, p, _)| *p)
            .collect();
        let paths: BTreeSet<&str> = peers
            .iter()
            .filter_map(|p| names.get(p).copied())
            .filter(|n| !n.is_empty())
            .collect();
        if !paths.is_empty() {
            if let Ok(ls) = d.unix_listeners() {
                for l in ls.into_iter().filter(|l| paths.contains(l.addr.as_str())) {
                    wanted.insert(l.inode);
                    out.unix.push(l);
                }
            }
        }
        // A peer accepted on a listener found above: whoever holds it serves.
        if !out.unix.is_empty() {
            wanted.extend(peers);
        }
    }
    out.pids = holders
        .holding(&wanted)
        .difference(front)
        .copied()
        .collect();
    // A listener no other process holds is the front's own (a status socket).
    if out.pids.is_empty() {
        out.tcp.clear();
        out.unix.clear();
    }
    out
}

/// Adds to `topo` the upstreams its front is connected to now ([`reached`]), with their
/// children, and the listeners reached; returns the processes added. Called when the
/// server is found and again during the load: an upstream connected to per request
/// (lighttpd's FastCGI and SCGI, a proxy without keep-alive) has no connection before
/// the load.
pub fn add_reached(topo: &mut Topology, d: &mut Diag, port: u16) -> Vec<ServerProcess> {
    let front: BTreeSet<i32> = topo
        .processes
        .iter()
        .filter(|p| p.tier != Tier::Upstream)
        .map(|p| p.pid)
        .collect();
    if front.is_empty() {
        return Vec::new();
    }
    let r = reached(d, &front, port);
    if r.pids.is_empty() {
        return Vec::new();
    }
    let procs = all_processes();
    let known: BTreeSet<i32> = topo.processes.iter().map(|p| p.pid).collect();
    let new: BTreeSet<i32> = with_children(&r.pids, &procs)
        .difference(&known)
        .copied()
        .collect();
    let before = topo.processes.len();
    push_processes(topo, &new, Tier::Upstream, &procs);
    for l in r.tcp {
        let known = |t: &[Listener]| t.iter().any(|x| x.inode == l.inode);
        if !known(&topo.listeners) && !known(&topo.upstream_listeners) {
            topo.upstream_listeners.push(l);
        }
    }
    for u in r.unix {
        if !topo.unix_listeners.iter().any(|l| l.inode == u.inode) {
            topo.unix_listeners.push(u);
        }
    }
    topo.processes[before..].to_vec()
}
