//! Node.js: recognised from its executable (`node`, `nodejs`); loadlens reads none of
//! its configuration and does not change it.

use super::{Knob, Knobs, Wording};
use crate::run::{KindInfo, ServerKind};

/// This kind, as recorded in the Run.
pub const KIND: ServerKind = ServerKind::new("node");

#[linkme::distributed_slice(crate::run::KINDS)]
static INFO: KindInfo = KindInfo {
    kind: KIND,
    name: "Node.js",
    title: "Node.js",
    executable: |n| matches!(n, "node" | "nodejs"),
    ignore_case: false,
};

/// What Node.js calls each knob, for the fixes (`diagnose` asks through [`super::knob`]).
fn knob(knob: Knob) -> Option<Wording> {
    Some(match knob {
        Knob::KeepAlive => (
            "`server.keepAliveTimeout` (and no `Connection: close` from the handlers)",
            None,
        ),
        Knob::Workers => (
            "the `cluster` module (one process per CPU, sharing the port)",
            None,
        ),
        Knob::Connections => ("`server.maxConnections`", None),
        Knob::Backlog => (
            "the `backlog` argument of `server.listen()` (default 511)",
            None,
        ),
        Knob::OpenFiles
        | Knob::Affinity
        | Knob::UpstreamReuse
        | Knob::Reuseport
        | Knob::Pool
        | Knob::UdpBuffer => return None,
    })
}

#[linkme::distributed_slice(super::KNOBS)]
static KNOBS: Knobs = Knobs { kind: KIND, knob };
