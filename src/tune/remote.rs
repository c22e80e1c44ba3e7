//! `tune --watch ssh://`: the server's config read, held, written, tested and reloaded
//! on its own machine, each step a request on the watch's ssh session
//! (`remote::protocol::TuneOp`), done there by `watch --stdio` with the same functions
//! a local tune calls (`kinds::live`). The backup of a held file and its lock are kept
//! there; every reply is read within the protocol's limits.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};

use super::live::Host;
use crate::kinds::Server;
use crate::remote::protocol::{TuneOp, MAX_CONFIG};
use crate::remote::Session;
use crate::run::Settle;

/// The server on the other end of a watch's ssh session.
pub struct Remote {
    pub session: Arc<Session>,
}

impl Remote {
    fn ask(&self, op: TuneOp) -> anyhow::Result<(String, Vec<String>)> {
        self.session.tune(op)
    }
}

fn text(p: &Path) -> String {
    p.display().to_string()
}

impl Host for Remote {
    fn name(&self) -> String {
        self.session.hostname().to_string()
    }
    fn config_file(&self, s: &dyn Server, pid: i32) -> anyhow::Result<PathBuf> {
        let (path, _) = self.ask(TuneOp::ConfigFile {
            kind: s.kind(),
            pid,
        })?;
        Ok(PathBuf::from(path))
    }
    fn files(&self, s: &dyn Server, main: &Path) -> anyhow::Result<Vec<PathBuf>> {
        let (_, paths) = self.ask(TuneOp::Files {
            kind: s.kind(),
            main: text(main),
        })?;
        Ok(paths.into_iter().map(PathBuf::from).collect())
    }
    fn read(&self, path: &Path) -> anyhow::Result<String> {
        let (t, _) = self.ask(TuneOp::Read { path: text(path) })?;
        if t.len() as u64 > MAX_CONFIG {
            bail!(
                "{} on {} is {} bytes: past the limit of {MAX_CONFIG} bytes a config file tune reads",
                path.display(),
                self.name(),
                t.len()
            );
        }
        Ok(t)
    }
    fn hold(&self, s: &dyn Server, pid: i32, path: &Path) -> anyhow::Result<()> {
        self.ask(TuneOp::Hold {
            kind: s.kind(),
            pid,
            path: text(path),
        })
        .map(drop)
    }
    fn write(&self, path: &Path, t: &str) -> anyhow::Result<()> {
        self.ask(TuneOp::Write {
            path: text(path),
            text: t.to_string(),
        })
        .map(drop)
    }
    fn config_test(&self, s: &dyn Server, pid: i32, file: &Path) -> anyhow::Result<()> {
        self.ask(TuneOp::Test {
            kind: s.kind(),
            pid,
            file: text(file),
        })
        .map(drop)
    }
    fn reload(&self, s: &dyn Server, pid: i32) -> anyhow::Result<Settle> {
        let (settle, _) = self.ask(TuneOp::Reload {
            kind: s.kind(),
            pid,
        })?;
        serde_json::from_str(&settle).with_context(|| {
            format!(
                "{} reloaded {} {pid} but said how it settled in words this loadlens does not read: `{settle}`",
                self.name(),
                s.kind().name()
            )
        })
    }
    fn sysctl(&self, pid: i32, key: &str, value: Option<&str>) -> anyhow::Result<String> {
        let (v, _) = self.ask(TuneOp::Sysctl {
            pid,
            key: key.into(),
            value: value.map(String::from),
        })?;
        Ok(v)
    }
    fn release(&self) -> anyhow::Result<Vec<String>> {
        let (notes, _) = self.ask(TuneOp::Release)?;
        Ok(notes
            .lines()
            .map(|l| format!("on {}: {l}", self.name()))
            .collect())
    }
}
