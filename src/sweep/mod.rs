//! Studies: a grid of loads (the cross product of the values given per dimension) and
//! the ceiling search (`ceiling.rs`). Each cell is one ordinary load through a
//! `measure` function the caller supplies (the command line's runs the pipeline), so
//! the planning and the search are tested here without a server.

pub mod ceiling;

use crate::run::{Cell, Dim, Run, Sweep, SWEEP_SCHEMA_VERSION};
use crate::spec::{MixSpec, Spec};

/// The values given for each dimension; a dimension with one value does not vary.
#[derive(Debug, Clone, Default)]
pub struct Grid {
    pub urls: Vec<String>,
    pub connections: Vec<u32>,
    pub threads: Vec<u32>,
    /// `None` = keep-alive.
    pub connreqs: Vec<Option<u32>>,
    /// `None` = closed loop.
    pub rates: Vec<Option<f64>>,
    /// `--targets`/`--replay`: the mix read against each URL, in `urls`' order (empty:
    /// the base spec's, or one request).
    pub mixes: Vec<Option<MixSpec>>,
}

/// One planned cell: its coordinates along the varying dimensions and its spec.
#[derive(Debug, Clone)]
pub struct Planned {
    pub coords: Vec<String>,
    pub spec: Spec,
}

fn connreqs_label(c: Option<u32>) -> String {
    c.map_or("keep-alive".to_string(), |n| n.to_string())
}

fn rate_label(r: Option<f64>) -> String {
    r.map_or("closed".to_string(), |r| format!("{r}"))
}

impl Grid {
    /// The varying dimensions (more than one value), in table order: the object
    /// (URL), requests per connection, rate, threads, then connections, so that the
    /// columns are connections, as in a published study's tables.
    pub fn dims(&self) -> Vec<Dim> {
        let mut dims = Vec::new();
        let mut push = |name: &str, values: Vec<String>| {
            if values.len() > 1 {
                dims.push(Dim {
                    name: name.to_string(),
                    values,
                });
            }
        };
        // As recorded: without passwords.
        push(
            "url",
            self.urls
                .iter()
                .map(|u| crate::spec::split_credentials(u).0)
                .collect(),
        );
        push(
            "connreqs",
            self.connreqs.iter().map(|c| connreqs_label(*c)).collect(),
        );
        push("rate", self.rates.iter().map(|r| rate_label(*r)).collect());
        push(
            "threads",
            self.threads.iter().map(|t| t.to_string()).collect(),
        );
        push(
            "connections",
            self.connections.iter().map(|c| c.to_string()).collect(),
        );
        dims
    }

    /// Every cell of the cross product, the last dimension varying fastest. `base`
    /// carries everything that does not vary (duration, headers, timeout…).
    pub fn plan(&self, base: &Spec) -> Vec<Planned> {
        let dims = self.dims();
        let mut out = Vec::new();
        for (u, raw) in self.urls.iter().enumerate() {
            let mix = self
                .mixes
                .get(u)
                .cloned()
                .unwrap_or_else(|| base.mix.clone());
            // Each URL's own credentials (the base has the first URL's).
            let (url, authorization) = crate::spec::split_credentials(raw);
            let url = &url;
            for connreqs in &self.connreqs {
                for rate in &self.rates {
                    for threads in &self.threads {
                        for connections in &self.connections {
                            let spec = Spec {
                                url: url.clone(),
                                connections: *connections,
                                threads: (*threads).min(*connections),
                                connreqs: *connreqs,
                                rate: *rate,
                                authorization: authorization.clone(),
                                mix: mix.clone(),
                                ..base.clone()
                            };
                            let coords = dims
                                .iter()
                                .map(|d| match d.name.as_str() {
                                    "url" => url.clone(),
                                    "connreqs" => connreqs_label(*connreqs),
                                    "rate" => rate_label(*rate),
                                    "threads" => threads.to_string(),
                                    _ => connections.to_string(),
                                })
                                .collect();
                            out.push(Planned { coords, spec });
                        }
                    }
                }
            }
        }
        out
    }
}

/// Runs every planned cell through `measure`, calling `each(k, n, cell)` before each.
/// Stops between cells when `stopped()` says so (the Sweep is then `interrupted`).
pub fn run_grid(
    grid: &Grid,
    base: &Spec,
    measure: &mut dyn FnMut(&Spec) -> anyhow::Result<Run>,
    each: &mut dyn FnMut(usize, usize, &Planned),
    stopped: &dyn Fn() -> bool,
) -> anyhow::Result<Sweep> {
    let plan = grid.plan(base);
    let mut cells = Vec::with_capacity(plan.len());
    let mut interrupted = false;
    for (k, p) in plan.iter().enumerate() {
        if stopped() {
            interrupted = true;
            break;
        }
        each(k, plan.len(), p);
        let run = measure(&p.spec)?;
        cells.push(Cell {
            coords: p.coords.clone(),
            run,
        });
    }
    Ok(Sweep {
        schema_version: SWEEP_SCHEMA_VERSION,
        tool: format!("loadlens {}", env!("CARGO_PKG_VERSION")),
        dims: grid.dims(),
        cells,
        ceiling: None,
        interrupted,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn base() -> Spec {
        Spec {
            url: "http://127.0.0.1:1/".into(),
            connections: 10,
            threads: 1,
            duration_s: Some(1.0),
            requests: None,
            connreqs: None,
            rate: None,
            method: "GET".into(),
            headers: Vec::new(),
            body_bytes: 0,
            timeout_s: 2.0,
            insecure: false,
            http: crate::spec::HttpVersion::Auto,
            max_concurrent_streams: 1,
            resume: Default::default(),
            io: Default::default(),
            mix: None,
            stages: None,
            abort_if_behind_pct: None,
            authorization: None,
        }
    }

    #[test]
    fn the_cross_product_varies_the_last_dimension_fastest() {
        let g = Grid {
            urls: vec!["http://a/".into()],
            connections: vec![10, 50],
            threads: vec![2],
            connreqs: vec![Some(1), Some(4), None],
            rates: vec![None],
            mixes: Vec::new(),
        };
        let dims = g.dims();
        let names: Vec<&str> = dims.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["connreqs", "connections"]);
        let plan = g.plan(&base());
        assert_eq!(plan.len(), 6);
        assert_eq!(plan[0].coords, ["1", "10"]);
        assert_eq!(plan[1].coords, ["1", "50"]);
        assert_eq!(plan[5].coords, ["keep-alive", "50"]);
        assert_eq!(plan[5].spec.connreqs, None);
        assert_eq!(plan[2].spec.connreqs, Some(4));
        assert_eq!(plan[1].spec.connections, 50);
        assert_eq!(plan[1].spec.threads, 2);
        assert_eq!(plan[0].spec.duration_s, Some(1.0));
    }

    /// Every URL of a sweep sends its own credentials (the later ones took the first
    /// URL's, or none) and none is recorded with its password.
    #[test]
    fn each_url_keeps_its_own_credentials() {
        let g = Grid {
            urls: vec![
                "http://127.0.0.1:1/a".into(),
                "http://u:pw@127.0.0.1:1/b".into(),
                "http://v:x@127.0.0.1:1/c".into(),
            ],
            connections: vec![10],
            threads: vec![1],
            connreqs: vec![None],
            rates: vec![None],
            mixes: Vec::new(),
        };
        let (_, first) = crate::spec::split_credentials(&g.urls[0]);
        let plan = g.plan(&Spec {
            authorization: first,
            ..base()
        });
        let auth: Vec<Option<&str>> = plan
            .iter()
            .map(|p| p.spec.authorization.as_deref())
            .collect();
        assert_eq!(auth, [None, Some("Basic dTpwdw=="), Some("Basic djp4")]);
        for p in &plan {
            assert!(!p.spec.url.contains(":pw@") && !p.spec.url.contains(":x@"));
            assert!(!p.coords.join(" ").contains("pw"), "{:?}", p.coords);
        }
        assert_eq!(g.dims()[0].values[1], "http://u@127.0.0.1:1/b");
    }
}
