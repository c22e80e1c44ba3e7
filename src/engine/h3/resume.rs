//! `--resume`: which kind each QUIC handshake was. quinn does not say whether rustls
//! resumed a session, so each connection's crypto session is the run's own rustls
//! session seen through [`Watched`], which reads the handshake messages the server
//! sends: a full handshake carries the server's certificate (TLS 1.3 `Certificate`,
//! RFC 8446 §4.4.2), a resumed one does not (the pre-shared key stands for it). The
//! rustls configuration, its session cache and its verifier stay the run's one (rustls
//! resumes a session only with the verifier that checked it).

use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use quinn::crypto::{self, ExportKeyingMaterialError, HeaderKey, KeyPair, Keys, PacketKey};
use quinn_proto::transport_parameters::TransportParameters;

/// The kind of a QUIC handshake (the index of its histogram in `QuicSum`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Handshake {
    /// 1-RTT, the server's certificate sent and checked.
    Full = 0,
    /// Resumed from a session ticket.
    Resumed = 1,
    /// Resumed, with 0-RTT early data the server accepted.
    ZeroRtt = 2,
}

impl Handshake {
    /// The kind of a handshake done: whether the server sent its certificate, and
    /// whether it accepted 0-RTT data.
    pub(super) fn of(certificate: bool, zero_rtt_accepted: bool) -> Handshake {
        match (certificate, zero_rtt_accepted) {
            (true, _) => Handshake::Full,
            (false, true) => Handshake::ZeroRtt,
            (false, false) => Handshake::Resumed,
        }
    }
}

/// The run's QUIC crypto configuration, each session it starts watched; one per
/// connection, with the flag its session raises on the server's certificate.
pub(super) struct Watched {
    pub(super) inner: Arc<dyn crypto::ClientConfig>,
    pub(super) certificate: Arc<AtomicBool>,
}

impl crypto::ClientConfig for Watched {
    fn start_session(
        self: Arc<Self>,
        version: u32,
        server_name: &str,
        params: &TransportParameters,
    ) -> Result<Box<dyn crypto::Session>, quinn::ConnectError> {
        let inner = self
            .inner
            .clone()
            .start_session(version, server_name, params)?;
        Ok(Box::new(Session {
            inner,
            messages: Messages::default(),
            certificate: self.certificate.clone(),
        }))
    }
}

/// The handshake messages read so far: where the current one's header or body is.
#[derive(Default)]
struct Messages {
    header: [u8; 4],
    have: usize,
    /// Bytes of the current message's body still to skip.
    skip: usize,
}

impl Messages {
    /// Reads `buf`, the next bytes of the server's handshake messages (in order, as
    /// QUIC's CRYPTO frames deliver them); true when a certificate message began.
    fn read(&mut self, mut buf: &[u8]) -> bool {
        let mut certificate = false;
        while !buf.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(buf.len());
                self.skip -= n;
                buf = &buf[n..];
                continue;
            }
            self.header[self.have] = buf[0];
            self.have += 1;
            buf = &buf[1..];
            if self.have == 4 {
                // Certificate (11), or CompressedCertificate (25, RFC 8879).
                certificate |= matches!(self.header[0], 11 | 25);
                self.skip = u32::from_be_bytes([0, self.header[1], self.header[2], self.header[3]])
                    as usize;
                self.have = 0;
            }
        }
        certificate
    }
}

/// A rustls session for QUIC, its incoming handshake messages read on the way.
struct Session {
    inner: Box<dyn crypto::Session>,
    messages: Messages,
    certificate: Arc<AtomicBool>,
}

impl crypto::Session for Session {
    fn initial_keys(&self, dst_cid: &quinn::ConnectionId, side: quinn::Side) -> Keys {
        self.inner.initial_keys(dst_cid, side)
    }
    fn handshake_data(&self) -> Option<Box<dyn Any>> {
        self.inner.handshake_data()
    }
    fn peer_identity(&self) -> Option<Box<dyn Any>> {
        self.inner.peer_identity()
    }
    fn early_crypto(&self) -> Option<(Box<dyn HeaderKey>, Box<dyn PacketKey>)> {
        self.inner.early_crypto()
    }
    fn early_data_accepted(&self) -> Option<bool> {
        self.inner.early_data_accepted()
    }
    fn is_handshaking(&self) -> bool {
        self.inner.is_handshaking()
    }
    fn read_handshake(&mut self, buf: &[u8]) -> Result<bool, quinn_proto::TransportError> {
        if self.messages.read(buf) {
            self.certificate.store(true, Ordering::Relaxed);
        }
        self.inner.read_handshake(buf)
    }
    fn transport_parameters(
        &self,
    ) -> Result<Option<TransportParameters>, quinn_proto::TransportError> {
        self.inner.transport_parameters()
    }
    fn write_handshake(&mut self, buf: &mut Vec<u8>) -> Option<Keys> {
        self.inner.write_handshake(buf)
    }
    fn next_1rtt_keys(&mut self) -> Option<KeyPair<Box<dyn PacketKey>>> {
        self.inner.next_1rtt_keys()
    }
    fn is_valid_retry(
        &self,
        orig_dst_cid: &quinn::ConnectionId,
        header: &[u8],
        payload: &[u8],
    ) -> bool {
        self.inner.is_valid_retry(orig_dst_cid, header, payload)
    }
    fn export_keying_material(
        &self,
        output: &mut [u8],
        label: &[u8],
        context: &[u8],
    ) -> Result<(), ExportKeyingMaterialError> {
        self.inner.export_keying_material(output, label, context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_is_seen_across_split_reads() {
        // EncryptedExtensions (8, 2 bytes), then Certificate (11, 3 bytes), split
        // mid-header and mid-body.
        let bytes = [8u8, 0, 0, 2, 0xaa, 0xbb, 11, 0, 0, 3, 1, 2, 3];
        let mut m = Messages::default();
        assert!(!m.read(&bytes[..4]));
        assert!(!m.read(&bytes[4..8]));
        assert!(m.read(&bytes[8..11]));
        assert!(!m.read(&bytes[11..]));
        // A body holding the byte 11 is not a message header.
        let mut m = Messages::default();
        assert!(!m.read(&[4, 0, 0, 3, 11, 0, 0, 20, 0, 0, 1, 9]));
    }

    #[test]
    fn kinds() {
        assert_eq!(Handshake::of(true, true), Handshake::Full);
        assert_eq!(Handshake::of(false, true), Handshake::ZeroRtt);
        assert_eq!(Handshake::of(false, false), Handshake::Resumed);
    }
}
