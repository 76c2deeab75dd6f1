//! HTTP: the application's state in parts (`state`), the errors and
//! extractors, the routes by feature (visitor API, sockets, operators, sale,
//! pages, ops, the API description), and the middleware every answer goes
//! through (CORS for the listed origins among them).

pub mod admin;
pub mod body_configs;
pub mod client_address;
pub mod cookies;
pub mod cors;
pub mod draw;
pub mod error;
pub mod extractors;
pub mod gate;
pub mod limits;
pub mod login_guard;
pub mod middleware;
pub mod notify;
pub mod openapi;
pub mod ops;
pub mod pages;
pub mod paths;
pub mod push;
pub mod refusal_log;
pub mod resume;
pub mod sale;
pub mod sale_views;
pub mod sockets;
pub mod state;
pub mod visitor;
