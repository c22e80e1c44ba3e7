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
        let v = if self.kind.ignores_case() {
            self.directives
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(directive))
                .map(|(_, v)| v)
        } else {
            self.directives.get(directive)
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
/// formats and config reader. Each kind is declared in its own file in `src/kinds/`
/// (its `KIND` constant and its [`KindInfo`] in [`KINDS`]); recorded as its id, the
/// same string as ever (`nginx`, `php-fpm`); an id no file declares reads as `unknown`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServerKind(&'static str);

/// What a kind is called and how its processes are told, declared beside the rest of the
/// kind in `src/kinds/<server>.rs`: `#[distributed_slice(KINDS)] static INFO: KindInfo`.
pub struct KindInfo {
    pub kind: ServerKind,
    /// The name people call it by (`php-fpm`, `Apache`, `the JVM`).
    pub name: &'static str,
    /// Its row in docs/findings.md's tables of knobs (`Apache httpd`).
    pub title: &'static str,
    /// Whether an executable's file name (`php-fpm8.2`, `apache2`) is this kind's.
    pub executable: fn(&str) -> bool,
    /// Whether its directive names ignore case (Apache's do).
    pub ignore_case: bool,
}

/// Every server kind's [`KindInfo`], one in each kind's file, gathered when linking.
#[linkme::distributed_slice]
pub static KINDS: [KindInfo];

impl ServerKind {
    /// Not recognised: what a process of no known kind, or an id no file declares, is.
    pub const UNKNOWN: ServerKind = ServerKind("unknown");

    /// The kind recorded as `id`, for a kind's own `KIND` constant.
    pub const fn new(id: &'static str) -> ServerKind {
        ServerKind(id)
    }

    /// Its id as recorded in the Run (`php-fpm`).
    pub fn id(self) -> &'static str {
        self.0
    }

    /// The kind recorded as `id`, or [`ServerKind::UNKNOWN`] when no kind's file declares it.
    pub fn from_id(id: &str) -> ServerKind {
        KINDS
            .iter()
            .find(|k| k.kind.0 == id)
            .map_or(ServerKind::UNKNOWN, |k| k.kind)
    }

    /// Every declared kind's information, by id.
    pub fn all() -> Vec<&'static KindInfo> {
        let mut v: Vec<&KindInfo> = KINDS.iter().collect();
        v.sort_by_key(|k| k.kind.0);
        v
    }

    fn info(self) -> Option<&'static KindInfo> {
        KINDS.iter().find(|k| k.kind == self)
    }

    /// From an executable's file name (`/usr/sbin/php-fpm8.2` → `php-fpm8.2`) or, when
    /// the executable is unreadable, the command name: the kind whose file says the name
    /// is its own.
    pub fn from_executable(name: &str) -> ServerKind {
        let n = name.rsplit('/').next().unwrap_or(name);
        let n = n.strip_suffix(" (deleted)").unwrap_or(n);
        ServerKind::all()
            .into_iter()
            .find(|k| (k.executable)(n))
            .map_or(ServerKind::UNKNOWN, |k| k.kind)
    }

    /// For `#[serde(default)]` of configs recorded before kinds.
    pub fn nginx() -> ServerKind {
        ServerKind::from_id("nginx")
    }

    /// The name people call it by.
    pub fn name(self) -> &'static str {
        self.info().map_or("the server", |k| k.name)
    }

    /// Whether its directive names ignore case (Apache's do).
    pub fn ignores_case(self) -> bool {
        self.info().is_some_and(|k| k.ignore_case)
    }
}

impl Default for ServerKind {
    fn default() -> Self {
        ServerKind::UNKNOWN
    }
}

impl std::fmt::Debug for ServerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl Serialize for ServerKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

impl<'de> Deserialize<'de> for ServerKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Ok(ServerKind::from_id(&s))
    }
}

impl schemars::JsonSchema for ServerKind {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ServerKind".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut ids: Vec<&str> = ServerKind::all().iter().map(|k| k.kind.0).collect();
        ids.push(ServerKind::UNKNOWN.0);
        schemars::json_schema!({
            "description": "A server loadlens knows, detected from the executable of its process: the id of its kind (`src/kinds/<server>.rs`), `unknown` for any other.",
            "type": "string",
            "enum": ids,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_from_executables() {
        for (exe, kind) in [
            ("/usr/sbin/nginx", "nginx"),
            ("/usr/sbin/php-fpm8.2", "php-fpm"),
            ("/usr/sbin/apache2", "apache"),
            ("/usr/sbin/httpd", "apache"),
            ("/usr/sbin/haproxy", "haproxy"),
            ("/usr/bin/node", "node"),
            ("/usr/local/bin/caddy", "caddy"),
            ("/usr/bin/java", "java"),
            ("/opt/app/server (deleted)", "unknown"),
        ] {
            assert_eq!(ServerKind::from_executable(exe).id(), kind, "{exe}");
        }
    }

    #[test]
    fn kinds_read_as_their_ids_and_unknown_ids_as_unknown() {
        for id in ["nginx", "php-fpm", "apache", "tomcat", "unknown"] {
            let k: ServerKind = serde_json::from_str(&format!("\"{id}\"")).unwrap();
            assert_eq!(k.id(), id);
            assert_eq!(serde_json::to_string(&k).unwrap(), format!("\"{id}\""));
        }
        let k: ServerKind = serde_json::from_str("\"gopher-httpd\"").unwrap();
        assert_eq!(k, ServerKind::UNKNOWN);
        assert_eq!(ServerKind::from_id("php-fpm").name(), "php-fpm");
        assert_eq!(k.name(), "the server");
    }

    #[test]
    fn apache_directives_ignore_case() {
        let mut c = ServerConfig {
            kind: ServerKind::from_id("apache"),
            ..Default::default()
        };
        c.directives
            .insert("maxrequestworkers".into(), vec!["8".into()]);
        assert_eq!(c.get("MaxRequestWorkers").as_deref(), Some("8"));
        c.kind = ServerKind::from_id("haproxy");
        assert_eq!(c.get("MaxRequestWorkers"), None);
    }
}
