//! Node.js: recognised from its executable (`node`, `nodejs`); loadlens reads none of
//! its configuration and does not change it.

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
