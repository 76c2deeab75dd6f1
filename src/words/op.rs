//! Every store operation as a value: a type per operation holding what it
//! is asked, with the type of its answer ([`Operation::Answer`]) and the
//! name the metrics and logs give it ([`Operation::NAME`]); the rooms'
//! operations and the sale's, each list with the enums of any of its
//! operations and any of its answers.
//!
//! A store runs any of them through one method (`Store::apply`,
//! `SaleStore::apply`, typed by `StoreExt::run` and `SaleStoreExt::run`),
//! so what wraps every call (measuring, a test's cut cable) wraps it once,
//! and a store says how it runs each operation by implementing [`Handle`]
//! for it: [`Handles`] and [`HandlesSale`] ask for all of them, so a store
//! that misses one does not compile. Adding an operation is one entry in a
//! list below, a rule in the model, and the store's way to run it (the
//! memory store's call to the model; the Redis store's script).
//!
//! A room's config and its info are boxed where they travel: the enums are
//! as large as their largest operation and answer, and every call's future
//! carries both, so the rare calls that hold a config (400 bytes, its info
//! 600) would make every join's futures too large for the allocator's fast
//! path (glibc's per-thread cache ends at 1 KiB): 64 joins at once cost
//! the node 1.2 times the CPU each (BENCHMARKS.md, issue 42).

use std::future::Future;

use crate::words::autotune::Failure;
use crate::words::clock::Millis;
use crate::words::codes::{GroupSummary, NewGroup};
use crate::words::draw::{DrawKey, EntryId};
use crate::words::join_limit::ClientBlock;
use crate::words::login_limit::Attempt;
use crate::words::notify::{Ask, EventKind, OutboxEvent};
use crate::words::operations::{JoinOptions, PassTakenBack, StoreError, Tick};
use crate::words::report::{Report, ReportEntry};
use crate::words::room_table::{Applied, RoomTable};
use crate::words::sale::{Claim, SaleConfig, SaleError, SaleView, Stock, Want};
use crate::words::{ConfigPatch, Place, RoomConfig, RoomId, RoomInfo, VisitorId};

/// One store operation: what it answers, how it is refused, and its name
/// in the metrics (`waitroom_store_op_seconds{op}`) and logs.
pub trait Operation: Into<Self::Any> + Send + 'static {
    type Answer: Send + 'static;
    type Error;
    /// Any operation of its list, and any answer.
    type Any;
    type AnyAnswer;
    const NAME: &'static str;
    /// This operation's answer out of the answer of any operation; `None`
    /// when a store answered another operation (a bug in that store).
    fn answer(any: Self::AnyAnswer) -> Option<Self::Answer>;
}

/// How a store runs operation `O`: one atomic step.
pub trait Handle<O: Operation> {
    fn handle(&self, op: O) -> impl Future<Output = Result<O::Answer, O::Error>> + Send;
}

/// Declares a list of operations: for each, its type, its answer and its
/// name; the enums of any operation and any answer of the list; and the
/// trait of a store that runs them all.
macro_rules! operations {
    (
        $(#[$any_doc:meta])*
        any: $any:ident, answer: $any_answer:ident, error: $error:ty, handles: $handles:ident;
        $(
            $(#[$doc:meta])*
            $name:literal => $op:ident { $($(#[$field_doc:meta])* $field:ident: $ty:ty),* $(,)? } -> $answer:ty;
        )*
    ) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone)]
            pub struct $op { $($(#[$field_doc])* pub $field: $ty),* }

            impl Operation for $op {
                type Answer = $answer;
                type Error = $error;
                type Any = $any;
                type AnyAnswer = $any_answer;
                const NAME: &'static str = $name;
                fn answer(any: $any_answer) -> Option<$answer> {
                    match any {
                        $any_answer::$op(answer) => Some(answer),
                        #[allow(unreachable_patterns)]
                        _ => None,
                    }
                }
            }

            impl From<$op> for $any {
                fn from(op: $op) -> $any {
                    $any::$op(op)
                }
            }
        )*

        $(#[$any_doc])*
        #[derive(Debug, Clone)]
        pub enum $any { $($op($op)),* }

        /// Any answer of the operations of [`
        #[doc = stringify!($any)]
        /// `].
        #[derive(Debug)]
        pub enum $any_answer { $($op($answer)),* }

        impl $any {
            /// The operation's name ([`Operation::NAME`]).
            pub fn name(&self) -> &'static str {
                match self { $($any::$op(_) => $name),* }
            }

            /// Runs the operation on `store`, in the way the store runs it.
            pub async fn run_on<S: $handles + Sync>(self, store: &S) -> Result<$any_answer, $error> {
                match self { $($any::$op(op) => store.handle(op).await.map($any_answer::$op)),* }
            }
        }

        /// A store that runs every operation of [`
        #[doc = stringify!($any)]
        /// `].
        pub trait $handles: $(Handle<$op> +)* {}
        impl<S: $(Handle<$op> +)*> $handles for S {}
    };
}

operations! {
    /// Any operation on the rooms.
    any: Op, answer: Answer, error: StoreError, handles: Handles;

    /// Creates a room; `RoomExists` if an open one has its id.
    "create_room" => CreateRoom { room: RoomId, config: Box<RoomConfig> } -> Box<RoomInfo>;
    /// Changes an open room's config (the fields the patch names).
    "configure" => Configure { room: RoomId, patch: ConfigPatch } -> Box<RoomInfo>;
    /// Applies a table of the rooms file, in one atomic step: a room
    /// missing (or closed under another table) is created from it; an open
    /// room under another table (or none) takes the fields it names, as
    /// `Configure` would; a room whose last table was this one is left as
    /// it is, open or closed. However many nodes apply it at once, it is
    /// applied once.
    "apply_table" => ApplyTable { table: RoomTable } -> Applied;
    /// Closes a room: every visitor's state becomes `closed`; its report
    /// is kept, with `sale`, the room's sale as the report shows it (JSON,
    /// read by the caller just before: the sale store is another).
    "close_room" => CloseRoom { room: RoomId, sale: Option<String> } -> ();
    /// An open room with its live stats.
    "room" => ReadRoom { room: RoomId } -> Box<RoomInfo>;
    /// Every open room with its live stats, by id.
    "rooms" => ListRooms {} -> Vec<RoomInfo>;
    /// A room's report (`words::report`): of the room made at `created_at`
    /// (open, or closed and still kept), or without it of the room under
    /// this id now (or closed last). `ReportNotFound` for a `created_at`
    /// that made no room kept.
    "report" => ReadReport { room: RoomId, created_at: Option<Millis> } -> Box<Report>;
    /// Every report kept: the open rooms' and the closed ones'.
    "reports" => ListReports {} -> Vec<ReportEntry>;
    /// Ids of the open rooms, for the promoter.
    "room_ids" => RoomIds {} -> Vec<RoomId>;
    /// Joins, or returns the visitor's existing place: idempotent per
    /// visitor; the options' limits are checked in the same atomic step.
    "join" => Join { room: RoomId, visitor: VisitorId, options: JoinOptions } -> Place;
    /// The visitor's place now; counts as a sign of presence.
    "status" => Status { room: RoomId, visitor: VisitorId } -> Place;
    /// Several visitors' places, in their order, each read as `Status`
    /// reads one, in one atomic step: what a node reads for a batch of its
    /// sockets when it must read them all (the draw's positions, a resync).
    "places" => Places { room: RoomId, visitors: Vec<VisitorId> } -> Vec<Place>;
    /// Up to `limit` entrants after `after`, in drawn order; `NotDrawn`
    /// before the opening.
    "draw_entries" => DrawEntries {
        room: RoomId,
        after: Option<(DrawKey, EntryId)>,
        limit: usize,
    } -> Vec<(DrawKey, EntryId)>;
    /// Adds a group of priority codes to an open room; `GroupExists` if
    /// one of that name is there.
    "add_codes" => AddCodes { room: RoomId, group: NewGroup } -> GroupSummary;
    /// The room's groups of codes, by name (never the codes).
    "code_groups" => CodeGroups { room: RoomId } -> Vec<GroupSummary>;
    /// Removes a group: its unused codes stop working at once;
    /// `GroupNotFound` if there is none of that name.
    "remove_codes" => RemoveCodes { room: RoomId, group: String } -> ();
    /// The user (a user token's `sub`) whose place this visitor holds, if
    /// the visitor joined with one: their sale's limit counts per user.
    "user_of" => UserOf { room: RoomId, visitor: VisitorId } -> Option<String>;
    /// Gives up the place or the admitted slot.
    "leave" => Leave { room: RoomId, visitor: VisitorId } -> ();
    /// The visitor's place, read for `/api/verify`, the gate or the sale
    /// checking their pass (the one whose `exp` is `pass_exp_s`): an
    /// admitted visitor has arrived, so their pass is no longer reclaimed
    /// as a no-show, and with sessions on (`session_idle_s`) the call
    /// renews that pass's session, unless it lapsed already
    /// (`rules::passes::renewed_lapse`).
    "arrive" => Arrive { room: RoomId, visitor: VisitorId, pass_exp_s: u64 } -> Place;
    /// Arrivals could not be recorded for a while (the store was
    /// unreachable, so `/api/verify` let passes through on their signature
    /// alone): every admitted visitor not seen yet gets the room's whole
    /// `arrival_grace_s` again, counted from now (a later deadline stays),
    /// so nobody who arrived meanwhile is reclaimed as a no-show, and the
    /// room's count of resumptions goes up. Unless it went up since `seen`
    /// (the count the caller last saw in a tick): then another node resumed
    /// after the same outage, and nothing changes. Answers the count. One
    /// bounded step however many passes wait: the new deadline is written
    /// once, and the tick's no-show sweep moves each arrival to it, a slice
    /// a call.
    "resume_arrivals" => ResumeArrivals { room: RoomId, seen: Option<u64> } -> u64;
    /// Takes back the visitor's pass (only the admission whose pass has
    /// this `exp`, in seconds, if given); its slot is free at once, and a
    /// waiting place is left alone. Whether a pass was taken back.
    "revoke_pass" => RevokePass {
        room: RoomId,
        visitor: VisitorId,
        pass_exp_s: Option<u64>,
        why: PassTakenBack,
    } -> bool;
    /// Marks these visitors present (they hold a socket on some node).
    "touch" => Touch { room: RoomId, visitors: Vec<VisitorId> } -> ();
    /// Runs the room's tick if one is due at the store's time, and says
    /// when the next is due. Safe to run from every node at once: a due
    /// tick runs once. A closed room answers `RoomClosed`.
    "tick" => TickIfDue { room: RoomId } -> Tick;
    /// Tells the room's line what its sale has left (`stock_left` in every
    /// status); a sale sold out closes the line if the room says so. Every
    /// node's sockets hear it. Run by whichever node's tick ran.
    "announce_stock" => AnnounceStock { room: RoomId, stock: Stock } -> ();
    /// Keeps a health sample of the room's origin (autotune), taken by the
    /// node whose tick was handed the probe (`TickReport::probe`); the
    /// room keeps the last `autotune::SAMPLES_KEPT` of the current epoch,
    /// and none without autotune.
    "record_sample" => RecordSample {
        room: RoomId,
        /// The epoch of the probe (`HealthCheck::epoch`): a sample of one
        /// handed out before the rate last changed is dropped.
        epoch: u64,
        latency_ms: u64,
        failure: Option<Failure>,
    } -> ();
    /// Keeps the waiting visitor's request to be notified (api.md, "Step
    /// away"), in one atomic step with its limits (the join budget and
    /// `--notify-per-ip`), or with `None` drops it; the place after.
    /// `NotWaiting` for a visitor who does not wait.
    "notify" => Notify { room: RoomId, visitor: VisitorId, ask: Option<Box<Ask>> } -> Place;
    /// Spends the visitor's resume code of `kind` (a notification's link):
    /// the place, its visitor present; `ResumeUsed` if it was spent.
    "resume" => Resume { room: RoomId, visitor: VisitorId, kind: EventKind } -> Place;
    /// Up to `limit` events of the room's outbox for `consumer` (a node):
    /// new ones, then those whose holder has not held them for
    /// `takeover_ms` (it died), each with how to reach its visitor now. An
    /// event whose place has ended is settled instead (nobody to call).
    "claim_events" => ClaimEvents {
        room: RoomId,
        consumer: std::sync::Arc<str>,
        takeover_ms: u64,
        limit: usize,
    } -> Vec<OutboxEvent>;
    /// `consumer` is still at these events (retrying them): nobody takes
    /// them over for `takeover_ms` more. The entries still its own.
    "hold_events" => HoldEvents {
        room: RoomId,
        consumer: std::sync::Arc<str>,
        entries: Vec<String>,
    } -> Vec<String>;
    /// These events were delivered or given up; the push subscriptions of
    /// `push_gone` were answered 404 or 410 and are dropped.
    "settle_events" => SettleEvents {
        room: RoomId,
        entries: Vec<String>,
        push_gone: Vec<VisitorId>,
    } -> ();
    /// Is the store reachable?
    "ping" => Ping {} -> ();
    /// Ends an operator session on every node (logout), remembered until
    /// `until`, when the session would have ended anyway.
    "end_admin_session" => EndAdminSession { session: String, until: Millis } -> ();
    /// Was this operator session ended?
    "admin_session_ended" => AdminSessionEnded { session: String } -> bool;
    /// Counts an operator login attempt from `block` (an admin or origin
    /// token, on the API or the login form) against the lockout of
    /// `words::login_limit`, in one atomic step: a wrong token spends one
    /// of the block's 10 a minute; past them every attempt, the right
    /// token included, is refused with `TooManyAttempts` until the budget
    /// has room. On Redis one budget for every node; the memory store, one
    /// node, counts its own.
    "login_attempt" => LoginAttempt { block: ClientBlock, attempt: Attempt } -> ();
}

operations! {
    /// Any operation on a room's sale.
    any: SaleOp, answer: SaleAnswer, error: SaleError, handles: HandlesSale;

    /// Sets up (or replaces, claims and all) the room's sale.
    "sale_configure" => ConfigureSale { room: RoomId, config: SaleConfig } -> SaleView;
    /// The sale as anyone may see it.
    "sale_view" => ReadSale { room: RoomId } -> SaleView;
    /// What is free and how many holds are out, for the room's line.
    "sale_stock" => ReadStock { room: RoomId } -> Stock;
    /// One atomic step: the per-user limit, the stock or every seat, the
    /// hold. A repeated `idempotency_key` of the same visitor answers the
    /// first result. A visitor whose place is `user`'s (their pass came
    /// from a user token) counts against that user's limit, of every visit
    /// and device (`Buyer`), in the same step.
    "sale_claim" => MakeClaim {
        room: RoomId,
        visitor: VisitorId,
        user: Option<String>,
        want: Want,
        idempotency_key: Option<String>,
    } -> Claim;
    /// Confirms the visitor's held claim: an order.
    "sale_confirm" => ConfirmClaim { room: RoomId, visitor: VisitorId, claim_id: String } -> Claim;
    /// Gives the visitor's held claim back to stock.
    "sale_release" => ReleaseClaim { room: RoomId, visitor: VisitorId, claim_id: String } -> ();
    /// Gives every hold of the visitor back to stock (their pass was taken
    /// back, so they can no longer confirm it); how many. Orders stay.
    "sale_release_holds" => ReleaseHoldsOf { room: RoomId, visitor: VisitorId } -> u64;
    /// The visitor's held and confirmed claims.
    "sale_mine" => ClaimsOf { room: RoomId, visitor: VisitorId } -> Vec<Claim>;
    /// Confirmed claims in order of confirmation.
    "sale_orders" => Orders { room: RoomId } -> Vec<Claim>;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every call's futures carry its list's enums (module docs): an
    /// operation that holds something large boxes it, so that a join's
    /// futures stay within the allocator's fast path.
    #[test]
    fn any_operation_and_any_answer_stay_small() {
        for (name, size) in [
            ("Op", size_of::<Op>()),
            ("Answer", size_of::<Answer>()),
            ("SaleOp", size_of::<SaleOp>()),
            ("SaleAnswer", size_of::<SaleAnswer>()),
        ] {
            assert!(size <= 256, "{name} is {size} bytes: box its largest");
        }
    }
}
