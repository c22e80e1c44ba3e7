//! loadlens: load-test an HTTP server, watch the machine while it runs, and say where
//! the bottleneck is.
//!
//! The pipeline (see DESIGN.md): [`spec`] (what was asked, validated) → [`engine`]
//! (drive the load) → [`run`] (the one artifact) → [`report`] (views of it).

pub mod cli;
pub mod compare;
pub mod diagnose;
pub mod engine;
pub mod gate;
pub mod history;
pub mod kinds;
pub mod lab;
pub mod merge;
pub mod pipeline;
pub mod remote;
pub mod report;
pub mod run;
pub mod slo;
pub mod spec;
pub mod stats;
pub mod sweep;
pub mod sys;
pub mod tune;
pub mod units;
pub mod watch;
