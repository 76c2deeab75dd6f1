//! What a store operation is asked and answers, in words every store and
//! the rules they implement share: a join's options, what a tick did, and
//! why an operation was refused ([`StoreError`]).

use std::net::IpAddr;

use crate::words::RoomId;
use crate::words::clock::Millis;
use crate::words::codes::CodeHash;
use crate::words::config::ConfigError;
use crate::words::join_limit::JoinLimit;
use crate::words::pow::Solved;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("room {0} not found")]
    RoomNotFound(RoomId),
    /// No report is kept of a room made under this id at that time.
    #[error("no report of room {0} made then")]
    ReportNotFound(RoomId),
    #[error("room {0} already exists")]
    RoomExists(RoomId),
    #[error("room {0} is closed")]
    RoomClosed(RoomId),
    /// A config or a change to it that breaks a rule, naming the field.
    #[error("invalid config: {0}")]
    InvalidConfig(ConfigError),
    /// The room changed between a read and the write that depended on it,
    /// more often than retries could absorb.
    #[error("room {0} was changed concurrently")]
    Conflict(RoomId),
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// A join that would create a new place, refused by the per-address
    /// join limit, or a join whose code would be looked at past its
    /// address's code guesses; nothing changed but the room's
    /// `turned_away` count.
    #[error("too many joins from this address; try again in {retry_after_s} s")]
    RateLimited { retry_after_s: u64 },
    /// Past the client block's wrong logins (`words::login_limit`): every
    /// attempt is refused until the budget has room, the right token too.
    #[error("too many wrong tokens from this address; try again in {retry_after_s} s")]
    TooManyAttempts { retry_after_s: u64 },
    /// The room asks new places for proof of work, and the join had none.
    #[error("this room asks for a solved challenge")]
    PowRequired,
    /// The solution was used before (on any node).
    #[error("this solution was used already")]
    PowReused,
    /// The solution's challenge is easier than the room asks for now (it
    /// was made before the room's `pow_difficulty` went up).
    #[error("this solution is easier than the room asks for now")]
    PowTooEasy,
    /// The room takes no new arrivals (`reject`, or past `closes_at`).
    #[error("this room takes no new arrivals")]
    NotAccepting,
    /// The room has no `opens_at`, so no draw.
    #[error("this room has no scheduled opening, so no draw")]
    NoDraw,
    /// The draw's order is revealed at the opening, not before.
    #[error("the draw happens at the opening")]
    NotDrawn,
    /// A node joined a pre-queue without the room's current draw seed; it
    /// reads the seed and joins again (never seen past the store).
    #[error("the room's draw seed changed")]
    DrawSeed,
    /// An operation met a schedule entry due and changed nothing; the node
    /// applies the entries and runs it again (never seen past the store).
    #[error("a schedule entry of room {0} is due")]
    ScheduleDue(RoomId),
    /// Only a waiting visitor may ask to be notified.
    #[error("only a visitor waiting in line can ask to be notified")]
    NotWaiting,
    /// Past `--notify-per-ip` places of the client's address holding a
    /// request to be notified.
    #[error("too many places from this address wait to be notified")]
    TooManyNotifications,
    /// The notification's resume link was used before (by another browser).
    #[error("this link was used already")]
    ResumeUsed,
    /// The room takes known users only, and the join named none.
    #[error("this room admits signed-in users only")]
    UserRequired,
    /// The room takes code holders only, and the join had no code.
    #[error("this room admits code holders only")]
    CodeRequired,
    /// No group holds the code (or its group was removed).
    #[error("this code is not valid here")]
    InvalidCode,
    /// Every use of the code was spent.
    #[error("this code was used already")]
    CodeUsed,
    /// A group of that name exists in the room.
    #[error("group {0} exists")]
    GroupExists(String),
    /// No group of that name in the room.
    #[error("no group {0}")]
    GroupNotFound(String),
    /// The room holds as many groups as it may.
    #[error("a room holds up to {0} groups of codes")]
    TooManyGroups(usize),
    /// An answer no version of the store gives: a bug, not an outage.
    #[error("unexpected store answer: {0}")]
    Unexpected(String),
}

/// How a join is made, beyond who joins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JoinOptions {
    /// Limits the new places the client's address may take (an existing
    /// place is returned whatever the limit says).
    pub limit: Option<JoinLimit>,
    /// The user the room's site vouched for (a user token's `sub`): a user
    /// holding a place gets that place back, whichever visitor asks.
    pub user: Option<String>,
    /// A solved proof-of-work challenge (checked by the caller); the store
    /// accepts each once, on every node, and only for a new place.
    pub pow: Option<Solved>,
    /// The client's address (as the join limit reads it), matched against
    /// the room's `bypass_networks` in the join's own step.
    pub address: Option<IpAddr>,
    /// A priority code (its hash): checked, and spent if the join makes a
    /// new place, in the join's atomic step.
    pub code: Option<CodeHash>,
    /// The client's budget of wrong codes a minute
    /// (`--code-guesses-per-ip`), spent by a code refused as unknown or
    /// used; past it a code is not looked at. Read only where the join's
    /// code is, so a join without one costs nothing more.
    pub code_guesses: Option<JoinLimit>,
    /// The visitor was made for this join (the client brought no ticket):
    /// no store holds anything of theirs yet, so a store may skip looking
    /// for their place. Set only on a visitor id no earlier join carried.
    pub fresh: bool,
}

/// Why a pass is taken back, which a room's report counts apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassTakenBack {
    /// By the protected site or an operator (`passes/revoke`): `revoked`.
    Revoked,
    /// By its holder (`leave` with the pass): `left`, as a place given up is.
    GivenUp,
}

impl PassTakenBack {
    /// The report's count it adds to (`ReportCounts`' field, and the
    /// ledger's in Redis).
    pub fn counted_as(self) -> &'static str {
        match self {
            PassTakenBack::Revoked => "revoked",
            PassTakenBack::GivenUp => "left",
        }
    }
}

/// What asking a room for its tick found: whether one ran and when the next
/// is due, so a promoter sleeps until then instead of asking again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tick {
    /// What the tick did; `None` when none was due (another node ran it).
    pub ran: Option<TickReport>,
    /// Someone waits or holds a pass: the room needs its ticks.
    pub busy: bool,
    /// How long until the next tick is due, by the store's clock.
    pub next_due_in_ms: Millis,
    /// How long until the schedule's next entry falls due (none without
    /// one, or while an operator's pause holds it): an idle room is asked
    /// for its tick then too, so the entry applies at its time.
    pub change_in_ms: Option<Millis>,
    /// How many times the room's arrivals were resumed after an outage
    /// (`op::ResumeArrivals`), as of this tick.
    pub arrival_resumptions: u64,
    /// Events in the room's outbox, not yet settled: the node's sender
    /// looks at the room while there are some (`live::callbacks`).
    pub outbox: u64,
    /// The room as this answer found it, whether a tick ran or not: every
    /// node asks for a busy room's ticks, so every node's per-room metrics
    /// agree to within a tick, whichever node's tick ran.
    pub figures: RoomFigures,
}

/// A room's figures for the metrics, read in the tick's atomic step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoomFigures {
    pub waiting: u64,
    pub active: u64,
    pub max_active: Option<u64>,
    pub paused: bool,
    /// Past `opens_at` (or without one): before it, those waiting are a
    /// pre-queue that nobody is admitted from, by design.
    pub opened: bool,
    /// The estimated wait the page shows the last in line
    /// (`LineSummary::eta_seconds` of `waiting`); none while paused or
    /// before any rate can be said.
    pub tail_eta_s: Option<u64>,
    /// Admitted in the last minute, as the room's stats count them (the
    /// admin page's chart and the history each node keeps of it).
    pub admitted_last_minute: u64,
    /// Sessions that lapsed for want of use, ever (the room's
    /// `sessions_lapsed`).
    pub sessions_lapsed: u64,
    /// The rate the ticks admit at: `admit_per_tick`, or autotune's.
    pub admit_per_tick_effective: u32,
}

/// What a due tick did, for the promoter's metrics and logs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TickReport {
    pub admitted: u64,
    /// Each admission's wait (ms) from joining, or the opening, as the
    /// room's report counts it: the node whose call admitted them records
    /// them in `waitroom_wait_seconds`, so a sum over nodes counts each once.
    pub waits_ms: Vec<crate::words::clock::Millis>,
    pub abandoned: u64,
    /// Passes reclaimed unused (`arrival_grace_s`).
    pub no_shows: u64,
    pub waiting: u64,
    pub active: u64,
    /// The room has autotune and a line, and this tick's node takes its
    /// health sample (one a second per room, whichever node ticks).
    pub probe: Option<crate::words::autotune::HealthCheck>,
    /// Autotune changed the rate in this tick (counted once: by the node
    /// whose call ran it).
    pub tuned: Option<crate::words::autotune::Direction>,
}
