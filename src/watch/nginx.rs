//! nginx's configuration as it runs: `nginx -T` with the master's own binary, prefix and
//! config file (from /proc/PID/exe and /proc/PID/cmdline), reduced to the directives the
//! diagnosis names in its fixes.

use std::collections::BTreeMap;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::run::ServerConfig;

/// Directives worth naming with their current values.
const DIRECTIVES: &[&str] = &[
    "worker_processes",
    "worker_cpu_affinity",
    "worker_connections",
    "worker_rlimit_nofile",
    "multi_accept",
    "listen",
    "keepalive",
    "keepalive_requests",
    "keepalive_timeout",
    "proxy_buffer_size",
    "proxy_buffers",
    "proxy_busy_buffers_size",
    "proxy_http_version",
    "fastcgi_keep_conn",
    "access_log",
    "error_log",
    "gzip",
    "gzip_comp_level",
    "sendfile",
    "output_buffers",
    "limit_req_zone",
    "limit_req",
    "limit_req_status",
    "limit_conn_zone",
    "limit_conn",
    "limit_conn_status",
];

impl ServerConfig {
    /// The first value of a directive.
    pub fn first(&self, name: &str) -> Option<&str> {
        self.directives.get(name)?.first().map(|s| s.as_str())
    }
}

/// Directives that name an upstream: the value is `unix:/path`, `host:port` or a URL
/// whose host is an `upstream` block's name.
const PASSES: &[&str] = &[
    "proxy_pass",
    "fastcgi_pass",
    "uwsgi_pass",
    "scgi_pass",
    "grpc_pass",
];

/// Parses the directives of interest out of `nginx -T` output (comments dropped; one
/// directive per `;`).
pub fn parse(text: &str) -> BTreeMap<String, Vec<String>> {
    parse_all(text).0
}

/// The directives of interest and the upstream addresses: every `*_pass` target and
/// every `server` of an `upstream` block it names, as written (`unix:/run/php.sock`,
/// `127.0.0.1:9000`). Variables (`$backend`) cannot be resolved and are left out.
pub fn parse_all(text: &str) -> (BTreeMap<String, Vec<String>>, Vec<String>) {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // Block names from the outside in, and statements as (enclosing blocks, words).
    let mut stack: Vec<Vec<String>> = Vec::new();
    let mut passes: Vec<String> = Vec::new();
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut stmt = String::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        for ch in line.chars().chain(std::iter::once(' ')) {
            if !matches!(ch, ';' | '{' | '}') {
                stmt.push(ch);
                continue;
            }
            let words: Vec<String> = stmt.split_whitespace().map(String::from).collect();
            stmt.clear();
            match ch {
                '{' => stack.push(words),
                '}' => {
                    stack.pop();
                }
                _ => {
                    let Some(name) = words.first().map(String::as_str) else {
                        continue;
                    };
                    let value = words[1..].join(" ");
                    if DIRECTIVES.contains(&name) {
                        out.entry(name.to_string()).or_default().push(value.clone());
                    }
                    if PASSES.contains(&name) {
                        passes.push(words.get(1).cloned().unwrap_or_default());
                    }
                    let block = stack.last().map(|b| b.as_slice()).unwrap_or(&[]);
                    if name == "server" && block.first().map(String::as_str) == Some("upstream") {
                        if let (Some(group), Some(addr)) = (block.get(1), words.get(1)) {
                            groups.entry(group.clone()).or_default().push(addr.clone());
                        }
                    }
                }
            }
        }
    }
    let mut upstreams: Vec<String> = Vec::new();
    for p in passes.iter().filter(|p| !p.contains('$')) {
        let bare = p.split_once("://").map(|(_, r)| r).unwrap_or(p);
        let targets = if bare.starts_with("unix:") {
            vec![bare.to_string()]
        } else {
            let host = bare.split('/').next().unwrap_or(bare);
            groups
                .get(host)
                .cloned()
                .unwrap_or_else(|| vec![host.to_string()])
        };
        for t in targets {
            if !upstreams.contains(&t) {
                upstreams.push(t);
            }
        }
    }
    (out, upstreams)
}

/// Runs `nginx -T` as the master `pid` was started; `None` (with the reason) when it
/// cannot be read.
pub fn read(pid: i32) -> Result<ServerConfig, String> {
    let mut args = crate::sys::procfs::read_cmdline(pid).map_err(|e| e.to_string())?;
    // The master rewrites its title to "nginx: master process nginx -c FILE ...", one
    // string over the original argv: split it again (paths with spaces are not kept).
    if let Some(rest) = args
        .first()
        .and_then(|a| a.strip_prefix("nginx: master process "))
    {
        args = rest.split_whitespace().map(String::from).collect();
    }
    let mut cmd = Command::new(format!("/proc/{pid}/exe"));
    cmd.arg("-T");
    let mut conf = String::from("(default)");
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "-c" | "-p" | "-e" => {
                if let Some(v) = it.next() {
                    if a == "-c" {
                        conf = v.clone();
                    }
                    cmd.arg(a).arg(v);
                }
            }
            _ => {}
        }
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run nginx -T: {e}"))?;
    let mut out = String::new();
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().map_err(|e| e.to_string())? {
            if !st.success() {
                return Err(format!("nginx -T failed ({st})"));
            }
            break;
        }
        if t0.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            return Err("nginx -T took more than 5 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let text = reader.join().unwrap_or_default();
    let (directives, upstreams) = parse_all(&text);
    Ok(ServerConfig {
        kind: crate::kinds::nginx::KIND,
        conf,
        directives,
        upstreams,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_directives() {
        let t = "# configuration file /etc/nginx/nginx.conf:\nworker_processes 1;\nevents { worker_connections 768; }\nhttp {\n upstream app { server 127.0.0.1:8081; keepalive 32; }\n server { listen 10.0.0.2:8080 backlog=10; listen [::]:80; # comment; listen 9;\n location / { proxy_buffers 8 4k; proxy_buffer_size 4k; } }\n}\n";
        let d = parse(t);
        assert_eq!(d["worker_processes"], vec!["1"]);
        assert_eq!(d["worker_connections"], vec!["768"]);
        assert_eq!(d["listen"], vec!["10.0.0.2:8080 backlog=10", "[::]:80"]);
        assert_eq!(d["keepalive"], vec!["32"]);
        assert_eq!(d["proxy_buffers"], vec!["8 4k"]);
        assert!(!d.contains_key("server"));
    }

    #[test]
    fn finds_upstreams_unix_tcp_and_groups() {
        let t = "http {\n upstream app { server 127.0.0.1:8081 weight=2; server unix:/run/b.sock; }\n server { listen 80;\n location / { proxy_pass http://app/x; }\n location ~ \\.php$ { fastcgi_pass unix:/run/php/php8.2-fpm.sock; }\n location /v { proxy_pass http://$backend; }\n location /d { proxy_pass http://localhost:9000; }\n } }\n";
        let (_, up) = parse_all(t);
        assert_eq!(
            up,
            [
                "127.0.0.1:8081",
                "unix:/run/b.sock",
                "unix:/run/php/php8.2-fpm.sock",
                "localhost:9000"
            ]
        );
    }
}
