//! The command line each segment of `run --ray` runs with, and the files it reads
//! shipped beside the binary: every `run` flag that shapes the load carried as given
//! (`tests::every_run_flag_is_carried_or_local` keeps the list whole), the body, a
//! `--targets` file with the body files it names renamed to their shipped copies, a
//! `--replay` log.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use super::super::run::RunArgs;
use crate::spec::Spec;

/// The flags each segment runs with: everything that shapes what is sent or watched,
/// as asked, without what only this machine's run uses (outputs, the objectives, Ray);
/// the companion adds --segment, --start-at, --json. The files the segments read are
/// written or named in `dir` and returned as (their name in the segments' working
/// directory, the file here); the flags name them by those names.
pub(super) fn segment_args(
    a: &RunArgs,
    whole: &Spec,
    body: &[u8],
    dir: &Path,
) -> anyhow::Result<Segments> {
    let ms = |d: Duration| format!("{}ms", d.as_millis().max(1));
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    let mut v: Vec<String> = vec![a.url.clone(), "-c".into(), whole.connections.to_string()];
    if let Some(t) = a.threads {
        v.extend(["-t".into(), t.to_string()]);
    }
    // -d and -n as asked: the defaults (10 s, a replay's -n its log's count) are made
    // again where the segment runs.
    if let Some(d) = a.duration {
        v.extend(["-d".into(), ms(d)]);
    }
    if let Some(n) = a.requests {
        v.extend(["-n".into(), n.to_string()]);
    }
    if let Some(n) = whole.connreqs {
        v.extend(["--connreqs".into(), n.to_string()]);
    }
    if let Some(r) = a.rate {
        v.extend(["-R".into(), r.to_string()]);
    }
    if let Some(file) = &a.mix.targets {
        let shipped = dir.join(TARGETS);
        let names = ship_targets(file, &shipped)?;
        files.push((TARGETS.into(), shipped));
        files.extend(names);
        v.extend(["--targets".into(), TARGETS.into()]);
        v.extend(["--seed".into(), a.mix.seed.to_string()]);
        if a.mix.sequential {
            v.push("--sequential".into());
        }
    }
    if let Some(log) = &a.mix.replay {
        files.push((REPLAY.into(), PathBuf::from(log)));
        v.extend(["--replay".into(), REPLAY.into()]);
        v.extend(["--speed".into(), a.mix.speed.clone()]);
    }
    v.extend(["-m".into(), whole.method.clone()]);
    for h in &whole.headers {
        v.extend(["-H".into(), h.clone()]);
    }
    if !body.is_empty() {
        // A file, not a flag: any bytes, and more than one argument may hold (128 KiB).
        let f = dir.join(BODY);
        std::fs::write(&f, body)
            .with_context(|| format!("cannot write the body to ship to {}", f.display()))?;
        files.push((BODY.into(), f));
        v.extend(["--body-file".into(), BODY.into()]);
    }
    v.extend(["--timeout".into(), ms(a.load.timeout)]);
    if whole.insecure {
        v.push("-k".into());
    }
    if a.load.h1 {
        v.push("--h1".into());
    }
    if a.load.h2 {
        v.push("--h2".into());
    }
    if a.load.h3 {
        v.push("--h3".into());
    }
    if let Some(r) = &a.load.resume {
        v.extend(["--resume".into(), r.clone()]);
    }
    v.extend([
        "--max-concurrent-streams".into(),
        a.load.max_concurrent_streams.to_string(),
        "--io".into(),
        a.load.io.clone(),
    ]);
    // With the server's node watched, the client machines' own watch says nothing.
    if a.load.no_watch || a.ray.server_node_resource.is_some() {
        v.push("--no-watch".into());
    }
    v.extend(["--sample".into(), ms(a.load.sample)]);
    for n in &a.load.server_names {
        v.extend(["--server-name".into(), n.clone()]);
    }
    if a.load.profile {
        v.extend([
            "--profile".into(),
            "--profile-hz".into(),
            a.load.profile_hz.to_string(),
        ]);
        if a.load.no_offcpu {
            v.push("--no-offcpu".into());
        }
    }
    Ok(Segments { args: v, files })
}

/// The flags of the segments and the files shipped for them.
pub(super) struct Segments {
    pub(super) args: Vec<String>,
    /// (name in the segments' working directory, the file on this machine).
    pub(super) files: Vec<(String, PathBuf)>,
}

/// The names the segments read the shipped files by (beside the binary, `loadlens`).
const TARGETS: &str = "targets.jsonl";
const REPLAY: &str = "replay.log";
const BODY: &str = "body";

/// Writes targets file `file` to `out` as the segments read it: every line as it is but
/// for a `body_file`, renamed to `body-K` (beside the shipped file, so found where
/// `targets::parse` looks on the node); returns the body files to ship by those names.
/// The file has been read and checked already, so every line parses.
fn ship_targets(file: &str, out: &Path) -> anyhow::Result<Vec<(String, PathBuf)>> {
    use crate::spec::targets;
    use std::io::Write as _;
    let dir = targets::body_dir(file);
    let cannot = |e: std::io::Error| {
        format!(
            "cannot write the targets file to ship to {}: {e}",
            out.display()
        )
    };
    // Line by line, as `targets::load` reads it: a file of a million lines is never whole
    // in memory.
    let f = std::fs::File::create(out).map_err(|e| anyhow::anyhow!(cannot(e)))?;
    let mut w = std::io::BufWriter::new(f);
    let mut names: Vec<(String, PathBuf)> = Vec::new();
    let mut seen: HashMap<PathBuf, usize> = HashMap::new();
    let what = "targets file";
    targets::each_line(
        targets::open(file, what).map_err(anyhow::Error::msg)?,
        what,
        file,
        |n, raw| {
            let line = raw.trim();
            // A key may be spelled with escapes (`body\u005ffile`): those lines are parsed too.
            if !(line.starts_with('{') && (line.contains("body_file") || line.contains("\\u"))) {
                return w.write_all(raw.as_bytes()).map_err(cannot);
            }
            let mut j: serde_json::Map<String, serde_json::Value> = serde_json::from_str(line)
                .map_err(|e| format!("targets file {file} line {n}: bad JSON: {e}"))?;
            let Some(serde_json::Value::String(f)) = j.get("body_file") else {
                return w.write_all(raw.as_bytes()).map_err(cannot);
            };
            let from = dir.join(f);
            let k = *seen.entry(from.clone()).or_insert_with(|| {
                names.push((format!("body-{}", names.len()), from));
                names.len() - 1
            });
            j.insert("body_file".into(), names[k].0.clone().into());
            serde_json::to_writer(&mut w, &j)
                .map_err(std::io::Error::from)
                .and_then(|()| w.write_all(b"\n"))
                .map_err(cannot)
        },
    )
    .map_err(anyhow::Error::msg)?;
    w.flush().map_err(|e| anyhow::anyhow!(cannot(e)))?;
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::super::super::run::RayFlags;
    use super::*;
    use crate::spec::targets;
    use clap::{CommandFactory, Parser};

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        run: RunArgs,
    }

    /// `run`'s flags that each segment is given (`segment_args`), as clap names them.
    const CARRIED: &[&str] = &[
        "h3",
        "resume",
        "url",
        "connections",
        "threads",
        "duration",
        "requests",
        "connreqs",
        "rate",
        "targets",
        "seed",
        "sequential",
        "replay",
        "speed",
        "headers",
        "method",
        "body",
        "body_file",
        "timeout",
        "insecure",
        "h2",
        "h1",
        "max_concurrent_streams",
        "io",
        "no_watch",
        "sample",
        "server_names",
        "profile",
        "profile_hz",
        "no_offcpu",
    ];
    /// The flags only this machine's run uses (its outputs, the objectives judged on the
    /// merged Run, Ray's own), or that `--ray` refuses (`cmd`, `run::prepare`).
    const LOCAL: &[&str] = &[
        "latency",
        "json",
        "flamegraph",
        "html",
        "quiet",
        "repeat",
        "pause",
        "segment",
        "start_at",
        "slo",
        "judge_untrusted",
        "junit",
        "summary_md",
        "hdr_log",
        "openmetrics",
        "address",
        "clients",
        "ray_timeout",
        "server_node_resource",
        "watch_ssh",
        "ssh_command",
        "server_pids",
        "save",
        "db",
        "tag",
        // Probes are the client's experiment on the whole load, never a segment's
        // (they are off under --segment).
        "probe",
        "no_probe",
        // Stages are refused with --segment and --ray (a schedule is not split yet).
        "stages",
        "abort_if_behind",
    ];

    /// A flag added to `run` must be carried to the segments or named as local here: a
    /// flag that changes what is sent and is left behind makes every node send
    /// something else than asked, silently.
    #[test]
    fn every_run_flag_is_carried_or_local() {
        let mut ids: Vec<String> = Cmd::command()
            .get_arguments()
            .map(|a| a.get_id().to_string())
            .filter(|id| id != "help" && id != "version")
            .collect();
        ids.sort();
        let mut known: Vec<String> = CARRIED.iter().chain(LOCAL).map(|s| s.to_string()).collect();
        known.sort();
        assert_eq!(ids, known);
    }

    /// `segment_args` for `argv`, and the segment's own command line parsed back, as the
    /// companion runs it (with the shipped files in `pkg`, its working directory).
    fn round_trip(argv: &[&str], pkg: &Path) -> (RunArgs, RunArgs, Spec) {
        let mut a = Cmd::try_parse_from(std::iter::once("loadlens").chain(argv.iter().copied()))
            .unwrap()
            .run;
        let (body, whole) = super::super::super::run::prepare(&mut a).unwrap();
        let ship = tempfile::tempdir().unwrap();
        let s = segment_args(&a, &whole, &body, ship.path()).unwrap();
        // The segments are given the connections resolved (the default made explicit).
        a.connections.get_or_insert(whole.connections);
        for (name, from) in &s.files {
            std::fs::copy(from, pkg.join(name)).unwrap();
        }
        let b = Cmd::try_parse_from(
            std::iter::once("loadlens".to_string())
                .chain(s.args.iter().cloned())
                .chain(
                    ["--segment", "1/2", "--start-at", "1", "--json", "-", "-q"].map(String::from),
                ),
        )
        .unwrap()
        .run;
        (a, b, whole)
    }

    /// `a` and `b` with what only this machine uses cleared.
    fn without_local(mut a: RunArgs) -> String {
        a.json = None;
        a.quiet = false;
        a.segment = None;
        a.start_at = None;
        a.ray = RayFlags::default();
        format!("{a:?}")
    }

    /// Every flag that shapes the load comes back from the segment's command line as it
    /// was given, and the shipped targets file (its bodies renamed and shipped with it,
    /// a binary one and one named by an absolute path, each once) reads on the node into
    /// the very targets read here.
    #[test]
    fn a_segment_is_given_the_load_as_asked() {
        let dir = tempfile::tempdir().unwrap();
        let pkg = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("b.bin"), [0u8, 0xff, 13, 10, 7]).unwrap();
        let abs = d.join("abs.json");
        std::fs::write(&abs, "{\"x\": 1}").unwrap();
        let t = d.join("t.jsonl");
        let text = format!(
            concat!(
                "# a mix\n",
                "{{\"url\": \"/a\", \"weight\": 5}}\n",
                "{{\"method\": \"POST\", \"url\": \"/p\", \"body_file\": \"b.bin\", \"name\": \"post\"}}\n",
                "{{\"method\": \"PUT\", \"url\": \"/q\", \"body_file\": \"{}\", \"headers\": {{\"X-Body_file\": [\"1\", \"2\"]}}}}\n",
                "{{\"url\": \"/r\", \"headers\": {{\"X-Note\": \"body_file\"}}, \"weight\": 2}}\n",
                "{{\"method\": \"POST\", \"url\": \"/p2\", \"body_file\": \"./b.bin\"}}\n",
                "GET /plain?x=1\n",
            ),
            abs.display()
        );
        std::fs::write(&t, &text).unwrap();
        let tf = t.display().to_string();
        let argv = [
            "http://u:pw@127.0.0.1:1/x",
            "-c",
            "6",
            "-t",
            "2",
            "-d",
            "3s",
            "-n",
            "10k",
            "--connreqs",
            "7",
            "-R",
            "500",
            "--targets",
            &tf,
            "--seed",
            "42",
            "--sequential",
            "-H",
            "X-A: 1",
            "-H",
            "X-B: 2",
            "-m",
            "PUT",
            "--timeout",
            "1500ms",
            "-k",
            "--h2",
            "--max-concurrent-streams",
            "4",
            "--io",
            "epoll",
            "--no-watch",
            "--sample",
            "250ms",
            "--server-name",
            "nginx",
            "--server-name",
            "php-fpm",
            "--profile",
            "--profile-hz",
            "49",
            "--no-offcpu",
            "--ray",
            "127.0.0.1:1",
            "--clients",
            "2",
            "--json",
            "x.json",
            "-q",
        ];
        let (a, mut b, whole) = round_trip(&argv, pkg.path());
        assert_eq!(b.mix.targets.as_deref(), Some(TARGETS));
        b.mix.targets = a.mix.targets.clone();
        assert_eq!(without_local(a), without_local(b));

        // The shipped file: the lines without a body file as they were, the bodies
        // shipped once each, and read on the node into the same targets.
        let shipped = std::fs::read_to_string(pkg.path().join(TARGETS)).unwrap();
        let lines: Vec<&str> = shipped.lines().collect();
        let orig: Vec<&str> = text.lines().collect();
        for i in [0, 1, 4, 6] {
            assert_eq!(lines[i], orig[i]);
        }
        assert!(
            lines[2].contains("\"body_file\":\"body-0\""),
            "{}",
            lines[2]
        );
        assert!(
            lines[3].contains("\"body_file\":\"body-1\""),
            "{}",
            lines[3]
        );
        // ./b.bin is b.bin: shipped once.
        assert!(
            lines[5].contains("\"body_file\":\"body-0\""),
            "{}",
            lines[5]
        );
        assert!(!pkg.path().join("body-2").exists());
        assert_eq!(
            std::fs::read(pkg.path().join("body-0")).unwrap(),
            [0u8, 0xff, 13, 10, 7]
        );
        let here = whole.mix.as_ref().unwrap();
        let there = targets::load(
            &pkg.path().join(TARGETS).display().to_string(),
            &whole.url,
            42,
            true,
        )
        .unwrap();
        assert_eq!(there.endpoints, here.endpoints);
        assert_eq!(there.loaded.len(), here.loaded.len());
        for (x, y) in there.loaded.iter().zip(here.loaded.iter()) {
            assert_eq!(
                (x.method, x.path, x.headers, x.body, x.weight, x.endpoint),
                (y.method, y.path, y.headers, y.body, y.weight, y.endpoint)
            );
        }
    }

    /// A replay ships its log and keeps its pace; a body (any bytes) is shipped as a
    /// file; the server's node watched means the segments do not watch.
    #[test]
    fn a_replay_and_a_body_are_shipped() {
        let dir = tempfile::tempdir().unwrap();
        let pkg = tempfile::tempdir().unwrap();
        let log = dir.path().join("access.log");
        let text = "{\"t\": 1, \"url\": \"/a\"}\n{\"t\": 2, \"url\": \"/b\"}\n";
        std::fs::write(&log, text).unwrap();
        let lf = log.display().to_string();
        let argv = [
            "http://127.0.0.1:1/",
            "-c",
            "4",
            "--replay",
            &lf,
            "--speed",
            "2.5",
            "--h1",
            "--ray",
            "auto",
            "--clients",
            "2",
            "--server-node-resource",
            "server",
        ];
        let (a, mut b, _) = round_trip(&argv, pkg.path());
        assert_eq!(b.mix.replay.as_deref(), Some(REPLAY));
        assert_eq!(
            std::fs::read_to_string(pkg.path().join(REPLAY)).unwrap(),
            text
        );
        assert!(b.load.no_watch && b.requests.is_none());
        b.mix.replay = a.mix.replay.clone();
        b.load.no_watch = false;
        assert_eq!(without_local(a), without_local(b));

        let body = dir.path().join("body.bin");
        std::fs::write(&body, [0u8, 0xff, 0xfe]).unwrap();
        let bf = body.display().to_string();
        let argv = [
            "http://127.0.0.1:1/",
            "-m",
            "POST",
            "--body-file",
            &bf,
            "--ray",
            "auto",
            "--clients",
            "2",
        ];
        let (a, mut b, _) = round_trip(&argv, pkg.path());
        assert_eq!(b.load.body_file.as_deref(), Some(Path::new(BODY)));
        assert_eq!(
            std::fs::read(pkg.path().join(BODY)).unwrap(),
            [0u8, 0xff, 0xfe]
        );
        b.load.body_file = a.load.body_file.clone();
        assert_eq!(without_local(a), without_local(b));
    }
}
