//! What each server calls its knobs. Rules reason about roles and resources (workers,
//! a connection limit, the accept queue, open files); a fix names the server's own
//! directive, which each kind's file says (`kinds/<server>.rs`, `fn knob`: nginx's core
//! and event module docs, Apache's mpm_common, mpm_event and mod_proxy docs, HAProxy's
//! configuration manual, php-fpm's pool configuration…), and a server loadlens does not
//! know gets the generic wording.

use crate::run::ServerKind;

pub use crate::kinds::Knob;

/// A knob in `kind`'s own terms: the fix phrase, and the directive whose current value
/// shows it (for `(now …)`) where loadlens reads one, as the kind's file says
/// (`kinds/<server>.rs`, `fn knob`). `None` when loadlens does not know the server (or
/// the server has no such knob): the caller words it generically.
fn entry(kind: ServerKind, knob: Knob) -> Option<crate::kinds::Wording> {
    crate::kinds::knob(kind, knob)
}

/// The fix phrase for `knob` in `kind`'s own terms, or `None` when loadlens does not
/// know the server (or the server has no such knob): the caller words it generically.
pub fn knob(kind: ServerKind, knob: Knob) -> Option<&'static str> {
    entry(kind, knob).map(|(phrase, _)| phrase)
}

/// The directive whose current value shows a knob, for `(now …)`.
pub fn setting(kind: ServerKind, knob: Knob) -> Option<&'static str> {
    entry(kind, knob).and_then(|(_, setting)| setting)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_front_server_names_its_limits() {
        for kind in [
            crate::kinds::nginx::KIND,
            crate::kinds::apache::KIND,
            crate::kinds::haproxy::KIND,
        ] {
            for k in [
                Knob::Workers,
                Knob::Connections,
                Knob::Backlog,
                Knob::OpenFiles,
            ] {
                assert!(knob(kind, k).is_some(), "{kind:?} {k:?}");
                if k != Knob::OpenFiles {
                    assert!(setting(kind, k).is_some(), "{kind:?} {k:?}");
                }
            }
        }
        assert_eq!(knob(ServerKind::UNKNOWN, Knob::Connections), None);
        assert!(knob(crate::kinds::envoy::KIND, Knob::Backlog)
            .unwrap()
            .contains("tcp_backlog_size"));
        assert!(knob(crate::kinds::haproxy::KIND, Knob::Connections)
            .unwrap()
            .contains("maxconn"));
        assert!(knob(crate::kinds::apache::KIND, Knob::Connections)
            .unwrap()
            .contains("MaxRequestWorkers"));
    }
}
