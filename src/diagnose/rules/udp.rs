//! UDP and QUIC servers (HTTP/3): datagrams dropped at a full socket receive buffer,
//! and a QUIC server bound by its CPU. Read from `/proc/net/snmp` `Udp` (and
//! `/proc/net/snmp6` `Udp6`) over the window and from the server's own UDP sockets
//! (sock_diag: `ss -uamn`'s `skmem` `rb` and `d`).
//!
//! udp(7): a datagram arriving at a socket whose receive queue is full (`sk_rmem_alloc`
//! past `sk_rcvbuf`) is dropped, counted in the socket's `sk_drops` and in
//! `RcvbufErrors`/`InErrors`; QUIC then sees loss, retransmits after its probe timeout
//! and shrinks its congestion window. The buffer is twice what the server asked with
//! SO_RCVBUF, capped at twice `net.core.rmem_max` (SO_RCVBUFFORCE passes the cap only
//! with CAP_NET_ADMIN). quic-go (Caddy) asks for 7 MB; nginx keeps the kernel's default
//! (`net.core.rmem_default`) unless `listen … rcvbuf=` says otherwise.

use super::{fact, finding, ramp, Ctx, FindingId};
use crate::diagnose::kinds::Knob;
use crate::run::Counter;
use crate::run::{Finding, Kind, UdpWindow};

/// Drops below this share of the datagrams received are not worth a finding: QUIC
/// recovers a few losses without the client noticing.
const NOTICED: f64 = 0.005;
/// From this share on, QUIC's loss recovery (a probe timeout, a halved congestion
/// window per loss episode) sets the pace: the drops are the bottleneck.
const BOTTLENECK: f64 = 0.05;
/// Fewer dropped datagrams than this over a run is noise whatever the share.
const MIN_DROPS: u64 = 100;
/// What quic-go asks for, and the value its documentation gives for
/// `net.core.rmem_max` (bytes).
const QUIC_GO_RCVBUF: u64 = 7_500_000;

/// The run's UDP evidence.
fn udp<'a>(c: &Ctx<'a>) -> Option<&'a UdpWindow> {
    c.ev?.window.udp.as_ref()
}

/// The server's UDP sockets dropped datagrams at their full receive buffer.
pub(super) fn udp_receive_buffer_drops(c: &Ctx) -> Option<Finding> {
    let w = udp(c)?;
    let total = w.total();
    // The server's own sockets' drops where they were watched; the namespace's
    // counter otherwise (sock_diag unavailable: the drops may be another program's).
    let own = !w.sockets.is_empty();
    let drops = if own {
        w.socket_drops()
    } else {
        total.rcvbuf_errors
    };
    let received = total.in_datagrams + drops.max(total.rcvbuf_errors);
    let share = drops as f64 / received.max(1) as f64;
    if drops < MIN_DROPS || share < NOTICED {
        return None;
    }
    let (kind, confidence) = if share >= BOTTLENECK && own {
        (Kind::Bottleneck, ramp(share, BOTTLENECK, 0.3).max(0.6))
    } else {
        (Kind::Warning, ramp(share, NOTICED, BOTTLENECK).max(0.3))
    };
    let sock = w.sockets.iter().max_by_key(|s| s.drops);
    let server = c
        .front_workers()
        .first()
        .map_or("the server".into(), |p| p.comm.clone());
    let mut f =
        finding(
            FindingId::UdpReceiveBufferDrops,
            kind,
            confidence,
            format!(
            "{}{} dropped {:.1}% of the datagrams sent to it: its UDP receive buffer{} was full",
            if own { server.as_str() } else { "the server's machine" },
            sock.map(|s| format!(" ({})", s.addr)).unwrap_or_default(),
            share * 100.0,
            sock.map(|s| format!(" ({:.0} KiB)", s.rcvbuf_bytes as f64 / 1024.0))
                .unwrap_or_default(),
        ),
        );
    f.evidence = vec![
        Counter::UdpRcvbufErrors.fact(total.rcvbuf_errors as f64),
        Counter::UdpInDatagrams.fact(total.in_datagrams as f64),
        Counter::UdpInErrors.fact(total.in_errors as f64),
        fact("datagrams dropped", share * 100.0, "%"),
    ];
    if let Some(s) = sock {
        f.evidence.extend([
            fact(
                "server's UDP socket drops (skmem d)",
                s.drops as f64,
                "datagrams",
            ),
            fact(
                "socket receive buffer (sk_rcvbuf)",
                s.rcvbuf_bytes as f64,
                "bytes",
            ),
            fact(
                "receive queue, highest",
                s.receive_queue_max_bytes as f64,
                "bytes",
            ),
        ]);
    }
    let rmem_max = c.sysctl("net.core.rmem_max");
    if let Some(v) = rmem_max.and_then(|v| v.parse::<f64>().ok()) {
        f.evidence.push(fact("net.core.rmem_max", v, "bytes"));
    }
    f.explanation = format!(
        "A datagram that finds its socket's receive buffer full is dropped by the kernel before the server sees it (RcvbufErrors, the socket's drop count). The server read its {} socket more slowly than the datagrams came{}, and {} of {} datagrams were lost; QUIC retransmits each after its probe timeout and halves its congestion window, so its connections slow down however idle the server's CPU.",
        sock.map_or("UDP".into(), |s| s.addr.clone()),
        sock.map(|s| format!(
            " into a {:.0} KiB buffer (the queue reached {:.0} KiB)",
            s.rcvbuf_bytes as f64 / 1024.0,
            s.receive_queue_max_bytes as f64 / 1024.0
        ))
        .unwrap_or_default(),
        drops,
        received
    );
    let now = rmem_max.map(|v| format!(" (now {v})")).unwrap_or_default();
    // A buffer below the kernel's cap was set small on the socket itself (SO_RCVBUF
    // gives twice what is asked, at most twice rmem_max): the cap is not what to raise.
    let below_cap = match (sock, rmem_max.and_then(|v| v.parse::<f64>().ok())) {
        (Some(s), Some(max)) => (s.rcvbuf_bytes as f64) < max,
        _ => false,
    };
    if let (true, Some(s)) = (below_cap, sock) {
        f.fix = format!(
            "the socket's buffer ({:.0} KiB) is far below what the kernel allows (net.core.rmem_max {}): it was set small on the socket; size it in the server: {}",
            s.rcvbuf_bytes as f64 / 1024.0,
            rmem_max.unwrap_or_default(),
            c.knob(Knob::UdpBuffer)
                .unwrap_or_else(|| "its SO_RCVBUF setting".into())
        );
        return Some(f);
    }
    f.fix = match c.knob(Knob::UdpBuffer) {
        Some(k) => format!(
            "{k}; `sysctl -w net.core.rmem_max={QUIC_GO_RCVBUF}`{now} so the server's buffer can grow past the kernel's cap"
        ),
        None => format!(
            "raise the server's UDP receive buffer (SO_RCVBUF) and the kernel's cap on it, `sysctl -w net.core.rmem_max={QUIC_GO_RCVBUF}`{now}"
        ),
    };
    Some(f)
}

/// Functions of the crypto a QUIC server spends its CPU on: OpenSSL/BoringSSL's
/// (nginx), Go's `crypto/…` and `golang.org/x/crypto` (quic-go in Caddy), rustls' ring.
pub fn quic_crypto(name: &str, kernel: bool) -> bool {
    !kernel
        && (name.starts_with("[libcrypto")
            || name.starts_with("[libssl")
            || name.starts_with("crypto/")
            || name.starts_with("golang.org/x/crypto")
            || name.starts_with("vendor/golang.org/x/crypto")
            || name.starts_with("ring::")
            || [
                "EVP_", "aesni_", "aes_gcm", "gcm_", "ChaCha20", "chacha20", "poly1305", "x25519",
                "X25519", "ecp_", "sha256_", "ossl_",
            ]
            .iter()
            .any(|p| name.starts_with(p)))
}

/// The busiest front process's CPU at the share where it holds the pace: a QUIC
/// server does per packet what a TCP server leaves to the kernel (crypto, ACKs, loss
/// recovery, pacing), so its CPU is its limit long before the network's.
const CPU_LIMIT_PCT: f64 = 90.0;
/// The datagrams a second that make the server a UDP server in this run (a QUIC
/// connection at work sends hundreds; a DNS lookup a few).
const QUIC_DATAGRAMS_PER_S: f64 = 200.0;

/// A UDP/QUIC server at its CPU's limit.
pub(super) fn quic_server_cpu_bound(c: &Ctx) -> Option<Finding> {
    let w = udp(c)?;
    if w.sockets.is_empty() {
        return None;
    }
    let dt = c.ev?.window.duration_s.max(1e-9);
    let total = w.total();
    let per_s = (total.in_datagrams + total.out_datagrams) as f64 / dt;
    if per_s < QUIC_DATAGRAMS_PER_S {
        return None;
    }
    let p = c
        .front_workers()
        .into_iter()
        .max_by(|a, b| c.worker_load_pct(a).total_cmp(&c.worker_load_pct(b)))?;
    let load = c.worker_load_pct(p);
    if load < CPU_LIMIT_PCT {
        return None;
    }
    let mut f = finding(
        FindingId::QuicServerCpuBound,
        Kind::Bottleneck,
        ramp(load, CPU_LIMIT_PCT, 100.0).max(0.6),
        format!(
            "{} serves UDP (QUIC) at its CPU's limit: {:.0}% of the {:.0} core(s) it can use",
            p.label(),
            load,
            c.worker_cores(p)
        ),
    );
    f.evidence = vec![
        fact(&format!("{} CPU", p.label()), p.cpu_pct, "%"),
        fact("of the cores it can use", load, "%"),
        fact("system CPU", p.system_pct, "%"),
        fact("UDP datagrams in and out", per_s, "/s"),
    ];
    let crypto = super::profile::profiled(c).map(|(prof, pids)| {
        prof.share(&pids, quic_crypto)
            .max(prof.self_share(&pids, quic_crypto))
    });
    if let Some(share) = crypto {
        f.evidence
            .push(fact("profile: samples in crypto", share, "%"));
    }
    f.explanation = format!(
        "A QUIC server encrypts and decrypts every packet itself, acknowledges, paces and recovers losses in user space, and makes a system call per datagram where it cannot batch them (GSO/GRO): per byte it costs several times what TCP with TLS does. {} ran at {load:.0}% of its cores while {per_s:.0} datagrams a second came and went{}.",
        p.label(),
        match crypto {
            Some(s) => format!("; its profile spent {s:.0}% in crypto"),
            None => "; profile it (`--profile`) to see how much of it is crypto".into(),
        }
    );
    let workers = c
        .knob(Knob::Workers)
        .map(|k| format!("give it more cores ({k})"))
        .unwrap_or_else(|| "give it more cores".into());
    f.fix = format!(
        "{workers}; keep QUIC connections long (many requests each: a handshake is public-key crypto), prefer AES-GCM where the CPU has AES-NI; let the kernel batch datagrams (UDP GSO/GRO: `ethtool -K IFACE rx-udp-gro-forwarding on`)"
    );
    Some(f)
}

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{fires, fixture};
    use crate::run::{Kind, Run, UdpCounters, UdpSocketWindow, UdpWindow};

    /// The healthy lab Run with a UDP server socket that received `received` datagrams
    /// over the window and dropped `dropped` of them at its buffer.
    fn with_udp(received: u64, dropped: u64) -> Run {
        let mut run = fixture("healthy-before");
        let ev = run.evidence.as_mut().unwrap();
        ev.host
            .sysctls
            .insert("net.core.rmem_max".into(), "4096".into());
        ev.window.udp = Some(UdpWindow {
            v4: UdpCounters {
                in_datagrams: received - dropped,
                out_datagrams: 10,
                in_errors: dropped,
                rcvbuf_errors: dropped,
                sndbuf_errors: 0,
            },
            v6: UdpCounters::default(),
            sockets: vec![UdpSocketWindow {
                addr: "0.0.0.0:8443".into(),
                port: 8443,
                rcvbuf_bytes: 8_192,
                sndbuf_bytes: 8_192,
                receive_queue_max_bytes: 8_192,
                send_queue_max_bytes: 0,
                drops: dropped,
                samples: 5,
            }],
        });
        run
    }

    fn drops(run: &Run) -> Option<crate::run::Finding> {
        crate::diagnose::diagnose(run)
            .into_iter()
            .find(|f| f.id == "udp-receive-buffer-drops")
    }

    #[test]
    fn drops_are_a_bottleneck_only_as_a_real_share_of_the_datagrams() {
        // 0.2%: QUIC recovers unseen.
        assert!(drops(&with_udp(100_000, 200)).is_none());
        // 1%: noticed, a warning.
        let f = drops(&with_udp(100_000, 1_000)).unwrap();
        assert_eq!(f.kind, Kind::Warning);
        // 40%: the bottleneck, citing the counter, the buffer and the sysctl.
        let f = drops(&with_udp(100_000, 40_000)).unwrap();
        assert_eq!(f.kind, Kind::Bottleneck, "{f:?}");
        assert!(f.title.contains("40.0%"), "{}", f.title);
        let cited = |n: &str| f.evidence.iter().any(|e| e.name == n);
        assert!(cited("Udp.RcvbufErrors") && cited("socket receive buffer (sk_rcvbuf)"));
        assert!(cited("net.core.rmem_max"));
        assert!(
            f.fix.contains("net.core.rmem_max=7500000` (now 4096)"),
            "{}",
            f.fix
        );
        // A few drops in a short run: noise whatever the share.
        assert!(drops(&with_udp(200, 50)).is_none());
    }

    fn udp(run: &mut Run) -> &mut UdpWindow {
        run.evidence.as_mut().unwrap().window.udp.as_mut().unwrap()
    }

    #[test]
    fn drops_of_other_sockets_are_not_the_servers() {
        // The namespace dropped datagrams, but not at the server's socket.
        let mut run = with_udp(100_000, 40_000);
        udp(&mut run).sockets[0].drops = 0;
        assert!(drops(&run).is_none());
        // No socket watched: the namespace's counter, a warning at most.
        udp(&mut run).sockets.clear();
        assert_eq!(drops(&run).unwrap().kind, Kind::Warning);
    }

    #[test]
    fn a_buffer_set_small_below_the_cap_is_not_the_sysctls() {
        let mut run = with_udp(100_000, 40_000);
        run.evidence
            .as_mut()
            .unwrap()
            .host
            .sysctls
            .insert("net.core.rmem_max".into(), "4194304".into());
        let f = drops(&run).unwrap();
        assert!(
            f.fix.contains("far below what the kernel allows"),
            "{}",
            f.fix
        );
        assert!(!f.fix.contains("sysctl -w"), "{}", f.fix);
    }

    #[test]
    fn the_fix_is_in_the_servers_words() {
        let mut run = with_udp(100_000, 40_000);
        for p in &mut run.evidence.as_mut().unwrap().topology.processes {
            p.kind = crate::kinds::caddy::KIND;
        }
        assert!(drops(&run).unwrap().fix.contains("quic-go"));
        for p in &mut run.evidence.as_mut().unwrap().topology.processes {
            p.kind = crate::kinds::nginx::KIND;
        }
        assert!(drops(&run).unwrap().fix.contains("rcvbuf="));
    }

    /// The UDP Run with the front's busiest process at `cpu_pct` of one core, the
    /// server allowed `cores`.
    fn busy(cpu_pct: f64, cores: u32) -> Run {
        let mut run = with_udp(100_000, 0);
        let ev = run.evidence.as_mut().unwrap();
        ev.host.server_cpus = (0..cores).collect();
        for p in &mut ev.window.processes {
            p.cpu_pct = cpu_pct;
            p.run_delay_ms_per_s = Some(0.0);
            p.busiest_thread_pct = None;
        }
        run
    }

    #[test]
    fn a_quic_server_at_its_cpus_limit() {
        let threads = fixture("healthy-before").evidence.unwrap().window.processes[0].threads;
        assert_eq!(threads, 1, "the fixture's worker is one thread");
        assert!(fires(&busy(98.0, 1), "quic-server-cpu-bound"));
        assert!(!fires(&busy(60.0, 1), "quic-server-cpu-bound"));
        // No datagrams to speak of: a TCP server at its limit is another rule's.
        let mut run = busy(98.0, 1);
        udp(&mut run).v4.in_datagrams = 10;
        udp(&mut run).v4.out_datagrams = 10;
        assert!(!fires(&run, "quic-server-cpu-bound"));
    }

    #[test]
    fn go_and_openssl_crypto_count_as_crypto() {
        use super::quic_crypto;
        assert!(quic_crypto(
            "crypto/internal/fips140/aes/gcm.(*GCM).Seal",
            false
        ));
        assert!(quic_crypto(
            "golang.org/x/crypto/chacha20poly1305.(*chacha20poly1305).seal",
            false
        ));
        assert!(quic_crypto("[libcrypto.so.3]", false));
        assert!(!quic_crypto("net.(*UDPConn).ReadMsgUDP", false));
        assert!(!quic_crypto("aesni_gcm_encrypt", true));
    }
}
