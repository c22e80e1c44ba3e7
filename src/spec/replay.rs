//! `run --replay LOG`: an access log sent again at its own pace. The log is nginx's or
//! Apache's combined or common format (`%h %l %u %t "%r" %>s %b …`, the formats both
//! ship) or JSON lines `{"t": seconds, "method": "GET", "url": "/path"}`. Each request
//! becomes a target of a mix (one per method and path, named as `--targets` names
//! them), the log's order is the sending order, and its times, relative to the first
//! request and divided by `--speed`, are when each request is due: an open loop whose
//! latency counts from each request's due time. Requests whose method carries a body
//! (the log does not hold it) are skipped and counted.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::Read;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::is_token;
use super::table::{Names, ShapeIndex, Targets};
use super::targets::{self, MixSpec};

/// `--replay`: what the Run records of the log replayed.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReplaySpec {
    /// `--speed`: the log's pace multiplied by this; `None` = `max` (as fast as the
    /// connections go, closed loop, in the log's order).
    pub speed: Option<f64>,
    /// Requests replayed.
    pub requests: u64,
    /// Requests skipped because their method carries a body the log does not hold
    /// (POST, PUT, PATCH).
    pub skipped_with_body: u64,
    /// Time from the log's first request to its last, seconds (before `--speed`).
    pub span_s: f64,
}

/// One request read from the log (its strings borrowed from the line where they can be).
#[derive(Debug, Clone, PartialEq)]
struct Entry<'a> {
    t_us: i64,
    method: Cow<'a, str>,
    url: Cow<'a, str>,
}

/// Methods whose requests carry a body: not replayable from a log.
const WITH_BODY: [&str; 3] = ["POST", "PUT", "PATCH"];

/// No key: the end of a chain in [`Keys`].
const NONE: u32 = u32::MAX;

/// The distinct (method, URL) pairs of a log as read, each once: the URLs back to back
/// in one string, found again by a hash of the pair (chained on collision). A million
/// distinct URLs cost their bytes and ~40 bytes each, not two `String`s and a map entry.
#[derive(Default)]
struct Keys {
    methods: Vec<String>,
    urls: String,
    /// Per key: its method (index into `methods`) and where its URL ends in `urls`.
    each: Vec<(u16, u32)>,
    /// The hash of a pair → the last key added with it; `next` chains the others.
    by_hash: HashMap<u64, u32, BuildHasherDefault<Already>>,
    next: Vec<u32>,
}

impl Keys {
    fn url(&self, k: u32) -> &str {
        let from = match k {
            0 => 0,
            k => self.each[k as usize - 1].1 as usize,
        };
        &self.urls[from..self.each[k as usize].1 as usize]
    }

    fn method(&self, k: u32) -> &str {
        &self.methods[self.each[k as usize].0 as usize]
    }

    /// The key of `method` and `url`, added if new.
    fn of(&mut self, method: &str, url: &str) -> Result<u32, String> {
        let m = match self.methods.iter().position(|x| x == method) {
            Some(m) => m,
            None => {
                if self.methods.len() > u16::MAX as usize {
                    return Err("more than 65,536 distinct methods".into());
                }
                self.methods.push(method.to_string());
                self.methods.len() - 1
            }
        } as u16;
        let h = hash(m, url.as_bytes());
        let head = self.by_hash.get(&h).copied().unwrap_or(NONE);
        let mut k = head;
        while k != NONE {
            if self.each[k as usize].0 == m && self.url(k) == url {
                return Ok(k);
            }
            k = self.next[k as usize];
        }
        self.urls.push_str(url);
        let end = u32::try_from(self.urls.len())
            .map_err(|_| "the log's URLs add up to more than 4 GiB — split it".to_string())?;
        let k = self.each.len() as u32;
        self.each.push((m, end));
        self.next.push(head);
        self.by_hash.insert(h, k);
        Ok(k)
    }
}

/// A (method, URL) pair's hash: FxHash's multiply-rotate over 8 bytes at a time, then
/// SplitMix64's finaliser so every bit of the table's index and tag is mixed. A map of a
/// million URLs with SipHash spent more time hashing than reading the log.
fn hash(method: u16, url: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = (method as u64).wrapping_mul(K);
    let mut chunks = url.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        h = (h.rotate_left(5) ^ w).wrapping_mul(K);
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    h = (h.rotate_left(5) ^ u64::from_le_bytes(tail) ^ url.len() as u64).wrapping_mul(K);
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The hasher of a map whose keys are hashes already: the key itself.
#[derive(Default)]
struct Already(u64);

impl Hasher for Already {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 keys")
    }
    fn write_u64(&mut self, h: u64) {
        self.0 = h;
    }
}

/// Reads the log and builds the mix it replays, checked against the run's URL.
pub fn load(file: &str, run_url: &str, speed: Option<f64>) -> Result<MixSpec, String> {
    from_text(targets::open(file, "replay log")?, file, run_url, speed)
}

/// The mix of a log's text, read line by line (`label` names it in errors).
pub fn from_text(
    text: impl Read,
    label: &str,
    run_url: &str,
    speed: Option<f64>,
) -> Result<MixSpec, String> {
    let base = url::Url::parse(run_url).map_err(|e| format!("invalid URL {run_url}: {e}"))?;
    let mut keys = Keys::default();
    // Per request: when, which (method, URL), the log's line.
    let mut entries: Vec<(i64, u32, u32)> = Vec::new();
    let mut skipped = 0u64;
    // Consecutive lines often share a second: its time is parsed once.
    let mut clock = (String::new(), 0i64);
    targets::each_line(text, "replay log", label, |n, raw| {
        let err = |m: String| format!("replay log {label} line {n}: {m}");
        let line = raw.trim();
        if line.is_empty() {
            return Ok(());
        }
        let e = parse_line(line, &mut clock).map_err(err)?;
        if WITH_BODY.contains(&e.method.as_ref()) {
            skipped += 1;
            return Ok(());
        }
        let k = keys.of(&e.method, &e.url).map_err(err)?;
        entries.push((e.t_us, k, n as u32));
        Ok(())
    })?;
    if entries.is_empty() {
        return Err(format!(
            "replay log {label}: no request to replay ({skipped} with a body skipped)"
        ));
    }
    // Access logs are written as requests end: put them back in order of time (stable,
    // so requests of the same second keep the log's order).
    entries.sort_by_key(|&(t, _, _)| t);
    let t0 = entries[0].0;
    let span_us = entries[entries.len() - 1].0 - t0;
    // Each distinct method and URL is a target, numbered in order of first use and
    // checked there, as a targets file listing them would be; the error names the log's
    // line.
    let mut table = Targets::default();
    let mut shapes = ShapeIndex::default();
    let mut names = Names::default();
    let mut target_of = vec![NONE; keys.each.len()];
    let mut sequence = Vec::with_capacity(entries.len());
    for &(_, k, n) in &entries {
        if target_of[k as usize] == NONE {
            let err = |m: String| format!("replay log {label} line {n}: {m}");
            let method = keys.method(k);
            if !is_token(method) {
                return Err(err(format!("invalid method `{}`", method.escape_debug())));
            }
            targets::path_of(&base, keys.url(k).trim(), table.paths_mut()).map_err(err)?;
            let shape = shapes.plain(&mut table, method);
            let endpoint = names.of_default(method, table.pending_path());
            target_of[k as usize] = table.len() as u32;
            table.push(shape, 1, endpoint).map_err(err)?;
        }
        sequence.push(target_of[k as usize]);
    }
    drop(keys);
    let due_us = match speed {
        Some(f) => entries
            .iter()
            .map(|&(t, _, _)| ((t - t0) as f64 / f) as u64)
            .collect(),
        None => Vec::new(),
    };
    Ok(MixSpec {
        file: label.to_string(),
        seed: targets::DEFAULT_SEED,
        sequential: true,
        targets: table.len(),
        endpoints: names.names,
        replay: Some(ReplaySpec {
            speed,
            requests: entries.len() as u64,
            skipped_with_body: skipped,
            span_s: span_us as f64 / 1e6,
        }),
        loaded: Arc::new(table),
        sequence: Arc::new(sequence),
        due_us: Arc::new(due_us),
    })
}

/// One line: JSON `{t, method, url}` or combined/common log format. `clock` is the last
/// time text parsed and its value.
fn parse_line<'a>(line: &'a str, clock: &mut (String, i64)) -> Result<Entry<'a>, String> {
    if line.starts_with('{') {
        #[derive(Deserialize)]
        struct J<'a> {
            t: f64,
            #[serde(borrow)]
            method: Option<Cow<'a, str>>,
            #[serde(borrow)]
            url: Cow<'a, str>,
        }
        let j: J = serde_json::from_str(line).map_err(|e| format!("bad JSON: {e}"))?;
        if !j.t.is_finite() {
            return Err("`t` must be a number of seconds".into());
        }
        return Ok(Entry {
            t_us: (j.t * 1e6) as i64,
            method: upper(j.method.unwrap_or(Cow::Borrowed("GET"))),
            url: j.url,
        });
    }
    let bad = || {
        "not a combined/common log line (`HOST - USER [TIME] \"METHOD PATH PROTO\" …`) nor JSON"
            .to_string()
    };
    let open = line.find('[').ok_or_else(bad)?;
    let close = open + line[open..].find(']').ok_or_else(bad)?;
    let time = &line[open + 1..close];
    let t_us = if clock.0 == time {
        clock.1
    } else {
        let t = parse_clf_time(time).ok_or_else(|| {
            format!("bad time `{time}`: expected e.g. 10/Oct/2000:13:55:36 -0700")
        })?;
        clock.0.clear();
        clock.0.push_str(time);
        clock.1 = t;
        t
    };
    let rest = &line[close + 1..];
    let q1 = rest.find('"').ok_or_else(bad)?;
    let q2 = q1 + 1 + rest[q1 + 1..].find('"').ok_or_else(bad)?;
    let mut request = rest[q1 + 1..q2].split(' ');
    let (Some(method), Some(url)) = (request.next(), request.next()) else {
        return Err(format!("bad request line `{}`", &rest[q1 + 1..q2]));
    };
    Ok(Entry {
        t_us,
        method: upper(Cow::Borrowed(method)),
        url: Cow::Borrowed(url),
    })
}

/// `m` in upper case, copied only when it is not already.
fn upper(m: Cow<'_, str>) -> Cow<'_, str> {
    if m.bytes().any(|b| b.is_ascii_lowercase()) {
        Cow::Owned(m.to_ascii_uppercase())
    } else {
        m
    }
}

/// `10/Oct/2000:13:55:36 -0700` → µs since the Unix epoch.
fn parse_clf_time(s: &str) -> Option<i64> {
    let (dt, zone) = s.split_once(' ')?;
    let mut p = dt.split(['/', ':']);
    let day: i64 = p.next()?.parse().ok()?;
    let mon = p.next()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == mon)? as i64
        + 1;
    let year: i64 = p.next()?.parse().ok()?;
    let h: i64 = p.next()?.parse().ok()?;
    let m: i64 = p.next()?.parse().ok()?;
    let sec: i64 = p.next()?.parse().ok()?;
    if zone.len() != 5 {
        return None;
    }
    let sign = match &zone[..1] {
        "+" => 1,
        "-" => -1,
        _ => return None,
    };
    let zh: i64 = zone[1..3].parse().ok()?;
    let zm: i64 = zone[3..5].parse().ok()?;
    // Days from the civil date (H. Hinnant, "chrono-Compatible Low-Level Date
    // Algorithms", days_from_civil).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let local = days * 86_400 + h * 3600 + m * 60 + sec;
    Some((local - sign * (zh * 3600 + zm * 60)) * 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "http://127.0.0.1:8080/";

    #[test]
    fn clf_times_are_utc_microseconds() {
        // date -d '2000-10-10T13:55:36-0700' +%s = 971211336
        assert_eq!(
            parse_clf_time("10/Oct/2000:13:55:36 -0700"),
            Some(971_211_336_000_000)
        );
        assert_eq!(
            parse_clf_time("01/Mar/2024:00:00:00 +0000"),
            Some(1_709_251_200_000_000)
        );
        assert_eq!(parse_clf_time("10/Foo/2000:13:55:36 -0700"), None);
    }

    #[test]
    fn a_combined_log_replays_in_time_order_at_its_speed() {
        let log = concat!(
            "127.0.0.1 - - [25/Nov/2026:10:00:02 +0000] \"GET /b?x=1 HTTP/1.1\" 200 5 \"-\" \"curl/8\"\n",
            "127.0.0.1 - frank [25/Nov/2026:10:00:00 +0000] \"GET /a HTTP/1.1\" 200 5\n",
            "127.0.0.1 - - [25/Nov/2026:10:00:01 +0000] \"POST /form HTTP/1.1\" 200 5 \"-\" \"x\"\n",
            "127.0.0.1 - - [25/Nov/2026:10:00:04 +0000] \"GET /a HTTP/1.1\" 304 0 \"-\" \"x\"\n",
        );
        let mix = from_text(log.as_bytes(), "access.log", RUN, Some(2.0)).unwrap();
        let r = mix.replay.as_ref().unwrap();
        assert_eq!((r.requests, r.skipped_with_body), (3, 1));
        assert_eq!(r.span_s, 4.0);
        assert_eq!(mix.endpoints, ["GET /a", "GET /b"]);
        assert_eq!(*mix.sequence, [0, 1, 0]);
        // Relative to the first, halved by --speed 2.
        assert_eq!(*mix.due_us, [0, 1_000_000, 2_000_000]);
        assert_eq!(mix.loaded.get(1).path, "/b?x=1");
        let max = from_text(log.as_bytes(), "access.log", RUN, None).unwrap();
        assert!(max.due_us.is_empty());
    }

    #[test]
    fn json_lines_and_errors_name_the_log_line() {
        let mix = from_text(
            "{\"t\": 100.5, \"url\": \"/a\"}\n{\"t\": 100.25, \"method\": \"head\", \"url\": \"/h\"}\n".as_bytes(),
            "l.jsonl",
            RUN,
            Some(1.0),
        )
        .unwrap();
        assert_eq!(*mix.due_us, [0, 250_000]);
        assert_eq!(mix.endpoints, ["HEAD /h", "GET /a"]);
        let e = from_text(
            "{\"t\": 1, \"url\": \"/a\"}\nnot a log line\n".as_bytes(),
            "l",
            RUN,
            None,
        )
        .unwrap_err();
        assert!(e.starts_with("replay log l line 2: not a combined"), "{e}");
        let e = from_text(
            "{\"t\": 1, \"url\": \"/a\"}\n\n{\"t\": 2, \"url\": \"http://example.com/\"}\n"
                .as_bytes(),
            "l",
            RUN,
            None,
        )
        .unwrap_err();
        assert!(e.starts_with("replay log l line 3: URL"), "{e}");
        let e = from_text(
            "{\"t\": 1, \"method\": \"PUT\", \"url\": \"/a\"}\n".as_bytes(),
            "l",
            RUN,
            None,
        )
        .unwrap_err();
        assert!(
            e.contains("no request to replay (1 with a body skipped)"),
            "{e}"
        );
    }
}
