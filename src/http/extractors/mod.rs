//! Credentials as extractors, one file per credential: the room a path
//! names (`room.rs`), a visitor's ticket (`ticket.rs`), whoever gives a place
//! up (`leaver.rs`), a pass (`pass.rs`), an operator (`operator.rs`), the
//! client's address (`client.rs`), and the `Idempotency-Key` a retried call
//! repeats (`idempotency.rs`; for a join without a ticket, it stands for
//! one). A handler that needs one takes it as an
//! argument, so no handler can forget the check, and each check is written
//! once. A pass is checked by `check_pass` alone, whoever asks (the sale,
//! `/api/verify`, the sale page).

use actix_web::http::header;
use actix_web::{HttpRequest, web};

mod client;
mod idempotency;
mod leaver;
mod operator;
mod pass;
mod room;
mod ticket;

pub use client::{client_address, client_block, code_guesses, join_limit};
pub use idempotency::IdempotencyKey;
pub use leaver::Leaver;
pub use operator::{
    ADMIN_IDLE, ADMIN_SESSION_COOKIE, CSRF_HEADER, CsrfProtected, Operator, OperatorForm,
    PassRevoker, admin_session, admin_session_cookie, refresh_admin_session,
};
pub use pass::{
    Expiry, LinkJudge, LinkedPass, PASS_COOKIE, Pass, PassChecker, PassHolder, PassRefusal,
    SaleViewer, Verified, check_pass, check_pass_for_proxy, judge_linked_pass, pass_cookie,
    pass_error, presented_pass, presented_pass_to_verify,
};
pub use room::Room;
pub use ticket::{
    SOCKET_PROTOCOL, SocketTicket, Ticket, TicketSource, offered_protocols, ticket_cookie_name,
    ticket_error,
};

/// A part of the application's state (`http::state`), registered as
/// `web::Data<T>`, for extractors that check a credential against it.
pub fn part<T: ?Sized + 'static>(req: &HttpRequest) -> &T {
    part_handle::<T>(req).get_ref()
}

/// A handle on a part, for an extractor that keeps it.
pub fn part_data<T: ?Sized + 'static>(req: &HttpRequest) -> web::Data<T> {
    part_handle::<T>(req).clone()
}

fn part_handle<T: ?Sized + 'static>(req: &HttpRequest) -> &web::Data<T> {
    req.app_data::<web::Data<T>>()
        .expect("the application registers every part of its state")
}

/// The token in `Authorization: Bearer …` (the scheme in any case), if any.
pub fn bearer(req: &HttpRequest) -> Option<&str> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|token| !token.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for value in ["Bearer abc", "bearer abc", "BEARER  abc "] {
            let req = TestRequest::default()
                .insert_header((header::AUTHORIZATION, value))
                .to_http_request();
            assert_eq!(bearer(&req), Some("abc"), "{value:?}");
        }
        for value in ["Basic abc", "Bearer", "Bearerabc", "Bearer  "] {
            let req = TestRequest::default()
                .insert_header((header::AUTHORIZATION, value))
                .to_http_request();
            assert_eq!(bearer(&req), None, "{value:?}");
        }
    }
}
