//! The live status line during a load: elapsed time, responses, rate and errors, on
//! stderr, only when stderr is a terminal, cleared when the load ends. It renders what
//! the engine's [`Progress`] callback hands it; it measures nothing.

use std::time::Duration;

use crate::engine::Progress;
use crate::spec::Spec;

/// The live status line on stderr (only when stderr is a terminal); cleared at the end.
pub struct LiveLine {
    bar: Option<indicatif::ProgressBar>,
    total: Option<Duration>,
    requests: Option<u64>,
}

impl LiveLine {
    pub fn new(enabled: bool, spec: &Spec) -> LiveLine {
        let bar = enabled.then(|| {
            let b = indicatif::ProgressBar::with_draw_target(
                None,
                indicatif::ProgressDrawTarget::stderr_with_hz(4),
            );
            b.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {prefix}{msg}")
                    .expect("valid template"),
            );
            b
        });
        LiveLine {
            bar,
            total: spec.duration_s.map(Duration::from_secs_f64),
            requests: spec.requests,
        }
    }
    /// The bar itself (shared), e.g. to name the repetition in its prefix.
    pub fn bar(&self) -> Option<indicatif::ProgressBar> {
        self.bar.clone()
    }

    pub fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

impl Progress for LiveLine {
    fn update(&mut self, elapsed: Duration, responses: u64, errors: u64) {
        let Some(b) = &self.bar else { return };
        let of = match (self.total, self.requests) {
            (Some(t), _) => format!(" / {:.0}s", t.as_secs_f64()),
            _ => String::new(),
        };
        let n = match self.requests {
            Some(n) => format!("{responses} / {n}"),
            None => responses.to_string(),
        };
        let rate = responses as f64 / elapsed.as_secs_f64().max(1e-3);
        b.set_message(format!(
            "{:.1}s{of}  {n} responses  {rate:.0} req/s  {errors} errors",
            elapsed.as_secs_f64()
        ));
        b.tick();
    }

    fn phase(&mut self, what: &str) {
        if let Some(b) = &self.bar {
            b.set_prefix(if what.is_empty() {
                String::new()
            } else {
                format!("{what}  ")
            });
        }
    }
}
