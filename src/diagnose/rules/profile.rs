//! Where the server's CPU went, from the profile (`--profile`): the kernel's network
//! stack, the allocator, compression, TLS, many small syscalls. Each is judged on the
//! front workers' samples and cites its share; without a profile none fires.

use super::{fact, finding, ramp, Ctx, FindingId};
use crate::run::{Finding, Kind, Profile};

/// Fewer samples than this (a second at 99 Hz, half a core busy) say too little.
const MIN_SAMPLES: u64 = 50;

/// The profile and the front workers it sampled, when there is enough of it.
pub(super) fn profiled<'a>(c: &Ctx<'a>) -> Option<(&'a Profile, Vec<i32>)> {
    let p = c.ev?.profile.as_ref()?;
    let pids: Vec<i32> = c
        .front_workers()
        .iter()
        .map(|w| w.pid)
        .filter(|&pid| p.samples_of(&[pid]) > 0)
        .collect();
    (!pids.is_empty() && p.samples_of(&pids) >= MIN_SAMPLES).then_some((p, pids))
}

/// Kernel functions of the TCP/IP send and receive paths, the socket layer and packet
/// devices (loopback and veth included: their cost is the sender's).
pub fn network_stack(name: &str, kernel: bool) -> bool {
    const PREFIXES: &[&str] = &[
        "tcp_",
        "__tcp_",
        "inet_",
        "__inet_",
        "inet6_",
        "ip_",
        "__ip_",
        "ip6_",
        "ipv6_",
        "sock_",
        "__sock_",
        "sk_",
        "__sk_",
        "skb_",
        "__skb_",
        "kfree_skb",
        "__kfree_skb",
        "net_rx_action",
        "__netif_",
        "netif_",
        "napi_",
        "__napi_",
        "__dev_queue_xmit",
        "dev_hard_start_xmit",
        "veth_",
        "loopback_xmit",
        "nf_",
        "__sys_accept",
        "__sys_connect",
        "__sys_sendto",
        "__sys_recvfrom",
        "do_tcp_",
        "process_backlog",
        "__x64_sys_sendfile",
        "__x64_sys_accept",
        "__x64_sys_writev",
        "__x64_sys_readv",
    ];
    kernel && PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The port search of connect() past TIME_WAIT entries.
pub fn connect_port_search(name: &str, kernel: bool) -> bool {
    kernel
        && matches!(
            name,
            "inet_hash_connect" | "__inet_hash_connect" | "__inet_check_established"
        )
}

fn allocator(name: &str, kernel: bool) -> bool {
    !kernel
        && (matches!(
            name,
            "malloc"
                | "free"
                | "cfree"
                | "calloc"
                | "realloc"
                | "_int_malloc"
                | "_int_free"
                | "_int_realloc"
                | "malloc_consolidate"
                | "__libc_malloc"
                | "__libc_free"
                | "__libc_calloc"
                | "__libc_realloc"
                | "unlink_chunk"
                | "tcache_init"
                | "_int_free_merge_chunk"
                | "_int_free_create_chunk"
                | "_int_free_maybe_consolidate"
        ) || name.starts_with("malloc_"))
}

fn compression(name: &str, kernel: bool) -> bool {
    !kernel
        && (name.starts_with("deflate")
            || name.starts_with("[libz.")
            || matches!(
                name,
                "longest_match"
                    | "fill_window"
                    | "compress_block"
                    | "send_bits"
                    | "crc32"
                    | "crc32_z"
                    | "adler32"
                    | "adler32_z"
                    | "build_tree"
                    | "pqdownheap"
            )
            || name.starts_with("_tr_")
            || name.starts_with("crc32_")
            || name.starts_with("BrotliEncoder"))
}

fn tls(name: &str, kernel: bool) -> bool {
    !kernel
        && (name.starts_with("[libcrypto")
            || name.starts_with("[libssl")
            || [
                "SSL_", "ssl3_", "tls1_", "tls_", "EVP_", "ossl_", "BN_", "bn_", "RSA_", "EC_",
                "ecp_", "aesni_", "sha256_", "sha512_", "gcm_", "ChaCha20", "x25519", "X25519",
            ]
            .iter()
            .any(|p| name.starts_with(p)))
}

fn syscall_entry(name: &str, kernel: bool) -> bool {
    kernel
        && matches!(
            name,
            "do_syscall_64" | "entry_SYSCALL_64" | "entry_SYSCALL_64_after_hwframe"
        )
}

/// A finding citing the share of the workers' samples.
fn from_share(id: FindingId, title: String, share: f64, what: &str, samples: u64) -> Finding {
    let mut f = finding(id, Kind::Warning, ramp(share, 0.0, 100.0).max(0.5), title);
    f.evidence = vec![
        fact(&format!("profile: worker samples in {what}"), share, "%"),
        fact("profile: worker samples", samples as f64, "samples"),
    ];
    f
}

/// The kernel's TCP/IP stack takes most of the workers' CPU.
pub(super) fn kernel_network_stack(c: &Ctx) -> Option<Finding> {
    let (p, pids) = profiled(c)?;
    // connect()'s port search is its own finding (time-wait-connect-cost).
    if p.share(&pids, connect_port_search) >= 10.0 {
        return None;
    }
    let share = p.share(&pids, network_stack);
    // Most of the worker's kernel time, and 40% of all its time, in the network stack:
    // user space is no longer the cost.
    if share < 40.0 {
        return None;
    }
    let mut f = from_share(
        FindingId::KernelNetworkStack,
        format!("{share:.0}% of the workers' CPU is the kernel's TCP/IP stack"),
        share,
        "the kernel network stack (tcp_*, ip_*, sock_*, skb_*, netif_*)",
        p.samples_of(&pids),
    );
    f.explanation = "The profile shows the workers' time going to the kernel sending and receiving (system calls into the TCP/IP stack, packet processing), not to the server's own code: user-space tuning will gain little. This is where a well-tuned static server ends up (the published evaluation's 'the bottleneck is the kernel TCP stack').".into();
    f.fix = format!(
        "fewer, larger writes and fewer packets: `sendfile on; tcp_nopush on;`{} for files, keep-alive (fewer handshakes), `reuseport` on the listen socket and one worker per core; beyond that more cores or NIC queues, or a kernel-bypass stack",
        c.now("sendfile")
    );
    Some(f)
}

/// malloc/free hot in the workers' own code.
pub(super) fn allocator_hot(c: &Ctx) -> Option<Finding> {
    let (p, pids) = profiled(c)?;
    let share = p.self_share(&pids, allocator);
    if share < 8.0 {
        return None;
    }
    let mut f = from_share(
        FindingId::AllocatorHot,
        format!("{share:.0}% of the workers' CPU is in malloc/free"),
        share,
        "malloc/free (self)",
        p.samples_of(&pids),
    );
    f.explanation = "The workers spend a visible share of their CPU allocating and freeing memory in glibc's malloc; a faster allocator gives it back (the published evaluation measured +8% with jemalloc).".into();
    f.fix = "try jemalloc or tcmalloc: `LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2` in the server's environment (Debian: libjemalloc2), then compare the two runs with `loadlens compare`".into();
    Some(f)
}

/// Compression (zlib's deflate) takes a large share of the workers' CPU.
pub(super) fn compression_cpu(c: &Ctx) -> Option<Finding> {
    let (p, pids) = profiled(c)?;
    let share = p
        .share(&pids, compression)
        .max(p.self_share(&pids, compression));
    if share < 20.0 {
        return None;
    }
    let mut f = from_share(
        FindingId::CompressionCpu,
        format!("{share:.0}% of the workers' CPU is compressing responses (deflate)"),
        share,
        "zlib deflate",
        p.samples_of(&pids),
    );
    f.explanation = "The workers compress responses on the fly and that costs more CPU than serving them; deflate's cost grows fast with the level while the size barely shrinks past 4.".into();
    let level: Option<u32> = c
        .nginx("gzip_comp_level")
        .flatten()
        .and_then(|v| v.split(" | ").filter_map(|x| x.parse().ok()).max());
    f.fix = match level {
        // Already cheap per byte: compress once, not per response.
        Some(l) if l <= 4 => format!(
            "compress once, not per response: serve precompressed files (`gzip_static on;` with .gz beside them) or cache compressed responses (`gzip_comp_level {l}` is already low)"
        ),
        _ => format!(
            "lower `gzip_comp_level`{} to 1–4, serve precompressed files (`gzip_static on;` with .gz beside them), or cache compressed responses",
            c.now("gzip_comp_level")
        ),
    };
    Some(f)
}

/// TLS (handshakes, record crypto) takes a large share of the workers' CPU.
pub(super) fn tls_cpu(c: &Ctx) -> Option<Finding> {
    let (p, pids) = profiled(c)?;
    let share = p.share(&pids, tls).max(p.self_share(&pids, tls));
    if share < 20.0 {
        return None;
    }
    let mut f = from_share(
        FindingId::TlsCpu,
        format!("{share:.0}% of the workers' CPU is TLS (handshakes and crypto)"),
        share,
        "libssl/libcrypto",
        p.samples_of(&pids),
    );
    f.explanation = "The workers spend a large share of their CPU in OpenSSL: full handshakes (public-key operations) cost far more than the bytes they protect when connections are short.".into();
    f.fix = "keep connections alive (`keepalive_requests`, `keepalive_timeout`), resume sessions (`ssl_session_cache shared:SSL:10m; ssl_session_tickets on;`), prefer ECDSA certificates and AES-GCM/ChaCha20 with hardware support".into();
    Some(f)
}

/// Most of the workers' CPU is system calls moving far fewer bytes than a response.
pub(super) fn syscall_bound(c: &Ctx) -> Option<Finding> {
    let (p, pids) = profiled(c)?;
    let share = p.share(&pids, syscall_entry);
    let w = c
        .front_workers()
        .into_iter()
        .max_by(|a, b| a.cpu_pct.total_cmp(&b.cpu_pct))?;
    let per_call = [w.bytes_per_read, w.bytes_per_write]
        .into_iter()
        .flatten()
        .filter(|b| *b > 0.0)
        .fold(f64::INFINITY, f64::min);
    let response = c.response_bytes();
    // Most CPU in syscalls, each moving a quarter of a response or less.
    if share < 60.0 || !per_call.is_finite() || response < 4.0 * per_call || response < 16384.0 {
        return None;
    }
    let mut f = from_share(
        FindingId::SyscallBound,
        format!(
            "{share:.0}% of the workers' CPU is system calls of {:.0} bytes for {:.0}-byte responses",
            per_call, response
        ),
        share,
        "system calls",
        p.samples_of(&pids),
    );
    f.evidence
        .push(fact("bytes per read/write (smallest)", per_call, "bytes"));
    f.evidence
        .push(fact("bytes per response", response, "bytes"));
    f.explanation = "The workers spend most of their CPU entering the kernel, and each call moves only a fraction of a response: the per-call cost, not the bytes, sets the pace.".into();
    f.fix = format!(
        "move more per call: larger buffers (`proxy_buffer_size`/`proxy_buffers`{} for proxied responses, `output_buffers`), `sendfile on;` for files, and upstream keep-alive",
        c.now("proxy_buffers")
    );
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testutil::{fires, fixture, with_profile};

    fn found(run_fixture: &str, profile: &str) -> Vec<Finding> {
        let mut run = fixture(run_fixture);
        with_profile(&mut run, profile);
        crate::diagnose::diagnose(&run)
    }

    fn get<'a>(f: &'a [Finding], id: &str) -> Option<&'a Finding> {
        f.iter().find(|x| x.id == id)
    }

    /// Profiles captured in the lab (`loadlens lab run NAME --json-dir`), each on the
    /// Run recorded from the same scenario.
    #[test]
    fn healthy_static_serving_is_the_kernel_network_stack() {
        let f = found("healthy-before", "healthy");
        let k = get(&f, "kernel-network-stack").expect("kernel-network-stack");
        assert!(k.evidence[0].value >= 40.0, "{k:?}");
        for id in [
            "compression-cpu",
            "allocator-hot",
            "tls-cpu",
            "syscall-bound",
        ] {
            assert!(get(&f, id).is_none(), "{id} on a healthy profile");
        }
        // The CPU finding names the top functions instead of asking for a profile.
        let cpu = get(&f, "server-cpu-saturated").unwrap();
        assert!(
            cpu.fix.contains("the profile's top functions: "),
            "{}",
            cpu.fix
        );
        assert!(!cpu.fix.contains("perf top"), "{}", cpu.fix);
    }

    #[test]
    fn time_wait_is_confirmed_by_the_port_search() {
        let f = found("time-wait-before", "time-wait");
        let tw = get(&f, "time-wait-connect-cost").expect("time-wait-connect-cost");
        let share = tw
            .evidence
            .iter()
            .find(|e| e.name.contains("port search"))
            .expect("the profile's share cited")
            .value;
        assert!(share > 30.0, "{share}");
        assert!(tw.explanation.contains("The profile shows it"));
        // The port search is not reported again as generic network-stack cost.
        assert!(get(&f, "kernel-network-stack").is_none());
    }

    #[test]
    fn gzip_serving_is_compression() {
        let mut run = fixture("healthy-before");
        with_profile(&mut run, "gzip-cpu");
        let f = crate::diagnose::diagnose(&run);
        let z = get(&f, "compression-cpu").expect("compression-cpu");
        assert!(z.evidence[0].value > 80.0, "{z:?}");
        assert!(get(&f, "kernel-network-stack").is_none());
        // Without a profile, none of the profile's findings fire.
        let plain = fixture("healthy-before");
        for id in ["kernel-network-stack", "compression-cpu", "allocator-hot"] {
            assert!(!fires(&plain, id));
        }
    }

    #[test]
    fn frame_classes() {
        assert!(network_stack("tcp_sendmsg_locked", true));
        assert!(!network_stack("tcp_sendmsg_locked", false));
        assert!(!network_stack("_raw_spin_unlock_irqrestore", true));
        assert!(connect_port_search("__inet_check_established", true));
        assert!(allocator("_int_malloc", false));
        assert!(!allocator("ngx_palloc", false));
        assert!(compression("deflate_slow", false));
        assert!(compression("[libz.so.1.2.13]", false));
        assert!(tls("[libcrypto.so.3]", false));
        assert!(syscall_entry("do_syscall_64", true));
    }
}
