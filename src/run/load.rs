//! What the load engine measured: counts, error classes, latency distributions (with
//! their HdrHistograms) and the per-second timeline.

use std::collections::BTreeMap;

use anyhow::Context;
use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Client-side results of the load.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LoadResults {
    /// Length of the load window actually run, seconds.
    pub duration_s: f64,
    /// Complete responses received (any status).
    pub responses: u64,
    /// Bytes read from the server (headers and bodies; for https, decrypted bytes).
    pub bytes_read: u64,
    /// Responses per second over the window.
    pub requests_per_s: f64,
    /// Bytes read per second over the window.
    pub bytes_per_s: f64,
    /// Failures by class; a failed request is not a response.
    pub errors: ErrorCounts,
    /// Connect failures by errno name (`ECONNREFUSED`, `EADDRNOTAVAIL`, `ETIMEDOUT` for a
    /// connect that did not finish within the timeout, ...).
    pub connect_errors: BTreeMap<String, u64>,
    /// Responses by status code.
    pub status_codes: BTreeMap<u16, u64>,
    /// Responses whose status was not 2xx or 3xx (wrk's "Non-2xx or 3xx responses").
    pub non_2xx_3xx: u64,
    /// TCP connections established (and TLS handshakes completed, for https).
    pub connections_opened: u64,
    /// Requests sent (wholly or in part) whose response had not come when the run
    /// ended (`-d` time up, or a signal): not counted as responses or errors, so
    /// responses + errors + in flight = requests sent.
    #[serde(default)]
    pub in_flight_at_end: u64,
    /// Open loop with a schedule by request (rate `--stages`, `--replay` at a speed,
    /// and each HTTP/3 stream's own turn under `-R`): requests the schedule had due
    /// before the run ended that the client had not sent — every connection or stream
    /// was busy, or the client itself was starved of a CPU. Neither sent nor counted
    /// above: responses + errors + in flight + these = the requests due.
    #[serde(default)]
    pub due_unsent_at_end: u64,
    /// Reused connections the server closed before any byte of the next response (its
    /// keep-alive ended without `Connection: close`): not errors; each request was sent
    /// again on a new connection.
    #[serde(default)]
    pub keepalive_closed: u64,
    /// Responses the server followed with bytes nobody asked for (two responses for one
    /// request, or garbage after a response), with one request in flight: a protocol
    /// error of the server. The response is counted; the extra bytes are counted here,
    /// not as a response or an error of a request (responses + errors + in flight =
    /// requests sent still holds), and the connection is reopened (its framing is lost).
    #[serde(default)]
    pub unsolicited: u64,
    /// The protocol the requests were sent with: `http/1.1`, `h2` or `h3`.
    #[serde(default = "http1")]
    pub protocol: String,
    /// The workers' socket I/O: `io_uring` or `epoll`.
    #[serde(default = "epoll")]
    pub io: String,
    /// Why epoll was used where io_uring was asked for or is the default (the kernel
    /// refused the ring, or the run needs TLS or HTTP/2, which only epoll drives).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_note: Option<String>,
    /// The UDP port on which the server offered HTTP/3 in its responses' `Alt-Svc`
    /// (`h3=":PORT"`) during a run over TCP: the same URL can be loaded with `--h3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alt_svc_h3_port: Option<u16>,
    /// The CPUs on which loadlens's own io_uring waits were counted as iowait: on a
    /// kernel without `IORING_FEAT_NO_IOWAIT` (before Linux 6.15) a thread waiting in
    /// the ring shows as iowait in `/proc/stat`. Empty where the waits were entered with
    /// `IORING_ENTER_NO_IOWAIT` (not iowait) or the run used epoll.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub iowait_cpus: Vec<u32>,
    /// HTTP/2: requests in flight per connection (1 for HTTP/1.1).
    #[serde(default = "one")]
    pub streams_per_connection: u32,
    /// HTTP/2 GOAWAY frames received: each ended its connection (not an error); the
    /// streams the server had not processed were sent again on a new connection.
    #[serde(default)]
    pub goaway_received: u64,
    /// Requests per connection in force (`--connreqs`); `None` = keep-alive as long as
    /// the server allows.
    pub requests_per_connection: Option<u32>,
    /// Request latency: first byte of the request written to last byte of the response
    /// read. Closed loop: not corrected for coordinated omission.
    pub latency: LatencySummary,
    /// Connection set-up time (TCP connect, plus the TLS handshake for https).
    pub connect_time: LatencySummary,
    /// Where the time went, phase by phase (`None` in Runs recorded before phases were
    /// measured).
    #[serde(default)]
    pub phases: Option<Phases>,
    /// Per-thread responses per second, sampled each second (wrk's "Req/Sec" line).
    pub thread_requests_per_s: Spread,
    /// One entry per second of the load.
    pub timeline: Vec<Second>,
    /// The load in 100 ms slices: how latency moved within the seconds (a stall of a
    /// few hundred milliseconds is a run of slices with no responses, then one whose
    /// latency jumped). Each slice's percentiles come from its own HdrHistogram, which
    /// is not kept (the seconds keep theirs). Empty in Runs recorded before it was
    /// kept and in Runs merged from segments (their slices cannot be combined exactly).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slices: Vec<Slice>,
    /// `--targets`: results per endpoint, in the targets file's order of first
    /// appearance (absent for a run of one request).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<super::endpoint::EndpointResult>,
    /// `--stages`: results per stage, in order (absent for a load at one rate or one
    /// number of connections).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<super::stages::StageResult>,
    /// `--abort-if-behind`: when and why the load was stopped for falling behind its
    /// schedule; absent when it ran its course.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted: Option<super::stages::Abort>,
    /// HTTP/3 (`--h3`): what the QUIC stack counted over the run's connections
    /// (absent for TCP runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<QuicStats>,
}

/// What the client's QUIC stack (quinn) counted over all of a run's QUIC connections:
/// each connection's counters added when it closed (or when the run ended).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QuicStats {
    #[serde(flatten)]
    pub counts: QuicCounts,
    /// The round-trip time the QUIC stack measured (smoothed), one value per
    /// connection when it closed, µs.
    pub rtt: LatencySummary,
    /// Handshake times by kind, µs (from the connection's start to its handshake's
    /// end; a 0-RTT connection's requests left before it): full (1-RTT, the server's
    /// certificate checked), resumed from a session ticket (`--resume`), resumed with
    /// the first requests in 0-RTT early data the server accepted (`--resume 0rtt`).
    /// Absent when no handshake was of that kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handshake_full: Option<LatencySummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handshake_resumed: Option<LatencySummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handshake_0rtt: Option<LatencySummary>,
}

/// The QUIC stack's counters, as the engine adds them connection by connection and a
/// merge adds them run by run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QuicCounts {
    /// QUIC packets the client sent (a UDP datagram may carry several).
    pub packets_sent: u64,
    /// Of them, packets the client's loss detection declared lost (their frames were
    /// sent again in new packets).
    pub packets_lost: u64,
    /// Bytes of the packets declared lost.
    pub bytes_lost: u64,
    /// Congestion events (a loss or ECN mark that cut the congestion window).
    pub congestion_events: u64,
    /// UDP datagrams sent and received.
    pub datagrams_sent: u64,
    pub datagrams_received: u64,
    /// System calls that sent and received them: with UDP GSO and GRO (or
    /// sendmmsg/recvmmsg) one call moves several datagrams.
    pub send_calls: u64,
    pub receive_calls: u64,
    /// Handshakes by kind: full (1-RTT), resumed from a session ticket, and resumed
    /// with 0-RTT early data the server accepted (a 0-RTT attempt the server refused is
    /// a resumed or full one).
    #[serde(default)]
    pub handshakes_full: u64,
    #[serde(default)]
    pub handshakes_resumed: u64,
    #[serde(default)]
    pub handshakes_0rtt: u64,
}

impl QuicCounts {
    /// Adds `o`'s counters to these.
    pub fn add(&mut self, o: &QuicCounts) {
        self.packets_sent += o.packets_sent;
        self.packets_lost += o.packets_lost;
        self.bytes_lost += o.bytes_lost;
        self.congestion_events += o.congestion_events;
        self.datagrams_sent += o.datagrams_sent;
        self.datagrams_received += o.datagrams_received;
        self.send_calls += o.send_calls;
        self.receive_calls += o.receive_calls;
        self.handshakes_full += o.handshakes_full;
        self.handshakes_resumed += o.handshakes_resumed;
        self.handshakes_0rtt += o.handshakes_0rtt;
    }
}

/// One 100 ms slice of the load (see [`LoadResults::slices`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Slice {
    /// Start of the slice, milliseconds from the start of the load.
    pub t_ms: u64,
    /// Responses completed in the slice.
    pub responses: u64,
    pub errors: u64,
    /// Latency percentiles of those responses, µs (0 if none).
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

/// Time by phase: name resolution once per run, then per new connection the TCP
/// connect and the TLS handshake, and per response the time to first byte and the body.
/// Each phase is an HdrHistogram filled by the workers (no per-request samples).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Phases {
    /// Resolving the URL's host to addresses, once before the load, µs (for an IP
    /// address only its parsing: no lookup is made).
    pub dns_us: u64,
    /// TCP connect: `connect()` called to the socket connected, one value per new
    /// connection (failed connects are connect errors, not values here).
    pub connect: LatencySummary,
    /// TLS handshake: TCP connected to handshake done, one value per https connection
    /// established; `None` for plain http.
    pub tls_handshake: Option<LatencySummary>,
    /// Time to first byte: the request's first byte written to the first byte of its
    /// response read, one value per response.
    pub ttfb: LatencySummary,
    /// Body: the response's first byte read to its last, one value per response (0 µs
    /// when the whole response arrived in one read).
    pub body: LatencySummary,
    /// How long a response's last bytes waited in the client's socket (from the
    /// kernel's arrival timestamp) before the loop handled them — the price of
    /// gathering responses into batches (io_uring's completions; HTTP/2's responses on
    /// epoll), kept out of the latency, ttfb and body above, which end at the arrival
    /// time. `None` for HTTP/1.1 on epoll, whose times are taken when the loop reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<LatencySummary>,
}

fn http1() -> String {
    "http/1.1".into()
}

fn epoll() -> String {
    "epoll".into()
}

fn one() -> u32 {
    1
}

/// Failures by class.
#[derive(
    Debug, Clone, Copy, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq, Eq,
)]
pub struct ErrorCounts {
    /// TCP connect or TLS handshake failed or timed out.
    pub connect: u64,
    /// Reading failed, or the server closed the connection before responding.
    pub read: u64,
    /// Writing the request failed.
    pub write: u64,
    /// No complete response within the timeout.
    pub timeout: u64,
    /// The response was malformed or cut short.
    pub parse: u64,
    /// HTTP/2: the server reset the request's stream (RST_STREAM); its connection
    /// went on.
    #[serde(default)]
    pub reset: u64,
}

impl ErrorCounts {
    pub fn total(&self) -> u64 {
        self.connect + self.read + self.write + self.timeout + self.parse + self.reset
    }
}

/// A latency distribution: summary numbers plus the full histogram.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencySummary {
    /// Number of values recorded.
    pub count: u64,
    pub min_us: u64,
    pub mean_us: f64,
    pub stdev_us: f64,
    pub max_us: u64,
    /// Share of values within mean ± stdev, percent (wrk's "+/- Stdev").
    pub within_stdev_pct: f64,
    /// Selected percentiles.
    pub percentiles: Vec<Percentile>,
    /// Whether latency was measured from the intended send time (open loop) rather than
    /// the actual one. Closed-loop runs are not corrected.
    pub corrected_for_coordinated_omission: bool,
    /// The HdrHistogram (µs, 3 significant figures), V2 deflate encoding in base64: the
    /// format HdrHistogram's own tools read (`HistogramLogReader`, hdrhistogram crate).
    pub histogram: String,
}

/// One percentile of a distribution.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Percentile {
    /// The percentile, e.g. 99.9.
    pub p: f64,
    /// The value at that percentile, µs.
    pub us: u64,
}

/// Mean, spread and maximum of a sampled rate.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Spread {
    pub mean: f64,
    pub stdev: f64,
    pub max: f64,
    /// Share of samples within mean ± stdev, percent.
    pub within_stdev_pct: f64,
}

/// One second of the load.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Second {
    /// Start of this interval, seconds from the start of the load.
    pub t_s: u64,
    /// Length of the interval, seconds (the last one may be shorter than 1).
    pub duration_s: f64,
    pub responses: u64,
    pub errors: u64,
    pub bytes_read: u64,
    /// Latency percentiles of the responses completed in this second, µs (0 if none).
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    /// The latency HdrHistogram of this second's responses (encoded as
    /// `LatencySummary.histogram`): one interval of `--hdr-log`. Absent in Runs recorded
    /// before it was kept, and in a merged second whose segments did not all keep it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<String>,
}

/// The percentiles every summary carries.
pub const PERCENTILES: [f64; 7] = [50.0, 75.0, 90.0, 99.0, 99.9, 99.99, 100.0];

impl LatencySummary {
    pub fn from_histogram(h: &Histogram<u64>, corrected: bool) -> LatencySummary {
        let (mean, stdev) = (h.mean(), h.stdev());
        let within = if h.is_empty() {
            0.0
        } else {
            let lo = (mean - stdev).max(0.0);
            let hi = mean + stdev;
            let inside: u64 = h
                .iter_recorded()
                .filter(|v| {
                    let x = v.value_iterated_to() as f64;
                    x >= lo && x <= hi
                })
                .map(|v| v.count_since_last_iteration())
                .sum();
            inside as f64 * 100.0 / h.len() as f64
        };
        LatencySummary {
            count: h.len(),
            min_us: if h.is_empty() { 0 } else { h.min() },
            mean_us: mean,
            stdev_us: stdev,
            max_us: h.max(),
            within_stdev_pct: within,
            percentiles: PERCENTILES
                .iter()
                .map(|&p| Percentile {
                    p,
                    us: h.value_at_quantile(p / 100.0),
                })
                .collect(),
            corrected_for_coordinated_omission: corrected,
            histogram: encode_histogram(h),
        }
    }

    /// The value at percentile `p` (one of [`PERCENTILES`]), µs.
    pub fn at(&self, p: f64) -> Option<u64> {
        self.percentiles.iter().find(|x| x.p == p).map(|x| x.us)
    }

    /// Decodes the stored histogram (e.g. to merge runs or compute other percentiles).
    pub fn decode(&self) -> anyhow::Result<Histogram<u64>> {
        decode_histogram(&self.histogram)
    }
}

impl Spread {
    pub fn of(samples: &[f64]) -> Spread {
        if samples.is_empty() {
            return Spread::default();
        }
        let n = samples.len() as f64;
        let mean = samples.iter().sum::<f64>() / n;
        let var = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        let stdev = var.sqrt();
        let within = samples
            .iter()
            .filter(|&&x| x >= mean - stdev && x <= mean + stdev)
            .count() as f64
            * 100.0
            / n;
        Spread {
            mean,
            stdev,
            max: samples.iter().cloned().fold(0.0, f64::max),
            within_stdev_pct: within,
        }
    }
}

pub fn encode_histogram(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .expect("serialising into memory cannot fail");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub fn decode_histogram(s: &str) -> anyhow::Result<Histogram<u64>> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s)
        .context("histogram is not valid base64")?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| anyhow::anyhow!("histogram cannot be decoded: {e:?}"))
}

/// A headline number of a load: its value in a Run (or a repetition) and its
/// per-second series. What the repetitions block and `compare` show.
pub struct LoadMetric {
    pub name: &'static str,
    /// `req/s`, `us` (a latency) or `count`.
    pub unit: &'static str,
    pub higher_is_better: bool,
    pub value: fn(&LoadResults) -> Option<f64>,
    /// The number second by second, from the timeline (empty where the timeline does
    /// not have it).
    pub per_second: fn(&LoadResults) -> Vec<f64>,
}

fn no_series(_: &LoadResults) -> Vec<f64> {
    Vec::new()
}

/// Full seconds only: the last, partial one would bias a rate.
fn full_seconds(r: &LoadResults) -> impl Iterator<Item = &Second> {
    r.timeline.iter().filter(|s| s.duration_s >= 0.999)
}

pub const LOAD_METRICS: &[LoadMetric] = &[
    LoadMetric {
        name: "requests/s",
        unit: "req/s",
        higher_is_better: true,
        value: |r| Some(r.requests_per_s),
        per_second: |r| full_seconds(r).map(|s| s.responses as f64).collect(),
    },
    LoadMetric {
        name: "latency p50",
        unit: "us",
        higher_is_better: false,
        value: |r| r.latency.at(50.0).map(|v| v as f64),
        per_second: |r| {
            full_seconds(r)
                .filter(|s| s.responses > 0)
                .map(|s| s.p50_us as f64)
                .collect()
        },
    },
    LoadMetric {
        name: "latency p90",
        unit: "us",
        higher_is_better: false,
        value: |r| r.latency.at(90.0).map(|v| v as f64),
        per_second: no_series,
    },
    LoadMetric {
        name: "latency p99",
        unit: "us",
        higher_is_better: false,
        value: |r| r.latency.at(99.0).map(|v| v as f64),
        per_second: |r| {
            full_seconds(r)
                .filter(|s| s.responses > 0)
                .map(|s| s.p99_us as f64)
                .collect()
        },
    },
    LoadMetric {
        name: "latency p99.9",
        unit: "us",
        higher_is_better: false,
        value: |r| r.latency.at(99.9).map(|v| v as f64),
        per_second: no_series,
    },
    LoadMetric {
        name: "latency max",
        unit: "us",
        higher_is_better: false,
        value: |r| Some(r.latency.max_us as f64),
        per_second: no_series,
    },
    LoadMetric {
        name: "errors",
        unit: "count",
        higher_is_better: false,
        value: |r| Some(r.errors.total() as f64),
        per_second: |r| full_seconds(r).map(|s| s.errors as f64).collect(),
    },
    LoadMetric {
        name: "non-2xx/3xx",
        unit: "count",
        higher_is_better: false,
        value: |r| Some(r.non_2xx_3xx as f64),
        per_second: no_series,
    },
];

impl QuicStats {
    /// The QUIC counters of several loads (summed; RTT histograms added). `None` when
    /// no load spoke HTTP/3.
    pub fn merged<'a>(
        parts: impl Iterator<Item = Option<&'a QuicStats>>,
    ) -> anyhow::Result<Option<QuicStats>> {
        let parts: Vec<&QuicStats> = parts.flatten().collect();
        let Some(first) = parts.first() else {
            return Ok(None);
        };
        let mut out = (*first).clone();
        for p in &parts[1..] {
            out.counts.add(&p.counts);
        }
        out.rtt = LatencySummary::merged(parts.iter().map(|p| &p.rtt))?;
        let kind = |f: fn(&QuicStats) -> Option<&LatencySummary>| {
            let some: Vec<&LatencySummary> = parts.iter().filter_map(|p| f(p)).collect();
            match some.is_empty() {
                true => Ok(None),
                false => LatencySummary::merged(some.into_iter()).map(Some),
            }
        };
        out.handshake_full = kind(|p| p.handshake_full.as_ref())?;
        out.handshake_resumed = kind(|p| p.handshake_resumed.as_ref())?;
        out.handshake_0rtt = kind(|p| p.handshake_0rtt.as_ref())?;
        Ok(Some(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_round_trips() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        for v in [1u64, 50, 700, 700, 12_000, 4_000_000] {
            h.record(v).unwrap();
        }
        let s = LatencySummary::from_histogram(&h, false);
        let back = s.decode().unwrap();
        assert_eq!(back.len(), 6);
        assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
        assert_eq!(back.max(), h.max());
        assert_eq!(s.percentiles.last().unwrap().us, h.max());
    }

    #[test]
    fn spread() {
        let s = Spread::of(&[10.0, 10.0, 20.0, 20.0]);
        assert_eq!((s.mean, s.stdev, s.max), (15.0, 5.0, 20.0));
        assert_eq!(s.within_stdev_pct, 100.0);
    }
}
