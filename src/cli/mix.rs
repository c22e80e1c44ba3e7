//! `--targets` and `--replay`, shared by `run` and `sweep`: a mix of requests read into
//! the spec before any load, each file checked line by line against the load's URL.

use std::time::Duration;

use clap::Args;

use super::load::LoadFlags;
use crate::spec::{HttpVersion, MixSpec, Spec};

#[derive(Args, Debug, Clone, Default)]
pub struct MixFlags {
    /// A mix of requests: JSON lines (`method`, `url` — absolute or a path —,
    /// `headers`, `body` or `body_file`, `weight`, `name`) or one URL per line; `-` =
    /// standard input. Results are kept per endpoint name.
    #[arg(long, value_name = "FILE")]
    pub targets: Option<String>,
    /// Seed of the weighted order of --targets: the same seed sends the same sequence.
    #[arg(long, requires = "targets", default_value_t = crate::spec::targets::DEFAULT_SEED)]
    pub seed: u64,
    /// Send --targets in the file's order, round robin (weights above 0 ignored).
    #[arg(long, requires = "targets")]
    pub sequential: bool,
    /// Replay an access log (nginx/Apache combined or common format, or JSON lines
    /// `{t, method, url}`): its requests at their original relative times × --speed
    /// (open loop, latency from each request's due time). Requests with a body are
    /// skipped (counted).
    #[arg(long, value_name = "LOG", conflicts_with_all = ["targets", "rate"])]
    pub replay: Option<String>,
    /// --replay's pace: the log's times divided by F (2 = twice as fast), or `max`
    /// (closed loop, the log's order as fast as the connections go).
    #[arg(long, value_name = "F|max", requires = "replay", default_value = "1")]
    pub speed: String,
}

impl MixFlags {
    /// Whether a mix was asked for.
    pub fn any(&self) -> bool {
        self.targets.is_some() || self.replay.is_some()
    }

    /// The file read, `-` = standard input (which can be read once only).
    pub fn file(&self) -> Option<&str> {
        self.targets.as_deref().or(self.replay.as_deref())
    }

    /// `--speed`: a factor, or `None` for `max`.
    fn speed(&self) -> anyhow::Result<Option<f64>> {
        match self.speed.as_str() {
            "max" => Ok(None),
            f => match f.parse::<f64>() {
                Ok(x) if x.is_finite() && x > 0.0 => Ok(Some(x)),
                _ => anyhow::bail!("--speed {f}: expected a factor above 0 (e.g. 2) or `max`"),
            },
        }
    }

    /// Checks the flags that cannot go with a mix, before any file is read.
    pub fn check(&self, load: &LoadFlags) -> anyhow::Result<()> {
        let body = load.body.is_some() || load.body_file.is_some();
        if self.targets.is_some() && body {
            anyhow::bail!("--targets gives each request its own body: drop --body/--body-file");
        }
        if self.replay.is_some() {
            self.speed()?;
            if load.h2 {
                anyhow::bail!("--replay speaks HTTP/1.1 or HTTP/3 (--h3) for now: drop --h2");
            }
            if body {
                anyhow::bail!("--replay sends requests without a body: drop --body/--body-file");
            }
        }
        Ok(())
    }

    /// The mix asked for, read and checked against `url` (`None`: one request).
    pub fn read(&self, url: &str) -> anyhow::Result<Option<MixSpec>> {
        let mix = match (&self.targets, &self.replay) {
            (Some(file), _) => crate::spec::targets::load(file, url, self.seed, self.sequential),
            (None, Some(log)) => crate::spec::replay::load(log, url, self.speed()?),
            (None, None) => return Ok(None),
        };
        mix.map(Some).map_err(anyhow::Error::msg)
    }

    /// Puts `mix` into `spec`. A replay sends the log's requests (`-n` is their count),
    /// over HTTP/1.1 (or HTTP/3 with `--h3`), for `duration` at most if one was given.
    pub fn apply(mix: Option<MixSpec>, spec: &mut Spec, duration: Option<Duration>) {
        let Some(mix) = mix else {
            return;
        };
        if let Some(r) = &mix.replay {
            spec.requests = Some(r.requests);
            spec.duration_s = duration.map(|d| d.as_secs_f64());
            if spec.http != HttpVersion::H3 {
                spec.http = HttpVersion::H1;
            }
        }
        spec.mix = Some(mix);
    }
}
