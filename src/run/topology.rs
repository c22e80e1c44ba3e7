//! What was watched, as found before the load: the listening sockets, the server's
//! processes, the configuration read from the server.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What is being watched, as found before the load.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Topology {
    /// One line for people: "watching nginx master 4120 + 2 workers on 127.0.0.1:8080",
    /// or why nothing is watched.
    pub summary: String,
    /// Whose network namespace the network counters are read from: `loadlens` (its own)
    /// or `pid N` (the server's, when it lives in another namespace).
    pub netns: String,
    /// The TCP listening sockets on the target port.
    pub listeners: Vec<Listener>,
    /// Unix listening sockets held by the watched processes (e.g. php-fpm's).
    pub unix_listeners: Vec<Listener>,
    /// The TCP listening sockets of the upstreams the front's configuration names
    /// (`proxy_pass http://127.0.0.1:9000`): their accept queues are watched too.
    #[serde(default)]
    pub upstream_listeners: Vec<Listener>,
    /// The server's processes.
    pub processes: Vec<ServerProcess>,
    /// The front server's configuration as read from the server itself: nginx's
    /// `nginx -T`, Apache's and HAProxy's config files (named on their command line or
    /// the distribution's default), when it could be read. (`nginx` in Runs of schema 1
    /// recorded before other servers were read.)
    #[serde(default, alias = "nginx")]
    pub config: Option<ServerConfig>,
    /// The upstream's configuration, where loadlens has a reader for its kind (uWSGI's
    /// ini, Tomcat's server.xml): the current value of the knob a fix names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_config: Option<ServerConfig>,
}

/// One watched server process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerProcess {
    pub pid: i32,
    pub ppid: i32,
    /// Command name (`nginx`, `php-fpm8.2`).
    pub comm: String,
    /// Which server it is, from its executable: what loadlens knows of its
    /// configuration, logs and directives.
    #[serde(default)]
    pub kind: ServerKind,
    /// `master` (its children are watched too), `worker` (a child of a watched
    /// process), or `server` (neither).
    pub role: Role,
    /// `front`: serves the URL (holds its listening socket, or was named by
    /// `--server-pid`/`--server-name` when nothing holds it); `upstream`: where the
    /// front passes requests (found from nginx's `*_pass` directives, or named).
    #[serde(default)]
    pub tier: Tier,
}

/// A listening socket and its queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Listener {
    /// `127.0.0.1:8080`, `[::]:80` or a unix socket path.
    pub addr: String,
    /// TCP port (0 for unix sockets).
    pub port: u16,
    /// Socket inode, which ties it to the processes holding it (/proc/PID/fd).
    pub inode: u64,
    /// Connections completed by the kernel but not yet accepted by the server.
    pub queue: u32,
    /// The accept queue's limit: min(listen() backlog, somaxconn).
    pub backlog: u32,
    /// An IPv6 socket with `IPV6_V6ONLY` set: a wildcard `[::]` that serves no IPv4
    /// client (sock_diag's `INET_DIAG_SKV6ONLY`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub v6only: bool,
}

/// The server's configuration as read: `nginx -T`, or Apache's/HAProxy's files.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerConfig {
    /// Whose configuration it is (absent in older Runs: nginx).
    #[serde(default = "ServerKind::nginx")]
    pub kind: ServerKind,
    /// The config file read.
    pub conf: String,
    /// Directive → each value it has in the configuration, in order (`listen` may appear
    /// many times; `keepalive` in an upstream block and at server level are both here).
    /// Apache's directive names are kept as written (`MaxRequestWorkers`); look them
    /// up with [`ServerConfig::get`], which ignores case as Apache does.
    pub directives: BTreeMap<String, Vec<String>>,
    /// Where it passes requests (`proxy_pass`, `fastcgi_pass`, … and the servers of
    /// the `upstream` blocks they name), as written: `unix:/run/php/php8.2-fpm.sock`,
    /// `127.0.0.1:9000`.
    #[serde(default)]
    pub upstreams: Vec<String>,
}

impl ServerConfig {
    /// A directive's values joined with ` | `, or `None` when it is not set. Names
    /// compare without case for Apache, exactly for the others.
    pub fn get(&self, directive: &str) -> Option<String> {
        let v = match self.kind {
            ServerKind::Apache => self
                .directives
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(directive))
                .map(|(_, v)| v),
            _ => self.directives.get(directive),
        }?;
        Some(v.join(" | "))
    }
}

/// A watched process's place in its server.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Its children are watched too.
    Master,
    /// A child of a watched process.
    Worker,
    /// Neither.
    #[default]
    Server,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Master => "master",
            Role::Worker => "worker",
            Role::Server => "server",
        }
    }
}

/// Which server a watched process belongs to: the one serving the URL or one behind it.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Front,
    Upstream,
    /// Not recorded (Runs older than tiers).
    #[default]
    #[serde(rename = "")]
    Unknown,
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Front => "front",
            Tier::Upstream => "upstream",
            Tier::Unknown => "",
        }
    }
}

/// A server loadlens knows, detected from the executable of its process. Rules reason
/// about roles and resources; the kind only adds the server's own directive names, log
/// formats and config reader.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ServerKind {
    Nginx,
    PhpFpm,
    /// Apache httpd (`apache2` on Debian, `httpd` elsewhere).
    Apache,
    Haproxy,
    Envoy,
    Caddy,
    Node,
    /// A JVM (Tomcat, Jetty, the JDK's HttpServer…), from the `java` executable.
    Java,
    /// lighttpd (`kinds/lighttpd.rs`).
    Lighttpd,
    /// uWSGI (`kinds/uwsgi.rs`).
    Uwsgi,
    /// Apache Tomcat: a JVM whose command line runs `org.apache.catalina…`
    /// (`kinds/tomcat.rs`).
    Tomcat,
    #[default]
    Unknown,
}

impl ServerKind {
    /// From an executable's file name (`/usr/sbin/php-fpm8.2` → `php-fpm8.2`) or, when
    /// the executable is unreadable, the command name.
    pub fn from_executable(name: &str) -> ServerKind {
        let n = name.rsplit('/').next().unwrap_or(name);
        let n = n.strip_suffix(" (deleted)").unwrap_or(n);
        match n {
            _ if n.starts_with("nginx") => ServerKind::Nginx,
            _ if n.starts_with("php-fpm") => ServerKind::PhpFpm,
            "apache2" | "httpd" | "httpd2" => ServerKind::Apache,
            _ if n.starts_with("haproxy") => ServerKind::Haproxy,
            _ if n.starts_with("envoy") => ServerKind::Envoy,
            _ if n.starts_with("caddy") => ServerKind::Caddy,
            "node" | "nodejs" => ServerKind::Node,
            "java" => ServerKind::Java,
            _ => ServerKind::Unknown,
        }
    }

    /// For `#[serde(default)]` of configs recorded before kinds.
    pub fn nginx() -> ServerKind {
        ServerKind::Nginx
    }

    /// The name people call it by.
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Nginx => "nginx",
            ServerKind::PhpFpm => "php-fpm",
            ServerKind::Apache => "Apache",
            ServerKind::Haproxy => "HAProxy",
            ServerKind::Envoy => "Envoy",
            ServerKind::Caddy => "Caddy",
            ServerKind::Node => "Node.js",
            ServerKind::Java => "the JVM",
            ServerKind::Lighttpd => "lighttpd",
            ServerKind::Uwsgi => "uWSGI",
            ServerKind::Tomcat => "Tomcat",
            ServerKind::Unknown => "the server",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_from_executables() {
        for (exe, kind) in [
            ("/usr/sbin/nginx", ServerKind::Nginx),
            ("/usr/sbin/php-fpm8.2", ServerKind::PhpFpm),
            ("/usr/sbin/apache2", ServerKind::Apache),
            ("/usr/sbin/httpd", ServerKind::Apache),
            ("/usr/sbin/haproxy", ServerKind::Haproxy),
            ("/usr/bin/node", ServerKind::Node),
            ("/usr/local/bin/caddy", ServerKind::Caddy),
            ("/opt/app/server (deleted)", ServerKind::Unknown),
        ] {
            assert_eq!(ServerKind::from_executable(exe), kind, "{exe}");
        }
    }

    #[test]
    fn apache_directives_ignore_case() {
        let mut c = ServerConfig {
            kind: ServerKind::Apache,
            ..Default::default()
        };
        c.directives
            .insert("maxrequestworkers".into(), vec!["8".into()]);
        assert_eq!(c.get("MaxRequestWorkers").as_deref(), Some("8"));
        c.kind = ServerKind::Haproxy;
        assert_eq!(c.get("MaxRequestWorkers"), None);
    }
}
