//! A pass: what it says, and the one check of it, for every route and proxy.

use std::future::{Ready, ready};

use std::borrow::Cow;

use actix_web::cookie::{Cookie, SameSite, time::Duration as CookieDuration};
use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};
use futures_util::future::LocalBoxFuture;

use super::room::Room;
use super::ticket::ticket_cookie_name;
use super::{bearer, part, part_data};
use crate::http::error::{ApiError, ErrorCode};
use crate::http::state::{AdminAccess, TokenHolder};
use crate::live::hub::Hub;
use crate::store::{Store, StoreError, StoreExt};
use crate::words::clock::Clock;
use crate::words::credentials::{CredentialError, Credentials, PassClaims};
use crate::words::{PlaceState, RoomId, VisitorId};

pub const PASS_COOKIE: &str = "wr_pass";

/// The `wr_pass` cookie, for as long as the pass has left: HttpOnly, on
/// the whole site, sent on top-level navigations from elsewhere (the
/// waiting room's redirect) but not on other sites' requests.
pub fn pass_cookie<'c>(pass: impl Into<Cow<'c, str>>, seconds_left: u64) -> Cookie<'c> {
    Cookie::build(PASS_COOKIE, pass)
        .path("/")
        .http_only(true)
        .same_site(SameSite::Lax)
        .max_age(CookieDuration::seconds(seconds_left as i64))
        .finish()
}

/// The pass a request carries: the Bearer token, or the `wr_pass` cookie.
pub fn presented_pass(req: &HttpRequest) -> Option<String> {
    bearer(req)
        .map(str::to_string)
        .or_else(|| req.cookie(PASS_COOKIE).map(|c| c.value().to_string()))
}

/// The header an app presents the pass in when its `Authorization` carries
/// credentials of its own.
const PASS_HEADER: &str = "X-Waitroom-Pass";

/// The pass a `/api/verify` or `/api/gate` call presents:
///
/// 1. `X-Waitroom-Pass`, whatever else is sent: the header exists for an
///    app whose `Authorization` is its own, so nothing else outranks it.
/// 2. The `wr_pass` cookie, when the Bearer is not a pass: one of the
///    protected site's origin tokens (verify is open to anyone, so the token
///    changes nothing), or a token our keys did not sign, such as an app's
///    own session token, which must not hide the visitor's cookie.
/// 3. The Bearer. One that is not a pass, with no cookie beside it, is still
///    what the caller presented as a pass, and is refused as `invalid_pass`
///    (not `missing_pass`), as it always was; an origin token never is (no
///    cookie beside it: no pass was sent).
/// 4. The cookie.
///
/// "A pass" is anything one of our keys signed (the current secret's or,
/// during a rotation, the previous one's), whatever its room or expiry: a
/// token of someone else's cannot carry that signature, and a pass of ours
/// that is expired or of another room was presented as a pass, so it is
/// judged and refused as one rather than swapped for the cookie. The check
/// is one Ed25519 verification, made only when both a Bearer and the
/// cookie are sent.
pub fn presented_pass_to_verify(req: &HttpRequest) -> Option<String> {
    if let Some(pass) = pass_header(req) {
        return Some(pass);
    }
    let cookie = || req.cookie(PASS_COOKIE).map(|c| c.value().to_string());
    let Some(token) = bearer(req) else {
        return cookie();
    };
    let origin_token = matches!(
        part::<AdminAccess>(req).holder_of(token),
        Some(TokenHolder::Origin(_))
    );
    if origin_token {
        return cookie();
    }
    if let Some(cookie) = cookie()
        && part::<Credentials>(req).read_pass(token, None, 0).is_err()
    {
        return Some(cookie);
    }
    Some(token.to_string())
}

/// The pass in `X-Waitroom-Pass`, if the header is there and not empty (an
/// app that has no pass yet may send it empty). A value that is not text is
/// kept as it reads, to be refused as `invalid_pass`.
fn pass_header(req: &HttpRequest) -> Option<String> {
    let value = req.headers().get(PASS_HEADER)?;
    let pass = String::from_utf8_lossy(value.as_bytes()).trim().to_string();
    (!pass.is_empty()).then_some(pass)
}

pub fn pass_error(error: CredentialError) -> ApiError {
    match error {
        CredentialError::Expired => {
            ApiError::unauthorized(ErrorCode::PassExpired, "the pass has expired")
        }
        CredentialError::WrongRoom => {
            ApiError::unauthorized(ErrorCode::InvalidPass, "the pass is not for this room")
        }
        CredentialError::Invalid | CredentialError::NotYetValid => {
            ApiError::unauthorized(ErrorCode::InvalidPass, "the pass is not valid")
        }
    }
}

fn missing_pass() -> ApiError {
    ApiError::unauthorized(
        ErrorCode::MissingPass,
        "send your pass as a Bearer token or wr_pass cookie",
    )
}

/// Whether a pass past its `exp` may still act.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Valid now: `/api/verify`, claims, the sale page's cookie.
    Enforced,
    /// Confirming or releasing a hold made while the pass was valid: the
    /// hold has an expiry of its own. Everything else is still checked.
    Ignored,
}

/// Why a pass was refused.
#[derive(Debug)]
pub enum PassRefusal {
    /// Signature, room or expiry.
    Credential(CredentialError),
    /// Given up with `leave`, replaced by a later admission, or issued by a
    /// room that has since been closed and created again.
    Revoked,
    /// The room is closed.
    RoomClosed(RoomId),
    /// No such room in the store.
    RoomNotFound(RoomId),
    Store(StoreError),
}

impl PassRefusal {
    /// The answer to the visitor (the sale): a closed room is 409 `room_closed`.
    pub fn into_api_error(self) -> ApiError {
        match self {
            PassRefusal::Credential(error) => pass_error(error),
            PassRefusal::Revoked => revoked(),
            PassRefusal::RoomClosed(room) => ApiError::Conflict {
                code: ErrorCode::RoomClosed,
                message: format!("room {:?} is closed: its sale is over", room.as_str()),
            },
            PassRefusal::RoomNotFound(room) => StoreError::RoomNotFound(room).into(),
            PassRefusal::Store(error) => error.into(),
        }
    }

    /// The answer to a proxy (`/api/verify`): every refusal is a 401, which
    /// nginx's `auth_request` turns into its `error_page 401`.
    pub fn into_verify_error(self) -> ApiError {
        match self {
            PassRefusal::RoomClosed(room) => ApiError::unauthorized(
                ErrorCode::RoomClosed,
                format!(
                    "room {:?} is closed: its passes no longer count",
                    room.as_str()
                ),
            ),
            PassRefusal::RoomNotFound(room) => ApiError::unauthorized(
                ErrorCode::RoomNotFound,
                format!("there is no room {:?}", room.as_str()),
            ),
            other => other.into_api_error(),
        }
    }
}

fn revoked() -> ApiError {
    ApiError::unauthorized(
        ErrorCode::PassRevoked,
        "the pass was given up, revoked, reclaimed unused, or replaced",
    )
}

/// What the one check of a pass reads: the keys, the clock and the store.
/// An extractor, for routes that check a pass other than their own
/// credential (`/api/verify`, the sale page's link).
pub struct PassChecker {
    credentials: web::Data<Credentials>,
    clock: web::Data<dyn Clock>,
    store: web::Data<dyn Store>,
}

impl PassChecker {
    fn of(req: &HttpRequest) -> Self {
        Self {
            credentials: part_data(req),
            clock: part_data(req),
            store: part_data(req),
        }
    }
}

impl FromRequest for PassChecker {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(Ok(PassChecker::of(req)))
    }
}

/// The one check of a pass, for `/api/verify`, the sale and the sale page
/// alike (a proxy's question through `check_pass_for_proxy`), so a pass
/// means the same thing everywhere: the signature, the
/// room and (with `Expiry::Enforced`) the expiry, then the store: the
/// visitor's place in that room must be the very admission the pass was
/// issued for (`Admitted` with the same expiry). So a pass given up with
/// `leave`, replaced by a later admission, of a closed room, or of a room
/// since created again under the same id is refused on every node at once.
///
/// With `Expiry::Ignored`, a pass whose expiry has passed is accepted while
/// the store has forgotten its visitor (which is what a pass running out
/// does), never once the visitor left or came back to the line. What a
/// predecessor room sold is wiped when its id is created again, so such a
/// pass names nothing of it.
pub async fn check_pass(
    checker: &PassChecker,
    room: &RoomId,
    pass: &str,
    expiry: Expiry,
) -> Result<Pass, PassRefusal> {
    let pass = read_signed_pass(checker, room, pass, expiry)?;
    confirm_with_store(checker, &pass, expiry).await?;
    Ok(pass)
}

/// How a proxy's question about a pass was answered.
#[derive(Debug, PartialEq, Eq)]
pub enum Verified {
    /// Every check of `check_pass`, the store's included.
    Fully,
    /// The store could not be reached: by signature, room and expiry alone.
    BySignatureAlone,
}

/// The check a proxy's question gets (`/api/verify`, and any gate that
/// answers for the protected site): `check_pass`, except that while the
/// store is unreachable a pass is judged by its signature, room and expiry
/// alone, so admitted visitors keep their access during the outage (a
/// revocation made meanwhile cannot be seen). A forged, another room's or
/// expired pass is refused all the same. The arrival it could not record is
/// noted, so that the room's arrival grace is counted again from the
/// store's return.
pub async fn check_pass_for_proxy(
    checker: &PassChecker,
    hub: &Hub,
    room: &RoomId,
    pass: &str,
) -> Result<(Pass, Verified), PassRefusal> {
    let pass = read_signed_pass(checker, room, pass, Expiry::Enforced)?;
    match confirm_with_store(checker, &pass, Expiry::Enforced).await {
        Ok(()) => Ok((pass, Verified::Fully)),
        Err(PassRefusal::Store(StoreError::Unavailable(reason))) => {
            hub.arrival_gaps().failed_in(room);
            metrics::counter!("waitroom_verified_by_signature_total").increment(1);
            tracing::debug!(%room, %reason, "store unreachable: pass verified by its signature alone");
            Ok((pass, Verified::BySignatureAlone))
        }
        Err(refusal) => Err(refusal),
    }
}

/// What a pass says, if it is ours (current secret, or the previous one
/// during a rotation), for this room, and (with `Expiry::Enforced`)
/// unexpired: no store involved.
fn read_signed_pass(
    checker: &PassChecker,
    room: &RoomId,
    pass: &str,
    expiry: Expiry,
) -> Result<Pass, PassRefusal> {
    let claims = match expiry {
        Expiry::Enforced => checker
            .credentials
            .read_pass(pass, Some(room), checker.clock.now_ms()),
        Expiry::Ignored => checker.credentials.pass_holder(pass, room),
    }
    .map_err(PassRefusal::Credential)?;
    let visitor: VisitorId = claims
        .sub
        .parse()
        .map_err(|_| PassRefusal::Credential(CredentialError::Invalid))?;
    Ok(Pass {
        room: room.clone(),
        visitor,
        claims,
    })
}

/// The store's half of `check_pass`: the visitor still holds the very
/// admission the pass was issued for.
async fn confirm_with_store(
    checker: &PassChecker,
    pass: &Pass,
    expiry: Expiry,
) -> Result<(), PassRefusal> {
    let room = &pass.room;
    // Read through `arrive`: a pass checked here has reached the protected
    // site, so it is not reclaimed as a no-show (`arrival_grace_s`), and
    // its session (`session_idle_s`) lasts on.
    let exp = pass.claims.exp;
    let place = match checker.store.arrive(room, pass.visitor, exp).await {
        Ok(place) => place.state,
        Err(StoreError::RoomNotFound(room)) => return Err(PassRefusal::RoomNotFound(room)),
        Err(StoreError::RoomClosed(room)) => return Err(PassRefusal::RoomClosed(room)),
        Err(error) => return Err(PassRefusal::Store(error)),
    };
    let ran_out = exp * 1000 <= checker.clock.now_ms();
    let accepted = match place {
        PlaceState::Admitted { expires_at, .. } => expires_at / 1000 == exp,
        PlaceState::Closed => return Err(PassRefusal::RoomClosed(room.clone())),
        // This pass's session lapsed: expired, though its `exp` has not
        // come (a hold made in time may still be confirmed or released).
        PlaceState::Lapsed { expires_at } if expires_at / 1000 == exp => match expiry {
            Expiry::Ignored => true,
            Expiry::Enforced => {
                return Err(PassRefusal::Credential(CredentialError::Expired));
            }
        },
        // The store forgets a visitor whose pass ran out; a pass still
        // running whose visitor it does not know is from another life of
        // the room.
        PlaceState::Expired | PlaceState::Away | PlaceState::Lapsed { .. } => {
            ran_out && expiry == Expiry::Ignored
        }
        PlaceState::PreQueue { .. } | PlaceState::Waiting { .. } | PlaceState::Left => false,
    };
    if accepted {
        Ok(())
    } else {
        Err(PassRefusal::Revoked)
    }
}

/// How a pass offered in a link is judged: as the sale judges a pass, or
/// as a proxy's question is (by signature alone while the store is down).
#[derive(Clone, Copy)]
pub enum LinkJudge<'h> {
    Sale,
    Proxy(&'h Hub),
}

/// What to make of a pass offered in a link (`?wr_pass=`, the waiting
/// room's redirect).
#[derive(Debug)]
pub enum LinkedPass {
    /// It may become the browser's `wr_pass` cookie.
    Take(Pass),
    /// It is valid, but would displace the visitor's own: the browser's
    /// ticket for this room names another visitor, or the browser already
    /// holds a valid pass for this room. Left where it is, so a link can
    /// never hand a visitor someone else's pass in place of their own.
    Keep,
    /// Not a pass of this room now.
    Refused(PassRefusal),
}

/// Judges a pass offered in a link against what the browser already holds
/// (see [`LinkedPass`]). Every place that takes `wr_pass` from a URL asks
/// this, so none of them can swap a visitor's pass for another's.
pub async fn judge_linked_pass(
    req: &HttpRequest,
    checker: &PassChecker,
    judge: LinkJudge<'_>,
    room: &RoomId,
    offered: &str,
) -> LinkedPass {
    let check = |pass: &str| {
        let pass = pass.to_string();
        async move {
            match judge {
                LinkJudge::Sale => check_pass(checker, room, &pass, Expiry::Enforced).await,
                LinkJudge::Proxy(hub) => check_pass_for_proxy(checker, hub, room, &pass)
                    .await
                    .map(|(pass, _)| pass),
            }
        }
    };
    let pass = match check(offered).await {
        Ok(pass) => pass,
        Err(refusal) => return LinkedPass::Refused(refusal),
    };
    let own_ticket = req
        .cookie(&ticket_cookie_name(room))
        .and_then(|c| checker.credentials.ticket_holder(room, c.value()).ok());
    if own_ticket.is_some_and(|visitor| visitor != pass.visitor) {
        return LinkedPass::Keep;
    }
    if let Some(current) = req.cookie(PASS_COOKIE)
        && current.value() != offered
    {
        match check(current.value()).await {
            Ok(_) => return LinkedPass::Keep,
            Err(PassRefusal::Store(error)) => {
                return LinkedPass::Refused(PassRefusal::Store(error));
            }
            Err(_) => {}
        }
    }
    LinkedPass::Take(pass)
}

impl Pass {
    /// Seconds until the pass's `exp`, from `now`.
    pub fn seconds_left(&self, now: crate::words::clock::Millis) -> u64 {
        (self.claims.exp * 1000).saturating_sub(now) / 1000
    }
}

/// A pass for the path's room, valid now (see `check_pass`).
#[derive(Debug, Clone)]
pub struct Pass {
    pub room: RoomId,
    pub visitor: VisitorId,
    pub claims: PassClaims,
}

/// A pass for the path's room that passes `check_pass` with its expiry
/// ignored: a hold made in time may be confirmed or released after the pass
/// runs out (the hold has an expiry of its own), but not with a pass given
/// up, replaced, or of a closed room.
#[derive(Debug, Clone)]
pub struct PassHolder(pub Pass);

impl Pass {
    async fn of(req: HttpRequest, expiry: Expiry) -> Result<Self, ApiError> {
        let room = Room::of(&req)?;
        let pass = presented_pass(&req).ok_or_else(missing_pass)?;
        check_pass(&PassChecker::of(&req), &room, &pass, expiry)
            .await
            .map_err(PassRefusal::into_api_error)
    }
}

impl FromRequest for Pass {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        Box::pin(Pass::of(req.clone(), Expiry::Enforced))
    }
}

/// The pass of whoever looks at a room's sale (`GET …/sale`, public):
/// none when none is presented, or when the one presented is another
/// room's (the `wr_pass` cookie is the site's, and its holder may look at
/// any sale). Any other refusal is answered as the sale's other routes
/// answer it (a pass `/api/verify` refuses is refused here too, design
/// rule 11), where `Option<PassHolder>` would have shown the public view
/// as if no pass had been sent. As `PassHolder`, its expiry is ignored: a
/// hold made in time is still the holder's to see.
#[derive(Debug, Clone)]
pub struct SaleViewer(pub Option<Pass>);

impl FromRequest for SaleViewer {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let room = Room::of(&req)?;
            let Some(pass) = presented_pass(&req) else {
                return Ok(SaleViewer(None));
            };
            match check_pass(&PassChecker::of(&req), &room, &pass, Expiry::Ignored).await {
                Ok(pass) => Ok(SaleViewer(Some(pass))),
                Err(PassRefusal::Credential(CredentialError::WrongRoom)) => Ok(SaleViewer(None)),
                Err(refusal) => Err(refusal.into_api_error()),
            }
        })
    }
}

impl FromRequest for PassHolder {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move { Pass::of(req, Expiry::Ignored).await.map(PassHolder) })
    }
}
