//! `loadlens import har FILE`: a browser's recording (HAR 1.2, what the developer tools
//! of Chrome, Firefox and Safari save with "Save all as HAR") turned into a `--targets`
//! file (`targets.rs`), one JSON line per entry, in the recording's order.
//!
//! Only `log.entries[].request` is read: `method`, `url`, `headers[]` and
//! `postData.text` (HAR 1.2, <http://www.softwareishard.com/blog/har-12-spec/>). Headers
//! that describe one connection rather than the request are dropped, as a proxy drops
//! them (RFC 9110 §7.6.1): HTTP/2 pseudo-headers (`:authority`, `:path`, …, RFC 9113
//! §8.3), `Host` (the run sends its own), `Content-Length` (computed from the body),
//! `Connection`, `Keep-Alive`, `Proxy-Connection`, `TE`, `Trailer`, `Transfer-Encoding`
//! and `Upgrade`. Cookies and everything else are kept.

use serde::{Deserialize, Serialize, Serializer};

use super::{check_header, is_token};

/// Request headers not carried into a target (compared case-insensitively).
const DROPPED: [&str; 9] = [
    "host",
    "content-length",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// A HAR file turned into targets.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    /// One `--targets` JSON line per entry kept (no newline).
    pub lines: Vec<String>,
    /// `scheme://host:port` of the first entry: the server a run of these targets loads.
    pub server: String,
    /// Entries on another server than the first's: `(index, scheme://host:port)`.
    pub other_servers: Vec<(usize, String)>,
    /// Entries skipped because their URL is not http or https (`data:`, `blob:`, …):
    /// `(index, scheme)`.
    pub skipped: Vec<(usize, String)>,
}

#[derive(Deserialize)]
struct Har {
    log: Option<Log>,
}

#[derive(Deserialize)]
struct Log {
    entries: Option<Vec<serde_json::Value>>,
}

#[derive(Deserialize)]
struct Entry {
    request: Request,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    method: Option<String>,
    url: Option<String>,
    #[serde(default)]
    headers: Vec<Header>,
    post_data: Option<PostData>,
}

#[derive(Deserialize)]
struct Header {
    name: String,
    value: String,
}

#[derive(Deserialize)]
struct PostData {
    text: Option<String>,
}

/// One line of the targets file, fields in the order `targets.rs` documents them.
#[derive(Serialize)]
struct Line<'a> {
    method: &'a str,
    url: &'a str,
    #[serde(
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "headers_in_order"
    )]
    headers: Vec<(&'a str, Vec<&'a str>)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<&'a str>,
}

/// The headers as a JSON object in the recording's order (a map type would sort them),
/// a name with one value as a string, with several as a list.
fn headers_in_order<S: Serializer>(h: &[(&str, Vec<&str>)], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(h.len()))?;
    for (name, values) in h {
        match values.as_slice() {
            [one] => m.serialize_entry(name, one)?,
            many => m.serialize_entry(name, many)?,
        }
    }
    m.end()
}

/// `scheme://host:port` of a URL (the port always written).
fn server_of(u: &url::Url) -> String {
    format!(
        "{}://{}:{}",
        u.scheme(),
        u.host_str().unwrap_or_default(),
        u.port_or_known_default().unwrap_or_default()
    )
}

/// Turns a HAR file's text into targets lines; `label` names the file in errors, each
/// of which also names the entry (`log.entries[I]`).
pub fn import(text: &str, label: &str) -> Result<Imported, String> {
    let har: Har =
        serde_json::from_str(text).map_err(|e| format!("HAR file {label}: not a HAR file: {e}"))?;
    let entries = har.log.and_then(|l| l.entries).ok_or_else(|| {
        format!(
            "HAR file {label}: no `log.entries` in it — save the recording from the browser's network panel (\"Save all as HAR\")"
        )
    })?;
    let mut out = Imported {
        lines: Vec::with_capacity(entries.len()),
        server: String::new(),
        other_servers: Vec::new(),
        skipped: Vec::new(),
    };
    for (i, v) in entries.into_iter().enumerate() {
        let err = |m: String| format!("HAR file {label}: log.entries[{i}]: {m}");
        let e: Entry = serde_json::from_value(v).map_err(|e| err(format!("{e}")))?;
        let r = e.request;
        let url = r
            .url
            .filter(|u| !u.is_empty())
            .ok_or_else(|| err("the request has no `url`".into()))?;
        let u = url::Url::parse(&url).map_err(|e| err(format!("bad URL `{url}`: {e}")))?;
        if !matches!(u.scheme(), "http" | "https") {
            out.skipped.push((i, u.scheme().to_string()));
            continue;
        }
        let server = server_of(&u);
        if out.server.is_empty() {
            out.server = server;
        } else if server != out.server {
            out.other_servers.push((i, server));
        }
        let method = r
            .method
            .unwrap_or_else(|| "GET".into())
            .to_ascii_uppercase();
        if !is_token(&method) {
            return Err(err(format!("invalid method `{}`", method.escape_debug())));
        }
        let mut headers: Vec<(&str, Vec<&str>)> = Vec::new();
        for h in &r.headers {
            let lower = h.name.to_ascii_lowercase();
            if h.name.starts_with(':') || DROPPED.contains(&lower.as_str()) {
                continue;
            }
            check_header(&format!("{}: {}", h.name, h.value)).map_err(err)?;
            match headers
                .iter_mut()
                .find(|(n, _)| n.eq_ignore_ascii_case(&h.name))
            {
                Some((_, values)) => values.push(h.value.as_str()),
                None => headers.push((h.name.as_str(), vec![h.value.as_str()])),
            }
        }
        let body = r
            .post_data
            .as_ref()
            .and_then(|p| p.text.as_deref())
            .filter(|t| !t.is_empty());
        let line = Line {
            method: &method,
            url: &url,
            headers,
            body,
        };
        out.lines
            .push(serde_json::to_string(&line).map_err(|e| err(format!("{e}")))?);
    }
    if out.lines.is_empty() {
        return Err(format!(
            "HAR file {label}: no http or https request in it ({} entries skipped)",
            out.skipped.len()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn har(entries: &str) -> String {
        format!("{{\"log\": {{\"version\": \"1.2\", \"entries\": [{entries}]}}}}")
    }

    #[test]
    fn connection_headers_are_dropped_and_repeated_names_become_lists() {
        let text = har(
            r#"{"request": {"method": "post", "url": "http://a.test/p?x=1",
            "headers": [{"name": ":authority", "value": "a.test"},
                        {"name": "Host", "value": "a.test"},
                        {"name": "cookie", "value": "a=1"},
                        {"name": "Content-Length", "value": "2"},
                        {"name": "Cookie", "value": "b=2"},
                        {"name": "Accept-Encoding", "value": "gzip"},
                        {"name": "Connection", "value": "keep-alive"}],
            "postData": {"mimeType": "text/plain", "text": "hi"}}}"#,
        );
        let got = import(&text, "t.har").unwrap();
        assert_eq!(
            got.lines,
            [
                r#"{"method":"POST","url":"http://a.test/p?x=1","headers":{"cookie":["a=1","b=2"],"Accept-Encoding":"gzip"},"body":"hi"}"#
            ]
        );
        assert_eq!(got.server, "http://a.test:80");
    }

    #[test]
    fn other_servers_are_kept_and_named_data_urls_skipped() {
        let text = har(r#"{"request": {"method": "GET", "url": "https://a.test/"}},
            {"request": {"method": "GET", "url": "data:text/plain,hi"}},
            {"request": {"method": "GET", "url": "https://a.test:443/b"}},
            {"request": {"method": "GET", "url": "https://cdn.test/c.js"}}"#);
        let got = import(&text, "t.har").unwrap();
        assert_eq!(got.lines.len(), 3);
        assert_eq!(got.other_servers, [(3, "https://cdn.test:443".to_string())]);
        assert_eq!(got.skipped, [(1, "data".to_string())]);
    }

    #[test]
    fn each_error_names_the_file_and_the_entry() {
        let cases = [
            (
                "not json".to_string(),
                "HAR file t.har: not a HAR file: expected",
            ),
            (
                "{\"log\": {}}".to_string(),
                "HAR file t.har: no `log.entries`",
            ),
            ("[1, 2]".to_string(), "HAR file t.har: not a HAR file"),
            (
                har(r#"{"request": {"url": "http://a.test/"}}, {"request": {"method": "GET"}}"#),
                "HAR file t.har: log.entries[1]: the request has no `url`",
            ),
            (
                har(r#"{"response": {}}"#),
                "HAR file t.har: log.entries[0]: missing field `request`",
            ),
            (
                har(
                    r#"{"request": {"url": "http://a.test/", "headers": [{"name": "X", "value": "1\r\nY: 2"}]}}"#,
                ),
                "HAR file t.har: log.entries[0]: invalid header",
            ),
            (
                har(r#"{"request": {"method": "G T", "url": "http://a.test/"}}"#),
                "HAR file t.har: log.entries[0]: invalid method",
            ),
            (har(""), "HAR file t.har: no http or https request"),
        ];
        for (text, want) in cases {
            let e = import(&text, "t.har").unwrap_err();
            assert!(e.starts_with(want), "{text}: {e}");
        }
    }
}
