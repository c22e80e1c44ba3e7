//! Envoy: recognised from its executable; loadlens reads none of its configuration
//! and does not change it.

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
