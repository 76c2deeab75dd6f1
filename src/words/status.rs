//! The `Status` message: the one shape a visitor sees, over HTTP and over the
//! WebSocket alike.

use serde::{Deserialize, Deserializer, Serialize};

use crate::words::clock::{Millis, rfc3339};
use crate::words::credentials::Credentials;
use crate::words::return_url;
use crate::words::{
    LineSummary, PlaceState, QueueMethod, RoomFacts, RoomId, VisitorId, WireName, one_of, wire_enum,
};

/// Written by the server; read by clients (the load tool), borrowing the
/// room and the ticket from the message (neither is ever escaped in JSON).
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(
    description = "A visitor's state: the answer of join and status, and every message of the WebSocket"
)]
pub struct Status<'a> {
    /// Always `"status"`: reading any other message type (`pong`, `error`) fails.
    #[serde(rename = "type", deserialize_with = "status_type")]
    #[schema(schema_with = status_type_schema)]
    pub kind: WireName,
    pub room: &'a str,
    pub state: State,
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
    #[schema(value_type = Option<u64>)]
    pub tick_at_ms: Option<Millis>,
    /// The operator's current message to everyone in the room.
    pub notice: Option<&'a str>,
    /// How the line is admitted: `fifo`, `random`, `passthrough`, `reject`.
    #[serde(default)]
    pub queue_method: QueueMethod,
    /// Why the room is `closed`, or why the place `expired` when its
    /// visitor was away too long.
    #[serde(default)]
    pub reason: Option<Reason>,
    /// Units or seats still free in the room's sale (null: no sale).
    #[serde(default)]
    pub stock_left: Option<u64>,
    /// The room's scheduled opening (RFC 3339): before it, the pre-queue.
    #[serde(default)]
    pub opens_at: Option<String>,
    /// The visitor's public id in the room's draw (pre-queue entrants).
    #[serde(default)]
    pub entry: Option<String>,
    /// While waiting: how long the place is kept, at least, for a visitor
    /// who is away (no socket, no poll: a closed tab, a locked phone).
    #[serde(default)]
    pub kept_away_seconds: Option<u64>,
    /// The code group whose priority line the visitor waits in (they
    /// joined with a code); null in the general line, and once admitted.
    #[serde(default)]
    pub priority: Option<&'a str>,
    /// The visitor asked to be notified (api.md, "Step away") and the
    /// request holds. In the answers of the HTTP API; a socket's frames
    /// leave it out (the page keeps what its own request was answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<bool>,
}

wire_enum! {
    /// Where the visitor stands, as a status says it.
    pub enum State {
        /// In the line, or in a scheduled room's pre-queue.
        Waiting,
        /// Holding a pass.
        Admitted,
        /// Unknown here, or their place or pass ran out.
        Expired,
        /// They gave up their place or pass (or it was taken back).
        Left,
        /// The room is closed.
        Closed,
    }
}

impl State {
    pub fn of(place: &PlaceState) -> Self {
        match place {
            PlaceState::PreQueue { .. } | PlaceState::Waiting { .. } => Self::Waiting,
            PlaceState::Admitted { .. } => Self::Admitted,
            PlaceState::Expired | PlaceState::Away | PlaceState::Lapsed { .. } => Self::Expired,
            PlaceState::Left => Self::Left,
            PlaceState::Closed => Self::Closed,
        }
    }
}

wire_enum! {
    /// Why a room is `closed` to a visitor, or why their place `expired`.
    pub enum Reason {
        ClosedByOperator,
        /// The sale behind the line has nothing left.
        SoldOut,
        /// Nobody saw the visitor (no socket, no poll) for the room's
        /// `abandon_after_s`, so the place went to those still there.
        AwayTooLong,
        /// The admitted visitor's session lapsed: no call accepted their
        /// pass for the room's `session_idle_s`.
        SessionIdle,
    }
}

/// Everything a status is built from.
pub struct StatusInput<'a> {
    pub room: &'a RoomId,
    pub ticket: &'a str,
    /// Their ticket's `return` (where they asked to go once admitted).
    pub ret: TicketReturn<'a>,
    pub visitor: VisitorId,
    pub state: PlaceState,
    pub line: &'a LineSummary,
    pub facts: &'a RoomFacts,
    /// The visitor's code group, if they joined with a code.
    pub priority: Option<&'a str>,
    /// Whether they asked to be notified, where the caller read it.
    pub notify: Option<bool>,
}

/// An admitted visitor's `return`: known to a caller that has just read
/// or signed the ticket (a join, a status read), or read from the ticket
/// when it is needed (a socket's status, which holds only the ticket).
#[derive(Debug, Clone, Copy)]
pub enum TicketReturn<'a> {
    Known(Option<&'a str>),
    ReadFromTicket,
}

impl<'a> Status<'a> {
    pub fn build(input: StatusInput<'a>, credentials: &Credentials) -> Self {
        let mut status = Status {
            kind: "status",
            room: input.room.as_str(),
            state: State::of(&input.state),
            ticket: input.ticket,
            position: None,
            waiting: input.line.waiting,
            eta_seconds: None,
            pass: None,
            redirect_url: None,
            expires_at: None,
            paused: input.line.paused,
            tick_at_ms: input.line.tick_at,
            notice: input.facts.notice.as_deref(),
            queue_method: input.facts.queue_method,
            reason: None,
            stock_left: input.facts.stock_left,
            opens_at: input.facts.opens_at.map(|at| rfc3339(at.0)),
            entry: None,
            kept_away_seconds: None,
            notify: input.notify,
            priority: match input.state {
                PlaceState::Waiting { .. } | PlaceState::PreQueue { .. } => input.priority,
                _ => None,
            },
        };
        match input.state {
            // No order exists before the draw: no position, no wait.
            PlaceState::PreQueue { entry } => {
                status.entry = Some(entry.to_string());
                status.kept_away_seconds = Some(input.facts.abandon_after_s);
            }
            // A random line has no order: everyone's expected wait is the
            // line's length at the achieved rate.
            PlaceState::Waiting { order, .. }
                if input.facts.queue_method == QueueMethod::Random =>
            {
                status.entry = order.entry().map(|entry| entry.to_string());
                status.eta_seconds = input.line.eta_seconds(input.line.waiting);
                status.kept_away_seconds = Some(input.facts.abandon_after_s);
            }
            PlaceState::Waiting { order, position } => {
                status.entry = order.entry().map(|entry| entry.to_string());
                status.position = Some(position);
                status.eta_seconds = input.line.eta_seconds(position);
                status.kept_away_seconds = Some(input.facts.abandon_after_s);
            }
            PlaceState::Admitted {
                admitted_at,
                expires_at,
            } => {
                let pass =
                    credentials.issue_pass(input.room, input.visitor, admitted_at, expires_at);
                // Back to the page a forward-auth gate turned them away
                // from, when their ticket carries it and it is on the
                // target's origin; else to the target.
                let from_ticket;
                let ret = match input.ret {
                    TicketReturn::Known(ret) => ret,
                    TicketReturn::ReadFromTicket => {
                        from_ticket = credentials.ticket_return(input.room, input.ticket);
                        from_ticket.as_deref()
                    }
                };
                let destination =
                    return_url::destination(ret, &input.facts.target_url, credentials.public_url());
                status.redirect_url = Some(with_pass(&destination, &pass));
                status.expires_at = Some(rfc3339(expires_at));
                status.pass = Some(pass);
            }
            PlaceState::Closed if input.facts.sold_out => status.reason = Some(Reason::SoldOut),
            PlaceState::Closed => status.reason = Some(Reason::ClosedByOperator),
            PlaceState::Away => status.reason = Some(Reason::AwayTooLong),
            PlaceState::Lapsed { .. } => status.reason = Some(Reason::SessionIdle),
            PlaceState::Expired | PlaceState::Left => {}
        }
        status
    }

    pub fn to_json(&self) -> String {
        // Room for a waiting visitor's status at once (about 400 bytes),
        // where `to_string` would grow its buffer from 128 twice; an
        // admitted one's also holds its pass and its redirect URL (the
        // pass again), which would grow it twice more.
        let admission = [&self.pass, &self.redirect_url]
            .into_iter()
            .flatten()
            .map(String::len)
            .sum::<usize>();
        let mut json = Vec::with_capacity(512 + admission);
        serde_json::to_writer(&mut json, self).expect("a Status always serializes");
        String::from_utf8(json).expect("serde_json writes UTF-8")
    }
}

/// The one `type` a status has, read and described alike.
const STATUS_TYPE: &[&str] = &["status"];

fn status_type<'de, D: Deserializer<'de>>(d: D) -> Result<WireName, D::Error> {
    one_of(d, STATUS_TYPE)
}

fn status_type_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    crate::words::wire::names_schema(STATUS_TYPE)
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

    /// Each enum reads back what it writes, and nothing else.
    #[test]
    fn wire_names_are_written_once_and_read_back() {
        for (state, name) in [(State::Waiting, "waiting"), (State::Admitted, "admitted")] {
            assert_eq!(serde_json::to_string(&state).unwrap(), format!("{name:?}"));
            assert_eq!(
                serde_json::from_str::<State>(&format!("{name:?}")).unwrap(),
                state
            );
        }
        let reason = serde_json::to_string(&Reason::ClosedByOperator).unwrap();
        assert_eq!(reason, r#""closed_by_operator""#);
        assert_eq!(
            QueueMethod::parse("passthrough"),
            Some(QueueMethod::Passthrough)
        );
        let error = serde_json::from_str::<QueueMethod>(r#""lifo""#).unwrap_err();
        assert!(error.to_string().contains("fifo"), "{error}");
    }

    #[test]
    fn a_status_reads_back_as_written() {
        let line = LineSummary {
            waiting: 3,
            rate_per_s: Some(1.0),
            tick_at: Some(1_700_000_000_000),
            ..LineSummary::default()
        };
        let room = RoomId::parse("sale").unwrap();
        let credentials = Credentials::from_secret("status test secret");
        let facts = RoomFacts {
            target_url: "/".into(),
            ..RoomFacts::default()
        };
        let write = |state| {
            let input = StatusInput {
                room: &room,
                ticket: "t.k.n",
                ret: TicketReturn::ReadFromTicket,
                visitor: VisitorId(7),
                state,
                line: &line,
                facts: &facts,
                priority: None,
                notify: None,
            };
            Status::build(input, &credentials).to_json()
        };
        let written = write(PlaceState::Waiting {
            order: crate::words::Order::Joined(4),
            position: 2,
        });
        let read: Status = serde_json::from_str(&written).unwrap();
        assert_eq!(
            (read.kind, read.room, read.state, read.ticket),
            ("status", "sale", State::Waiting, "t.k.n")
        );
        assert_eq!(
            (read.position, read.waiting, read.eta_seconds),
            (Some(2), 3, Some(2))
        );
        assert_eq!(read.tick_at_ms, Some(1_700_000_000_000));
        let admitted = write(PlaceState::Admitted {
            admitted_at: 1_700_000_000_000,
            expires_at: 1_700_000_600_000,
        });
        let read: Status = serde_json::from_str(&admitted).unwrap();
        assert_eq!(read.state, State::Admitted);
        let pass = read.pass.expect("an admitted status carries a pass");
        assert_eq!(read.redirect_url, Some(format!("/?wr_pass={pass}")));
        for other in [
            r#"{"type":"pong"}"#,
            &written.replace(r#""waiting","ticket""#, r#""lost","ticket""#),
        ] {
            assert!(serde_json::from_str::<Status>(other).is_err(), "{other}");
        }
    }
}
