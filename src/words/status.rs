//! The `Status` message: the one shape a visitor sees, over HTTP and over the
//! WebSocket alike.

use serde::Serialize;

use crate::words::clock::{Millis, rfc3339};
use crate::words::credentials::Credentials;
use crate::words::{LineSummary, PlaceState, RoomId, VisitorId};

#[derive(Debug, Serialize)]
pub struct Status<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub room: &'a str,
    pub state: &'static str,
    pub ticket: &'a str,
    pub position: Option<u64>,
    pub waiting: u64,
    pub eta_seconds: Option<u64>,
    pub pass: Option<String>,
    pub redirect_url: Option<String>,
    pub expires_at: Option<String>,
    /// Admission is paused by the operator (the ETA is then null).
    pub paused: bool,
    /// When the tick this status reflects ran (ms since the epoch), so a
    /// client can measure tick-to-screen latency.
    pub tick_at_ms: Option<Millis>,
}

/// Everything a status is built from.
pub struct StatusInput<'a> {
    pub room: &'a RoomId,
    pub ticket: &'a str,
    pub visitor: VisitorId,
    pub state: PlaceState,
    pub line: &'a LineSummary,
    pub target_url: &'a str,
}

impl<'a> Status<'a> {
    pub fn build(input: StatusInput<'a>, credentials: &Credentials) -> Self {
        let mut status = Status {
            kind: "status",
            room: input.room.as_str(),
            state: state_name(&input.state),
            ticket: input.ticket,
            position: None,
            waiting: input.line.waiting,
            eta_seconds: None,
            pass: None,
            redirect_url: None,
            expires_at: None,
            paused: input.line.paused,
            tick_at_ms: input.line.tick_at,
        };
        match input.state {
            PlaceState::Waiting { position, .. } => {
                status.position = Some(position);
                status.eta_seconds = input.line.eta_seconds(position);
            }
            PlaceState::Admitted {
                admitted_at,
                expires_at,
            } => {
                let pass =
                    credentials.issue_pass(input.room, input.visitor, admitted_at, expires_at);
                status.redirect_url = Some(with_pass(input.target_url, &pass));
                status.expires_at = Some(rfc3339(expires_at));
                status.pass = Some(pass);
            }
            PlaceState::Expired | PlaceState::Left | PlaceState::Closed => {}
        }
        status
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a Status always serializes")
    }
}

pub fn state_name(state: &PlaceState) -> &'static str {
    match state {
        PlaceState::Waiting { .. } => "waiting",
        PlaceState::Admitted { .. } => "admitted",
        PlaceState::Expired => "expired",
        PlaceState::Left => "left",
        PlaceState::Closed => "closed",
    }
}

/// The target URL with the pass attached as `wr_pass`.
pub fn with_pass(target_url: &str, pass: &str) -> String {
    let (base, fragment) = match target_url.split_once('#') {
        Some((base, fragment)) => (base, Some(fragment)),
        None => (target_url, None),
    };
    let separator = if base.contains('?') { '&' } else { '?' };
    // A JWT is base64url and dots only: nothing to escape.
    let mut url = format!("{base}{separator}wr_pass={pass}");
    if let Some(fragment) = fragment {
        url.push('#');
        url.push_str(fragment);
    }
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_is_attached_before_any_fragment() {
        assert_eq!(
            with_pass("https://a.example/x", "p"),
            "https://a.example/x?wr_pass=p"
        );
        assert_eq!(with_pass("/x?y=1#top", "p"), "/x?y=1&wr_pass=p#top");
    }
}
