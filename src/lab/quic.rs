//! QUIC servers in the lab: Caddy (Debian's package serves HTTP/3 by default) with its
//! QUIC socket's receive buffer held tiny (what a low `net.core.rmem_max` leaves it),
//! and a bounded UDP flood at its QUIC port from the client's namespace beside the
//! load: the datagrams the buffer cannot hold are dropped (`Udp.RcvbufErrors`, the
//! socket's `skmem d`), which `udp-receive-buffer-drops` names. The fix gives the
//! socket a large buffer, so the same flood fits in it.
//!
//! The load is chosen by [`Load`]: over TCP to Caddy's HTTP side today; over HTTP/3 to
//! its QUIC port once the engine loads over QUIC (`--h3`), with the same world.
//!
//! Caddy runs without CAP_NET_ADMIN (`setpriv --bounding-set -net_admin`, as Debian's
//! unit runs it as user `caddy`): newer quic-go falls back to SO_RCVBUFFORCE, which a
//! root process with that capability would pass the cap with.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::scenario::{Beside, Key, Moves, Scenario, Setup};
use super::servers::docroot;
use super::world::{in_netns, World, CLIENT_IP, SERVER_IP};
use crate::run::Run;

/// Caddy's HTTP (TCP) port and its HTTPS port (TCP and, for HTTP/3, UDP).
pub const HTTP_PORT: u16 = 8080;
pub const QUIC_PORT: u16 = 8443;

/// The receive buffer the test gives Caddy's QUIC socket (SO_RCVBUFFORCE; the kernel
/// doubles it): with the fault 8 KiB asked, 16 KiB set (seven 1,200-byte datagrams,
/// each charged ~2.3 KiB), what an `net.core.rmem_max` of 8 KiB would leave quic-go;
/// with the fix 64 MiB asked, seconds of the flood however late Caddy reads. A
/// namespace cannot lower `net.core.rmem_max` itself: outside the host's namespace the
/// kernel (6.x) shows it read-only, and the host's is never changed.
pub const RCVBUF_FAULT: i32 = 8192;
pub const RCVBUF_FIXED: i32 = 67_108_864;

/// The flood: bursts of `BURST` datagrams of `DATAGRAM` bytes every `PERIOD` (5,000
/// a second), at most `MAX_DATAGRAMS` in all whatever happens to the test.
pub const BURST: u64 = 100;
pub const DATAGRAM: usize = 1200;
pub const PERIOD: Duration = Duration::from_millis(20);
pub const MAX_DATAGRAMS: u64 = 400_000;

/// How the load reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// HTTP/1.1 over TCP to Caddy's HTTP site (the QUIC port sees only the flood).
    Tcp,
    /// HTTP/3 to the QUIC port (`--h3`, when the engine has it).
    H3,
}

/// Caddy in namespace `ns` serving the lab's docroot over HTTP on [`HTTP_PORT`] and
/// over HTTPS with HTTP/3 (its internal CA) on [`QUIC_PORT`]. Returns its pid.
/// `default_sni`: a client of an IP address sends no SNI, and over QUIC Caddy cannot
/// fall back to the connection's local address (its socket is bound to the wildcard),
/// so without it the handshake fails with TLS alert 80. Caddy runs at nice -10: the
/// world's server ahead of whatever else the host runs (a build beside the lab made it
/// wait for a CPU 0.5 s a second, `run-queue-delay`, which is the host's, not the fault's).
pub fn start_caddy(w: &mut World, ns: &str) -> anyhow::Result<i32> {
    let root = docroot(w)?;
    let data = w.dir.join("caddy");
    std::fs::create_dir_all(&data)?;
    let conf = format!(
        "{{\n\tadmin off\n\tauto_https disable_redirects\n\tlocal_certs\n\tdefault_sni {SERVER_IP}\n\tskip_install_trust\n\tstorage file_system {data}\n\tservers {{\n\t\tprotocols h1 h2 h3\n\t}}\n}}\n\nhttp://{SERVER_IP}:{HTTP_PORT} {{\n\troot * {root}\n\tfile_server\n}}\n\nhttps://{SERVER_IP}:{QUIC_PORT} {{\n\ttls internal\n\troot * {root}\n\tfile_server\n}}\n",
        data = data.display(),
        root = root.display(),
    );
    let conf = w.write("caddy/Caddyfile", conf.as_bytes())?;
    let bin = super::world::which("caddy").ok_or_else(|| {
        anyhow::anyhow!("Caddy is not installed: apt-get install caddy (make test installs it)")
    })?;
    let home = format!("HOME={}", data.display());
    let xdg = format!("XDG_DATA_HOME={}", data.display());
    let xdg_conf = format!("XDG_CONFIG_HOME={}", data.display());
    let (bin, conf) = (bin.display().to_string(), conf.display().to_string());
    let pid = w.spawn(
        ns,
        "caddy",
        &[
            "env",
            &home,
            &xdg,
            &xdg_conf,
            "nice",
            "-n",
            "-10",
            "setpriv",
            "--bounding-set",
            "-net_admin",
            &bin,
            "run",
            "--config",
            &conf,
            "--adapter",
            "caddyfile",
        ],
    )?;
    let c = w.client();
    w.wait_tcp(&c, &format!("{SERVER_IP}:{HTTP_PORT}"), "caddy")?;
    w.wait_tcp(&c, &format!("{SERVER_IP}:{QUIC_PORT}"), "caddy")?;
    Ok(pid)
}

/// A UDP flood at `to` from a socket in namespace `ns`: [`BURST`] datagrams every
/// [`PERIOD`] until stopped, [`MAX_DATAGRAMS`] at most. The count sent is in `sent`.
pub fn udp_flood(ns: &str, to: String, sent: Arc<AtomicU64>) -> anyhow::Result<Beside> {
    let sock = in_netns(&format!("/run/netns/{ns}"), || {
        UdpSocket::bind(format!("{CLIENT_IP}:0"))
    })??;
    let payload = [0x40u8; DATAGRAM];
    Ok(Beside::every(PERIOD, move || {
        for _ in 0..BURST {
            if sent.load(Ordering::Relaxed) >= MAX_DATAGRAMS {
                return;
            }
            // A full send buffer or an unreachable port: the next burst tries again.
            if sock.send_to(&payload, &to).is_ok() {
                sent.fetch_add(1, Ordering::Relaxed);
            }
        }
    }))
}

/// Sets the receive buffer of process `pid`'s UDP socket on `port` from outside, as
/// the server's own `setsockopt` would: pidfd_getfd(2) duplicates its descriptor (the
/// same socket), SO_RCVBUFFORCE sets the buffer past `net.core.rmem_max` (root).
/// Returns the buffer the kernel set (`sk_rcvbuf`: twice what was asked).
pub fn set_udp_rcvbuf(pid: i32, port: u16, bytes: i32) -> anyhow::Result<u32> {
    let inode = udp_socket_inode(pid, port)?;
    let fd = std::fs::read_dir(format!("/proc/{pid}/fd"))?
        .flatten()
        .find(|e| {
            std::fs::read_link(e.path())
                .is_ok_and(|l| l.to_str() == Some(&format!("socket:[{inode}]")))
        })
        .and_then(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .ok_or_else(|| {
            anyhow::anyhow!("no descriptor of process {pid} holds UDP socket {inode}")
        })?;
    // SAFETY: plain system calls on descriptors this function opens and closes.
    unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, pid, 0) as i32;
        anyhow::ensure!(
            pidfd >= 0,
            "pidfd_open({pid}): {}",
            std::io::Error::last_os_error()
        );
        let dup = libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0) as i32;
        let err = std::io::Error::last_os_error();
        libc::close(pidfd);
        anyhow::ensure!(dup >= 0, "pidfd_getfd({pid}, {fd}): {err}");
        let set = libc::setsockopt(
            dup,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &bytes as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        );
        let err = std::io::Error::last_os_error();
        let mut now: i32 = 0;
        let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
        libc::getsockopt(
            dup,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &mut now as *mut i32 as *mut libc::c_void,
            &mut len,
        );
        libc::close(dup);
        anyhow::ensure!(set == 0, "SO_RCVBUFFORCE on {pid}'s UDP socket: {err}");
        Ok(now as u32)
    }
}

/// The inode of process `pid`'s UDP socket bound to `port` (`/proc/PID/net/udp` and
/// `udp6`, in the process's namespace), waiting for it a while (Caddy opens it as its
/// HTTP/3 server starts).
fn udp_socket_inode(pid: i32, port: u16) -> anyhow::Result<u64> {
    let want = format!(":{port:04X}");
    for _ in 0..100 {
        for table in ["udp", "udp6"] {
            let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}"))?;
            for line in text.lines().skip(1) {
                let f: Vec<&str> = line.split_whitespace().collect();
                if f.len() > 9 && f[1].ends_with(&want) {
                    return Ok(f[9].parse()?);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    anyhow::bail!("process {pid} has no UDP socket on port {port} after 10 s")
}

/// The world: Caddy with HTTP/3 in the server's namespace, its QUIC socket's receive
/// buffer set to 16 KiB (`fixed`: 128 MiB), the flood at its QUIC port beside the load,
/// and the load of kind `load`. The flood starts before the load and stops when the
/// Setup is dropped, so the load's whole window is inside it.
pub fn udp_receive_buffer(
    w: &mut World,
    fixed: bool,
    load: Load,
    sent: Arc<AtomicU64>,
) -> anyhow::Result<Setup> {
    w.two_hosts()?;
    let s = w.server();
    let pid = start_caddy(w, &s)?;
    set_udp_rcvbuf(
        pid,
        QUIC_PORT,
        if fixed { RCVBUF_FIXED } else { RCVBUF_FAULT },
    )?;
    let c = w.client();
    let flood = udp_flood(&c, format!("{SERVER_IP}:{QUIC_PORT}"), sent)?;
    let mut setup = match load {
        Load::Tcp => Setup::new(
            format!("http://{SERVER_IP}:{HTTP_PORT}/1k.bin"),
            &["-c", "2", "--no-probe"],
            vec![pid],
        ),
        Load::H3 => Setup::new(
            format!("https://{SERVER_IP}:{QUIC_PORT}/1k.bin"),
            &["-c", "2", "--no-probe", "--h3", "--insecure"],
            vec![pid],
        ),
    };
    setup.beside = Some(flood);
    Ok(setup)
}

/// The default and range of `udp-receive-buffer`'s `--param rcvbuf_kib`: what Caddy's
/// QUIC socket is given (SO_RCVBUF; the kernel doubles it). At both ends loadlens's own
/// HTTP/3 load overflows it (see the scenario's key).
pub const RCVBUF_KIB: u32 = 8;
pub const RCVBUF_KIB_RANGE: std::ops::RangeInclusive<u32> = 4..=16;

/// The load of `udp-receive-buffer`: `-c` QUIC connections of `--max-concurrent-streams`
/// requests each. 16 × 8 overflowed 8 KiB (asked; 16 KiB set) with 13-28% of the
/// datagrams dropped from 4 to 16 KiB on loopback (a release of bursts: the handshakes'
/// 1,200-byte Initials, then the requests of every stream at once); 4 MiB dropped none.
pub const H3_CONNECTIONS: &str = "16";
pub const H3_STREAMS: &str = "8";

/// The datagrams the server's UDP sockets dropped over the window (`skmem d`).
fn socket_drops(run: &Run) -> Option<f64> {
    let udp = run.evidence.as_ref()?.window.udp.as_ref()?;
    Some(udp.socket_drops() as f64)
}

/// The world of `udp-receive-buffer`: Caddy with HTTP/3 in the server's namespace and
/// loadlens loading its QUIC port with `--h3`. The fault gives Caddy's QUIC socket
/// `--param rcvbuf_kib` KiB (from outside, [`set_udp_rcvbuf`]: a namespace cannot lower
/// `net.core.rmem_max` — it is read-only there — and the host's is never changed); the
/// fix is Caddy as started, with the buffer quic-go asked for itself (7 MB, capped at
/// twice the host's `net.core.rmem_max`), which is what raising the sysctl and
/// restarting Caddy gives.
fn udp_receive_buffer_h3(w: &mut World, fixed: bool) -> anyhow::Result<Setup> {
    let kib = w.param("rcvbuf_kib", RCVBUF_KIB, RCVBUF_KIB_RANGE)?;
    w.two_hosts()?;
    let s = w.server();
    let pid = start_caddy(w, &s)?;
    if !fixed {
        set_udp_rcvbuf(pid, QUIC_PORT, kib as i32 * 1024)?;
    }
    // loadlens ahead of the host's own load too (as Caddy, see [`start_caddy`]): a
    // client starved by a build beside it measured nothing of the fix.
    Ok(Setup {
        client_prefix: super::scenario::args(&["nice", "-n", "-10"]),
        ..Setup::new(
            format!("https://{SERVER_IP}:{QUIC_PORT}/1k.bin"),
            &[
                "--h3",
                "--insecure",
                "-c",
                H3_CONNECTIONS,
                "--max-concurrent-streams",
                H3_STREAMS,
                "--no-probe",
            ],
            vec![pid],
        )
    })
}

pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario {
        name: "udp-receive-buffer",
        summary: "Caddy loaded over HTTP/3 (--h3): its QUIC socket's receive buffer overflows",
        source: "quic-go's wiki, UDP buffer sizes (quic-go asks for 7 MB and gets at most net.core.rmem_max; raise it and restart)",
        fault: "Caddy's QUIC socket holds 8 KiB of datagrams (--param rcvbuf_kib=4..16), what a tiny net.core.rmem_max leaves quic-go",
        fix: "net.core.rmem_max raised and Caddy restarted: quic-go gets the buffer it asks for",
        expected_finding: "udp-receive-buffer-drops",
        key: Key {
            label: "server's UDP socket drops",
            read: socket_drops,
            moves: Moves::Down(10.0),
        },
        build: udp_receive_buffer_h3,
    }]
}
