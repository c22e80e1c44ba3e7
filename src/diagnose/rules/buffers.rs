//! Proxy buffers too small for the responses they carry.

use super::{fact, finding, ramp, Ctx};
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
    if c.upstream_opens() == 0 {
        return None;
    }
    // Judged against the response: several reads per response, each a small part of it.
    if size < 16_384.0 || reads_per_response < 3.0 || bpr > size / 4.0 {
        return None;
    }
    let mut f = finding(
        "small-proxy-buffers",
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
