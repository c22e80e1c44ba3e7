//! nginx: `name args;` statements in `{}` blocks, `#` comments, quoted strings; the
//! config file from the master's command line (`-c`, relative to `-p`); `nginx -t` with
//! the master's own binary and flags; HUP to the master (new workers start with the new
//! configuration, the old ones finish their requests and exit).

use std::path::{Path, PathBuf};

use super::{arg_after, exe, Found, Knob, Knobs, Server, Wording};
use crate::run::{KindInfo, ServerKind};

pub struct Nginx;

/// The master's command line, its title split again: the master rewrites its argv to
/// "nginx: master process nginx -c FILE ..." (paths with spaces are not kept).
fn args(pid: i32) -> anyhow::Result<Vec<String>> {
    let mut args = crate::sys::procfs::read_cmdline(pid)
        .map_err(|e| anyhow::anyhow!("cannot read /proc/{pid}/cmdline: {e}"))?;
    if let Some(rest) = args
        .first()
        .and_then(|a| a.strip_prefix("nginx: master process "))
    {
        args = rest.split_whitespace().map(String::from).collect();
    }
    if args.first().is_some_and(|a| a.starts_with("nginx: worker")) {
        anyhow::bail!("pid {pid} is an nginx worker: give the master's pid (--server-pid)");
    }
    Ok(args)
}

/// This kind, as recorded in the Run.
pub const KIND: ServerKind = ServerKind::new("nginx");

#[linkme::distributed_slice(crate::run::KINDS)]
static INFO: KindInfo = KindInfo {
    kind: KIND,
    name: "nginx",
    title: "nginx",
    executable: |n| n.starts_with("nginx"),
    ignore_case: false,
};

/// What nginx calls each knob, for the fixes (`diagnose` asks through [`super::knob`]).
fn knob(knob: Knob) -> Option<Wording> {
    Some(match knob {
        Knob::Workers => ("`worker_processes auto;`", Some("worker_processes")),
        Knob::Connections => ("`worker_connections` in the events block, with `worker_rlimit_nofile` at least as high", Some("worker_connections")),
        Knob::Backlog => ("the nginx `listen ... backlog=`", Some("listen")),
        Knob::OpenFiles => ("`worker_rlimit_nofile 65535;` (and `LimitNOFILE=` in its unit)", Some("worker_rlimit_nofile")),
        Knob::Affinity => ("`worker_cpu_affinity`", Some("worker_cpu_affinity")),
        Knob::UpstreamReuse => ("`keepalive 32;` (and `keepalive_requests` high) in the upstream block with `proxy_http_version 1.1; proxy_set_header Connection \"\";` (FastCGI: `fastcgi_keep_conn on;`)", None),
        Knob::Reuseport => ("`listen ... reuseport;`", None),
        Knob::KeepAlive => ("`keepalive_timeout 65;` and `keepalive_requests 1000;`", Some("keepalive_timeout")),
        Knob::UdpBuffer => ("the receive buffer of nginx's QUIC listener, `listen 443 quic reuseport rcvbuf=8m;` (within `net.core.rmem_max`)", Some("listen")),
        Knob::Pool => return None,
    })
}

#[linkme::distributed_slice(super::KNOBS)]
static KNOBS: Knobs = Knobs { kind: KIND, knob };

#[linkme::distributed_slice(super::SERVERS)]
static SERVER: &dyn Server = &Nginx;

impl Server for Nginx {
    fn kind(&self) -> ServerKind {
        KIND
    }

    fn config_file(&self, pid: i32) -> anyhow::Result<PathBuf> {
        let a = args(pid)?;
        let prefix = arg_after(&a, "-p");
        Ok(match arg_after(&a, "-c") {
            Some(c) if c.starts_with('/') => PathBuf::from(c),
            Some(c) => Path::new(prefix.as_deref().unwrap_or("/etc/nginx")).join(c),
            None => PathBuf::from("/etc/nginx/nginx.conf"),
        })
    }

    fn scan(&self, text: &str) -> Vec<Found> {
        scan(text)
    }

    fn insert(&self, text: &str, block: &str, name: &str, value: &str) -> Option<(usize, String)> {
        let close = block_close(text, block)?;
        // After the block's last statement: on its line when the block is one line.
        let body = &text[..close];
        let last = body.rfind([';', '{', '}'])?;
        let at = last + 1;
        let one_line = !text[at..close].contains('\n');
        Some(if one_line {
            (at, format!(" {name} {value};"))
        } else {
            let indent = super::indent_at(text, last).to_string();
            (at, format!("\n{indent}{name} {value};"))
        })
    }

    fn test_command(&self, pid: i32, file: &Path) -> anyhow::Result<Vec<String>> {
        let a = args(pid)?;
        let mut cmd = vec![exe(pid)?, "-t".to_string()];
        // Not `-g`: the title split its words apart, and a test needs no global
        // directives given on the command line.
        for flag in ["-p", "-e"] {
            if let Some(v) = arg_after(&a, flag) {
                cmd.push(flag.into());
                cmd.push(v);
            }
        }
        cmd.push("-c".into());
        cmd.push(file.display().to_string());
        Ok(cmd)
    }

    fn reload_signal(&self, pid: i32) -> anyhow::Result<i32> {
        args(pid)?;
        Ok(libc::SIGHUP)
    }
}

/// One token of an nginx config: a word (its byte range; a quoted string is one word,
/// quotes included), or a `;`, `{` or `}` at a byte. Comments and blanks are skipped.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Token {
    Word(usize, usize),
    Semi(usize),
    Open,
    Close(usize),
}

/// The tokens of `text`, in order: the one lexer `scan` and `block_close` read.
fn tokens(text: &str) -> Vec<Token> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            c if c.is_ascii_whitespace() => i += 1,
            b';' => {
                out.push(Token::Semi(i));
                i += 1;
            }
            b'{' => {
                out.push(Token::Open);
                i += 1;
            }
            b'}' => {
                out.push(Token::Close(i));
                i += 1;
            }
            q @ (b'"' | b'\'') => {
                let s = i;
                i += 1;
                while i < b.len() && b[i] != q {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i = (i + 1).min(b.len());
                out.push(Token::Word(s, i));
            }
            _ => {
                let s = i;
                while i < b.len()
                    && !b[i].is_ascii_whitespace()
                    && !matches!(b[i], b';' | b'{' | b'}')
                {
                    i += 1;
                }
                out.push(Token::Word(s, i));
            }
        }
    }
    out
}

/// The words before a `{` joined by a space: a block's label (`upstream app`).
fn label(text: &str, words: &[(usize, usize)]) -> String {
    let l: Vec<&str> = words.iter().map(|&(s, e)| &text[s..e]).collect();
    l.join(" ")
}

/// Every statement of an nginx config, with the blocks around it. Block labels are the
/// words before `{` joined by a space (`upstream app`, `location /`).
pub fn scan(text: &str) -> Vec<Found> {
    let mut out = Vec::new();
    let mut blocks: Vec<String> = Vec::new();
    // The words of the statement being read: (start, end) byte ranges.
    let mut words: Vec<(usize, usize)> = Vec::new();
    for t in tokens(text) {
        match t {
            Token::Word(s, e) => words.push((s, e)),
            Token::Semi(at) => {
                if let Some(&(s, e)) = words.first() {
                    // A statement without a value: an empty range at its `;`.
                    let (vs, ve) = match (words.get(1), words.last()) {
                        (Some(&(vs, _)), Some(&(_, ve))) => (vs, ve),
                        _ => (at, at),
                    };
                    out.push(Found {
                        name: text[s..e].to_string(),
                        value: text[vs..ve].to_string(),
                        range: vs..ve,
                        block: blocks.clone(),
                    });
                }
                words.clear();
            }
            Token::Open => {
                blocks.push(label(text, &words));
                words.clear();
            }
            Token::Close(_) => {
                blocks.pop();
                words.clear();
            }
        }
    }
    out
}

/// The byte of the `}` closing the first block labelled `label`.
fn block_close(text: &str, wanted: &str) -> Option<usize> {
    let mut depth_of_target: Option<usize> = None;
    let mut depth = 0usize;
    let mut words: Vec<(usize, usize)> = Vec::new();
    for t in tokens(text) {
        match t {
            Token::Word(s, e) => words.push((s, e)),
            Token::Semi(_) => words.clear(),
            Token::Open => {
                depth += 1;
                if depth_of_target.is_none() && label(text, &words) == wanted {
                    depth_of_target = Some(depth);
                }
                words.clear();
            }
            Token::Close(at) => {
                if depth_of_target == Some(depth) {
                    return Some(at);
                }
                depth = depth.saturating_sub(1);
                words.clear();
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::{add, find, set};

    const CONF: &str = "worker_processes 1;\n# worker_connections 1;\nevents { worker_connections 64; }\nhttp {\n    upstream app { server 127.0.0.1:8081; }\n    server {\n        listen 10.77.0.2:8080 backlog=10;\n        location / { proxy_pass http://app; add_header X \"a;b\"; }\n    }\n}\n";

    #[test]
    fn scans_statements_in_their_blocks() {
        let f = find(&Nginx, CONF, "worker_connections", None);
        assert_eq!(f.len(), 1, "the commented one is not a directive");
        assert_eq!(f[0].value, "64");
        assert_eq!(f[0].block, vec!["events"]);
        let l = find(&Nginx, CONF, "listen", None);
        assert_eq!(l[0].value, "10.77.0.2:8080 backlog=10");
        assert_eq!(l[0].block, vec!["http", "server"]);
        let h = find(&Nginx, CONF, "add_header", None);
        assert_eq!(h[0].value, "X \"a;b\"", "a quoted ; ends nothing");
        assert_eq!(
            find(&Nginx, CONF, "server", Some("8081"))[0].block,
            vec!["http", "upstream app"]
        );
    }

    #[test]
    fn an_edit_changes_only_the_value() {
        let (t, old) = set(&Nginx, CONF, "worker_connections", None, "4096").unwrap();
        assert_eq!(old, "64");
        assert_eq!(t, CONF.replace("connections 64;", "connections 4096;"));
        let (t, _) = set(
            &Nginx,
            CONF,
            "listen",
            Some(":8080"),
            "10.77.0.2:8080 backlog=4096",
        )
        .unwrap();
        assert_eq!(t, CONF.replace("backlog=10", "backlog=4096"));
        assert!(set(&Nginx, CONF, "gzip_comp_level", None, "1").is_none());
    }

    #[test]
    fn adds_to_a_block_on_one_line_or_many() {
        let t = add(&Nginx, CONF, "upstream app", "keepalive", "32").unwrap();
        assert_eq!(t, CONF.replace("8081; }", "8081; keepalive 32; }"));
        let multi = "http {\n    upstream app {\n        server a:1;\n    }\n}\n";
        let t = add(&Nginx, multi, "upstream app", "keepalive", "32").unwrap();
        assert_eq!(
            t,
            "http {\n    upstream app {\n        server a:1;\n        keepalive 32;\n    }\n}\n"
        );
        assert!(add(&Nginx, CONF, "upstream other", "keepalive", "32").is_none());
    }
}
