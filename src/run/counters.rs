//! The kernel's network counters loadlens reads from `/proc/net/netstat`, `/proc/net/snmp`
//! and `/proc/net/snmp6`'s UDP lines, by name: each one's key in the Run (`Window::counters`,
//! the same `Group.Name` strings as the files), its unit and what it counts, in one
//! place. Rules, reports and comparisons name a [`Counter`], so a misspelt one does not
//! compile.

/// A counter of the kernel's network stack, as a window delta.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Counter {
    ListenOverflows,
    ListenDrops,
    PassiveOpens,
    ActiveOpens,
    AttemptFails,
    EstabResets,
    OutRsts,
    InErrs,
    OutSegs,
    RetransSegs,
    SyncookiesSent,
    ReqQFullDoCookies,
    ReqQFullDrop,
    SynRetrans,
    Timeouts,
    LossProbes,
    AbortOnData,
    AbortOnMemory,
    TimeWaitOverflow,
    TimeWait,
    UdpInDatagrams,
    UdpInErrors,
    UdpRcvbufErrors,
}

impl Counter {
    /// Every counter, in the order of the table below.
    pub const ALL: &'static [Counter] = &[
        Counter::ListenOverflows,
        Counter::ListenDrops,
        Counter::PassiveOpens,
        Counter::ActiveOpens,
        Counter::AttemptFails,
        Counter::EstabResets,
        Counter::OutRsts,
        Counter::InErrs,
        Counter::OutSegs,
        Counter::RetransSegs,
        Counter::SyncookiesSent,
        Counter::ReqQFullDoCookies,
        Counter::ReqQFullDrop,
        Counter::SynRetrans,
        Counter::Timeouts,
        Counter::LossProbes,
        Counter::AbortOnData,
        Counter::AbortOnMemory,
        Counter::TimeWaitOverflow,
        Counter::TimeWait,
        Counter::UdpInDatagrams,
        Counter::UdpInErrors,
        Counter::UdpRcvbufErrors,
    ];

    /// Its key in the Run and in `/proc` (`TcpExt.ListenOverflows`), its unit, and what
    /// it counts.
    fn row(self) -> (&'static str, &'static str, &'static str) {
        use Counter::*;
        match self {
            ListenOverflows => (
                "TcpExt.ListenOverflows",
                "connections",
                "connections dropped because a listening socket's accept queue was full",
            ),
            ListenDrops => (
                "TcpExt.ListenDrops",
                "connections",
                "connections dropped at a listening socket for any reason, overflows included",
            ),
            PassiveOpens => (
                "Tcp.PassiveOpens",
                "connections",
                "connections accepted by listening sockets",
            ),
            ActiveOpens => (
                "Tcp.ActiveOpens",
                "connections",
                "connections opened from this machine",
            ),
            AttemptFails => (
                "Tcp.AttemptFails",
                "connections",
                "connection attempts that failed",
            ),
            EstabResets => (
                "Tcp.EstabResets",
                "connections",
                "established connections reset",
            ),
            OutRsts => ("Tcp.OutRsts", "segments", "RST segments sent"),
            InErrs => (
                "Tcp.InErrs",
                "segments",
                "segments received in error (a bad checksum, a full queue)",
            ),
            OutSegs => ("Tcp.OutSegs", "segments", "segments sent"),
            RetransSegs => ("Tcp.RetransSegs", "segments", "segments sent again"),
            SyncookiesSent => (
                "TcpExt.SyncookiesSent",
                "SYNs",
                "SYNs answered with a SYN cookie",
            ),
            ReqQFullDoCookies => (
                "TcpExt.TCPReqQFullDoCookies",
                "SYNs",
                "SYNs answered with a cookie because the SYN queue was full",
            ),
            ReqQFullDrop => (
                "TcpExt.TCPReqQFullDrop",
                "SYNs",
                "SYNs dropped because the SYN queue was full",
            ),
            SynRetrans => ("TcpExt.TCPSynRetrans", "SYNs", "SYNs sent again"),
            Timeouts => (
                "TcpExt.TCPTimeouts",
                "timeouts",
                "retransmission timeouts that fired",
            ),
            LossProbes => ("TcpExt.TCPLossProbes", "probes", "tail loss probes sent"),
            AbortOnData => (
                "TcpExt.TCPAbortOnData",
                "connections",
                "connections reset because data arrived after close",
            ),
            AbortOnMemory => (
                "TcpExt.TCPAbortOnMemory",
                "connections",
                "connections reset for want of socket memory",
            ),
            TimeWaitOverflow => (
                "TcpExt.TCPTimeWaitOverflow",
                "connections",
                "TIME_WAIT sockets not kept because the bucket table was full",
            ),
            TimeWait => (
                "TcpExt.TW",
                "connections",
                "connections that finished their TIME_WAIT",
            ),
            UdpInDatagrams => (
                "Udp.InDatagrams",
                "datagrams",
                "UDP datagrams delivered to sockets",
            ),
            UdpInErrors => (
                "Udp.InErrors",
                "datagrams",
                "UDP datagrams not delivered (errors, full buffers)",
            ),
            UdpRcvbufErrors => (
                "Udp.RcvbufErrors",
                "datagrams",
                "UDP datagrams dropped because a socket's receive buffer was full",
            ),
        }
    }

    /// Its key in the Run's counters and in `/proc` (`TcpExt.ListenOverflows`).
    pub fn key(self) -> &'static str {
        self.row().0
    }

    /// What it counts in (`connections`, `segments`, `SYNs`).
    pub fn unit(self) -> &'static str {
        self.row().1
    }

    /// What it counts, in a line.
    pub fn meaning(self) -> &'static str {
        self.row().2
    }

    /// A finding's evidence: this counter's change, under its key and in its unit.
    pub fn fact(self, value: f64) -> super::Fact {
        super::Fact {
            name: self.key().to_string(),
            value,
            unit: self.unit().to_string(),
        }
    }

    /// The counter whose key is `key`.
    pub fn from_key(key: &str) -> Option<Counter> {
        Counter::ALL.iter().copied().find(|c| c.key() == key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_distinct_and_named_as_proc_names_them() {
        for (i, c) in Counter::ALL.iter().enumerate() {
            assert_eq!(Counter::from_key(c.key()), Some(*c));
            let (group, name) = c.key().split_once('.').unwrap();
            assert!(["Tcp", "TcpExt", "Udp"].contains(&group), "{c:?}");
            assert!(!name.is_empty() && !c.unit().is_empty() && !c.meaning().is_empty());
            assert!(!Counter::ALL[..i].contains(c));
        }
    }
}
