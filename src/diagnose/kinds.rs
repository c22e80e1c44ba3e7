//! What each server calls its knobs. Rules reason about roles and resources (workers,
//! a connection limit, the accept queue, open files); a fix names the server's own
//! directive from here, and a server loadlens does not know gets the generic wording.
//! Sources: nginx's core and event module docs; Apache's mpm_common, mpm_event and
//! mod_proxy docs; HAProxy's configuration manual (2.6); php-fpm's pool configuration.

use crate::run::ServerKind;

/// A resource a server lets its operator size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Knob {
    /// How many processes or threads serve (the CPUs it can use).
    Workers,
    /// How many connections (or requests in progress) it serves at once.
    Connections,
    /// The backlog it passes to listen().
    Backlog,
    /// Its open-files limit.
    OpenFiles,
    /// Pinning its workers to CPUs.
    Affinity,
    /// Keeping connections to its upstream open between requests.
    UpstreamReuse,
    /// One accept queue per worker.
    Reuseport,
}

/// The fix phrase for `knob` in `kind`'s own terms, or `None` when loadlens does not
/// know the server (or the server has no such knob): the caller words it generically.
pub fn knob(kind: ServerKind, knob: Knob) -> Option<&'static str> {
    use Knob::*;
    use ServerKind::*;
    Some(match (kind, knob) {
        (Nginx, Workers) => "`worker_processes auto;`",
        (Nginx, Connections) => {
            "`worker_connections` in the events block, with `worker_rlimit_nofile` at least as high"
        }
        (Nginx, Backlog) => "the nginx `listen ... backlog=`",
        (Nginx, OpenFiles) => "`worker_rlimit_nofile 65535;` (and `LimitNOFILE=` in its unit)",
        (Nginx, Affinity) => "`worker_cpu_affinity`",
        (Nginx, UpstreamReuse) => {
            "`keepalive 32;` (and `keepalive_requests` high) in the upstream block with `proxy_http_version 1.1; proxy_set_header Connection \"\";` (FastCGI: `fastcgi_keep_conn on;`)"
        }
        (Nginx, Reuseport) => "`listen ... reuseport;`",
        (Apache, Workers) => "`ServerLimit` × `ThreadsPerChild` (the MPM's processes and threads)",
        (Apache, Connections) => {
            "`MaxRequestWorkers` (with `ServerLimit` × `ThreadsPerChild` at least as high)"
        }
        (Apache, Backlog) => "Apache's `ListenBacklog`",
        (Apache, OpenFiles) => {
            "`APACHE_ULIMIT_MAX_FILES` in /etc/apache2/envvars (or `LimitNOFILE=` in its unit)"
        }
        (Apache, UpstreamReuse) => "`enablereuse=on` on the `ProxyPass` worker",
        (Haproxy, Workers) => "`nbthread` in the global section",
        (Haproxy, Connections) => "`maxconn` in the global section (and the frontend's)",
        (Haproxy, Backlog) => "`backlog` on the frontend (it follows the frontend's `maxconn`)",
        (Haproxy, OpenFiles) => "`ulimit-n` (HAProxy derives it from `maxconn`)",
        (Haproxy, Affinity) => "`cpu-map`",
        (Haproxy, UpstreamReuse) => "`http-reuse always` in the backend",
        (Node, Workers) => "the `cluster` module (one process per CPU, sharing the port)",
        (Node, Connections) => "`server.maxConnections`",
        (Node, Backlog) => "the `backlog` argument of `server.listen()` (default 511)",
        (Envoy, Workers) => "`--concurrency` (worker threads)",
        (Envoy, Connections) => {
            "the listener's connection limit (overload manager `downstream_connections`, cluster `circuit_breakers`)"
        }
        (Envoy, Backlog) => "the listener's `tcp_backlog_size`",
        (Caddy, Workers) => "`GOMAXPROCS` (Caddy's threads)",
        (PhpFpm, Workers | Connections) => "`pm.max_children` in the pool",
        (PhpFpm, Backlog) => "`listen.backlog` in the pool",
        (PhpFpm, OpenFiles) => "`rlimit_files` in php-fpm.conf",
        _ => return None,
    })
}

/// The directive whose current value shows a knob, for `(now …)`.
pub fn setting(kind: ServerKind, knob: Knob) -> Option<&'static str> {
    use Knob::*;
    use ServerKind::*;
    Some(match (kind, knob) {
        (Nginx, Workers) => "worker_processes",
        (Nginx, Connections) => "worker_connections",
        (Nginx, Backlog) => "listen",
        (Nginx, OpenFiles) => "worker_rlimit_nofile",
        (Apache, Workers) => "ThreadsPerChild",
        (Apache, Connections) => "MaxRequestWorkers",
        (Apache, Backlog) => "ListenBacklog",
        (Haproxy, Workers) => "nbthread",
        (Haproxy, Connections) => "maxconn",
        (Haproxy, Backlog) => "backlog",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_front_server_names_its_limits() {
        for kind in [ServerKind::Nginx, ServerKind::Apache, ServerKind::Haproxy] {
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
        assert_eq!(knob(ServerKind::Unknown, Knob::Connections), None);
        assert!(knob(ServerKind::Envoy, Knob::Backlog)
            .unwrap()
            .contains("tcp_backlog_size"));
        assert!(knob(ServerKind::Haproxy, Knob::Connections)
            .unwrap()
            .contains("maxconn"));
        assert!(knob(ServerKind::Apache, Knob::Connections)
            .unwrap()
            .contains("MaxRequestWorkers"));
    }
}
