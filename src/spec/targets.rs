//! A mix of requests (`run --targets FILE`): the targets file read and checked line by
//! line before any load, the weighted order the requests are sent in, and the table of
//! request bytes the workers index per request.
//!
//! The file is JSON lines with vegeta's JSON target fields where they overlap (`method`,
//! `url`, `header`/`headers`, `body` — here plain text, not base64 — and `body_file`),
//! plus `weight` and `name`; a line that is not a JSON object is a URL, optionally after
//! a method (`GET /a`, `/b`, `http://127.0.0.1:8080/c`). Every connection goes to the
//! run's one server, so a URL naming another host, port or scheme is refused.
//!
//! The order is a table computed once: blocks of the targets' reduced weights, each
//! block shuffled by a PRNG seeded from `--seed` (SplitMix64, Steele et al., "Fast
//! splittable pseudorandom number generators", OOPSLA 2014). Any run of consecutive
//! requests holds each target in its weight's share to within one block; the n-th
//! request of a `-n` run (the n-th claim of the shared budget) is always the same
//! target, so two runs with one seed send the same requests whatever the timing.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use super::lines::{each_line, open, read_capped};
use super::table::{Names, ShapeIndex};
pub use super::table::{Shape, TargetRef, Targets};
use super::{check_header, is_token};

/// At most this many endpoint names get results of their own; the rest are "other"
/// (each name costs a latency histogram per worker thread).
pub const MAX_ENDPOINTS: usize = 100;
/// The name of the endpoint that gathers targets beyond [`MAX_ENDPOINTS`] names.
pub const OTHER: &str = "other";
/// The seed used when `--seed` is not given (recorded in the spec either way).
pub const DEFAULT_SEED: u64 = 1;
/// The order table holds at least this many entries (whole blocks of the weights).
const SCHEDULE_MIN: usize = 4096;
/// The sum of the reduced weights is scaled down to at most this (a bounded table).
const WEIGHT_MAX: u64 = 65_536;

/// `--targets`: what the Run records of the mix (the requests themselves are not).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MixSpec {
    /// The targets file as given (`-` = standard input).
    pub file: String,
    /// Seed of the weighted order: two runs with the same file and seed send the same
    /// sequence of requests.
    pub seed: u64,
    /// `--sequential`: the file's order, round robin (weights above 0 ignored).
    pub sequential: bool,
    /// Targets read from the file.
    pub targets: usize,
    /// The endpoint names results are kept under, in the file's order.
    pub endpoints: Vec<String>,
    /// `--replay`: the access log replayed (absent for `--targets`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<super::replay::ReplaySpec>,
    /// The parsed targets (not recorded).
    #[serde(skip)]
    #[schemars(skip)]
    pub loaded: Arc<Targets>,
    /// The order sent when it is not the whole weighted one: a replay's log order, or a
    /// segment's share of either (`segment.rs#mix_share`); empty: the weighted order,
    /// built with the requests.
    #[serde(skip)]
    #[schemars(skip)]
    pub sequence: Arc<Vec<u32>>,
    /// `--replay` at a speed: when each request of `sequence` is due, µs from the start.
    #[serde(skip)]
    #[schemars(skip)]
    pub due_us: Arc<Vec<u64>>,
}
/// One JSON line of a targets file (strings borrowed from the line where JSON allows).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonLine<'a> {
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow)]
    url: Cow<'a, str>,
    #[serde(alias = "header")]
    headers: Option<serde_json::Map<String, serde_json::Value>>,
    body: Option<String>,
    body_file: Option<String>,
    weight: Option<u32>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
}

/// Reads `file` (`-` = standard input) and checks every line against the run's URL.
pub fn load(file: &str, run_url: &str, seed: u64, sequential: bool) -> Result<MixSpec, String> {
    let what = "targets file";
    let (targets, endpoints) = parse(open(file, what)?, file, run_url, body_dir(file))?;
    Ok(MixSpec {
        file: file.to_string(),
        seed,
        sequential,
        targets: targets.len(),
        endpoints,
        replay: None,
        loaded: Arc::new(targets),
        sequence: Arc::default(),
        due_us: Arc::default(),
    })
}

/// Where the relative `body_file`s of targets file `file` are: beside it.
pub fn body_dir(file: &str) -> &Path {
    Path::new(file).parent().unwrap_or(Path::new("."))
}

/// Parses a targets file's lines; `label` names it in errors, `dir` is where relative
/// `body_file`s are. Returns the targets and the endpoint names.
pub fn parse(
    text: impl Read,
    label: &str,
    run_url: &str,
    dir: &Path,
) -> Result<(Targets, Vec<String>), String> {
    let base = url::Url::parse(run_url).map_err(|e| format!("invalid URL {run_url}: {e}"))?;
    let mut t = Targets::default();
    let mut shapes = ShapeIndex::default();
    let mut names = Names::default();
    // Bodies read from files, each file once; bodies given inline, each text once.
    let mut files: HashMap<String, Arc<[u8]>> = HashMap::new();
    let mut texts: HashMap<String, Arc<[u8]>> = HashMap::new();
    let mut last = 0;
    let mut any_weight = false;
    each_line(text, "targets file", label, |n, raw| {
        let err = |m: String| format!("targets file {label} line {n}: {m}");
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            return Ok(());
        }
        last = n;
        let j: JsonLine = if line.starts_with('{') {
            serde_json::from_str(line).map_err(|e| err(format!("bad JSON: {e}")))?
        } else {
            let (method, url) = match line.split_once(char::is_whitespace) {
                Some((m, u)) => (Some(Cow::Borrowed(m)), u.trim()),
                None => (None, line),
            };
            JsonLine {
                method,
                url: Cow::Borrowed(url),
                headers: None,
                body: None,
                body_file: None,
                weight: None,
                name: None,
            }
        };
        let method = match j.method {
            None => Cow::Borrowed("GET"),
            Some(m) if m.bytes().any(|b| b.is_ascii_lowercase()) => {
                Cow::Owned(m.to_ascii_uppercase())
            }
            Some(m) => m,
        };
        if !is_token(&method) {
            return Err(err(format!("invalid method `{}`", method.escape_debug())));
        }
        path_of(&base, &j.url, t.paths_mut()).map_err(err)?;
        let mut headers = Vec::new();
        for (name, v) in j.headers.unwrap_or_default() {
            let values = match v {
                serde_json::Value::String(s) => vec![s],
                serde_json::Value::Array(a) => a
                    .into_iter()
                    .map(|x| match x {
                        serde_json::Value::String(s) => Ok(s),
                        _ => Err(err(format!("header `{name}`: values must be strings"))),
                    })
                    .collect::<Result<_, _>>()?,
                _ => {
                    return Err(err(format!(
                        "header `{name}`: expected a string or a list of strings"
                    )))
                }
            };
            for v in values {
                let h = format!("{name}: {v}");
                check_header(&h).map_err(err)?;
                headers.push(h);
            }
        }
        let body: Option<Arc<[u8]>> = match (j.body, j.body_file) {
            (Some(_), Some(_)) => return Err(err("give `body` or `body_file`, not both".into())),
            (Some(b), None) => Some(match texts.get(&b) {
                Some(a) => a.clone(),
                None => {
                    let a: Arc<[u8]> = Arc::from(b.as_bytes());
                    texts.insert(b, a.clone());
                    a
                }
            }),
            (None, Some(f)) => Some(match files.get(&f) {
                Some(a) => a.clone(),
                None => {
                    let p = dir.join(&f);
                    let a: Arc<[u8]> = std::fs::read(&p)
                        .map_err(|e| err(format!("body_file {}: {e}", p.display())))?
                        .into();
                    files.insert(f, a.clone());
                    a
                }
            }),
            (None, None) => None,
        };
        let shape = match (headers.is_empty(), body) {
            (true, None) => shapes.plain(&mut t, &method),
            (_, body) => {
                let body = body.unwrap_or_default();
                shapes.with(
                    &mut t,
                    Shape {
                        method: method.to_string(),
                        headers,
                        body,
                    },
                )
            }
        };
        let weight = j.weight.unwrap_or(1);
        any_weight |= weight > 0;
        let endpoint = match &j.name {
            Some(name) => names.of(name),
            None => names.of_default(&method, t.pending_path()),
        };
        t.push(shape, weight, endpoint).map_err(err)
    })?;
    if t.is_empty() {
        return Err(format!("targets file {label}: no targets in it"));
    }
    if !any_weight {
        return Err(format!(
            "targets file {label} line {last}: every weight is 0 — give at least one target a weight above 0"
        ));
    }
    Ok((t, names.names))
}

/// Appends to `out` the path and query a target URL asks for, refused when it leaves
/// the run's server.
pub(super) fn path_of(base: &url::Url, url: &str, out: &mut String) -> Result<(), String> {
    if url.is_empty() {
        return Err("`url` is empty".into());
    }
    if url.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err(format!(
            "bad URL `{}`: spaces and control characters are not allowed",
            url.escape_debug()
        ));
    }
    if verbatim(url) {
        out.push_str(url);
        return Ok(());
    }
    let u = base
        .join(url)
        .map_err(|e| format!("bad URL `{url}`: {e}"))?;
    let same = u.scheme() == base.scheme()
        && u.host_str() == base.host_str()
        && u.port_or_known_default() == base.port_or_known_default();
    if !same {
        return Err(format!(
            "URL `{url}` is on another server than the run's {}://{}: every connection goes to the run's URL — use a path, or that host:port",
            base.scheme(),
            base.host_str().map_or(String::new(), |h| match base.port_or_known_default() {
                Some(p) => format!("{h}:{p}"),
                None => h.to_string(),
            })
        ));
    }
    out.push_str(u.path());
    if let Some(q) = u.query() {
        out.push('?');
        out.push_str(q);
    }
    Ok(())
}

/// Whether `url` is a path (and query) that joining it to the run's URL leaves as it is,
/// so the URL parser can be skipped (a third of the time to read a million targets): it
/// starts with one `/`, no segment of its path is `.` or `..` and the path has no `%`
/// (`%2e` is a dot too), and each byte is one neither the path's nor a special scheme's
/// query's percent-encode set holds (WHATWG URL §4.4, §4.1; `\` is a `/` in an http
/// URL). Anything else goes to the parser; `a_verbatim_path_is_what_the_parser_makes`
/// checks the two agree.
fn verbatim(url: &str) -> bool {
    let b = url.as_bytes();
    if b.first() != Some(&b'/') || b.get(1) == Some(&b'/') {
        return false;
    }
    let q = b.iter().position(|&c| c == b'?').unwrap_or(b.len());
    let (path, query) = b.split_at(q);
    let plain = |c: u8| c.is_ascii_alphanumeric() || b"-._~!$&()*+,;=:@/".contains(&c);
    path.iter().all(|&c| plain(c))
        && query.iter().all(|&c| plain(c) || c == b'%' || c == b'?')
        && path.split(|&c| c == b'/').all(|s| s != b"." && s != b"..")
}

/// SplitMix64: a small, fast, well-mixed PRNG, enough to shuffle a table.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> SplitMix {
        SplitMix(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (Lemire's multiply-shift; the bias for n ≪ 2^64 is negligible).
    fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }
}

pub(super) fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The order requests are sent in: indices into the targets, one per request, repeated.
/// Weighted: whole blocks of the reduced weights, each shuffled; sequential: the targets
/// with a weight above 0, in the file's order.
pub fn schedule(weights: &[u32], seed: u64, sequential: bool) -> Vec<u32> {
    let live = || (0..weights.len() as u32).filter(|&i| weights[i as usize] > 0);
    if sequential {
        return live().collect();
    }
    let g = weights.iter().fold(0u64, |g, &w| gcd(g, w as u64)).max(1);
    let mut reduced: Vec<u64> = weights.iter().map(|&w| w as u64 / g).collect();
    let sum: u64 = reduced.iter().sum();
    if sum > WEIGHT_MAX {
        // Scaled down; every target with a weight keeps at least one slot.
        for w in reduced.iter_mut().filter(|w| **w > 0) {
            *w = (*w * WEIGHT_MAX / sum).max(1);
        }
    }
    let mut block: Vec<u32> = Vec::new();
    for i in live() {
        block.extend(std::iter::repeat_n(i, reduced[i as usize] as usize));
    }
    let blocks = SCHEDULE_MIN.div_ceil(block.len()).max(1);
    let mut rng = SplitMix::new(seed);
    let mut table = Vec::with_capacity(blocks * block.len());
    for _ in 0..blocks {
        let start = table.len();
        table.extend_from_slice(&block);
        let part = &mut table[start..];
        // Fisher–Yates.
        for k in (1..part.len()).rev() {
            part.swap(k, rng.below(k + 1));
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "http://127.0.0.1:8080/";

    fn parse_ok(text: &str) -> (Targets, Vec<String>) {
        parse(text.as_bytes(), "t.jsonl", RUN, Path::new(".")).unwrap()
    }

    fn parse_err(text: &str) -> String {
        parse(text.as_bytes(), "t.jsonl", RUN, Path::new(".")).unwrap_err()
    }

    #[test]
    fn json_lines_and_plain_urls() {
        let (t, names) = parse_ok(concat!(
            "# a comment\n",
            "{\"method\":\"post\",\"url\":\"/api?x=1\",\"headers\":{\"X-A\":[\"1\",\"2\"],\"X-B\":\"b\"},\"body\":\"hi\",\"weight\":5}\n",
            "\n",
            "http://127.0.0.1:8080/static/a.css\n",
            "HEAD /h\n",
            "{\"url\":\"/api?x=2\",\"name\":\"api\",\"weight\":0}\n",
        ));
        assert_eq!(t.len(), 4);
        assert_eq!(t.get(0).method, "POST");
        assert_eq!(t.get(0).path, "/api?x=1");
        assert_eq!(t.get(0).headers, ["X-A: 1", "X-A: 2", "X-B: b"]);
        assert_eq!(t.get(0).body, b"hi");
        assert_eq!(t.get(0).weight, 5);
        assert_eq!(t.get(1).path, "/static/a.css");
        assert_eq!(t.get(1).weight, 1);
        assert_eq!(t.get(2).method, "HEAD");
        assert_eq!(names, ["POST /api", "GET /static/a.css", "HEAD /h", "api"]);
        assert_eq!(t.get(3).endpoint, 3);
        // GET alone is one shape for /static/a.css and /api?x=2.
        assert_eq!(t.shapes().len(), 3);
        assert_eq!(t.get(1).shape, t.get(3).shape);
    }

    #[test]
    fn each_error_names_its_line() {
        let cases = [
            ("/a\n{\"url\": \"/b\"\n", "line 2: bad JSON"),
            ("/a\n\n{\"url\": \"http://[::1\"}\n", "line 3: bad URL"),
            (
                "{\"url\": \"http://127.0.0.1:9999/x\"}\n",
                "line 1: URL `http://127.0.0.1:9999/x` is on another server",
            ),
            ("/a\nhttps://127.0.0.1:8080/\n", "line 2: URL"),
            (
                "/a\n/b\n{\"url\":\"/c\",\"headers\":{\"X\":\"a\\r\\nEvil: 1\"}}\n",
                "line 3: invalid header",
            ),
            (
                "{\"url\":\"/c\",\"body_file\":\"/nonexistent/body\"}\n",
                "line 1: body_file /nonexistent/body",
            ),
            (
                "{\"url\":\"/a\",\"weight\":0}\n{\"url\":\"/b\",\"weight\":0}\n",
                "line 2: every weight is 0",
            ),
            (
                "{\"url\":\"/a\",\"wieght\":3}\n",
                "line 1: bad JSON: unknown field `wieght`",
            ),
            ("{\"url\":\"/a\",\"weight\":-1}\n", "line 1: bad JSON"),
            ("G(T /a\n", "line 1: invalid method"),
        ];
        for (text, want) in cases {
            let e = parse_err(text);
            assert!(e.starts_with("targets file t.jsonl "), "{e}");
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn names_beyond_the_limit_are_other() {
        let text: String = (0..150).map(|i| format!("/p{i}\n")).collect();
        let (t, names) = parse_ok(&text);
        assert_eq!(names.len(), MAX_ENDPOINTS + 1);
        assert_eq!(names[MAX_ENDPOINTS], OTHER);
        assert_eq!(t.get(149).endpoint as usize, MAX_ENDPOINTS);
        assert_eq!(t.get(99).endpoint, 99);
    }

    #[test]
    fn the_order_is_the_same_for_a_seed_and_differs_for_another() {
        let w = [5, 3, 2];
        assert_eq!(schedule(&w, 7, false), schedule(&w, 7, false));
        assert_ne!(schedule(&w, 7, false), schedule(&w, 8, false));
    }

    #[test]
    fn every_window_keeps_the_weights() {
        let w = [50, 30, 20, 0];
        let order = schedule(&w, DEFAULT_SEED, false);
        // Reduced to 5/3/2: each block of 10 holds 5, 3 and 2.
        assert!(order.len() >= SCHEDULE_MIN && order.len() % 10 == 0);
        for start in [0usize, 3, 17, 1234] {
            let mut n = [0u32; 4];
            for k in 0..1000 {
                n[order[(start + k) % order.len()] as usize] += 1;
            }
            // Within one block (10 requests) of the exact 500/300/200.
            for (got, want) in n.iter().zip([500, 300, 200, 0]) {
                assert!(got.abs_diff(want) <= 10, "{n:?}");
            }
        }
    }

    #[test]
    fn sequential_is_the_file_order() {
        assert_eq!(schedule(&[5, 0, 1, 2], 3, true), [0, 2, 3]);
    }

    #[test]
    fn huge_weights_keep_a_bounded_table() {
        let order = schedule(&[u32::MAX, 1, 7], 1, false);
        assert!(order.len() <= 2 * (WEIGHT_MAX as usize + 2));
        assert!(order.contains(&1) && order.contains(&2));
    }

    /// Every URL the fast path takes is the path and query the URL parser makes of it:
    /// random strings over the characters that matter (dots, slashes, `%`, `?`, `#`,
    /// backslashes, quotes, non-ASCII).
    #[test]
    fn a_verbatim_path_is_what_the_parser_makes() {
        let base = url::Url::parse(RUN).unwrap();
        let slow = |u: &str| {
            let u = base.join(u).unwrap();
            let mut p = u.path().to_string();
            if let Some(q) = u.query() {
                p.push('?');
                p.push_str(q);
            }
            p
        };
        for u in [
            "/",
            "/a.css",
            "/1k.txt?id=1",
            "/a/b.c/d?x=1&y=%20.z/..",
            "/api;v=1:2@x",
        ] {
            assert!(verbatim(u), "{u}");
            assert_eq!(slow(u), u);
        }
        for u in [
            "//h/a", "a", "/a/../b", "/./a", "/a/.", "/a%2e", "/a#f", "/a\\b", "/a?'", "/é",
        ] {
            assert!(!verbatim(u), "{u}");
        }
        let chars: Vec<char> = "/./..%?#\\'\"<>`{}|^[]=&;:@+,!$*()~-_aZ09 é"
            .chars()
            .collect();
        let mut rng = SplitMix::new(7);
        let mut taken = 0;
        for _ in 0..200_000 {
            let len = 1 + rng.below(12);
            let mut u = String::from("/");
            for _ in 0..len {
                u.push(chars[rng.below(chars.len())]);
            }
            if verbatim(&u) {
                taken += 1;
                assert_eq!(slow(&u), u, "{u:?}");
            }
        }
        assert!(taken > 1000, "{taken}");
    }
}
