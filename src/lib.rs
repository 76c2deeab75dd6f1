//! waitroom: a real-time virtual waiting room for ticket drops and flash sales.
//!
//! Features, each in its own module: `admission` (rooms, the line, the
//! token-bucket promoter, the stores), `sessions` (live WebSockets), `visitor`
//! (the visitor API and passes), `admin` (operators), `pages` (HTML).
#![forbid(unsafe_code)]

pub mod admin;
pub mod admission;
pub mod app;
pub mod clock;
pub mod config;
pub mod credentials;
pub mod demo;
pub mod error;
pub mod ops;
pub mod pages;
pub mod sale;
pub mod sessions;
pub mod telemetry;
pub mod visitor;

pub use app::{AppHandle, Application, StartError};
