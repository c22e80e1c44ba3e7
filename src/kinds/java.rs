//! A JVM (Jetty, the JDK's HttpServer…) from the `java` executable, when it is not
//! Tomcat (`tomcat.rs`, told by its main class); loadlens reads none of its
//! configuration and does not change it.

use super::{Knob, Knobs, Wording};
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

/// What a JVM calls each knob, for the fixes (`diagnose` asks through [`super::knob`]).
fn knob(knob: Knob) -> Option<Wording> {
    Some(match knob {
        Knob::Pool => ("the request thread pool: `maxThreads` on Tomcat's Connector (Jetty's `QueuedThreadPool` `maxThreads`, Spring Boot's `server.tomcat.threads.max`, the HttpServer executor's size)", None),
        Knob::Workers => ("the request thread pool's `maxThreads`", None),
        Knob::Connections
        | Knob::Backlog
        | Knob::OpenFiles
        | Knob::Affinity
        | Knob::UpstreamReuse
        | Knob::Reuseport
        | Knob::KeepAlive
        | Knob::UdpBuffer => return None,
    })
}

#[linkme::distributed_slice(super::KNOBS)]
static KNOBS: Knobs = Knobs { kind: KIND, knob };
