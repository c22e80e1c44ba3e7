//! `run --replay LOG`: an access log sent again at its own pace. The log is nginx's or
//! Apache's combined or common format (`%h %l %u %t "%r" %>s %b …`, the formats both
//! ship) or JSON lines `{"t": seconds, "method": "GET", "url": "/path"}`. Each request
//! becomes a target of a mix (one per method and path, named as `--targets` names
//! them), the log's order is the sending order, and its times, relative to the first
//! request and divided by `--speed`, are when each request is due: an open loop whose
//! latency counts from each request's due time. Requests whose method carries a body
//! (the log does not hold it) are skipped and counted.

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

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

/// One request read from the log.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    t_us: i64,
    method: String,
    url: String,
}

/// Methods whose requests carry a body: not replayable from a log.
const WITH_BODY: [&str; 3] = ["POST", "PUT", "PATCH"];

/// Reads the log and builds the mix it replays, checked against the run's URL.
pub fn load(file: &str, run_url: &str, speed: Option<f64>) -> Result<MixSpec, String> {
    let text = targets::read_capped(file, "replay log")?;
    from_text(&text, file, run_url, speed)
}

/// The mix of a log's text (`label` names it in errors).
pub fn from_text(
    text: &str,
    label: &str,
    run_url: &str,
    speed: Option<f64>,
) -> Result<MixSpec, String> {
    let mut entries = Vec::new();
    let mut skipped = 0u64;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let e = parse_line(line).map_err(|m| format!("replay log {label} line {}: {m}", i + 1))?;
        if WITH_BODY.contains(&e.method.as_str()) {
            skipped += 1;
            continue;
        }
        entries.push((i + 1, e));
    }
    if entries.is_empty() {
        return Err(format!(
            "replay log {label}: no request to replay ({skipped} with a body skipped)"
        ));
    }
    // Access logs are written as requests end: put them back in order of time (stable,
    // so requests of the same second keep the log's order).
    entries.sort_by_key(|(_, e)| e.t_us);
    let t0 = entries[0].1.t_us;
    let span_us = entries.last().map_or(0, |(_, e)| e.t_us - t0);
    // Each distinct method and URL once, as a targets file would list it.
    let mut keys: Vec<(String, String)> = Vec::new();
    let mut index = std::collections::HashMap::new();
    let mut sequence = Vec::with_capacity(entries.len());
    let mut lines_of = Vec::new();
    for (n, e) in &entries {
        let key = (e.method.clone(), e.url.clone());
        let k = *index.entry(key.clone()).or_insert_with(|| {
            keys.push(key);
            lines_of.push(*n);
            keys.len() - 1
        });
        sequence.push(k as u32);
    }
    let targets_text: String = keys.iter().map(|(m, u)| format!("{m} {u}\n")).collect();
    let (mut lines, endpoints) = targets::parse(&targets_text, label, run_url, Path::new("."))
        .map_err(|m| {
            // Name the log's line, not the generated list's.
            match m
                .split_once(" line ")
                .and_then(|(_, rest)| rest.split_once(':'))
            {
                Some((k, why)) => {
                    let k: usize = k.parse().unwrap_or(1);
                    format!("replay log {label} line {}:{why}", lines_of[k - 1])
                }
                None => m,
            }
        })?;
    for l in &mut lines {
        l.weight = 1;
    }
    let due_us = match speed {
        Some(f) => entries
            .iter()
            .map(|(_, e)| ((e.t_us - t0) as f64 / f) as u64)
            .collect(),
        None => Vec::new(),
    };
    Ok(MixSpec {
        file: label.to_string(),
        seed: targets::DEFAULT_SEED,
        sequential: true,
        targets: lines.len(),
        endpoints,
        replay: Some(ReplaySpec {
            speed,
            requests: entries.len() as u64,
            skipped_with_body: skipped,
            span_s: span_us as f64 / 1e6,
        }),
        loaded: Arc::new(lines),
        sequence: Arc::new(sequence),
        due_us: Arc::new(due_us),
    })
}

/// One line: JSON `{t, method, url}` or combined/common log format.
fn parse_line(line: &str) -> Result<Entry, String> {
    if line.starts_with('{') {
        #[derive(Deserialize)]
        struct J {
            t: f64,
            method: Option<String>,
            url: String,
        }
        let j: J = serde_json::from_str(line).map_err(|e| format!("bad JSON: {e}"))?;
        if !j.t.is_finite() {
            return Err("`t` must be a number of seconds".into());
        }
        return Ok(Entry {
            t_us: (j.t * 1e6) as i64,
            method: j
                .method
                .unwrap_or_else(|| "GET".into())
                .to_ascii_uppercase(),
            url: j.url,
        });
    }
    let bad = || {
        "not a combined/common log line (`HOST - USER [TIME] \"METHOD PATH PROTO\" …`) nor JSON"
            .to_string()
    };
    let open = line.find('[').ok_or_else(bad)?;
    let close = open + line[open..].find(']').ok_or_else(bad)?;
    let t_us = parse_clf_time(&line[open + 1..close]).ok_or_else(|| {
        format!(
            "bad time `{}`: expected e.g. 10/Oct/2000:13:55:36 -0700",
            &line[open + 1..close]
        )
    })?;
    let rest = &line[close + 1..];
    let q1 = rest.find('"').ok_or_else(bad)?;
    let q2 = q1 + 1 + rest[q1 + 1..].find('"').ok_or_else(bad)?;
    let mut request = rest[q1 + 1..q2].split(' ');
    let (Some(method), Some(url)) = (request.next(), request.next()) else {
        return Err(format!("bad request line `{}`", &rest[q1 + 1..q2]));
    };
    Ok(Entry {
        t_us,
        method: method.to_ascii_uppercase(),
        url: url.to_string(),
    })
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
        let mix = from_text(log, "access.log", RUN, Some(2.0)).unwrap();
        let r = mix.replay.as_ref().unwrap();
        assert_eq!((r.requests, r.skipped_with_body), (3, 1));
        assert_eq!(r.span_s, 4.0);
        assert_eq!(mix.endpoints, ["GET /a", "GET /b"]);
        assert_eq!(*mix.sequence, [0, 1, 0]);
        // Relative to the first, halved by --speed 2.
        assert_eq!(*mix.due_us, [0, 1_000_000, 2_000_000]);
        assert_eq!(mix.loaded[1].path, "/b?x=1");
        let max = from_text(log, "access.log", RUN, None).unwrap();
        assert!(max.due_us.is_empty());
    }

    #[test]
    fn json_lines_and_errors_name_the_log_line() {
        let mix = from_text(
            "{\"t\": 100.5, \"url\": \"/a\"}\n{\"t\": 100.25, \"method\": \"head\", \"url\": \"/h\"}\n",
            "l.jsonl",
            RUN,
            Some(1.0),
        )
        .unwrap();
        assert_eq!(*mix.due_us, [0, 250_000]);
        assert_eq!(mix.endpoints, ["HEAD /h", "GET /a"]);
        let e = from_text(
            "{\"t\": 1, \"url\": \"/a\"}\nnot a log line\n",
            "l",
            RUN,
            None,
        )
        .unwrap_err();
        assert!(e.starts_with("replay log l line 2: not a combined"), "{e}");
        let e = from_text(
            "{\"t\": 1, \"url\": \"/a\"}\n\n{\"t\": 2, \"url\": \"http://example.com/\"}\n",
            "l",
            RUN,
            None,
        )
        .unwrap_err();
        assert!(e.starts_with("replay log l line 3: URL"), "{e}");
        let e = from_text(
            "{\"t\": 1, \"method\": \"PUT\", \"url\": \"/a\"}\n",
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
