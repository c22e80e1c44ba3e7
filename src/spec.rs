//! The spec: everything the user asked for, validated before any load is sent.
//!
//! A `Spec` is built from the command line (see `cli.rs`), checked here (flags that
//! contradict each other, a URL that cannot work, a target that refuses connections),
//! and recorded as-is in the Run artifact so a run can be repeated from its JSON.

pub mod har;
mod header;
mod lines;
pub mod replay;
mod requests;
mod segment;
pub mod stages;
mod table;
pub mod targets;
pub use header::split_credentials;
pub(crate) use header::{check_header, is_token};
use requests::RequestParts;
pub use requests::Requests;
pub use segment::{share_of, SegmentOf};
pub use stages::{Stage, StageKind, Stages};
pub use table::{TargetRef, Targets};
pub use targets::MixSpec;

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// What to load, how hard and for how long.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Spec {
    /// The URL requested, as given.
    pub url: String,
    /// Concurrent connections kept open (closed loop: one request in flight on each).
    pub connections: u32,
    /// Worker threads, each with its own event loop over its share of connections.
    pub threads: u32,
    /// Length of the load window; `None` when the run is bounded by `requests` only.
    pub duration_s: Option<f64>,
    /// Stop after this many request outcomes (responses plus failed requests).
    pub requests: Option<u64>,
    /// Requests per connection before it is closed and reopened; `None` = keep-alive for
    /// as long as the server allows.
    pub connreqs: Option<u32>,
    /// Open loop: requests per second over all connections, sent on schedule whatever
    /// the responses do, latency measured from each request's scheduled time; `None` =
    /// closed loop (each connection sends its next request when the last one is answered).
    #[serde(default)]
    pub rate: Option<f64>,
    /// HTTP method.
    pub method: String,
    /// Extra request headers, `Name: value`.
    pub headers: Vec<String>,
    /// Length of the request body in bytes (the body itself is not recorded).
    pub body_bytes: usize,
    /// Per-request (and per-connect) timeout in seconds; a request still unanswered after
    /// it is counted as a timeout and its connection replaced.
    pub timeout_s: f64,
    /// TLS certificate verification is skipped (`--insecure`).
    pub insecure: bool,
    /// Which HTTP version was asked for (`--h1`, `--h2`, or chosen by ALPN); the one
    /// used is `results.protocol`.
    #[serde(default)]
    pub http: HttpVersion,
    /// HTTP/2: requests in flight on each connection (`--max-concurrent-streams`,
    /// h2load's `-m`); 1 for HTTP/1.1.
    #[serde(default = "one")]
    pub max_concurrent_streams: u32,
    /// HTTP/3: how a new QUIC connection's handshake may resume (`--resume`).
    #[serde(default, skip_serializing_if = "Resume::is_off")]
    pub resume: Resume,
    /// The socket I/O interface asked for (`--io`); the one used is `results.io`.
    #[serde(default)]
    pub io: IoBackend,
    /// `Authorization: Basic …` from the URL's `user:password@`: sent with every
    /// request, never recorded (the URL above is kept without its password).
    #[serde(skip)]
    #[schemars(skip)]
    pub authorization: Option<String>,
    /// `--targets`: a mix of requests instead of the one above (its method, headers and
    /// body are then each target's, after the run's own `-H` headers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mix: Option<MixSpec>,
    /// `--stages`: the load's target over the run, stage by stage (k6's `stages`): open-
    /// loop rates or connections, each stage ramping linearly from the previous stage's
    /// target (0 before the first) to its own; `duration_s` is their sum. Absent for a
    /// load at one rate or one number of connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<Stages>,
    /// `--abort-if-behind`: an open-loop load is stopped when the requests completed
    /// fall behind its schedule by more than this percentage over 2 s. Absent when not
    /// asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_if_behind_pct: Option<f64>,
}

fn one() -> u32 {
    1
}

/// The socket I/O interface of the load engine's workers.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum IoBackend {
    /// io_uring where the kernel allows it and the run is plain-text HTTP/1.1, else epoll.
    #[default]
    Auto,
    /// io_uring (`--io uring`); epoll with a one-line note where the kernel refuses it.
    Uring,
    /// epoll readiness with non-blocking sockets (`--io epoll`).
    Epoll,
}

/// The HTTP version asked for.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum HttpVersion {
    /// HTTP/1.1 for http://; for https://, HTTP/2 when the server chooses `h2` by ALPN
    /// (HTTP/1.1 for open-loop runs).
    #[default]
    Auto,
    /// HTTP/1.1 only (`--h1`).
    H1,
    /// HTTP/2 only (`--h2`): prior knowledge over cleartext (h2c), ALPN `h2` over TLS.
    H2,
    /// HTTP/3 over QUIC (`--h3`, https:// only): ALPN `h3` over UDP.
    H3,
}

/// HTTP/3 (`--resume`): whether a new QUIC connection resumes the TLS session of an
/// earlier one from its ticket, and sends its first requests in 0-RTT early data.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Resume {
    /// Every handshake is a full one (no session cache).
    #[default]
    Off,
    /// Resumed from a session ticket the server gave an earlier connection.
    Tickets,
    /// Resumed, its requests sent in 0-RTT early data when the server accepts them.
    #[serde(rename = "0rtt")]
    ZeroRtt,
}

impl Resume {
    pub fn is_off(&self) -> bool {
        *self == Resume::Off
    }
}

/// A URL broken into what the engine needs.
#[derive(Debug, Clone)]
pub struct Target {
    pub tls: bool,
    /// Host name as written in the URL (used for `Host:` and TLS SNI).
    pub host: String,
    pub port: u16,
    /// Path and query, at least `/`.
    pub path: String,
    /// The addresses the host resolved to; the engine uses the first that accepts.
    pub addrs: Vec<SocketAddr>,
    /// How long resolving the host took, µs (the run's one name lookup).
    pub resolve_us: u64,
}

/// Why a run cannot start. Each message says what was wrong and what to do.
#[derive(Debug, Error)]
pub enum SpecError {
    #[error("invalid URL `{url}`: {reason} — expected e.g. http://127.0.0.1:8080/")]
    Url { url: String, reason: String },
    #[error("unsupported scheme `{0}` — loadlens speaks http:// and https://")]
    Scheme(String),
    #[error("cannot resolve host `{host}`: {reason}")]
    Resolve { host: String, reason: String },
    #[error("connection refused to {addr} — is the server running? check the URL's port ({port})")]
    Refused { addr: SocketAddr, port: u16 },
    #[error("cannot connect to {addr}: {reason}")]
    Connect { addr: SocketAddr, reason: String },
    #[error("{0}")]
    Flags(String),
}

impl Spec {
    /// Whether requests are sent on a schedule (`-R`, or `--stages` of rates) rather
    /// than each when the connection's last response came back.
    pub fn open_loop(&self) -> bool {
        self.rate.is_some()
            || self
                .stages
                .as_ref()
                .is_some_and(|s| s.kind == StageKind::Rate)
    }

    /// Checks the flags against each other (no I/O).
    pub fn check_flags(&self) -> Result<(), SpecError> {
        let bad = |m: &str| Err(SpecError::Flags(m.to_string()));
        if self.threads == 0 {
            return bad("-t/--threads must be at least 1");
        }
        if self.connections == 0 {
            return bad("-c/--connections must be at least 1");
        }
        if self.connections < self.threads {
            return Err(SpecError::Flags(format!(
                "-c/--connections ({}) must be at least -t/--threads ({}): each thread needs a connection",
                self.connections, self.threads
            )));
        }
        if self.duration_s.is_some_and(|d| d <= 0.0) {
            return bad("-d/--duration must be greater than zero");
        }
        if self.requests == Some(0) {
            return bad("-n/--requests must be at least 1");
        }
        if self.connreqs == Some(0) {
            return bad("--connreqs must be at least 1 (1 = a new connection for every request)");
        }
        if self.rate.is_some_and(|r| r.is_nan() || r <= 0.0) {
            return bad("--rate must be greater than zero");
        }
        if self.timeout_s <= 0.0 {
            return bad("--timeout must be greater than zero");
        }
        if self.max_concurrent_streams == 0 || self.max_concurrent_streams > 1000 {
            return bad("--max-concurrent-streams must be between 1 and 1000");
        }
        if self.max_concurrent_streams > 1 && self.http == HttpVersion::H1 {
            return bad("--max-concurrent-streams is for HTTP/2 and HTTP/3: HTTP/1.1 has one request in flight per connection (drop --h1, or use -c)");
        }
        if self.http == HttpVersion::H3 {
            if !self
                .url
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("https://")
            {
                return bad(
                    "--h3 speaks HTTP/3 over QUIC, which is always TLS: give an https:// URL",
                );
            }
            if self.io == IoBackend::Uring {
                return bad("--io uring drives TCP only: HTTP/3 (--h3) runs on quinn's UDP sockets; drop --io uring");
            }
            if self
                .stages
                .as_ref()
                .is_some_and(|s| s.kind == StageKind::Connections)
            {
                return bad("--stages of connections (30s:c10,…) is not built for HTTP/3: ramp the rate instead (--stages 30s:100,1m:1000 over -c connections), or drop --h3");
            }
        }
        if self.resume != Resume::Off && self.http != HttpVersion::H3 {
            return bad("--resume is for HTTP/3 (--h3): TCP's TLS connections resume from rustls's session cache already; add --h3 or drop --resume");
        }
        if !is_token(&self.method) {
            return Err(SpecError::Flags(format!(
                "invalid method `{}`: expected a token such as GET, POST, HEAD",
                self.method.escape_debug()
            )));
        }
        for h in &self.headers {
            check_header(h).map_err(SpecError::Flags)?;
        }
        Ok(())
    }

    /// Parses and resolves the URL.
    pub fn target(&self) -> Result<Target, SpecError> {
        let mut t = self.parse_url()?;
        let resolving = std::time::Instant::now();
        t.addrs = (t.host.as_str(), t.port)
            .to_socket_addrs()
            .map_err(|e| SpecError::Resolve {
                host: t.host.clone(),
                reason: e.to_string(),
            })?
            .collect();
        t.resolve_us = resolving.elapsed().as_micros() as u64;
        if t.addrs.is_empty() {
            return Err(SpecError::Resolve {
                host: t.host,
                reason: "no addresses".into(),
            });
        }
        Ok(t)
    }

    /// Parses the URL (no I/O): the target with no addresses yet.
    pub fn parse_url(&self) -> Result<Target, SpecError> {
        let url = url::Url::parse(&self.url).map_err(|e| SpecError::Url {
            url: self.url.clone(),
            reason: e.to_string(),
        })?;
        let tls = match url.scheme() {
            "http" => false,
            "https" => true,
            other => return Err(SpecError::Scheme(other.to_string())),
        };
        let host = match url.host() {
            Some(url::Host::Ipv6(a)) => a.to_string(),
            Some(h) => h.to_string(),
            None => {
                return Err(SpecError::Url {
                    url: self.url.clone(),
                    reason: "no host".into(),
                })
            }
        };
        let port = url
            .port_or_known_default()
            .unwrap_or(if tls { 443 } else { 80 });
        if port == 0 {
            return Err(SpecError::Url {
                url: self.url.clone(),
                reason: "port 0 is not a port a server listens on".into(),
            });
        }
        let mut path = url.path().to_string();
        if let Some(q) = url.query() {
            path.push('?');
            path.push_str(q);
        }
        Ok(Target {
            tls,
            host,
            port,
            path,
            addrs: Vec::new(),
            resolve_us: 0,
        })
    }

    /// The request timeout as a `Duration`.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_s)
    }
}

impl Target {
    /// Connects once (blocking, bounded by `timeout`) so a wrong port fails before any
    /// load with a useful message. Returns the first address that accepted.
    pub fn probe(&self, timeout: Duration) -> Result<SocketAddr, SpecError> {
        let mut last = None;
        for addr in &self.addrs {
            match TcpStream::connect_timeout(addr, timeout) {
                Ok(_) => return Ok(*addr),
                Err(e) => last = Some((*addr, e)),
            }
        }
        let (addr, e) = last.expect("at least one address");
        Err(match e.kind() {
            std::io::ErrorKind::ConnectionRefused => SpecError::Refused {
                addr,
                port: self.port,
            },
            _ => SpecError::Connect {
                addr,
                reason: e.to_string(),
            },
        })
    }

    /// The `Host:` header value: the port only when it is not the scheme's default.
    pub fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let default = if self.tls { 443 } else { 80 };
        if self.port == default {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

/// The request bytes, built once before the run.
#[derive(Debug, Clone)]
pub struct RequestBytes {
    /// The request as sent on a connection that stays open.
    pub keep: Vec<u8>,
    /// The same request with `Connection: close`, sent as the last request of a
    /// connection under `--connreqs`, so the server closes first (as it would for ab or
    /// a browser told to) and the TIME_WAIT state stays on the server, not on the client's
    /// ephemeral ports.
    pub last: Vec<u8>,
    /// Whether responses have no body (HEAD).
    pub head: bool,
}

impl RequestBytes {
    pub fn build(spec: &Spec, target: &Target, body: &[u8]) -> RequestBytes {
        let parts = RequestParts::build(&spec.method, &spec.headers, &[], spec, target, body);
        let whole = |after: &[u8]| {
            let mut b = Vec::with_capacity(parts.before.len() + target.path.len() + after.len());
            b.extend_from_slice(&parts.before);
            b.extend_from_slice(target.path.as_bytes());
            b.extend_from_slice(after);
            b
        };
        RequestBytes {
            keep: whole(&parts.keep_after),
            last: whole(&parts.last_after),
            head: parts.head,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn spec(url: &str) -> Spec {
        Spec {
            authorization: None,
            url: url.into(),
            connections: 10,
            threads: 2,
            duration_s: Some(1.0),
            requests: None,
            connreqs: None,
            rate: None,
            method: "GET".into(),
            headers: vec![],
            body_bytes: 0,
            timeout_s: 2.0,
            insecure: false,
            http: HttpVersion::Auto,
            max_concurrent_streams: 1,
            resume: Default::default(),
            io: Default::default(),
            mix: None,
            stages: None,
            abort_if_behind_pct: None,
        }
    }

    #[test]
    fn flag_errors() {
        let mut s = spec("http://127.0.0.1/");
        s.connections = 1;
        assert!(s
            .check_flags()
            .unwrap_err()
            .to_string()
            .contains("-c/--connections (1)"));
        let mut s = spec("http://127.0.0.1/");
        s.connreqs = Some(0);
        assert!(s
            .check_flags()
            .unwrap_err()
            .to_string()
            .contains("--connreqs"));
        let mut s = spec("http://127.0.0.1/");
        s.duration_s = Some(0.0);
        assert!(s.check_flags().is_err());
        let mut s = spec("http://127.0.0.1/");
        s.headers = vec!["NoColon".into()];
        assert!(s.check_flags().is_err());
    }

    #[test]
    fn url_errors() {
        assert!(matches!(
            spec("ftp://x/").target(),
            Err(SpecError::Scheme(_))
        ));
        assert!(matches!(
            spec("http//x").target(),
            Err(SpecError::Url { .. })
        ));
        let t = spec("http://127.0.0.1:8080/a?b=1").target().unwrap();
        assert_eq!((t.port, t.path.as_str(), t.tls), (8080, "/a?b=1", false));
        let t = spec("https://[::1]/").target().unwrap();
        assert_eq!((t.port, t.host.as_str(), t.tls), (443, "::1", true));
    }

    #[test]
    fn request_bytes() {
        let mut s = spec("http://127.0.0.1:8080/x");
        s.method = "POST".into();
        s.headers = vec!["X-A: 1".into()];
        let t = s.target().unwrap();
        let r = RequestBytes::build(&s, &t, b"hi");
        assert_eq!(
            r.keep,
            b"POST /x HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nX-A: 1\r\nContent-Length: 2\r\n\r\nhi"
        );
        assert!(String::from_utf8_lossy(&r.last).contains("Connection: close\r\n\r\nhi"));
        let t = spec("http://[::1]/").target().unwrap();
        let r = RequestBytes::build(&spec("http://[::1]/"), &t, b"");
        assert!(String::from_utf8_lossy(&r.keep).contains("Host: [::1]\r\n"));
    }
}
