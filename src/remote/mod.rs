//! The watch on another machine (`run --watch ssh://[user@]host[:port]`): the same
//! local watch (`watch::Watch`) run there by `loadlens watch --stdio`, spoken to over
//! the system `ssh` in a framed, versioned protocol, its Evidence placed on this
//! machine's clock and marked with where it came from (`Evidence::source`).
//!
//! Files: [`protocol`] (the messages, their framing, the clock arithmetic), [`server`]
//! (`watch --stdio`: the server's side), [`ssh`] (the ssh command line, the remote
//! scripts, copying the build there, what ssh's failures mean), [`session`] (the
//! client's side: one channel for every load of a command; `reader.rs`, what the
//! server sends read within the limits), [`bounded`] (every read from another machine
//! within a stated limit), [`lost`] (the Evidence
//! of a channel lost mid-run), [`attach`] (a watch run alone joined to a Run by wall
//! clock).

pub mod attach;
pub mod bounded;
pub mod lost;
pub mod protocol;
mod reader;
pub mod server;
pub mod session;
pub mod ssh;

pub use session::{Session, Watching};
