//! The user documentation (README.md and every Markdown file under docs/) is checked
//! against the code, so it cannot drift:
//!
//! 1. **Relative links** — `[text](path)`, `[text](path#anchor)`, `[text](#anchor)`,
//!    images too — must name a file or directory that exists and, for a Markdown file,
//!    a heading whose anchor (as a repository host computes it) is the one given. Any new
//!    page is checked; there is no list to update.
//! 2. **Commands** — every `loadlens …` line in a fenced block (with or without a leading
//!    `$ `, continued with a trailing `\`) must parse with the current command line
//!    (`loadlens::cli::command()`): a renamed or removed flag fails here. `$VAR` and
//!    `$(…)` words are taken as `1`; a trailing `# comment` is dropped.
//! 3. **Output** — a block that shows output after a `$ loadlens …` line must say where
//!    that output comes from, in an HTML comment on the line before the block (invisible
//!    when rendered):
//!
//!    - `<!-- doc-test: run -->` — each `$ loadlens …` line is run from the repository
//!      root (deterministic commands: `explain`, `report tests/data/runs/…`, `--help`),
//!      and the lines after it must be its output, line for line, numbers masked
//!      (every number, with its unit, becomes `N`; runs of spaces become one). A line
//!      `...` or `…` stands for any number of lines.
//!    - `<!-- doc-test: nginx -->` — the same against an nginx the test starts on
//!      loopback (the block's `http://127.0.0.1:PORT` becomes its address; the loads
//!      must be bounded, `-d` or `-n`): each line shown must be a line of the output,
//!      numbers masked, in any order (rows sorted by time can swap between runs). A
//!      `$ cat FILE` line followed by lines writes those lines to FILE first, in the
//!      command's working directory (a temporary one).
//!    - `<!-- doc-test: golden tests/data/docs/NAME.txt -->` — the output of a real run
//!      that cannot be repeated here (the lab's namespaces, ssh, several machines, a
//!      benchmark), kept in that file: the block's lines, less its `$ ` lines and
//!      `...`/`…`, must appear in the file in order. To refresh one, run the command,
//!      save its output there, and paste the lines you want to show.
//!    - `<!-- doc-test: usage -->` — a synopsis (`URL [-c CONNS]`…), not a command: not
//!      parsed.
//!
//!    A block with output and no such comment fails, naming the file and line.
//!
//! docs/findings.md is generated from the code and checked by `tests/docs_current.rs`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

mod common;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every Markdown file under docs/, relative to the repository root.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "md") {
                out.push(p);
            }
        }
    }
    let mut out = vec![root().join("README.md")];
    walk(&root().join("docs"), &mut out);
    out
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

// ---------------------------------------------------------------- links

/// The anchor a repository host (GitHub's rule) gives a heading: lower case, every
/// character that is not a letter, digit, space, `-` or `_` dropped, spaces to `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown text's headings (outside fenced blocks), with `-1`, `-2`
/// for repeated ones.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        if fence || !line.starts_with('#') {
            continue;
        }
        let a = anchor(line.trim_start_matches('#'));
        let mut name = a.clone();
        let mut n = 0;
        while seen.contains(&name) {
            n += 1;
            name = format!("{a}-{n}");
        }
        seen.insert(name);
    }
    seen
}

/// The link targets of a Markdown text outside fenced blocks and code spans, with
/// their line numbers.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fence = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        // Drop code spans: a `[x](y)` inside backticks is not a link.
        let mut plain = String::new();
        for (k, part) in line.split('`').enumerate() {
            if k % 2 == 0 {
                plain.push_str(part);
            } else {
                plain.push_str("code");
            }
        }
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((i + 1, after[..end].trim().to_string()));
            rest = &after[end..];
        }
    }
    out
}

/// What is wrong with the relative links of `page` (empty when all resolve).
fn broken_links(page: &Path, text: &str) -> Vec<String> {
    let mut bad = Vec::new();
    for (line, target) in links(text) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, frag) = match target.split_once('#') {
            Some((p, f)) => (p, Some(f)),
            None => (target.as_str(), None),
        };
        if path.is_empty() {
            if let Some(frag) = frag.filter(|f| !anchors(text).contains(*f)) {
                bad.push(format!(
                    "{}:{line}: `{target}`: no heading with anchor #{frag} here",
                    rel(page)
                ));
            }
            continue;
        }
        let file = page.parent().unwrap().join(path);
        if !file.exists() {
            bad.push(format!(
                "{}:{line}: `{target}`: {} does not exist",
                rel(page),
                rel(&file)
            ));
            continue;
        }
        if let Some(frag) = frag {
            if file.extension().is_some_and(|e| e == "md") {
                let other = std::fs::read_to_string(&file).unwrap();
                if !anchors(&other).contains(frag) {
                    bad.push(format!(
                        "{}:{line}: `{target}`: no heading with anchor #{frag} in {}",
                        rel(page),
                        rel(&file)
                    ));
                }
            }
        }
    }
    bad
}

#[test]
fn relative_links_resolve() {
    let mut bad = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        bad.extend(broken_links(&page, &text));
    }
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
}

/// The checker itself: a missing file and a missing anchor are caught, a good link and
/// a link inside a code span are not.
#[test]
fn the_link_check_catches_what_it_should() {
    let page = root().join("docs/guide/some-new-page.md");
    let text = "# Title\n\n## A `flag`: here\n\n[ok](../performance.md) [ok](#a-flag-here) \
                [ok](running.md#tips)\n[bad](nowhere.md) [bad](#nope) [bad](running.md#nope)\n\
                `[not a link](nowhere.md)`\n```\n[in a block](nowhere.md)\n```\n";
    let bad = broken_links(&page, text);
    assert_eq!(bad.len(), 3, "{bad:#?}");
    assert!(bad[0].contains("nowhere.md does not exist"), "{}", bad[0]);
    assert!(bad[1].contains("#nope"), "{}", bad[1]);
    assert!(bad[2].contains("running.md#nope"), "{}", bad[2]);
    assert_eq!(
        anchor("Proving a fix: `--repeat`, `compare` and `sweep`"),
        "proving-a-fix---repeat-compare-and-sweep"
    );
}

// ---------------------------------------------------------------- blocks

/// A fenced block: where it starts, its marker, its lines.
#[derive(Debug)]
struct Block {
    page: String,
    line: usize,
    marker: Option<String>,
    lines: Vec<String>,
}

fn blocks(page: &Path, text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].trim_start().starts_with("```") {
            i += 1;
            continue;
        }
        let start = i;
        let marker = lines[..i]
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .and_then(|l| l.trim().strip_prefix("<!-- doc-test:"))
            .and_then(|l| l.strip_suffix("-->"))
            .map(|m| m.trim().to_string());
        i += 1;
        let mut body = Vec::new();
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            body.push(lines[i].to_string());
            i += 1;
        }
        i += 1;
        out.push(Block {
            page: rel(page),
            line: start + 1,
            marker,
            lines: body,
        });
    }
    out
}

/// A command line of a block: `$ loadlens …` or `loadlens …`, with its `\` continuations
/// joined; `None` for any other line.
fn command_at(lines: &[String], i: usize) -> Option<(String, usize)> {
    let l = lines[i].trim_start();
    let l = l.strip_prefix("$ ").unwrap_or(l);
    if !l.starts_with("loadlens ") {
        return None;
    }
    let mut cmd = l.to_string();
    let mut j = i;
    while cmd.trim_end().ends_with('\\') && j + 1 < lines.len() {
        cmd = cmd.trim_end().trim_end_matches('\\').to_string();
        j += 1;
        cmd.push(' ');
        cmd.push_str(lines[j].trim());
    }
    Some((cmd, j + 1))
}

/// A shell line split into words: quotes respected, `# comment` and anything after a
/// pipe or redirection dropped, `$VAR`/`$(…)` words as `1`.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut w = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => w.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, ' ' | '\t') => {
                if in_word {
                    out.push(std::mem::take(&mut w));
                    in_word = false;
                }
            }
            (None, '#' | '|' | '>' | '<' | ';' | '&') if !in_word => break,
            (None, c) => {
                w.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(w);
    }
    out.into_iter()
        .map(|w| if w.starts_with('$') { "1".into() } else { w })
        .collect()
}

/// Every number, with the unit or suffix glued to it, becomes `N`; spaces collapse.
fn mask(line: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = line.trim_end().chars().collect();
    let mut i = 0;
    let mut prev_word = false;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c.is_ascii_digit() && !prev_word {
            // Digits, with `.` or `,` between digits (1,000 and 2.5), then a unit.
            while i < chars.len()
                && (chars[i].is_ascii_digit()
                    || (matches!(chars[i], '.' | ',')
                        && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit())))
            {
                i += 1;
            }
            while i < chars.len() && (chars[i].is_alphabetic() || chars[i] == '%') {
                i += 1;
            }
            out.push('N');
            prev_word = true;
            continue;
        }
        prev_word = c.is_alphanumeric() || c == '_';
        out.push(c);
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn is_elision(l: &str) -> bool {
    matches!(l.trim(), "..." | "…")
}

/// `doc` (with `...` lines for any run of lines) matches `out` exactly, line for line.
fn matches_in_order(doc: &[String], out: &[String]) -> bool {
    match doc.split_first() {
        None => out.is_empty(),
        Some((d, rest)) if is_elision(d) => {
            (0..=out.len()).any(|k| matches_in_order(rest, &out[k..]))
        }
        Some((d, rest)) => out.first().is_some_and(|o| o == d) && matches_in_order(rest, &out[1..]),
    }
}

fn loadlens_bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_loadlens"))
}

/// Runs one documented command in `dir` (bounded), its stdout and stderr together.
fn run_doc_command(argv: &[String], dir: &Path, env_url: Option<&str>) -> Vec<String> {
    let mut args: Vec<String> = argv[1..].to_vec();
    if let Some(base) = env_url {
        for a in &mut args {
            if let Some(at) = a.find("http://127.0.0.1:") {
                let tail = &a[at + "http://127.0.0.1:".len()..];
                let path = tail.find('/').map_or("/", |p| &tail[p..]);
                *a = format!("{}{}{}", &a[..at], base.trim_end_matches('/'), path);
            }
        }
    }
    let mut cmd = loadlens_bin();
    cmd.args(&args).current_dir(dir).env("NO_COLOR", "1");
    let out = common::output_within(cmd, Duration::from_secs(40));
    let mut text = String::from_utf8_lossy(&out.stdout).to_string();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    text.lines().map(str::to_string).collect()
}

/// The commands of a block with the lines shown after each, and the files its
/// `$ cat FILE` lines show.
#[allow(clippy::type_complexity)]
fn shown(block: &Block) -> (Vec<(Vec<String>, Vec<String>)>, Vec<(String, String)>) {
    let mut cmds = Vec::new();
    let mut files = Vec::new();
    let mut i = 0;
    let l = &block.lines;
    while i < l.len() {
        if let Some(file) = l[i].strip_prefix("$ cat ") {
            let mut content = String::new();
            i += 1;
            while i < l.len() && !l[i].starts_with("$ ") {
                content.push_str(&l[i]);
                content.push('\n');
                i += 1;
            }
            files.push((file.trim().to_string(), content));
            continue;
        }
        if l[i].starts_with("$ ") {
            if let Some((cmd, next)) = command_at(l, i) {
                let mut output = Vec::new();
                i = next;
                while i < l.len() && !l[i].starts_with("$ ") {
                    output.push(l[i].clone());
                    i += 1;
                }
                cmds.push((words(&cmd), output));
                continue;
            }
        }
        i += 1;
    }
    (cmds, files)
}

/// Whether the block shows output: a line that is not a command, a `$ ` line or a
/// continuation, after a `$ loadlens` line.
fn shows_output(block: &Block) -> bool {
    shown(block)
        .0
        .iter()
        .any(|(_, out)| out.iter().any(|l| !l.trim().is_empty()))
}

fn all_blocks() -> Vec<Block> {
    let mut out = Vec::new();
    for page in pages() {
        if rel(&page) == "docs/findings.md" {
            continue; // generated; checked by docs_current
        }
        out.extend(blocks(&page, &std::fs::read_to_string(&page).unwrap()));
    }
    out
}

#[test]
fn every_command_shown_parses_with_the_current_command_line() {
    let mut bad = Vec::new();
    let mut n = 0;
    for b in all_blocks() {
        if b.marker.as_deref() == Some("usage") {
            continue;
        }
        for i in 0..b.lines.len() {
            let Some((cmd, _)) = command_at(&b.lines, i) else {
                continue;
            };
            n += 1;
            if let Err(e) = loadlens::cli::command().try_get_matches_from(words(&cmd)) {
                let first = e.to_string();
                let first = first.lines().next().unwrap_or_default().to_string();
                bad.push(format!("{}:{}: `{cmd}`: {first}", b.page, b.line + 1 + i));
            }
        }
    }
    assert!(
        n >= 20,
        "only {n} commands found: is the block parser broken?"
    );
    assert!(
        bad.is_empty(),
        "commands that no longer parse:\n{}",
        bad.join("\n")
    );
}

#[test]
fn every_block_with_output_says_where_it_comes_from() {
    let mut bad = Vec::new();
    for b in all_blocks() {
        let ok = match b.marker.as_deref() {
            Some("run" | "nginx" | "usage") => true,
            Some(m) if m.starts_with("golden ") => true,
            Some(m) => {
                bad.push(format!("{}:{}: unknown marker `{m}`", b.page, b.line));
                true
            }
            None => !shows_output(&b),
        };
        if !ok {
            bad.push(format!(
                "{}:{}: a block with output and no `<!-- doc-test: … -->` before it (the convention: the top of tests/docs.rs)",
                b.page, b.line
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn golden_blocks_are_real_output() {
    let mut bad = Vec::new();
    let mut n = 0;
    for b in all_blocks() {
        let Some(path) = b.marker.as_deref().and_then(|m| m.strip_prefix("golden ")) else {
            continue;
        };
        n += 1;
        let golden = match std::fs::read_to_string(root().join(path)) {
            Ok(t) => t,
            Err(e) => {
                bad.push(format!("{}:{}: {path}: {e}", b.page, b.line));
                continue;
            }
        };
        let mut g = golden.lines().map(str::trim_end);
        let mut cont = false;
        for l in &b.lines {
            // Command lines and their continuations, and elisions, are not output.
            let is_cmd = l.starts_with("$ ") || cont;
            cont = is_cmd && l.trim_end().ends_with('\\');
            if is_cmd || is_elision(l) || l.trim().is_empty() {
                continue;
            }
            if !g.any(|x| x == l.trim_end()) {
                bad.push(format!(
                    "{}:{}: not in {path} (in this order): {l}",
                    b.page, b.line
                ));
                break;
            }
        }
    }
    assert!(n >= 10, "only {n} golden blocks");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn run_blocks_match_their_commands_output() {
    let mut bad = Vec::new();
    let mut n = 0;
    for b in all_blocks() {
        if b.marker.as_deref() != Some("run") {
            continue;
        }
        let (cmds, _) = shown(&b);
        for (argv, doc) in cmds {
            n += 1;
            let out: Vec<String> = run_doc_command(&argv, &root(), None)
                .iter()
                .map(|l| mask(l))
                .collect();
            let doc: Vec<String> = doc.iter().map(|l| mask(l)).collect();
            if !matches_in_order(&doc, &out) {
                bad.push(format!(
                    "{}:{}: `{}` printed (numbers masked):\n{}\n",
                    b.page,
                    b.line,
                    argv.join(" "),
                    out.join("\n")
                ));
            }
        }
    }
    assert!(n >= 2, "only {n} commands run");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn nginx_blocks_match_a_run_against_nginx() {
    let blocks: Vec<Block> = all_blocks()
        .into_iter()
        .filter(|b| b.marker.as_deref() == Some("nginx"))
        .collect();
    assert!(!blocks.is_empty());
    // Answers every path the documented mixes send, POSTs included.
    let ng = common::Nginx::start("", "location / { return 200 \"hello, loadlens\\n\"; }");
    let base = ng.url("/");
    let mut bad = Vec::new();
    for b in &blocks {
        let dir = tempfile::tempdir().unwrap();
        let (cmds, files) = shown(b);
        for (name, content) in files {
            std::fs::write(dir.path().join(name), content).unwrap();
        }
        for (argv, doc) in cmds {
            assert!(
                argv.iter().any(|a| a == "-d" || a == "-n"),
                "{}:{}: a documented load must be bounded (-d or -n)",
                b.page,
                b.line
            );
            let out: BTreeSet<String> = run_doc_command(&argv, dir.path(), Some(&base))
                .iter()
                .map(|l| mask(l))
                .collect();
            for l in doc
                .iter()
                .filter(|l| !is_elision(l) && !l.trim().is_empty())
            {
                if !out.contains(&mask(l)) {
                    bad.push(format!(
                        "{}:{}: `{}`: no line like `{}` (masked `{}`) in:\n{}\n",
                        b.page,
                        b.line,
                        argv.join(" "),
                        l,
                        mask(l),
                        out.iter().cloned().collect::<Vec<_>>().join("\n")
                    ));
                    break;
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_output_check_catches_what_it_should() {
    let s = |v: &[&str]| v.iter().map(|l| mask(l)).collect::<Vec<_>>();
    assert_eq!(mask("  Latency   480.24us  153.29us"), "Latency N N");
    assert_eq!(mask("p99<20ms  24.05ms  not judged"), "p99<N N not judged");
    assert_eq!(mask("GET /api/search    18780  0"), "GET /api/search N N");
    assert_eq!(mask("HTTP/2, h2load"), "HTTP/N, h2load");
    let out = s(&["a 1", "b 2", "c 3"]);
    assert!(matches_in_order(&s(&["a 9", "...", "c 1"]), &out));
    assert!(matches_in_order(&s(&["a 9", "b 2", "c 1"]), &out));
    assert!(
        !matches_in_order(&s(&["a 9", "c 1"]), &out),
        "a line dropped"
    );
    assert!(
        !matches_in_order(&s(&["a 9", "...", "d 1"]), &out),
        "a line changed"
    );
    assert_eq!(
        words("loadlens run http://x/ -H 'A: b c' --start-at $T --json s.json   # machine A"),
        [
            "loadlens",
            "run",
            "http://x/",
            "-H",
            "A: b c",
            "--start-at",
            "1",
            "--json",
            "s.json"
        ]
    );
    let b = blocks(
        Path::new("x.md"),
        "<!-- doc-test: run -->\n```\n$ loadlens explain x \\\n  y\nout\n```\n",
    );
    assert_eq!(b[0].marker.as_deref(), Some("run"));
    assert!(shows_output(&b[0]));
    assert_eq!(shown(&b[0]).0[0].0, ["loadlens", "explain", "x", "y"]);
}
