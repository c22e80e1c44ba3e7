//! The request table the workers index per request: every target's bytes built once,
//! back to back, from the parts its method, headers and body share with others.

use std::sync::Arc;

use super::table::TargetRef;
use super::targets::schedule;
use super::{Spec, Target};

/// A request's bytes on either side of its path: all a request shares with the other
/// targets of a mix that have its method, headers and body, so a million targets cost
/// one path each, not a million builds (`targets::Requests::build`).
#[derive(Debug, Clone)]
pub(super) struct RequestParts {
    /// `METHOD ` (the path follows).
    pub before: Vec<u8>,
    /// ` HTTP/1.1`, the headers, the blank line and the body.
    pub keep_after: Vec<u8>,
    /// The same with `Connection: close` (see `RequestBytes::last`).
    pub last_after: Vec<u8>,
    /// Whether responses have no body (HEAD).
    pub head: bool,
}

impl RequestParts {
    /// `headers` then `more` are sent after `Host:` (the run's `-H` headers, then a
    /// target's own); `spec` gives the credentials, `target` the host.
    pub(super) fn build(
        method: &str,
        headers: &[String],
        more: &[String],
        spec: &Spec,
        target: &Target,
        body: &[u8],
    ) -> RequestParts {
        let all = || headers.iter().chain(more);
        let user_has = |name: &str| {
            all().any(|h| {
                h.split_once(':')
                    .is_some_and(|(n, _)| n.trim().eq_ignore_ascii_case(name))
            })
        };
        let after = |close: bool| {
            let mut head = String::from(" HTTP/1.1\r\n");
            if !user_has("host") {
                head.push_str(&format!("Host: {}\r\n", target.host_header()));
            }
            for h in all() {
                let (n, v) = h.split_once(':').expect("checked in check_flags");
                head.push_str(&format!("{}: {}\r\n", n.trim(), v.trim()));
            }
            if !body.is_empty() && !user_has("content-length") {
                head.push_str(&format!("Content-Length: {}\r\n", body.len()));
            }
            if let Some(a) = spec
                .authorization
                .as_ref()
                .filter(|_| !user_has("authorization"))
            {
                head.push_str(&format!("Authorization: {a}\r\n"));
            }
            if close && !user_has("connection") {
                head.push_str("Connection: close\r\n");
            }
            head.push_str("\r\n");
            let mut bytes = head.into_bytes();
            bytes.extend_from_slice(body);
            bytes
        };
        RequestParts {
            before: format!("{method} ").into_bytes(),
            keep_after: after(false),
            last_after: after(true),
            head: method.eq_ignore_ascii_case("HEAD"),
        }
    }
}

/// The requests of a run, built once: every target's request bytes back to back in one
/// buffer, the order, and each target's endpoint. A run without `--targets` is a table
/// of one. The worker loop indexes it per request (`bytes`, `head`), nothing more.
#[derive(Debug, Clone)]
pub struct Requests {
    /// Every target's request as sent on a connection that stays open, back to back.
    keep: Vec<u8>,
    /// Where each target's request starts in `keep`, and where the last one ends.
    keep_at: Vec<usize>,
    /// `--connreqs`: the same with `Connection: close` (see `RequestBytes::last`);
    /// empty without it (never sent, so never built).
    last: Vec<u8>,
    last_at: Vec<usize>,
    /// Per target: responses have no body (HEAD).
    head: Vec<bool>,
    /// The longest request (whether Nagle's delay can bite: `TCP_NODELAY`).
    pub max_len: usize,
    /// Indices of targets, one per request, in sending order (repeated).
    pub order: Arc<Vec<u32>>,
    /// Each target's endpoint (index into the mix's names).
    pub endpoint: Vec<u16>,
    /// Endpoint names results are kept for (empty without `--targets`).
    pub endpoints: usize,
    /// `--replay` at a speed: when the request of each ordinal is due, µs from the
    /// start (empty otherwise).
    pub due_us: Arc<Vec<u64>>,
}

impl Requests {
    /// The request table for `spec` (its one request, or its mix).
    pub fn build(spec: &Spec, target: &Target, body: &[u8]) -> Requests {
        let close = spec.connreqs.is_some();
        let mut r = Requests {
            keep: Vec::new(),
            keep_at: vec![0],
            last: Vec::new(),
            last_at: vec![0],
            head: Vec::new(),
            max_len: 0,
            order: Arc::new(vec![0]),
            endpoint: vec![0],
            endpoints: 0,
            due_us: Arc::default(),
        };
        let Some(mix) = &spec.mix else {
            let parts = RequestParts::build(&spec.method, &spec.headers, &[], spec, target, body);
            r.push(&parts, &target.path, close);
            return r;
        };
        // Each distinct method, headers and body built once; a target adds its path
        // between them (the bytes are those `RequestBytes::build` makes of it alone).
        let parts: Vec<RequestParts> = mix
            .loaded
            .shapes()
            .iter()
            .map(|s| {
                RequestParts::build(&s.method, &spec.headers, &s.headers, spec, target, &s.body)
            })
            .collect();
        let n = mix.loaded.len();
        // Sized exactly once: no doubling of a buffer of a hundred megabytes.
        let (mut keep, mut last) = (0, 0);
        for t in mix.loaded.iter() {
            let p = &parts[t.shape as usize];
            keep += p.before.len() + t.path.len() + p.keep_after.len();
            last += p.before.len() + t.path.len() + p.last_after.len();
        }
        r.keep = Vec::with_capacity(keep);
        r.keep_at = Vec::with_capacity(n + 1);
        r.keep_at.push(0);
        if close {
            r.last = Vec::with_capacity(last);
            r.last_at = Vec::with_capacity(n + 1);
            r.last_at.push(0);
        }
        r.head = Vec::with_capacity(n);
        for t in mix.loaded.iter() {
            r.push(&parts[t.shape as usize], t.path, close);
        }
        r.order = if mix.sequence.is_empty() {
            Arc::new(schedule(&mix.loaded.weights(), mix.seed, mix.sequential))
        } else {
            mix.sequence.clone()
        };
        r.endpoint = mix.loaded.endpoints();
        r.endpoints = mix.endpoints.len();
        r.due_us = mix.due_us.clone();
        r
    }

    /// Appends one target's request: `parts` around `path`.
    fn push(&mut self, parts: &RequestParts, path: &str, close: bool) {
        let mut put = |bytes: &mut Vec<u8>, at: &mut Vec<usize>, after: &[u8]| {
            bytes.extend_from_slice(&parts.before);
            bytes.extend_from_slice(path.as_bytes());
            bytes.extend_from_slice(after);
            let len = bytes.len() - at[at.len() - 1];
            at.push(bytes.len());
            self.max_len = self.max_len.max(len);
        };
        put(&mut self.keep, &mut self.keep_at, &parts.keep_after);
        if close {
            put(&mut self.last, &mut self.last_at, &parts.last_after);
        }
        self.head.push(parts.head);
    }

    /// Target `t`'s request bytes; `last`: the one with `Connection: close` that ends a
    /// connection under `--connreqs`.
    #[inline]
    pub fn bytes(&self, t: u32, last: bool) -> &[u8] {
        let t = t as usize;
        if last && !self.last.is_empty() {
            &self.last[self.last_at[t]..self.last_at[t + 1]]
        } else {
            &self.keep[self.keep_at[t]..self.keep_at[t + 1]]
        }
    }

    /// Whether target `t`'s responses have no body (HEAD).
    #[inline]
    pub fn head(&self, t: u32) -> bool {
        self.head[t as usize]
    }

    /// The number of targets.
    pub fn len(&self) -> usize {
        self.head.len()
    }

    pub fn is_empty(&self) -> bool {
        self.head.is_empty()
    }

    /// The target of the request with this ordinal (its place in the run's sequence).
    #[inline]
    pub fn pick(&self, ordinal: u64) -> u32 {
        self.order[(ordinal % self.order.len() as u64) as usize]
    }
}

impl TargetRef<'_> {
    /// The run's spec and URL as this target asks: its method, its headers after the
    /// run's, its path (so the builders of the one-request run build this one).
    pub fn apply(&self, spec: &Spec, target: &Target) -> (Spec, Target) {
        let mut s = spec.clone();
        s.method = self.method.to_string();
        s.headers.extend(self.headers.iter().cloned());
        s.body_bytes = self.body.len();
        s.mix = None;
        let t = Target {
            path: self.path.to_string(),
            ..target.clone()
        };
        (s, t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::targets::{parse, MixSpec};
    use crate::spec::RequestBytes;
    use std::path::Path;

    const RUN: &str = "http://127.0.0.1:8080/";

    fn parse_ok(text: &str) -> (super::super::Targets, Vec<String>) {
        parse(text.as_bytes(), "t.jsonl", RUN, Path::new(".")).unwrap()
    }

    /// The table's bytes are those each target's own spec builds, byte for byte: the
    /// run's headers and credentials, each target's method, headers, body and path,
    /// with and without `Connection: close`.
    #[test]
    fn the_request_table_is_each_targets_own_request() {
        let mut spec = crate::spec::tests::spec("http://user:pw@127.0.0.1:8080/");
        spec.headers = vec!["X-Run: 1".into()];
        spec.authorization = Some("Basic dXNlcjpwdw==".into());
        let target = spec.parse_url().unwrap();
        let text = concat!(
            "/a\n",
            "{\"method\":\"post\",\"url\":\"/api?x=1\",\"headers\":{\"X-A\":[\"1\",\"2\"]},\"body\":\"hi\"}\n",
            "HEAD /h\n",
            "{\"url\":\"/b\",\"headers\":{\"Host\":\"other.test\",\"Connection\":\"keep-alive\"}}\n",
            "{\"method\":\"PUT\",\"url\":\"/api?x=2\",\"headers\":{\"X-A\":[\"1\",\"2\"]},\"body\":\"hi\"}\n",
            "/%7Ea/b?q=%20\n",
        );
        let (loaded, endpoints) = parse_ok(text);
        for connreqs in [None, Some(3)] {
            spec.connreqs = connreqs;
            spec.mix = Some(MixSpec {
                file: "t".into(),
                seed: 1,
                sequential: false,
                targets: loaded.len(),
                endpoints: endpoints.clone(),
                replay: None,
                loaded: Arc::new(parse_ok(text).0),
                sequence: Arc::default(),
                due_us: Arc::default(),
            });
            let r = Requests::build(&spec, &target, b"");
            assert_eq!(r.len(), loaded.len());
            for (i, t) in loaded.iter().enumerate() {
                let (s, tg) = t.apply(&spec, &target);
                let one = RequestBytes::build(&s, &tg, t.body);
                assert_eq!(r.bytes(i as u32, false), one.keep, "target {i}");
                if connreqs.is_some() {
                    assert_eq!(r.bytes(i as u32, true), one.last, "target {i}");
                }
                assert_eq!(r.head(i as u32), one.head);
                assert_eq!(r.endpoint[i], t.endpoint);
            }
            assert_eq!(
                r.max_len,
                (0..r.len() as u32)
                    .map(|i| r.bytes(i, connreqs.is_some()).len())
                    .max()
                    .unwrap()
            );
        }
        spec.mix = None;
        let r = Requests::build(&spec, &target, b"body");
        let one = RequestBytes::build(&spec, &target, b"body");
        assert_eq!(
            (r.bytes(0, false), r.bytes(0, true)),
            (&one.keep[..], &one.last[..])
        );
    }
}
