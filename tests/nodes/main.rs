//! The `waitroom` binary as operators run it, in processes of its own: its
//! flags and signals, many nodes on one Redis, rooms from a file, and the
//! edge worker and protected origins of `integrations/` in front of it.

mod binary;
mod integrations;
mod multi_node;
mod notifications;
mod rooms_file;
