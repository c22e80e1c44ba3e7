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
    use crate::kinds::{apache, envoy, haproxy, java, nginx, node, php_fpm};
    use Knob::*;
    // A kind whose file says it (`kinds/caddy.rs`) answers for itself.
    if let Some(s) = crate::kinds::of(kind) {
        if let Some(e) = s.knob(knob) {
            return Some(e);
        }
    }
    Some(match (kind, knob) {
        (nginx::KIND, Workers) => ("`worker_processes auto;`", Some("worker_processes")),
        (nginx::KIND, Connections) => ("`worker_connections` in the events block, with `worker_rlimit_nofile` at least as high", Some("worker_connections")),
        (nginx::KIND, Backlog) => ("the nginx `listen ... backlog=`", Some("listen")),
        (nginx::KIND, OpenFiles) => ("`worker_rlimit_nofile 65535;` (and `LimitNOFILE=` in its unit)", Some("worker_rlimit_nofile")),
        (nginx::KIND, Affinity) => ("`worker_cpu_affinity`", Some("worker_cpu_affinity")),
        (nginx::KIND, UpstreamReuse) => ("`keepalive 32;` (and `keepalive_requests` high) in the upstream block with `proxy_http_version 1.1; proxy_set_header Connection \"\";` (FastCGI: `fastcgi_keep_conn on;`)", None),
        (nginx::KIND, Reuseport) => ("`listen ... reuseport;`", None),
        (nginx::KIND, KeepAlive) => ("`keepalive_timeout 65;` and `keepalive_requests 1000;`", Some("keepalive_timeout")),
        (apache::KIND, KeepAlive) => ("`KeepAlive On` with `MaxKeepAliveRequests 1000` and `KeepAliveTimeout 5`", Some("KeepAlive")),
        (haproxy::KIND, KeepAlive) => ("`option http-keep-alive` with `timeout http-keep-alive`", None),
        (node::KIND, KeepAlive) => ("`server.keepAliveTimeout` (and no `Connection: close` from the handlers)", None),
        (apache::KIND, Workers) => ("`ServerLimit` × `ThreadsPerChild` (the MPM's processes and threads)", Some("ThreadsPerChild")),
        (apache::KIND, Connections) => ("`MaxRequestWorkers` (with `ServerLimit` × `ThreadsPerChild` at least as high)", Some("MaxRequestWorkers")),
        (apache::KIND, Backlog) => ("Apache's `ListenBacklog`", Some("ListenBacklog")),
        (apache::KIND, OpenFiles) => ("`APACHE_ULIMIT_MAX_FILES` in /etc/apache2/envvars (or `LimitNOFILE=` in its unit)", None),
        (apache::KIND, UpstreamReuse) => ("`enablereuse=on` on the `ProxyPass` worker", None),
        (haproxy::KIND, Workers) => ("`nbthread` in the global section", Some("nbthread")),
        (haproxy::KIND, Connections) => ("`maxconn` in the global section (and the frontend's)", Some("maxconn")),
        (haproxy::KIND, Backlog) => ("`backlog` on the frontend (it follows the frontend's `maxconn`)", Some("backlog")),
        (haproxy::KIND, OpenFiles) => ("`ulimit-n` (HAProxy derives it from `maxconn`)", None),
        (haproxy::KIND, Affinity) => ("`cpu-map`", None),
        (haproxy::KIND, UpstreamReuse) => ("`http-reuse always` in the backend", None),
        (node::KIND, Workers) => ("the `cluster` module (one process per CPU, sharing the port)", None),
        (node::KIND, Connections) => ("`server.maxConnections`", None),
        (node::KIND, Backlog) => ("the `backlog` argument of `server.listen()` (default 511)", None),
        (envoy::KIND, Workers) => ("`--concurrency` (worker threads)", None),
        (envoy::KIND, Connections) => ("the listener's connection limit (overload manager `downstream_connections`, cluster `circuit_breakers`)", None),
        (envoy::KIND, Backlog) => ("the listener's `tcp_backlog_size`", None),
        (nginx::KIND, UdpBuffer) => ("the receive buffer of nginx's QUIC listener, `listen 443 quic reuseport rcvbuf=8m;` (within `net.core.rmem_max`)", Some("listen")),
        (php_fpm::KIND, Pool) => ("`pm.max_children` in the pool (each child serves one request at a time)", None),
        (apache::KIND, Pool) => ("`MaxRequestWorkers` (with `ServerLimit` × `ThreadsPerChild` at least as high)", Some("MaxRequestWorkers")),
        (java::KIND, Pool) => ("the request thread pool: `maxThreads` on Tomcat's Connector (Jetty's `QueuedThreadPool` `maxThreads`, Spring Boot's `server.tomcat.threads.max`, the HttpServer executor's size)", None),
        (java::KIND, Workers) => ("the request thread pool's `maxThreads`", None),
        (php_fpm::KIND, Workers | Connections) => ("`pm.max_children` in the pool", None),
        (php_fpm::KIND, Backlog) => ("`listen.backlog` in the pool", None),
        (php_fpm::KIND, OpenFiles) => ("`rlimit_files` in php-fpm.conf", None),
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
