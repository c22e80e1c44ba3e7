//! The servers' own error logs over the load window: what they said, classified.

use serde::{Deserialize, Serialize};

/// One server log read over the window (only what was appended during the load).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServerLog {
    /// The file.
    pub path: String,
    /// Whose log it is: `nginx`, `php-fpm`.
    pub server: String,
    /// Bytes appended during the window that were read (at most a bounded amount).
    pub bytes_read: u64,
    /// Known messages by class, most frequent first.
    pub classes: Vec<LogClass>,
    /// Lines of no known class.
    pub other_lines: u64,
    /// An example of those, when there were some.
    #[serde(default)]
    pub other_example: Option<String>,
    /// Why the log was not (fully) read, when it was not: one line; never a failure.
    #[serde(default)]
    pub note: Option<String>,
}

/// A class of message and how often it appeared.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct LogClass {
    /// Stable id, e.g. `too-many-open-files`, `worker-connections-not-enough`,
    /// `max-children-reached`, `connect-failed`, `upstream-timed-out`.
    pub class: String,
    pub count: u64,
    /// The first line of this class, as logged (trimmed to 300 characters).
    pub example: String,
}
