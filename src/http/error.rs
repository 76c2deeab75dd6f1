//! The one place where failures become HTTP answers:
//! `{"error":{"code":"…","message":"…"}}` with the status api.md fixes.

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::{HttpResponse, ResponseError};

use crate::store::StoreError;
use crate::words::ConfigError;

crate::words::wire_enum! {
    /// Every `code` an error answer can carry (api.md lists them), each named
    /// once, in snake case on the wire.
    pub enum ErrorCode {
        AlreadyConfirmed,
        BodyTimeout,
        Draining,
        ClaimNotFound,
        ClaimReleased,
        CodeRequired,
        CodeUsed,
        EditConflict,
        FormRefused,
        GroupExists,
        GroupNotFound,
        HoldExpired,
        Internal,
        InvalidAdminToken,
        InvalidBody,
        InvalidClaim,
        InvalidCode,
        InvalidConfig,
        InvalidCsrfToken,
        InvalidForm,
        InvalidIdempotencyKey,
        InvalidJson,
        InvalidNotify,
        InvalidPass,
        InvalidPath,
        InvalidQuantity,
        InvalidQuery,
        InvalidResume,
        InvalidRevocation,
        InvalidRoom,
        InvalidSale,
        InvalidSeats,
        InvalidTicket,
        InvalidUserToken,
        InvalidVisitor,
        LimitReached,
        MethodNotAllowed,
        MissingAdminToken,
        MissingPass,
        MissingTicket,
        NoDraw,
        NotAWebsocket,
        NotDrawn,
        NotWaiting,
        NotFound,
        OriginNotAllowed,
        OriginTokenNotAllowed,
        PassExpired,
        PassRevoked,
        PlaceHeld,
        PayloadTooLarge,
        PowInvalid,
        PowRequired,
        PublicUrlUnknown,
        ReportNotFound,
        ResumeUsed,
        RateLimited,
        RoomClosed,
        RoomExists,
        RoomMismatch,
        RoomNotAccepting,
        RoomNotFound,
        RoomRequired,
        SaleNotFound,
        SeatTaken,
        SoldOut,
        StoreUnavailable,
        TaskFailed,
        TooManyAttempts,
        TooManyNotifications,
        TooManySockets,
        UnknownSeat,
        UnsupportedMediaType,
        UpgradeRefused,
        UserRequired,
        WrongKind,
    }
}

impl ErrorCode {
    /// The refusals of a join that asking again cannot change: the room,
    /// the code or the user must change first. The client module stops on
    /// them and tells its page why (`static/refusals.js`, written from
    /// this list: see [`refusals_js`]); on any other it backs off and asks
    /// again.
    pub const FINAL_FOR_A_JOIN: [ErrorCode; 9] = [
        ErrorCode::RoomNotAccepting,
        ErrorCode::CodeRequired,
        ErrorCode::InvalidCode,
        ErrorCode::CodeUsed,
        ErrorCode::UserRequired,
        ErrorCode::InvalidUserToken,
        ErrorCode::RoomNotFound,
        ErrorCode::NotFound,
        ErrorCode::RoomClosed,
    ];
}

/// `static/refusals.js`: the codes of [`ErrorCode::FINAL_FOR_A_JOIN`] for
/// the client module, kept equal to this by a test.
pub fn refusals_js() -> String {
    let codes: Vec<String> = ErrorCode::FINAL_FOR_A_JOIN
        .iter()
        .map(|code| format!("  '{code}'"))
        .collect();
    format!(
        "// Generated from src/http/error.rs (ErrorCode::FINAL_FOR_A_JOIN) by its\n\
         // test: do not edit. The refusals of a join that asking again cannot\n\
         // change: the client stops and tells its page why.\n\
         export const FINAL_REFUSALS = [\n{}\n];\n",
        codes.join(",\n")
    )
}

/// Every error answer's body: `{"error":{"code","message"}}`.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[schema(as = Error)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    pub code: ErrorCode,
    /// For people: what was wrong, and what to do.
    pub message: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("no room called {0:?}")]
    RoomNotFound(String),
    #[error("{message}")]
    BadRequest { code: ErrorCode, message: String },
    #[error("{message}")]
    Unauthorized { code: ErrorCode, message: String },
    #[error("{message}")]
    Conflict { code: ErrorCode, message: String },
    #[error("{message}")]
    Forbidden { code: ErrorCode, message: String },
    #[error("{0}")]
    NotFound(String),
    /// A 404 with a code of its own (`sale_not_found`, `claim_not_found`).
    #[error("{message}")]
    Absent { code: ErrorCode, message: String },
    #[error("{message}")]
    Gone { code: ErrorCode, message: String },
    /// A method no route on this path answers; `allowed` are those that do.
    #[error(
        "this path does not answer that method; it answers {}",
        method_list(allowed)
    )]
    MethodNotAllowed { allowed: Vec<Method> },
    /// A body in a media type the route does not read.
    #[error("{0}")]
    UnsupportedMediaType(&'static str),
    #[error("the request body is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("the request body took too long to arrive")]
    BodyTimeout,
    #[error("too many wrong tokens from this address; try again in {retry_after_s} s")]
    TooManyAttempts { retry_after_s: u64 },
    #[error("too many joins from this address; try again in {retry_after_s} s")]
    RateLimited { retry_after_s: u64 },
    #[error("the waiting room's store is unavailable; try again in a few seconds")]
    StoreUnavailable,
    #[error(
        "this node holds all the live connections it can; poll the status instead, or try again later"
    )]
    TooManySockets,
    /// A form of the admin page that was not read: the operator is sent
    /// back to the page, which says why in words of its own.
    #[error("the admin form was refused: {0:?}")]
    AdminFormRefused(FormTrouble),
    /// Something that should not happen did; logged where it is answered.
    #[error("something went wrong on our side; try again")]
    Internal,
}

/// Why a form of the admin page was not read; the page says it in the
/// operator's language (`admin.refused_…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::EnumString, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum FormTrouble {
    /// The form's CSRF token is not its session's (an old tab).
    FormExpired,
    /// The form's fields could not be read.
    FormUnreadable,
    /// No session: log in again.
    SessionExpired,
}

/// A config refused by its rules: 400 `invalid_config`, its message naming
/// the field.
impl From<ConfigError> for ApiError {
    fn from(error: ConfigError) -> Self {
        ApiError::bad_request(ErrorCode::InvalidConfig, error.message)
    }
}

impl ApiError {
    pub fn bad_request(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::BadRequest {
            code,
            message: message.into(),
        }
    }

    pub fn unauthorized(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::Unauthorized {
            code,
            message: message.into(),
        }
    }

    /// Reads a JSON body already known to be JSON into its shape; a wrong
    /// field or type is a 400 under `code` that says what was wrong.
    pub fn parse_body<T: serde::de::DeserializeOwned>(
        body: serde_json::Value,
        code: ErrorCode,
        what: &str,
    ) -> Result<T, Self> {
        serde_json::from_value(body)
            .map_err(|e| Self::bad_request(code, format!("{what} is not valid: {e}")))
    }

    /// The `error` object of its answer's body, for an answer that carries
    /// more than the error (the gate's refusal to an app).
    pub fn detail(&self) -> ErrorDetail {
        ErrorDetail {
            code: self.code(),
            message: self.to_string(),
        }
    }

    pub fn code(&self) -> ErrorCode {
        match self {
            ApiError::RoomNotFound(_) => ErrorCode::RoomNotFound,
            ApiError::BadRequest { code, .. }
            | ApiError::Unauthorized { code, .. }
            | ApiError::Conflict { code, .. }
            | ApiError::Forbidden { code, .. }
            | ApiError::Absent { code, .. }
            | ApiError::Gone { code, .. } => *code,
            ApiError::NotFound(_) => ErrorCode::NotFound,
            ApiError::MethodNotAllowed { .. } => ErrorCode::MethodNotAllowed,
            ApiError::UnsupportedMediaType(_) => ErrorCode::UnsupportedMediaType,
            ApiError::PayloadTooLarge { .. } => ErrorCode::PayloadTooLarge,
            ApiError::BodyTimeout => ErrorCode::BodyTimeout,
            ApiError::TooManyAttempts { .. } => ErrorCode::TooManyAttempts,
            ApiError::RateLimited { .. } => ErrorCode::RateLimited,
            ApiError::StoreUnavailable => ErrorCode::StoreUnavailable,
            ApiError::TooManySockets => ErrorCode::TooManySockets,
            ApiError::AdminFormRefused(_) => ErrorCode::FormRefused,
            ApiError::Internal => ErrorCode::Internal,
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            ApiError::RoomNotFound(_) | ApiError::NotFound(_) | ApiError::Absent { .. } => {
                StatusCode::NOT_FOUND
            }
            ApiError::Gone { .. } => StatusCode::GONE,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::Forbidden { .. } => StatusCode::FORBIDDEN,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            ApiError::TooManyAttempts { .. } | ApiError::RateLimited { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            ApiError::StoreUnavailable | ApiError::TooManySockets => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::AdminFormRefused(_) => StatusCode::SEE_OTHER,
            ApiError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        if let ApiError::AdminFormRefused(trouble) = self {
            let location = match trouble {
                // The page shows the login form.
                FormTrouble::SessionExpired => "/admin".to_string(),
                trouble => format!("/admin?refused={}", <&str>::from(trouble)),
            };
            return HttpResponse::SeeOther()
                .insert_header((header::LOCATION, location))
                .finish();
        }
        let mut response = HttpResponse::build(self.status_code());
        if matches!(self, ApiError::StoreUnavailable | ApiError::TooManySockets) {
            response.insert_header((header::RETRY_AFTER, HeaderValue::from_static("2")));
        }
        if let ApiError::TooManyAttempts { retry_after_s }
        | ApiError::RateLimited { retry_after_s } = self
        {
            response.insert_header((header::RETRY_AFTER, retry_after_s.to_string()));
        }
        if let ApiError::MethodNotAllowed { allowed } = self {
            response.insert_header((header::ALLOW, method_list(allowed)));
        }
        response.json(ErrorBody {
            error: self.detail(),
        })
    }
}

/// Methods as `Allow` lists them: `GET, HEAD, POST`.
fn method_list(methods: &[Method]) -> String {
    methods
        .iter()
        .map(Method::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

impl From<crate::words::sale::WantProblem> for ErrorCode {
    fn from(problem: crate::words::sale::WantProblem) -> Self {
        use crate::words::sale::WantProblem;
        match problem {
            WantProblem::Claim => ErrorCode::InvalidClaim,
            WantProblem::Quantity => ErrorCode::InvalidQuantity,
            WantProblem::Seats => ErrorCode::InvalidSeats,
        }
    }
}

impl From<crate::words::sale::SaleError> for ApiError {
    fn from(error: crate::words::sale::SaleError) -> Self {
        use crate::words::sale::SaleError;
        let message = error.to_string();
        let conflict = |code| ApiError::Conflict {
            code,
            message: message.clone(),
        };
        match error {
            SaleError::NoSale => ApiError::Absent {
                code: ErrorCode::SaleNotFound,
                message,
            },
            SaleError::ClaimNotFound => ApiError::Absent {
                code: ErrorCode::ClaimNotFound,
                message,
            },
            SaleError::SoldOut => conflict(ErrorCode::SoldOut),
            SaleError::SeatTaken(_) => conflict(ErrorCode::SeatTaken),
            SaleError::LimitReached(_) => conflict(ErrorCode::LimitReached),
            SaleError::Released => conflict(ErrorCode::ClaimReleased),
            SaleError::AlreadyConfirmed => conflict(ErrorCode::AlreadyConfirmed),
            SaleError::UnknownSeat(_) => ApiError::bad_request(ErrorCode::UnknownSeat, message),
            SaleError::WrongKind(_) => ApiError::bad_request(ErrorCode::WrongKind, message),
            SaleError::HoldExpired => ApiError::Gone {
                code: ErrorCode::HoldExpired,
                message,
            },
            SaleError::Unavailable(reason) => {
                tracing::warn!(%reason, "sale store unavailable");
                ApiError::StoreUnavailable
            }
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::RoomNotFound(id) => ApiError::RoomNotFound(id.to_string()),
            StoreError::ReportNotFound(id) => ApiError::Absent {
                code: ErrorCode::ReportNotFound,
                message: format!(
                    "no report is kept of a room {:?} made at that time",
                    id.as_str()
                ),
            },
            StoreError::RoomExists(id) => ApiError::Conflict {
                code: ErrorCode::RoomExists,
                message: format!("a room called {:?} already exists", id.as_str()),
            },
            StoreError::RoomClosed(id) => ApiError::Conflict {
                code: ErrorCode::RoomClosed,
                message: format!("room {:?} is closed", id.as_str()),
            },
            StoreError::InvalidConfig(error) => error.into(),
            StoreError::Conflict(id) => ApiError::Conflict {
                code: ErrorCode::EditConflict,
                message: format!(
                    "room {:?} was changed by someone else at the same time; read it and try again",
                    id.as_str()
                ),
            },
            StoreError::RateLimited { retry_after_s } => ApiError::RateLimited { retry_after_s },
            StoreError::TooManyAttempts { retry_after_s } => {
                ApiError::TooManyAttempts { retry_after_s }
            }
            StoreError::NotWaiting => ApiError::Conflict {
                code: ErrorCode::NotWaiting,
                message: "only a visitor waiting in line can ask to be notified".into(),
            },
            StoreError::TooManyNotifications => ApiError::Conflict {
                code: ErrorCode::TooManyNotifications,
                message: "too many places from your address already wait to be notified; keep this page open instead".into(),
            },
            StoreError::ResumeUsed => ApiError::Gone {
                code: ErrorCode::ResumeUsed,
                message: "this link was used already, on another device; open the waiting room there, or join again".into(),
            },
            StoreError::NotAccepting => ApiError::Forbidden {
                code: ErrorCode::RoomNotAccepting,
                message: "this waiting room takes no new arrivals now".into(),
            },
            StoreError::PowRequired => ApiError::Forbidden {
                code: ErrorCode::PowRequired,
                message: "this room asks your browser to solve a challenge first: GET /api/rooms/{room}/challenge, then join with {\"pow\": \"<solution>\"}".into(),
            },
            StoreError::PowReused => ApiError::Forbidden {
                code: ErrorCode::PowInvalid,
                message: "this solution was used already; solve a new challenge".into(),
            },
            StoreError::PowTooEasy => ApiError::Forbidden {
                code: ErrorCode::PowInvalid,
                message: "this solution's challenge is easier than the room asks for now; solve a new challenge".into(),
            },
            StoreError::UserRequired => ApiError::unauthorized(
                ErrorCode::UserRequired,
                "this room admits signed-in users only: come back through the link on the site where you sign in",
            ),
            StoreError::CodeRequired => ApiError::Forbidden {
                code: ErrorCode::CodeRequired,
                message: "this room admits code holders only: join with {\"code\": \"<your code>\"}, or open the link your code came with".into(),
            },
            StoreError::InvalidCode => ApiError::Forbidden {
                code: ErrorCode::InvalidCode,
                message: "this code is not valid for this room (unknown, or withdrawn)".into(),
            },
            StoreError::CodeUsed => ApiError::Forbidden {
                code: ErrorCode::CodeUsed,
                message: "this code was used already".into(),
            },
            StoreError::GroupExists(group) => ApiError::Conflict {
                code: ErrorCode::GroupExists,
                message: format!("the room has a group called {group:?} already; remove it first or choose another name"),
            },
            StoreError::GroupNotFound(group) => ApiError::Absent {
                code: ErrorCode::GroupNotFound,
                message: format!("the room has no group called {group:?}"),
            },
            StoreError::TooManyGroups(most) => ApiError::Conflict {
                code: ErrorCode::LimitReached,
                message: format!("a room holds up to {most} groups of codes; remove one first"),
            },
            StoreError::NoDraw => ApiError::Absent {
                code: ErrorCode::NoDraw,
                message: "this room has no scheduled opening, so no draw".into(),
            },
            StoreError::NotDrawn => ApiError::Conflict {
                code: ErrorCode::NotDrawn,
                message: "the draw happens at the opening: its order is not revealed before".into(),
            },
            StoreError::DrawSeed => {
                tracing::error!("a join's draw seed was refused twice");
                ApiError::Internal
            }
            StoreError::ScheduleDue(room) => {
                tracing::error!(%room, "an operation kept meeting a due schedule entry");
                ApiError::Internal
            }
            StoreError::Unexpected(reason) => {
                tracing::error!(%reason, "unexpected store answer");
                ApiError::Internal
            }
            StoreError::Unavailable(reason) => {
                tracing::warn!(%reason, "store unavailable");
                ApiError::StoreUnavailable
            }
        }
    }
}

impl From<crate::store::SetUpSaleError> for ApiError {
    fn from(error: crate::store::SetUpSaleError) -> Self {
        match error {
            crate::store::SetUpSaleError::Room(error) => error.into(),
            crate::store::SetUpSaleError::Sale(error) => error.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::words::written::kept_as_written;

    /// `WAITROOM_WRITE_REFUSALS=1 cargo test --lib refusals` writes it anew.
    #[test]
    fn static_refusals_js_is_written_from_the_codes() {
        kept_as_written(
            "static/refusals.js",
            &refusals_js(),
            "WAITROOM_WRITE_REFUSALS",
        );
    }
}
