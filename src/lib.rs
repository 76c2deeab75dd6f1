//! waitroom: a real-time virtual waiting room for ticket drops and flash sales.
//!
//! Layers, each depending only on those below it:
//! - `words`: the vocabulary and rules (no actix, no redis);
//! - `store`: the store boundary and its memory and Redis implementations;
//! - `live`: this node's sockets, the hub, the promoter;
//! - `http`: state, extractors, errors, and the routes by feature;
//! - `startup`: settings, building and running the application.
#![forbid(unsafe_code)]

pub mod http;
pub mod live;
pub mod startup;
pub mod store;
pub mod words;

pub use startup::{AppHandle, Application, StartError};
