//! Envoy: recognised from its executable; loadlens reads none of its configuration
//! and does not change it.

use super::{Knob, Knobs, Wording};
use crate::run::{KindInfo, ServerKind};

/// This kind, as recorded in the Run.
pub const KIND: ServerKind = ServerKind::new("envoy");

#[linkme::distributed_slice(crate::run::KINDS)]
static INFO: KindInfo = KindInfo {
    kind: KIND,
    name: "Envoy",
    title: "Envoy",
    executable: |n| n.starts_with("envoy"),
    ignore_case: false,
};

/// What Envoy calls each knob, for the fixes (`diagnose` asks through [`super::knob`]).
fn knob(knob: Knob) -> Option<Wording> {
    Some(match knob {
        Knob::Workers => ("`--concurrency` (worker threads)", None),
        Knob::Connections => ("the listener's connection limit (overload manager `downstream_connections`, cluster `circuit_breakers`)", None),
        Knob::Backlog => ("the listener's `tcp_backlog_size`", None),
        Knob::OpenFiles
        | Knob::Affinity
        | Knob::UpstreamReuse
        | Knob::Reuseport
        | Knob::KeepAlive
        | Knob::Pool
        | Knob::UdpBuffer => return None,
    })
}

#[linkme::distributed_slice(super::KNOBS)]
static KNOBS: Knobs = Knobs { kind: KIND, knob };
