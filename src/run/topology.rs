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
    /// The server's processes.
    pub processes: Vec<ServerProcess>,
    /// nginx's configuration (`nginx -T` with the master's binary and config), when the
    /// server is nginx and it could be read.
    #[serde(default)]
    pub nginx: Option<NginxConfig>,
}

/// One watched server process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerProcess {
    pub pid: i32,
    pub ppid: i32,
    /// Command name (`nginx`, `php-fpm8.2`).
    pub comm: String,
    /// `master` (its children are watched too), `worker` (a child of a watched
    /// process), or `server` (neither).
    pub role: String,
    /// `front`: serves the URL (holds its listening socket, or was named by
    /// `--server-pid`/`--server-name` when nothing holds it); `upstream`: where the
    /// front passes requests (found from nginx's `*_pass` directives, or named).
    #[serde(default)]
    pub tier: String,
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
}

/// What `nginx -T` said.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NginxConfig {
    /// The config file read.
    pub conf: String,
    /// Directive → each value it has in the configuration, in order (`listen` may appear
    /// many times; `keepalive` in an upstream block and at server level are both here).
    pub directives: BTreeMap<String, Vec<String>>,
    /// Where it passes requests (`proxy_pass`, `fastcgi_pass`, … and the servers of
    /// the `upstream` blocks they name), as written: `unix:/run/php/php8.2-fpm.sock`,
    /// `127.0.0.1:9000`.
    #[serde(default)]
    pub upstreams: Vec<String>,
}
