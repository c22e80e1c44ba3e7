//! A JVM (Jetty, the JDK's HttpServer…) from the `java` executable, when it is not
//! Tomcat (`tomcat.rs`, told by its main class); loadlens reads none of its
//! configuration and does not change it.

use crate::run::{KindInfo, ServerKind};

/// This kind, as recorded in the Run.
pub const KIND: ServerKind = ServerKind::new("java");

#[linkme::distributed_slice(crate::run::KINDS)]
static INFO: KindInfo = KindInfo {
    kind: KIND,
    name: "the JVM",
    title: "Java (Jetty, HttpServer, a JVM not recognised as Tomcat)",
    executable: |n| n == "java",
    ignore_case: false,
};
