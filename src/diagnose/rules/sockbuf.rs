//! Socket buffers too small for the responses: the server's send buffer, or the
//! receiving client's window. Judged from the server's side of its connections
//! (sock_diag): how long they had data to send, what held them back, and the buffers.

use super::{fact, finding, ramp, Ctx, FindingId};
use crate::run::{ConnWindow, Finding, Kind};

/// The Linux defaults, quoted in the fixes.
const TCP_WMEM_DEFAULT: &str = "4096 16384 4194304";
const TCP_RMEM_DEFAULT: &str = "4096 131072 6291456";

/// The server's connections and the share of the window they spent sending (summed
/// over connections, so 1.0 = every connection sending all the time), when they were
/// sending most of it: with buffers sized to the responses, sending a response on
/// loopback or a LAN takes a small part of a request's time.
fn sending<'a>(c: &Ctx<'a>) -> Option<(&'a ConnWindow, f64)> {
    let w = c.ev?.window.server_connections.as_ref()?;
    let open_ms = w.sockets_max as f64 * c.ev?.window.duration_s * 1e3;
    if w.samples == 0 || open_ms <= 0.0 {
        return None;
    }
    let busy = w.busy_ms / open_ms;
    (busy >= 0.3).then_some((w, busy))
}

/// The server's name for a title: "nginx", or "the server".
fn server(c: &Ctx) -> String {
    c.front_workers()
        .first()
        .map_or("the server".into(), |p| p.comm.clone())
}

/// The server's sockets may hold far less than a response: each response leaves in
/// buffer-sized pieces, one round trip (often a delayed ACK) apart, while the CPU idles.
pub(super) fn small_send_buffer(c: &Ctx) -> Option<Finding> {
    let (w, busy) = sending(c)?;
    let size = c.response_bytes();
    let buf = w.send_buffer_bytes as f64;
    if buf <= 0.0 || size < 2.0 * buf {
        return None;
    }
    // Held by the receiver instead: that is the other rule's.
    if w.rwnd_limited_ms > 0.3 * w.busy_ms {
        return None;
    }
    let wmem = c.sysctl("net.ipv4.tcp_wmem");
    let wmem_max = wmem
        .and_then(|v| v.split_whitespace().nth(2))
        .and_then(|v| v.parse::<f64>().ok());
    let listen_sndbuf = c
        .nginx("listen")
        .flatten()
        .filter(|l| l.contains("sndbuf="));
    // The buffer must be held small, not still growing: set by the server, capped by
    // the sysctl, or at most 32 KiB — the kernel starts a connection at tcp_wmem's
    // default (16 KiB) and grows it with the congestion window, past 64 KiB within the
    // first round trips of a large response even on a 1500-byte-MTU link.
    let capped = wmem_max.is_some_and(|m| m < size);
    if listen_sndbuf.is_none() && !capped && buf > 32_768.0 {
        return None;
    }
    let name = server(c);
    let mut f = finding(
        FindingId::SmallSendBuffer,
        Kind::Bottleneck,
        ramp(size / buf, 2.0, 8.0),
        format!(
            "{name}'s sockets send through a {:.0} KiB buffer: {:.0} KiB responses wait for ACKs",
            buf / 1024.0,
            size / 1024.0
        ),
    );
    f.evidence = vec![
        fact("socket send buffer (sk_sndbuf)", buf, "bytes"),
        fact("response size", size, "bytes"),
        fact("connections' time spent sending", busy * 100.0, "%"),
        fact("round-trip time (smoothed)", w.rtt_us as f64 / 1e3, "ms"),
    ];
    let cpu = c
        .front_workers()
        .iter()
        .map(|p| p.cpu_pct)
        .fold(0.0, f64::max);
    f.explanation = format!(
        "A socket holds at most its send buffer of data not yet acknowledged: with {:.0} KiB for {:.0} KiB responses, each response leaves in {:.0} pieces, each waiting for the client's ACK (often a delayed one), so the connections spent {:.0}% of the run sending{}. The round trip grew to {:.1} ms.",
        buf / 1024.0,
        size / 1024.0,
        (size / buf).ceil(),
        busy * 100.0,
        if cpu < 50.0 {
            format!(" while the server's CPU waited (busiest worker {cpu:.0}%)")
        } else {
            format!(" and the workers' CPU ({cpu:.0}%) went to moving it in small pieces")
        },
        w.rtt_us as f64 / 1e3
    );
    f.fix = match (listen_sndbuf, wmem_max) {
        (Some(l), _) => format!(
            "remove `sndbuf=` from nginx's `listen` (now `listen {l}`) so the kernel sizes the buffer, or set it above the responses"
        ),
        (None, Some(_)) if capped => format!(
            "`sysctl -w net.ipv4.tcp_wmem=\"{TCP_WMEM_DEFAULT}\"` on the server (the kernel's default; now \"{}\"), so the buffer grows with the connection",
            wmem.unwrap_or_default()
        ),
        _ => "the server sets its sockets' buffer itself (`setsockopt(SO_SNDBUF)`, a `sndbuf` option): remove it so the kernel sizes the buffer, or size it above the responses".into(),
    };
    Some(f)
}

/// The receiver's advertised window held the server back: the client's receive buffer
/// is too small for the responses. The client is the load generator: its limit, not
/// the server's.
pub(super) fn client_receive_window(c: &Ctx) -> Option<Finding> {
    let (w, busy) = sending(c)?;
    let held = w.rwnd_limited_ms / w.busy_ms.max(1e-9);
    if held < 0.3 {
        return None;
    }
    let size = c.response_bytes();
    let window = w.peer_window_bytes as f64;
    let mut f = finding(
        FindingId::ClientReceiveWindow,
        Kind::Bottleneck,
        ramp(held, 0.3, 0.6),
        format!(
            "the client's receive window{} held {}'s sending back {:.0}% of the time",
            if window > 0.0 {
                format!(" ({:.0} KiB)", window / 1024.0)
            } else {
                String::new()
            },
            server(c),
            held * 100.0
        ),
    );
    f.evidence = vec![
        fact("sending time held by the receive window", held * 100.0, "%"),
        fact("connections' time spent sending", busy * 100.0, "%"),
        fact("response size", size, "bytes"),
    ];
    if window > 0.0 {
        f.evidence
            .push(fact("client's advertised window", window, "bytes"));
    }
    // Where the server is in loadlens's own namespace, the sysctls read are the
    // client's too.
    let same_ns = c.ev.is_some_and(|e| e.topology.netns == "loadlens");
    let now = c
        .sysctl("net.ipv4.tcp_rmem")
        .filter(|_| same_ns)
        .map(|v| format!("; now \"{v}\""))
        .unwrap_or_default();
    f.explanation = format!(
        "The server had responses to send and room in its congestion window, but the receiver's advertised window was full: the receiving socket's buffer is too small for {:.0} KiB responses, so the server waited for the client to read. The client here is loadlens: this is the load generator's limit, not the server's, and the rates are a floor.",
        size / 1024.0
    );
    f.fix = format!(
        "raise the load generator's receive buffers: `sysctl -w net.ipv4.tcp_rmem=\"{TCP_RMEM_DEFAULT}\"` on its machine or in its namespace (the kernel's default{now})"
    );
    Some(f)
}

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{fires, fixture};
    use crate::run::{ConnWindow, Run};

    /// The healthy lab Run with 200 KiB responses and these connections: ten, sending
    /// `busy` of a window, held by the receive window for `rwnd` of that.
    fn with_conns(send_buffer: u32, busy: f64, rwnd: f64) -> Run {
        let mut run = fixture("healthy-before");
        run.results.bytes_read = run.results.responses * 204_800;
        let ev = run.evidence.as_mut().unwrap();
        let open_ms = 10.0 * ev.window.duration_s * 1e3;
        ev.window.server_connections = Some(ConnWindow {
            samples: 3,
            sockets_max: 10,
            send_buffer_bytes: send_buffer,
            peer_window_bytes: 6_272,
            rtt_us: 20_000,
            busy_ms: busy * open_ms,
            rwnd_limited_ms: rwnd * busy * open_ms,
            sndbuf_limited_ms: 0.0,
        });
        run
    }

    #[test]
    fn a_small_buffer_fires_only_when_the_connections_were_sending() {
        assert!(fires(&with_conns(8_192, 0.9, 0.0), "small-send-buffer"));
        // Sending a tenth of the time: the buffer held nothing back.
        assert!(!fires(&with_conns(8_192, 0.1, 0.0), "small-send-buffer"));
        // A buffer the kernel is still growing (not capped by tcp_wmem in this Run, no
        // `sndbuf=`): not this.
        assert!(!fires(&with_conns(65_536, 0.9, 0.0), "small-send-buffer"));
    }

    #[test]
    fn held_by_the_receivers_window_is_the_client_not_the_send_buffer() {
        let run = with_conns(8_192, 0.9, 0.6);
        assert!(fires(&run, "client-receive-window"));
        assert!(!fires(&run, "small-send-buffer"));
        assert!(!fires(
            &with_conns(4_000_000, 0.9, 0.2),
            "client-receive-window"
        ));
    }
}
