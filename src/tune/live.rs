//! The live server as `tune` touches it, wherever it runs ([`Host`]): on this machine
//! ([`Local`], through `kinds::live`), or on the server's machine through the watch's
//! ssh session (`remote.rs`), the same steps done there. And the request that proves
//! the server serves, always from this machine (where the load comes from).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::kinds::live::{self, Held};
use crate::kinds::Server;
use crate::run::Settle;

/// Where the server's files and processes are, and the steps `tune` takes on them.
pub trait Host {
    /// Where, in words, for messages (`this machine`, `web1`).
    fn name(&self) -> String;
    /// The main config file of server process `pid`.
    fn config_file(&self, s: &dyn Server, pid: i32) -> anyhow::Result<PathBuf>;
    /// The files the main one includes that hold directives too, the main one first.
    fn files(&self, s: &dyn Server, main: &Path) -> anyhow::Result<Vec<PathBuf>>;
    /// A config file's text.
    fn read(&self, path: &Path) -> anyhow::Result<String>;
    /// Checks, locks and backs up `path`, a config file of server `pid`, for the
    /// session: only held files are written.
    fn hold(&self, s: &dyn Server, pid: i32, path: &Path) -> anyhow::Result<()>;
    /// Writes a held file in place.
    fn write(&self, path: &Path, text: &str) -> anyhow::Result<()>;
    /// The server's own config test of `file`.
    fn config_test(&self, s: &dyn Server, pid: i32, file: &Path) -> anyhow::Result<()>;
    /// The graceful reload, the wait for new workers and for them to settle.
    fn reload(&self, s: &dyn Server, pid: i32) -> anyhow::Result<Settle>;
    /// A sysctl read (`value = None`) or written in process `pid`'s network namespace.
    fn sysctl(&self, pid: i32, key: &str, value: Option<&str>) -> anyhow::Result<String>;
    /// Lets go of the held files; a line for each changed one (where its backup is).
    fn release(&self) -> anyhow::Result<Vec<String>>;
}

/// The server on this machine.
#[derive(Default)]
pub struct Local {
    held: Mutex<Held>,
}

impl Host for Local {
    fn name(&self) -> String {
        "this machine".into()
    }
    fn config_file(&self, s: &dyn Server, pid: i32) -> anyhow::Result<PathBuf> {
        s.config_file(pid)
    }
    fn files(&self, s: &dyn Server, main: &Path) -> anyhow::Result<Vec<PathBuf>> {
        Ok(s.files(main))
    }
    fn read(&self, path: &Path) -> anyhow::Result<String> {
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
    }
    fn hold(&self, s: &dyn Server, pid: i32, path: &Path) -> anyhow::Result<()> {
        lock(&self.held).hold(s, pid, path)
    }
    fn write(&self, path: &Path, text: &str) -> anyhow::Result<()> {
        lock(&self.held).write(path, text.as_bytes())
    }
    fn config_test(&self, s: &dyn Server, pid: i32, file: &Path) -> anyhow::Result<()> {
        live::config_test(s, pid, file)
    }
    fn reload(&self, s: &dyn Server, pid: i32) -> anyhow::Result<Settle> {
        live::reload(s, pid)
    }
    fn sysctl(&self, pid: i32, key: &str, value: Option<&str>) -> anyhow::Result<String> {
        live::sysctl(pid, key, value)
    }
    fn release(&self) -> anyhow::Result<Vec<String>> {
        Ok(lock(&self.held).release())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A GET of `url` answered (any status: a 502 of a proxy whose upstream is the fault
/// still says the server is up), within a few seconds (retried). The status.
pub fn serving(url: &str) -> anyhow::Result<u16> {
    let u = url::Url::parse(url).context("the URL")?;
    let addrs: Vec<std::net::SocketAddr> = u
        .socket_addrs(|| None)
        .with_context(|| format!("cannot resolve {url}"))?;
    let Some(addr) = addrs.first().copied() else {
        bail!("{url} has no address");
    };
    let https = u.scheme() == "https";
    let host = u.host_str().unwrap_or("localhost").to_string();
    let path = match u.query() {
        Some(q) => format!("{}?{q}", u.path()),
        None => u.path().to_string(),
    };
    let t0 = Instant::now();
    let mut last = String::new();
    // A worker just reloaded may still be taking over a full accept queue (fd-limit once
    // gave a 3 s read timeout after the reload, in a full suite): room for a few tries.
    while t0.elapsed() < Duration::from_secs(20) {
        let attempt = || -> anyhow::Result<u16> {
            let mut c = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
            if https {
                return Ok(0); // accepting connections; TLS is the load's to check
            }
            c.set_read_timeout(Some(Duration::from_secs(3)))?;
            write!(
                c,
                "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
            )?;
            let mut head = [0u8; 64];
            let n = c.read(&mut head)?;
            let line = String::from_utf8_lossy(&head[..n]).to_string();
            let code: u16 = line
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .ok_or_else(|| anyhow::anyhow!("no HTTP status line"))?;
            Ok(code)
        };
        match attempt() {
            Ok(code) => return Ok(code),
            Err(e) => last = format!("{e:#}"),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    bail!("the server does not serve {url}: {last}")
}
