//! Plain TCP and TLS behind one small trait, so the worker loop is written once.
//!
//! The worker is generic over the transport (monomorphised: no dynamic dispatch in the
//! hot path). Sockets are non-blocking mio streams; every method returns `WouldBlock`
//! when it must wait for readiness, like the socket itself.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Instant;

use mio::net::TcpStream;
use rustls::pki_types::ServerName;

use super::arrival;

/// A byte stream to the server.
pub trait Transport: Sized {
    /// Per-run shared state (TLS configuration).
    type Config: Clone + Send + 'static;
    /// Set-up includes a TLS handshake after the TCP connect (its own timed phase).
    const TLS: bool;

    /// Starts a non-blocking connect.
    fn connect(addr: SocketAddr, config: &Self::Config) -> io::Result<Self>;
    /// The socket, for registration with the poller.
    fn socket(&mut self) -> &mut TcpStream;
    /// Drives connection set-up (TCP connect, TLS handshake). `Ok(true)` once application
    /// data can flow, `Ok(false)` while waiting, `Err` when set-up failed.
    fn establish(&mut self) -> io::Result<bool>;
    /// The TCP connect has finished (the handshake, if any, may still be under way).
    fn tcp_up(&self) -> bool;
    /// The application protocol TLS's ALPN chose (`h2`), if any.
    fn alpn(&self) -> Option<&[u8]> {
        None
    }
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    /// Whether the last read, which returned less than asked when `short`, left
    /// nothing to read: the loop may then wait for the next readiness event instead of
    /// reading again to see `WouldBlock` (one system call saved per response). Linux
    /// queues a new edge-triggered epoll event for every segment that arrives after a
    /// read, so a TCP read that returned less than asked proves it.
    fn drained(&self, short: bool) -> bool {
        short
    }
    /// Asks the kernel to timestamp the bytes arriving on the socket (`arrival.rs`), for
    /// `read_stamped`; `true` if it will.
    fn stamp_arrivals(&mut self) -> bool {
        arrival::enable(self.socket().as_raw_fd()).is_ok()
    }
    /// `read`, with the kernel's arrival time of the last bytes read from the socket
    /// once `stamp_arrivals` has asked for it.
    fn read_stamped(&mut self, buf: &mut [u8]) -> io::Result<(usize, Option<Instant>)>;
    fn write(&mut self, buf: &[u8]) -> io::Result<usize>;
    /// Pushes out bytes buffered inside the transport (TLS records). `Ok(true)` when
    /// nothing is left.
    fn flush(&mut self) -> io::Result<bool>;
}

/// Checks whether a non-blocking TCP connect finished, and how.
fn tcp_connected(s: &TcpStream) -> io::Result<bool> {
    if let Some(e) = s.take_error()? {
        return Err(e);
    }
    match s.peer_addr() {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(false),
        Err(e) => Err(e),
    }
}

fn new_socket(addr: SocketAddr) -> io::Result<TcpStream> {
    let s = TcpStream::connect(addr)?;
    // Requests are written in one piece; Nagle would only delay a request that spans
    // two segments (a large body). wrk sets it too.
    s.set_nodelay(true)?;
    Ok(s)
}

/// Plain TCP.
pub struct Plain {
    stream: TcpStream,
    connected: bool,
}

impl Transport for Plain {
    type Config = ();
    const TLS: bool = false;

    fn connect(addr: SocketAddr, _: &()) -> io::Result<Self> {
        Ok(Plain {
            stream: new_socket(addr)?,
            connected: false,
        })
    }
    fn socket(&mut self) -> &mut TcpStream {
        &mut self.stream
    }
    fn establish(&mut self) -> io::Result<bool> {
        if !self.connected {
            self.connected = tcp_connected(&self.stream)?;
        }
        Ok(self.connected)
    }
    fn tcp_up(&self) -> bool {
        self.connected
    }
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.read(buf)
    }
    fn read_stamped(&mut self, buf: &mut [u8]) -> io::Result<(usize, Option<Instant>)> {
        arrival::recv(self.stream.as_raw_fd(), buf)
    }
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.write(buf)
    }
    fn flush(&mut self) -> io::Result<bool> {
        Ok(true)
    }
}

/// What every TLS connection of a run shares.
#[derive(Clone)]
pub struct TlsConfig {
    pub client: Arc<rustls::ClientConfig>,
    pub server_name: ServerName<'static>,
}

impl TlsConfig {
    /// Builds the client configuration: web PKI roots, or no verification at all when
    /// `insecure` (for self-signed test servers, like `curl -k`); `alpn` = the
    /// application protocols offered, in order of preference (`h2`, `http/1.1`).
    pub fn new(host: &str, insecure: bool, alpn: &[&[u8]]) -> anyhow::Result<TlsConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?;
        let mut client = if insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
                .with_no_client_auth()
        } else {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            builder.with_root_certificates(roots).with_no_client_auth()
        };
        client.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        let server_name = ServerName::try_from(host.to_string())
            .map_err(|e| anyhow::anyhow!("invalid TLS server name `{host}`: {e}"))?;
        Ok(TlsConfig {
            client: Arc::new(client),
            server_name,
        })
    }
}

impl TlsConfig {
    /// One blocking handshake before the load, so a certificate the client refuses fails
    /// the run at once with a hint, instead of a run made only of connect errors.
    /// Returns the protocol ALPN chose (`h2`), if any.
    pub fn probe(
        &self,
        addr: SocketAddr,
        timeout: std::time::Duration,
    ) -> anyhow::Result<Option<Vec<u8>>> {
        let mut tcp = std::net::TcpStream::connect_timeout(&addr, timeout)?;
        tcp.set_read_timeout(Some(timeout))?;
        tcp.set_write_timeout(Some(timeout))?;
        let mut tls = rustls::ClientConnection::new(self.client.clone(), self.server_name.clone())?;
        while tls.is_handshaking() {
            if let Err(e) = tls.complete_io(&mut tcp) {
                let rustls_error = e
                    .get_ref()
                    .and_then(|inner| inner.downcast_ref::<rustls::Error>());
                let cert =
                    rustls_error.is_some_and(|r| matches!(r, rustls::Error::InvalidCertificate(_)));
                let no_alpn = rustls_error.is_some_and(|r| {
                    matches!(
                        r,
                        rustls::Error::AlertReceived(
                            rustls::AlertDescription::NoApplicationProtocol
                        )
                    )
                });
                if no_alpn && self.client.alpn_protocols == [b"h2".to_vec()] {
                    anyhow::bail!(
                        "{addr} did not choose HTTP/2 by ALPN (h2) — drop --h2 to use HTTP/1.1"
                    );
                }
                anyhow::bail!(
                    "TLS handshake with {addr} failed: {e}{}",
                    if cert {
                        " — for a self-signed or private certificate, use --insecure (-k)"
                    } else {
                        ""
                    }
                );
            }
        }
        Ok(tls.alpn_protocol().map(|p| p.to_vec()))
    }

    /// The same configuration offering only `protocol` by ALPN.
    pub fn only(&self, protocol: &[u8]) -> TlsConfig {
        let mut client = (*self.client).clone();
        client.alpn_protocols = vec![protocol.to_vec()];
        TlsConfig {
            client: Arc::new(client),
            server_name: self.server_name.clone(),
        }
    }
}

/// TLS over TCP (rustls).
pub struct Tls {
    stream: TcpStream,
    tls: rustls::ClientConnection,
    tcp_up: bool,
    /// The arrival time of the last records read from the socket, once stamped.
    arrived: Option<Instant>,
    /// The last read of the socket returned less than rustls asked: it was empty then.
    socket_short: bool,
}

/// The socket as rustls reads it, through `recvmsg` for the arrival time.
struct Stamped<'a> {
    fd: RawFd,
    arrived: &'a mut Option<Instant>,
    short: &'a mut bool,
}

impl Read for Stamped<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let (n, at) = arrival::recv(self.fd, buf)?;
        if at.is_some() {
            *self.arrived = at;
        }
        *self.short = n < buf.len();
        Ok(n)
    }
}

impl Tls {
    /// Reads TLS records from the socket into rustls. `Ok(false)` at EOF.
    fn fill(&mut self) -> io::Result<bool> {
        let n = self.tls.read_tls(&mut Stamped {
            fd: self.stream.as_raw_fd(),
            arrived: &mut self.arrived,
            short: &mut self.socket_short,
        })?;
        self.tls
            .process_new_packets()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        Ok(n > 0)
    }
}

impl Transport for Tls {
    type Config = TlsConfig;
    const TLS: bool = true;

    fn connect(addr: SocketAddr, config: &TlsConfig) -> io::Result<Self> {
        let tls = rustls::ClientConnection::new(config.client.clone(), config.server_name.clone())
            .map_err(io::Error::other)?;
        Ok(Tls {
            stream: new_socket(addr)?,
            tls,
            tcp_up: false,
            arrived: None,
            socket_short: false,
        })
    }
    fn socket(&mut self) -> &mut TcpStream {
        &mut self.stream
    }
    fn establish(&mut self) -> io::Result<bool> {
        if !self.tcp_up {
            self.tcp_up = tcp_connected(&self.stream)?;
            if !self.tcp_up {
                return Ok(false);
            }
        }
        while self.tls.is_handshaking() {
            if self.tls.wants_write() {
                match self.tls.write_tls(&mut self.stream) {
                    Ok(_) => continue,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                    Err(e) => return Err(e),
                }
            }
            match self.fill() {
                Ok(true) => {}
                Ok(false) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        self.flush()?;
        Ok(true)
    }
    fn tcp_up(&self) -> bool {
        self.tcp_up
    }
    fn alpn(&self) -> Option<&[u8]> {
        self.tls.alpn_protocol()
    }
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.tls.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The peer closed without close_notify: an EOF like any other here.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            if !self.fill()? {
                return Ok(0);
            }
        }
    }
    /// Drained when the plaintext ran out (`short`) and the socket's last read was
    /// short too: rustls decrypts every whole record it has read, so what it still
    /// holds is part of a record whose rest will come as a new event. (A read that
    /// filled rustls's buffer proves nothing: the socket may hold more.)
    fn drained(&self, short: bool) -> bool {
        short && self.socket_short
    }
    fn read_stamped(&mut self, buf: &mut [u8]) -> io::Result<(usize, Option<Instant>)> {
        // Plaintext rustls already held came with the records last read: their time.
        let n = self.read(buf)?;
        Ok((n, self.arrived))
    }
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.tls.writer().write(buf)?;
        self.flush()?;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<bool> {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut self.stream) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
}

/// Accepts any certificate (`--insecure`), still checking handshake signatures.
#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
