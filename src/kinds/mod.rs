//! One file per server kind: what `tune` needs to change a server's own configuration
//! safely — where its config file is (from the process's command line), how its
//! directives are written (a scanner over the real text, so an edit replaces exactly the
//! bytes of one value and leaves every other byte as it was), the server's own config
//! test, and its graceful reload signal. Behind one trait, [`Server`]; [`of`] picks it.
//!
//! Sources: nginx's "Controlling nginx" (HUP: re-read the configuration, start new
//! workers, old ones finish their requests) and `nginx -t`; php-fpm(8) (USR2: graceful
//! reload of the configuration and workers; `-t`); Apache's "Stopping and Restarting"
//! (USR1: graceful restart; `-t`); HAProxy's management guide (master-worker mode: USR2
//! to the master reloads; `-c`).

// The registry: one line per server kind, each kind's file all there is of it (its
// `KIND`, its `KindInfo` in `run::KINDS`, what it calls its knobs in [`KNOBS`], its
// `Server` in [`SERVERS`] when loadlens can read or change its configuration).
pub mod apache;
pub mod caddy;
pub mod envoy;
pub mod haproxy;
pub mod java;
pub mod lighttpd;
pub mod nginx;
pub mod node;
pub mod php_fpm;
pub mod tomcat;
pub mod uwsgi;

pub mod live;

use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::run::{ServerConfig, ServerKind};

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
    /// Keeping client connections open between requests.
    KeepAlive,
    /// The pool of threads or processes that each serve one request at a time.
    Pool,
    /// The receive buffer of its UDP (QUIC) sockets.
    UdpBuffer,
}

/// What a server calls a knob: the fix's phrase, and the directive whose current value
/// shows it (for `(now …)`) where loadlens reads one.
pub type Wording = (&'static str, Option<&'static str>);

/// What a server kind calls its knobs, declared in the kind's file whether or not
/// loadlens reads or changes its configuration:
/// `#[distributed_slice(KNOBS)] static KNOBS: Knobs = Knobs { kind: KIND, knob };`.
pub struct Knobs {
    pub kind: ServerKind,
    /// What the kind calls a knob; `None` when it has no such knob.
    pub knob: fn(Knob) -> Option<Wording>,
}

/// Every kind's [`Knobs`], one in each kind's file, gathered when linking.
#[linkme::distributed_slice]
pub static KNOBS: [Knobs];

/// What `kind` calls `knob`, from the kind's own file; `None` when the kind has no such
/// knob or no file declares it (the fix is then worded generically).
pub fn knob(kind: ServerKind, knob: Knob) -> Option<Wording> {
    KNOBS
        .iter()
        .find(|k| k.kind == kind)
        .and_then(|k| (k.knob)(knob))
}

/// One directive as written in a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// As written (`worker_connections`, `MaxRequestWorkers`, `pm.max_children`).
    pub name: String,
    /// Its value as written, without the terminator (`;`) or surrounding space.
    pub value: String,
    /// Where `value` is in the text (bytes): the part an edit replaces.
    pub range: Range<usize>,
    /// The blocks around it, outermost first: `["http", "upstream app"]`, `["app"]` (a
    /// php-fpm pool), `["global"]` (a HAProxy section).
    pub block: Vec<String>,
}

/// What `tune` asks of a server kind.
pub trait Server: Sync {
    fn kind(&self) -> ServerKind;
    /// Whether a process whose executable's file name is `exe` (`java`) and whose
    /// command line is `args` is this kind, where its command line tells ([`recognise`]:
    /// a `java` running Tomcat's main class); the executable alone is its `KindInfo`'s.
    fn recognises(&self, _exe: &str, _args: &[String]) -> bool {
        false
    }
    /// The main config file process `pid` was started with.
    fn config_file(&self, pid: i32) -> anyhow::Result<PathBuf>;
    /// The files the main one includes that hold directives too (php-fpm's `pool.d`),
    /// the main one first.
    fn files(&self, main: &Path) -> Vec<PathBuf> {
        vec![main.to_path_buf()]
    }
    /// Every directive in `text`, in order.
    fn scan(&self, text: &str) -> Vec<Found>;
    /// Whether two directive names are the same (Apache ignores case).
    fn same_name(&self, a: &str, b: &str) -> bool {
        a == b
    }
    /// Where and what to insert for a new directive `name value` at the end of the
    /// block whose innermost label is `block`; `None` when there is no such block.
    fn insert(&self, text: &str, block: &str, name: &str, value: &str) -> Option<(usize, String)>;
    /// The server's own config test of `file`, as process `pid` would read it.
    fn test_command(&self, pid: i32, file: &Path) -> anyhow::Result<Vec<String>>;
    /// The signal that makes process `pid` reload its configuration gracefully, or why
    /// it cannot be reloaded so.
    fn reload_signal(&self, pid: i32) -> anyhow::Result<i32>;
    /// Whether [`Server::read_config`] reads this kind's configuration for the watch
    /// (nginx's, Apache's and HAProxy's readers are in `watch/`).
    fn reads_config(&self) -> bool {
        false
    }
    /// The configuration process `pid` runs, reduced to its directives and upstreams.
    fn read_config(&self, pid: i32) -> Result<ServerConfig, String> {
        Err(format!(
            "no configuration reader for {} ({pid})",
            self.kind().name()
        ))
    }
}

/// Every server kind loadlens can read or change, each registered in its own file:
/// `#[distributed_slice(SERVERS)] static SERVER: &dyn Server = &Nginx;`.
#[linkme::distributed_slice]
pub static SERVERS: [&'static dyn Server];

/// The server kind loadlens can change, or `None`.
pub fn of(kind: ServerKind) -> Option<&'static dyn Server> {
    SERVERS.iter().copied().find(|s| s.kind() == kind)
}

/// The kind of a process from its executable (`/usr/sbin/lighttpd`) and command line:
/// a kind whose file recognises it (a `java` running Tomcat's main class is Tomcat),
/// else what the executable's name says.
pub fn recognise(exe: &str, args: &[String]) -> ServerKind {
    let name = exe.rsplit('/').next().unwrap_or(exe);
    let name = name.strip_suffix(" (deleted)").unwrap_or(name);
    SERVERS
        .iter()
        .find(|s| s.recognises(name, args))
        .map_or_else(|| ServerKind::from_executable(exe), |s| s.kind())
}

/// The occurrences of directive `name` in `text` whose value contains `matching`.
pub fn find(s: &dyn Server, text: &str, name: &str, matching: Option<&str>) -> Vec<Found> {
    s.scan(text)
        .into_iter()
        .filter(|f| s.same_name(&f.name, name))
        .filter(|f| matching.is_none_or(|m| f.value.contains(m)))
        .collect()
}

/// `text` with the value of the first directive `name` (whose value contains
/// `matching`) replaced by `value`: every other byte unchanged. Also the old value.
pub fn set(
    s: &dyn Server,
    text: &str,
    name: &str,
    matching: Option<&str>,
    value: &str,
) -> Option<(String, String)> {
    let f = find(s, text, name, matching).into_iter().next()?;
    let mut out = String::with_capacity(text.len() + value.len());
    out.push_str(&text[..f.range.start]);
    out.push_str(value);
    out.push_str(&text[f.range.end..]);
    Some((out, f.value))
}

/// `text` with `name value` added at the end of block `block`.
pub fn add(s: &dyn Server, text: &str, block: &str, name: &str, value: &str) -> Option<String> {
    let (at, ins) = s.insert(text, block, name, value)?;
    let mut out = String::with_capacity(text.len() + ins.len());
    out.push_str(&text[..at]);
    out.push_str(&ins);
    out.push_str(&text[at..]);
    Some(out)
}

/// The argument after `flag` in a command line.
pub(crate) fn arg_after(args: &[String], flag: &str) -> Option<String> {
    let i = args.iter().position(|a| a == flag)?;
    args.get(i + 1).cloned()
}

/// The executable of process `pid` (its `/proc` link, which works even when the file
/// was replaced by an upgrade).
pub(crate) fn exe(pid: i32) -> anyhow::Result<String> {
    let p = std::fs::read_link(format!("/proc/{pid}/exe"))
        .map_err(|e| anyhow::anyhow!("cannot read /proc/{pid}/exe ({e}): is the server running, and is loadlens root or its owner?"))?;
    let s = p.display().to_string();
    Ok(match s.strip_suffix(" (deleted)") {
        Some(_) => format!("/proc/{pid}/exe"),
        None => s,
    })
}

/// The indentation of the line holding byte `at`.
pub(crate) fn indent_at(text: &str, at: usize) -> &str {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = &text[start..];
    let n = line.len() - line.trim_start_matches([' ', '\t']).len();
    &line[..n]
}

/// Line-oriented configs (php-fpm, Apache, HAProxy): each line's byte range, without
/// its newline.
pub(crate) fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut at = 0;
    text.split_inclusive('\n').map(move |l| {
        let start = at;
        at += l.len();
        (start, l.trim_end_matches(['\n', '\r']))
    })
}

/// `key rest` on a line starting at `start`: the key and the range of `rest` (trimmed),
/// for space-separated configs (Apache, HAProxy). `comment` starts a trailing comment.
pub(crate) fn key_value(
    line: &str,
    start: usize,
    trailing_comment: bool,
) -> Option<(String, Range<usize>)> {
    let lead = line.len() - line.trim_start().len();
    let t = &line[lead..];
    if t.is_empty() || t.starts_with('#') {
        return None;
    }
    let key_end = t.find(char::is_whitespace).unwrap_or(t.len());
    let key = &t[..key_end];
    let mut rest = &t[key_end..];
    if trailing_comment {
        if let Some(i) = rest.find(" #").or_else(|| rest.find("\t#")) {
            rest = &rest[..i];
        }
    }
    let v_lead = rest.len() - rest.trim_start().len();
    let v = rest.trim();
    let from = start + lead + key_end + v_lead;
    Some((key.to_string(), from..from + v.len()))
}

#[cfg(test)]
mod tests {
    use crate::run::ServerKind;

    /// Every kind's file says what it calls its knobs, once (a kind it does not declare
    /// would get the generic wording everywhere, silently).
    #[test]
    fn every_kind_declares_its_knobs_once() {
        let kinds = ServerKind::all();
        for info in &kinds {
            let n = super::KNOBS.iter().filter(|k| k.kind == info.kind).count();
            assert_eq!(n, 1, "{}", info.kind.id());
        }
        assert_eq!(super::KNOBS.len(), kinds.len());
    }
}
