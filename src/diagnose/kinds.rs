//! What each server calls its knobs. Rules reason about roles and resources (workers,
//! a connection limit, the accept queue, open files); a fix names the server's own
//! directive from here, and a server loadlens does not know gets the generic wording.
//! Sources: nginx's core and event module docs; Apache's mpm_common, mpm_event and
//! mod_proxy docs; HAProxy's configuration manual (2.6); php-fpm's pool configuration.

use crate::run::ServerKind;

pub use crate::kinds::Knob;

/// A knob in `kind`'s own terms: the fix phrase, and the directive whose current value
/// shows it (for `(now …)`) where loadlens reads one. `None` when loadlens does not know
/// the server (or the server has no such knob): the caller words it generically.
fn entry(kind: ServerKind, knob: Knob) -> Option<(&'static str, Option<&'static str>)> {
    use Knob::*;
    use ServerKind::*;
    // A kind whose file says it (`kinds/caddy.rs`) answers for itself.
    if let Some(s) = crate::kinds::of(kind) {
        if let Some(e) = s.knob(knob) {
            return Some(e);
        }
    }
    Some(match (kind, knob) {
        (Nginx, Workers) => ("`worker_processes auto;`", Some("worker_processes")),
        (Nginx, Connections) => ("`worker_connections` in the events block, with `worker_rlimit_nofile` at least as high", Some("worker_connections")),
        (Nginx, Backlog) => ("the nginx `listen ... backlog=`", Some("listen")),
        (Nginx, OpenFiles) => ("`worker_rlimit_nofile 65535;` (and `LimitNOFILE=` in its unit)", Some("worker_rlimit_nofile")),
        (Nginx, Affinity) => ("`worker_cpu_affinity`", Some("worker_cpu_affinity")),
        (Nginx, UpstreamReuse) => ("`keepalive 32;` (and `keepalive_requests` high) in the upstream block with `proxy_http_version 1.1; proxy_set_header Connection \"\";` (FastCGI: `fastcgi_keep_conn on;`)", None),
        (Nginx, Reuseport) => ("`listen ... reuseport;`", None),
        (Nginx, KeepAlive) => ("`keepalive_timeout 65;` and `keepalive_requests 1000;`", Some("keepalive_timeout")),
        (Apache, KeepAlive) => ("`KeepAlive On` with `MaxKeepAliveRequests 1000` and `KeepAliveTimeout 5`", Some("KeepAlive")),
        (Haproxy, KeepAlive) => ("`option http-keep-alive` with `timeout http-keep-alive`", None),
        (Node, KeepAlive) => ("`server.keepAliveTimeout` (and no `Connection: close` from the handlers)", None),
        (Apache, Workers) => ("`ServerLimit` × `ThreadsPerChild` (the MPM's processes and threads)", Some("ThreadsPerChild")),
        (Apache, Connections) => ("`MaxRequestWorkers` (with `ServerLimit` × `ThreadsPerChild` at least as high)", Some("MaxRequestWorkers")),
        (Apache, Backlog) => ("Apache's `ListenBacklog`", Some("ListenBacklog")),
        (Apache, OpenFiles) => ("`APACHE_ULIMIT_MAX_FILES` in /etc/apache2/envvars (or `LimitNOFILE=` in its unit)", None),
        (Apache, UpstreamReuse) => ("`enablereuse=on` on the `ProxyPass` worker", None),
        (Haproxy, Workers) => ("`nbthread` in the global section", Some("nbthread")),
        (Haproxy, Connections) => ("`maxconn` in the global section (and the frontend's)", Some("maxconn")),
        (Haproxy, Backlog) => ("`backlog` on the frontend (it follows the frontend's `maxconn`)", Some("backlog")),
        (Haproxy, OpenFiles) => ("`ulimit-n` (HAProxy derives it from `maxconn`)", None),
        (Haproxy, Affinity) => ("`cpu-map`", None),
        (Haproxy, UpstreamReuse) => ("`http-reuse always` in the backend", None),
        (Node, Workers) => ("the `cluster` module (one process per CPU, sharing the port)", None),
        (Node, Connections) => ("`server.maxConnections`", None),
        (Node, Backlog) => ("the `backlog` argument of `server.listen()` (default 511)", None),
        (Envoy, Workers) => ("`--concurrency` (worker threads)", None),
        (Envoy, Connections) => ("the listener's connection limit (overload manager `downstream_connections`, cluster `circuit_breakers`)", None),
        (Envoy, Backlog) => ("the listener's `tcp_backlog_size`", None),
        (Nginx, UdpBuffer) => ("the receive buffer of nginx's QUIC listener, `listen 443 quic reuseport rcvbuf=8m;` (within `net.core.rmem_max`)", Some("listen")),
        (PhpFpm, Pool) => ("`pm.max_children` in the pool (each child serves one request at a time)", None),
        (Apache, Pool) => ("`MaxRequestWorkers` (with `ServerLimit` × `ThreadsPerChild` at least as high)", Some("MaxRequestWorkers")),
        (Java, Pool) => ("the request thread pool: `maxThreads` on Tomcat's Connector (Jetty's `QueuedThreadPool` `maxThreads`, Spring Boot's `server.tomcat.threads.max`, the HttpServer executor's size)", None),
        (Java, Workers) => ("the request thread pool's `maxThreads`", None),
        (PhpFpm, Workers | Connections) => ("`pm.max_children` in the pool", None),
        (PhpFpm, Backlog) => ("`listen.backlog` in the pool", None),
        (PhpFpm, OpenFiles) => ("`rlimit_files` in php-fpm.conf", None),
        _ => return None,
    })
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
