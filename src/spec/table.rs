//! The targets of a mix as they are kept between reading them and building their
//! requests: compact, because a replayed log or a generated targets file may hold a
//! million of them — each target its path and 16 bytes, what targets share (method,
//! headers, body) once, the endpoint names once.

use std::collections::HashMap;
use std::sync::Arc;

use super::targets::{MAX_ENDPOINTS, OTHER};

/// The targets of a mix, checked, kept compact: a million of them cost their paths and
/// 16 bytes each. What lines share — method, headers, body — is kept once per distinct
/// combination (a [`Shape`]), the paths back to back in one string.
#[derive(Debug, Default)]
pub struct Targets {
    /// Every target's path and query, back to back.
    paths: String,
    each: Vec<Packed>,
    shapes: Vec<Shape>,
}

/// One target: where its path ends in [`Targets::paths`], and indices.
#[derive(Debug, Clone, Copy)]
struct Packed {
    path_end: u32,
    shape: u32,
    weight: u32,
    /// Index into [`MixSpec::endpoints`].
    endpoint: u16,
}

/// What targets share: the method, the headers (after the run's own `-H` headers) and
/// the body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shape {
    pub method: String,
    /// `Name: value`.
    pub headers: Vec<String>,
    pub body: Arc<[u8]>,
}

/// One target of the mix, as the table holds it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TargetRef<'a> {
    pub method: &'a str,
    /// Path and query, at least `/`.
    pub path: &'a str,
    /// `Name: value`, after the run's own `-H` headers.
    pub headers: &'a [String],
    pub body: &'a [u8],
    pub weight: u32,
    /// Index into [`MixSpec::endpoints`].
    pub endpoint: u16,
    /// Index into [`Targets::shapes`].
    pub shape: u32,
}

impl Targets {
    pub fn len(&self) -> usize {
        self.each.len()
    }

    pub fn is_empty(&self) -> bool {
        self.each.is_empty()
    }

    /// Target `i`.
    pub fn get(&self, i: usize) -> TargetRef<'_> {
        let p = self.each[i];
        let from = if i == 0 {
            0
        } else {
            self.each[i - 1].path_end as usize
        };
        let shape = &self.shapes[p.shape as usize];
        TargetRef {
            method: &shape.method,
            path: &self.paths[from..p.path_end as usize],
            headers: &shape.headers,
            body: &shape.body,
            weight: p.weight,
            endpoint: p.endpoint,
            shape: p.shape,
        }
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = TargetRef<'_>> + '_ {
        (0..self.each.len()).map(|i| self.get(i))
    }

    /// The distinct methods, headers and bodies, indexed by [`TargetRef::shape`].
    pub fn shapes(&self) -> &[Shape] {
        &self.shapes
    }

    /// Every target's weight.
    pub fn weights(&self) -> Vec<u32> {
        self.each.iter().map(|p| p.weight).collect()
    }

    /// Every target's endpoint.
    pub fn endpoints(&self) -> Vec<u16> {
        self.each.iter().map(|p| p.endpoint).collect()
    }

    /// Where a target's path is written before it is pushed.
    pub(super) fn paths_mut(&mut self) -> &mut String {
        &mut self.paths
    }

    /// The path written to the end of `paths` since the last target was pushed.
    pub(super) fn pending_path(&self) -> &str {
        let from = self.each.last().map_or(0, |p| p.path_end as usize);
        &self.paths[from..]
    }

    /// Appends a target whose path is [`pending_path`](Self::pending_path); `Err` (the
    /// message) when the paths outgrow the table's 4 GiB.
    pub(super) fn push(&mut self, shape: u32, weight: u32, endpoint: u16) -> Result<(), String> {
        let path_end = u32::try_from(self.paths.len()).map_err(|_| {
            "the targets' paths add up to more than 4 GiB — split the file".to_string()
        })?;
        self.each.push(Packed {
            path_end,
            shape,
            weight,
            endpoint,
        });
        Ok(())
    }
}

/// The shapes of a table being built, each once.
#[derive(Default)]
pub(super) struct ShapeIndex {
    index: HashMap<Shape, u32>,
    /// The shape of a method alone (no headers, no body), without building a key.
    plain: HashMap<String, u32>,
    empty: Arc<[u8]>,
}

impl ShapeIndex {
    /// The index of `method` alone in `t`'s shapes, added if new.
    pub(super) fn plain(&mut self, t: &mut Targets, method: &str) -> u32 {
        if let Some(&i) = self.plain.get(method) {
            return i;
        }
        let i = self.with(
            t,
            Shape {
                method: method.to_string(),
                headers: Vec::new(),
                body: self.empty.clone(),
            },
        );
        self.plain.insert(method.to_string(), i);
        i
    }

    /// The index of `shape` in `t`'s shapes, added if new.
    pub(super) fn with(&mut self, t: &mut Targets, shape: Shape) -> u32 {
        if let Some(&i) = self.index.get(&shape) {
            return i;
        }
        let i = t.shapes.len() as u32;
        t.shapes.push(shape.clone());
        self.index.insert(shape, i);
        i
    }
}

/// Endpoint names in the order first seen, at most [`MAX_ENDPOINTS`] and then "other".
#[derive(Default)]
pub(super) struct Names {
    pub(super) names: Vec<String>,
    index: HashMap<String, u16>,
    /// Reused to make a default name without allocating one per target.
    scratch: String,
    /// The last name looked up and its endpoint: consecutive targets often share one.
    last: Option<(String, u16)>,
}

impl Names {
    /// The endpoint of a target named `name`.
    pub(super) fn of(&mut self, name: &str) -> u16 {
        if let Some((n, e)) = &self.last {
            if n == name {
                return *e;
            }
        }
        let e = self.lookup(name);
        match &mut self.last {
            Some((n, last)) => {
                n.clear();
                n.push_str(name);
                *last = e;
            }
            None => self.last = Some((name.to_string(), e)),
        }
        e
    }

    fn lookup(&mut self, name: &str) -> u16 {
        match self.index.get(name) {
            Some(&e) => e,
            None if self.names.len() < MAX_ENDPOINTS => {
                let e = self.names.len() as u16;
                self.names.push(name.to_string());
                self.index.insert(name.to_string(), e);
                e
            }
            None => {
                if self.names.len() == MAX_ENDPOINTS {
                    self.names.push(OTHER.into());
                }
                MAX_ENDPOINTS as u16
            }
        }
    }

    /// The endpoint of a target named by default: its method and its path without the
    /// query.
    pub(super) fn of_default(&mut self, method: &str, path: &str) -> u16 {
        let mut name = std::mem::take(&mut self.scratch);
        name.clear();
        name.push_str(method);
        name.push(' ');
        name.push_str(path.split_once('?').map_or(path, |(p, _)| p));
        let e = self.of(&name);
        self.scratch = name;
        e
    }
}
