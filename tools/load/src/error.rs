//! The tool's errors. A run that cannot go on stops with a [`LoadError`],
//! which `main` prints as `waitroom-load: {error}` before exiting with 1. A
//! request that fails in the middle of a run does not stop it: it is a
//! [`Failure`], counted by its kind in `common::ErrorKinds` and reported
//! with the figures.
//!
//! `thiserror` rather than `anyhow`: every error here is only ever printed,
//! but the workspace already builds `thiserror` (the server's errors use it),
//! and the causes are few and worth naming apart: the command line, a node's
//! answer, Redis, this machine, and the floor server.

use std::io;

/// Why a run stopped before its report.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The command line asks for something no run can do (what clap's own
    /// checks cannot see, such as a non-loopback `--url`).
    #[error("{0}")]
    Usage(String),
    /// A node did not do what the run needs of it before measuring
    /// (creating a room, moving the opening, reading the draw).
    #[error("{0}")]
    Node(String),
    /// The Redis named by `--redis-url`, or its `redis-benchmark`.
    #[error("{context}: {source}")]
    Redis {
        context: String,
        #[source]
        source: redis::RedisError,
    },
    /// This machine: a socket, a file, a child process.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    /// The floor server (this tool again, as a child process) did not
    /// start, listen or report as agreed.
    #[error("{0}")]
    Floor(String),
    /// The run could not set up what it measures.
    #[error("{0}")]
    Setup(String),
}

impl LoadError {
    /// An I/O error with what the tool was doing when it happened.
    pub fn io(context: impl Into<String>) -> impl FnOnce(io::Error) -> Self {
        let context = context.into();
        move |source| Self::Io { context, source }
    }

    /// A Redis error with what the tool asked of it.
    pub fn redis(context: impl Into<String>) -> impl FnOnce(redis::RedisError) -> Self {
        let context = context.into();
        move |source| Self::Redis { context, source }
    }
}

/// A command-line value clap could not take (its value parsers' error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?}: {expected}")]
pub struct BadValue {
    pub value: String,
    pub expected: &'static str,
}

/// One request (or socket) that failed mid-run, named by its kind: the key
/// it is counted under in `common::ErrorKinds`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Failure(pub String);

impl From<&reqwest::Error> for Failure {
    fn from(error: &reqwest::Error) -> Self {
        Self(crate::common::error_kind(error))
    }
}

impl From<reqwest::Error> for Failure {
    fn from(error: reqwest::Error) -> Self {
        Self::from(&error)
    }
}

impl From<Failure> for String {
    fn from(failure: Failure) -> Self {
        failure.0
    }
}
