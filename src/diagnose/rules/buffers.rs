//! Responses moved in pieces far smaller than they are: proxy buffers too small for
//! the upstream's responses, static files copied through nginx's output buffers.

use super::{fact, finding, ramp, Ctx, FindingId};
use crate::run::{Finding, Kind};

/// A proxying worker reads each response in many small pieces: proxy_buffers far
/// smaller than the responses (the published case: readv of 4 KiB for 91 KiB bodies).
pub(super) fn small_proxy_buffers(c: &Ctx) -> Option<Finding> {
    let size = c.response_bytes();
    let rps = c.run.results.requests_per_s.max(1e-9);
    let w = c
        .front_workers()
        .into_iter()
        .filter(|p| p.bytes_per_read.is_some() && p.reads_per_s.is_some())
        .max_by(|a, b| {
            a.reads_per_s
                .unwrap_or(0.0)
                .total_cmp(&b.reads_per_s.unwrap_or(0.0))
        })?;
    let bpr = w.bytes_per_read?;
    let reads_per_response = w.reads_per_s? / rps;
    // Only a proxy: a static server reading a large file in output_buffers-sized pieces
    // is not this.
    if !c.proxies() {
        return None;
    }
    // Judged against the response: several reads per response, each a small part of it.
    if size < 16_384.0 || reads_per_response < 3.0 || bpr > size / 4.0 {
        return None;
    }
    let mut f = finding(
        FindingId::SmallProxyBuffers,
        Kind::Bottleneck,
        ramp(size / bpr, 4.0, 16.0),
        format!("{} reads responses in small pieces", w.label()),
    );
    f.evidence = vec![
        fact("response size", size, "bytes"),
        fact("bytes per read syscall", bpr, "bytes"),
        fact("reads per response", reads_per_response, "syscalls"),
        fact("worker CPU", w.cpu_pct, "%"),
    ];
    f.explanation = "The proxy reads the upstream response into its proxy buffers; buffers far smaller than the response mean one readv (and a matching writev to the client) per few KiB, so the worker spends its CPU on syscalls instead of moving data.".into();
    f.fix = format!(
        "size the buffers to the responses: `proxy_buffer_size 128k; proxy_buffers 8 128k; proxy_busy_buffers_size 128k;`{} (responses here average {:.0} KiB; now about {:.0} KiB per read)",
        c.now("proxy_buffers"),
        size / 1024.0,
        bpr / 1024.0
    );
    Some(f)
}

/// nginx serving large static files with `sendfile` off: each file is read into its
/// output buffers (`output_buffers`, 2 × 32 KiB by default) and written out again,
/// two system calls and two copies per piece, where `sendfile on;` hands the file to
/// the kernel. Judged only for a busy worker: an idle one has the CPU to spare.
pub(super) fn sendfile_off(c: &Ctx) -> Option<Finding> {
    let sendfile = c.nginx("sendfile")?;
    if sendfile
        .as_deref()
        .is_some_and(|v| v.split(" | ").any(|v| v == "on"))
    {
        return None;
    }
    // A static server: nothing proxied.
    if c.proxies() {
        return None;
    }
    let size = c.response_bytes();
    let rps = c.run.results.requests_per_s.max(1e-9);
    let w = c
        .front_workers()
        .into_iter()
        .max_by(|a, b| a.cpu_demand_pct().total_cmp(&b.cpu_demand_pct()))?;
    let bpr = w.bytes_per_read?;
    let reads = w.reads_per_s? / rps;
    if size < 32_768.0 || w.cpu_demand_pct() < 80.0 || reads < 2.0 || bpr > size / 2.0 {
        return None;
    }
    // In few pieces the copy is a share of the cost (nginx's default buffers: ~20% on a
    // 91 KiB file); in many, the cost itself (4 KiB buffers: an eighth of the rate).
    let kind = if reads >= 4.0 {
        Kind::Bottleneck
    } else {
        Kind::Warning
    };
    let mut f = finding(
        FindingId::SendfileOff,
        kind,
        ramp(reads, 2.0, 16.0),
        format!(
            "{} copies each {:.0} KiB file through user space in {:.0} reads and writes (sendfile off)",
            w.label(),
            size / 1024.0,
            reads
        ),
    );
    f.evidence = vec![
        fact("response size", size, "bytes"),
        fact("file reads per response", reads, "syscalls"),
        fact("bytes per read syscall", bpr, "bytes"),
        fact("worker CPU", w.cpu_pct, "%"),
    ];
    f.explanation = format!(
        "With `sendfile` off nginx reads each file into its output buffers and writes it to the socket, piece by piece: {reads:.0} reads of {:.0} KiB and as many writes per response, each copying the data once more, on a worker at {:.0}% of a core. `sendfile` lets the kernel send the file's pages itself, in one call per socket-buffer's worth.",
        bpr / 1024.0,
        w.cpu_demand_pct().min(100.0)
    );
    f.fix = format!(
        "`sendfile on;`{} (with `tcp_nopush on;`); where sendfile cannot be used (a filesystem without it), larger buffers: `output_buffers 2 256k;`{}",
        c.now("sendfile"),
        c.now("output_buffers")
    );
    Some(f)
}

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{fires, fixture};

    #[test]
    fn near_miss_proxy_buffers() {
        // Reads of a third of the response: not "far smaller".
        let mut run = fixture("proxy-buffers-before");
        let size = run.results.bytes_read as f64 / run.results.responses as f64;
        for p in run.evidence.as_mut().unwrap().window.processes.iter_mut() {
            p.bytes_per_read = Some(size / 3.0);
        }
        assert!(!fires(&run, "small-proxy-buffers"));
    }
}
