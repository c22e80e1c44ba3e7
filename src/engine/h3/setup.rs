//! What an HTTP/3 run sets up before its load: the requests as the `http` types h3
//! takes, the QUIC client configuration (the TCP engine's rustls configuration with
//! ALPN `h3`), a worker's endpoint, and the one handshake that checks the server first.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;

use super::resume::Watched;
use super::H3_NO_ERROR;
use crate::engine::transport::TlsConfig;
use crate::spec::{Resume, Spec, Target};

/// One request of the run (or of each target of its mix) ready to send: its HEADERS
/// frame (and DATA frame with its body) as they go on a request stream, encoded once.
pub(super) struct H3Request {
    pub(super) wire: Bytes,
}

impl H3Request {
    fn build(spec: &Spec, target: &Target, body: &[u8]) -> anyhow::Result<H3Request> {
        let mut authority = target.host_header();
        let mut headers: Vec<(http::HeaderName, http::HeaderValue)> = Vec::new();
        for h in &spec.headers {
            let Some((n, v)) = h.split_once(':') else {
                continue;
            };
            let name = n.trim().to_ascii_lowercase();
            if name == "host" {
                authority = v.trim().to_string();
                continue;
            }
            // Connection-specific fields mean nothing over HTTP/3 (RFC 9114 §4.2).
            if [
                "connection",
                "keep-alive",
                "proxy-connection",
                "transfer-encoding",
                "upgrade",
                "te",
            ]
            .contains(&name.as_str())
            {
                continue;
            }
            let name = http::HeaderName::from_bytes(name.as_bytes())
                .with_context(|| format!("header `{h}` cannot be sent over HTTP/3"))?;
            let value = http::HeaderValue::from_str(v.trim())
                .with_context(|| format!("header `{h}` cannot be sent over HTTP/3"))?;
            headers.push((name, value));
        }
        let has = |h: &[(http::HeaderName, http::HeaderValue)], n: &http::HeaderName| {
            h.iter().any(|(name, _)| name == n)
        };
        if !body.is_empty() && !has(&headers, &http::header::CONTENT_LENGTH) {
            headers.push((http::header::CONTENT_LENGTH, body.len().into()));
        }
        if let Some(a) = spec.authorization.as_ref() {
            if !has(&headers, &http::header::AUTHORIZATION) {
                headers.push((http::header::AUTHORIZATION, a.parse()?));
            }
        }
        let uri = http::Uri::builder()
            .scheme("https")
            .authority(authority.as_str())
            .path_and_query(target.path.as_str())
            .build()
            .with_context(|| format!("https://{authority}{} is not a valid URI", target.path))?;
        let method = http::Method::from_bytes(spec.method.as_bytes())?;
        let fields: Vec<(&str, &[u8])> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_bytes()))
            .collect();
        let authority = uri.authority().map_or(authority.as_str(), |a| a.as_str());
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        Ok(H3Request {
            wire: super::wire::request(method.as_str(), authority, path, &fields, body),
        })
    }
}

/// The requests of `spec` (one per target of a mix, in the order table's numbering).
pub(super) fn build_requests(
    spec: &Spec,
    target: &Target,
    body: &[u8],
) -> anyhow::Result<Vec<H3Request>> {
    match &spec.mix {
        None => Ok(vec![H3Request::build(spec, target, body)?]),
        Some(mix) => mix
            .loaded
            .iter()
            .map(|t| {
                let (s, tg) = t.apply(spec, target);
                H3Request::build(&s, &tg, t.body)
            })
            .collect(),
    }
}

/// The QUIC client configuration of a run: the TCP engine's rustls configuration (its
/// verifier, `--insecure`, the ring provider) offering ALPN `h3`, with a session cache
/// and early data as `--resume` asks, and the transport and token store every
/// connection shares.
#[derive(Clone)]
pub(super) struct H3Config {
    crypto: Arc<dyn quinn::crypto::ClientConfig>,
    transport: Arc<quinn::TransportConfig>,
    tokens: Arc<dyn quinn::TokenStore>,
}

impl H3Config {
    /// The configuration of one new connection, and the flag its handshake raises when
    /// the server sends its certificate (a full handshake, not a resumed one).
    pub(super) fn connection(&self) -> (quinn::ClientConfig, Arc<AtomicBool>) {
        let certificate = Arc::new(AtomicBool::new(false));
        let mut cfg = quinn::ClientConfig::new(Arc::new(Watched {
            inner: self.crypto.clone(),
            certificate: certificate.clone(),
        }));
        cfg.transport_config(self.transport.clone());
        cfg.token_store(self.tokens.clone());
        (cfg, certificate)
    }
}

pub(super) fn client_config(spec: &Spec, target: &Target) -> anyhow::Result<H3Config> {
    let tls = TlsConfig::new(&target.host, spec.insecure, &[b"h3"])?;
    let mut client = (*tls.client).clone();
    match spec.resume {
        Resume::Off => client.resumption = rustls::client::Resumption::disabled(),
        Resume::Tickets => {}
        Resume::ZeroRtt => client.enable_early_data = true,
    }
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(Arc::new(client))
        .map_err(|e| anyhow::anyhow!("cannot use the TLS configuration for QUIC: {e}"))?;
    let mut transport = quinn::TransportConfig::default();
    // A peer silent for longer than the request timeout ends the connection (its
    // requests are then counted as errors, never left waiting).
    let idle = spec.timeout().max(Duration::from_millis(500));
    transport.max_idle_timeout(Some(
        quinn::IdleTimeout::try_from(idle).context("--timeout too long for QUIC")?,
    ));
    Ok(H3Config {
        crypto: Arc::new(crypto),
        transport: Arc::new(transport),
        tokens: Arc::new(quinn::TokenMemoryCache::default()),
    })
}

pub(super) fn endpoint_for(addr: SocketAddr) -> std::io::Result<quinn::Endpoint> {
    let bind: SocketAddr = match addr {
        SocketAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    quinn::Endpoint::client(bind)
}

/// One QUIC handshake (ALPN `h3`) before the load, so a server that does not speak
/// HTTP/3 on that UDP port, or a certificate the client refuses, fails the run at once
/// with a hint instead of a run made only of errors.
pub(super) fn probe(
    cfg: &H3Config,
    addr: SocketAddr,
    host: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let ep = endpoint_for(addr)?;
        let connecting = ep
            .connect_with(cfg.connection().0, addr, host)
            .with_context(|| format!("cannot start a QUIC connection to {addr}"))?;
        let conn = match tokio::time::timeout(timeout, connecting).await {
            Err(_) => anyhow::bail!(
                "no QUIC handshake with {addr} (UDP) within --timeout {timeout:?}: is HTTP/3 enabled on that port?"
            ),
            Ok(Err(e)) => {
                let cert = e.to_string().contains("certificate");
                anyhow::bail!(
                    "QUIC handshake with {addr} failed: {e}{}",
                    if cert {
                        " — for a self-signed or private certificate, use --insecure (-k)"
                    } else {
                        ""
                    }
                )
            }
            Ok(Ok(c)) => c,
        };
        // HTTP/3's control streams opened; no request is sent, so the server's log
        // holds the load's requests only.
        let (mut driver, _send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
            .await
            .with_context(|| format!("{addr} did not start HTTP/3 on its QUIC connection"))?;
        let drive = tokio::spawn(async move {
            std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        conn.close(H3_NO_ERROR.into(), b"");
        drive.abort();
        let _ = tokio::time::timeout(Duration::from_millis(100), ep.wait_idle()).await;
        Ok(())
    })
}
