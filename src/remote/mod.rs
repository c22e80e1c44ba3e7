//! The watch on another machine: the same local watch (`watch::Watch`) run there by
//! `loadlens watch --stdio`, spoken to in a framed, versioned protocol.
//!
//! Files: [`protocol`] (the messages, their framing, the clock arithmetic), [`server`]
//! (`watch --stdio`: the server's side).

pub mod protocol;
pub mod server;
