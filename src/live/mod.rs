//! Live visitors on this node: the registry of sockets, positions derived
//! from events, the fan-out and the worker threads it runs on (homes), the
//! hub that applies the store's events, each socket's loop (actix-ws), the
//! promoter that ticks the rooms (resuming the arrivals this node could not
//! record) and keeps their recent figures for the admin chart (history),
//! the guarded client it calls origins' health checks and notifications
//! with (outbound), a room's webhook (webhook), the notifications' sender
//! (callbacks), and the tracked tasks they all run in.

pub mod arrival_gaps;
pub mod callbacks;
pub mod fanout;
pub mod frame_guard;
pub mod history;
pub mod home;
pub mod hub;
pub mod lane;
pub mod outbound;
pub mod outlet;
pub mod positions;
pub mod promoter;
pub mod registry;
pub mod socket;
pub mod tasks;
pub mod webhook;
