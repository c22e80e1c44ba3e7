//! `loadlens watch URL` (hidden; what `run --ray --server-node-resource` starts on the
//! server's node): the machine watched around a load that other machines send, from
//! `--start-at` until its standard input closes, the Evidence written as JSON.
//! `loadlens watch --stdio` (what `run --watch ssh://…` starts there): the same watch
//! driven by the protocol of `remote::protocol` on standard input and output.

use std::io::Read;
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use crate::units::parse_duration;
use crate::watch::discover::Hints;
use crate::watch::{Watch, WatchSpec};

#[derive(Args, Debug)]
pub struct WatchArgs {
    /// The URL the load is sent to (its port finds the server's listener).
    #[arg(required_unless_present = "stdio")]
    url: Option<String>,
    /// Speak the watch protocol on standard input and output (`run --watch ssh://…`):
    /// the URL, interval and profile come in its start message; exits when standard
    /// input closes, or after --max-duration.
    #[arg(long, conflicts_with_all = ["url", "start_at", "json"])]
    stdio: bool,
    /// Start watching a second before this time (seconds since the Unix epoch).
    #[arg(long, value_name = "UNIX_TIME")]
    start_at: Option<f64>,
    /// Stop at the latest after this long, even if standard input stays open.
    #[arg(long, value_parser = parse_duration, default_value = "10m")]
    max_duration: Duration,
    /// Watch alone for this long, not until standard input closes (a server the
    /// client cannot reach: start it before the load, end it after, then `loadlens
    /// attach RUN.json WATCH.json`).
    #[arg(long, value_parser = parse_duration, conflicts_with = "stdio")]
    duration: Option<Duration>,
    /// Write the Evidence as JSON to FILE (`-` = stdout).
    #[arg(long, value_name = "FILE")]
    json: Option<String>,
    /// Sampling interval.
    #[arg(long = "sample", value_parser = parse_duration, default_value = "1s")]
    sample: Duration,
    /// Watch the processes with this command name (repeatable).
    #[arg(long = "server-name")]
    server_names: Vec<String>,
    /// Profile the server at this many samples per second.
    #[arg(long, value_name = "HZ")]
    profile_hz: Option<u64>,
}

pub fn cmd(a: WatchArgs) -> anyhow::Result<ExitCode> {
    let Some(url) = a.url else {
        return Ok(match crate::remote::server::serve(a.max_duration)? {
            crate::remote::server::Ended::Refused => ExitCode::from(2),
            crate::remote::server::Ended::Broken(why) => anyhow::bail!("{why}"),
            _ => ExitCode::SUCCESS,
        });
    };
    let url = url::Url::parse(&url).with_context(|| format!("invalid URL `{url}`"))?;
    let host = url
        .host_str()
        .unwrap_or("127.0.0.1")
        .trim_matches(['[', ']']);
    let port = url.port_or_known_default().unwrap_or(80);
    let target = (host, port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve host `{host}`"))?
        .next()
        .ok_or_else(|| anyhow::anyhow!("cannot resolve host `{host}`: no addresses"))?;
    if let Some(at) = a.start_at {
        crate::pipeline::wait_until(at - crate::pipeline::WATCH_LEAD_S, &AtomicBool::new(false));
    }
    let watch = Watch::start(WatchSpec {
        interval: a.sample,
        target,
        hints: Hints {
            pids: Vec::new(),
            names: a.server_names,
        },
        profile_hz: a.profile_hz,
        offcpu: a.profile_hz.is_some(),
        sampled: true,
    });
    // `start` returns once the `before` snapshot is taken: the samples count from here.
    let started_unix_s = crate::remote::protocol::unix_now();
    match a.duration {
        Some(d) => std::thread::sleep(d),
        None => {
            // Until the caller closes our standard input (the load is over), bounded.
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                let _ = std::io::stdin().read_to_end(&mut Vec::new());
                let _ = tx.send(());
            });
            let _ = rx.recv_timeout(a.max_duration);
        }
    }
    let mut evidence = watch.finish();
    evidence.started_unix_s = Some(started_unix_s);
    if a.duration.is_some() {
        evidence.source = Some(crate::run::EvidenceSource {
            transport: "watch".into(),
            hostname: crate::remote::server::hostname(),
            remote_version: crate::remote::protocol::VERSION.into(),
            ..Default::default()
        });
    }
    let text = serde_json::to_string(&evidence)?;
    match a.json.as_deref() {
        None | Some("-") => println!("{text}"),
        Some(f) => {
            std::fs::write(PathBuf::from(f), text).with_context(|| format!("cannot write {f}"))?
        }
    }
    Ok(ExitCode::SUCCESS)
}
