//! The HTTP upgrade path. actix's HTTP/1 dispatcher hands every request that
//! asks for a protocol upgrade here, together with its connection. The
//! request goes through the application like any other; when the answer is
//! a `101` carrying a [`Handover`] (the WebSocket route's), the answer is
//! written and the socket is served on the bare TCP connection by a task of
//! its own, the dispatcher, its task and its buffers gone. Any other answer is written as it is,
//! and the connection closed.

use std::convert::Infallible;
use std::rc::Rc;

use actix_codec::Framed;
use actix_http::{Request, StatusCode, h1};
use actix_service::Service;
use actix_web::body::{BoxBody, MessageBody, to_bytes};
use actix_web::dev::ServiceResponse;
use actix_web::web::BytesMut;
use actix_web::{Error, HttpResponse};
use tokio::net::TcpStream;

use super::socket::{Handover, serve};

/// What the dispatcher hands over: the request and its connection.
pub type Upgrade = (Request, Framed<TcpStream, h1::Codec>);

/// Answers one upgrade request through `app`, and serves the socket it accepted.
pub async fn handle<S, B>(app: Rc<S>, (request, framed): Upgrade) -> Result<(), Infallible>
where
    S: Service<Request, Response = ServiceResponse<B>, Error = Error>,
    B: MessageBody + 'static,
{
    let mut response: HttpResponse = match app.call(request).await {
        Ok(response) => response.map_into_boxed_body().into_parts().1,
        Err(error) => error.error_response(),
    };
    let handover = response.extensions_mut().remove::<Handover>();
    let response: actix_http::Response<BoxBody> = response.into();
    match handover {
        Some(handover) if response.status() == StatusCode::SWITCHING_PROTOCOLS => {
            let (response, _) = response.into_parts();
            let Ok(framed) = h1::SendResponse::new(framed, response).await else {
                return Ok(());
            };
            let parts = framed.into_parts();
            // Bytes the client sent right behind its handshake, copied out
            // so the dispatcher's 8 KiB read buffer is freed with the rest.
            let early = BytesMut::from(&parts.read_buf[..]);
            // Its own task, sized for the socket alone: the dispatcher's
            // task (sized for any HTTP exchange) ends here.
            actix_web::rt::spawn(serve(handover, parts.io, early));
        }
        _ => {
            // Refusals, and answers to other upgrade requests (an `h2c`
            // GET): written whole, then the connection closes.
            let (head, body) = response.into_parts();
            let body = to_bytes(body).await.unwrap_or_default();
            let _ = h1::SendResponse::new(framed, head.set_body(body)).await;
        }
    }
    Ok(())
}
