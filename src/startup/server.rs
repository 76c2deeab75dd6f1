//! The HTTP server: the application's `App` on actix-http's `HttpService`,
//! with the one thing actix-web's `HttpServer` has no setting for, an
//! upgrade service.
//!
//! A request that asks for a protocol upgrade comes here with its TCP
//! connection and goes through the same `App` as any other. When the answer
//! is the WebSocket route's `101`, the socket goes on over the bare
//! connection: a relay task feeds actix-ws's request payload from it and
//! drains actix-ws's response body into it, and the HTTP/1 dispatcher ends,
//! with the two 8 KiB buffers it keeps for every connection for the
//! connection's life: with the socket left in the dispatcher, memory per
//! held socket was 18.2 KiB, with the relay 10.5 (BENCHMARKS.md, issue 10;
//! heaptrack put 16.4 KB of a socket in those buffers). The connection's lane (`live::lane`), offered to the
//! route in the request's extensions, is how every frame we send but the
//! close reaches it (the route refuses a handshake that comes without one);
//! actix-ws's response body is left by the route in a slot offered beside
//! it (`http::sockets::SocketBody`), not sent back through the middleware;
//! actix-ws keeps the handshake, what the client sends, and the close
//! frame. Any other answer to an upgrade request (a
//! refusal, an `h2c` upgrade of a plain GET) is written whole, and the
//! connection closed. The request's body is fed only after a `101`, so an
//! upgrade request that has one (or is not a GET) is refused at once
//! (`http::limits::refuse_upgrade_with_body`) rather than left waiting.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::{Future, poll_fn};
use std::io;
use std::pin::{Pin, pin};
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use actix_codec::Framed;
use actix_http::body::{BoxBody, MessageBody, to_bytes};
use actix_http::error::{DispatchError, PayloadError};
use actix_http::h1;
use actix_http::{ConnectionType, HttpMessage, HttpService, Protocol, Request, StatusCode};
use actix_service::{
    IntoServiceFactory, Service, ServiceFactory, ServiceFactoryExt, fn_factory, fn_service,
    map_config,
};
use actix_web::dev::{AppConfig, Server, ServiceResponse};
use actix_web::web::{Bytes, BytesMut};
use actix_web::{App, Error, HttpResponse, web};
use futures_util::Stream;
use socket2::SockRef;
use tokio::net::TcpStream;
use tokio::time::Sleep;
use tracing_actix_web::TracingLogger;

use super::config::Settings;
use super::write_guard::WriteGuard;
use crate::http::body_configs;
use crate::http::error::ApiError;
use crate::http::limits::AsksToUpgrade;
use crate::http::sockets::SocketBody;
use crate::http::state::{AppParts, Ops};
use crate::http::{
    admin, cookies, cors, draw, extractors, gate, limits, middleware, notify, openapi, ops, pages,
    push, resume, sale, sockets, visitor,
};
use crate::live::lane::Lane;
use crate::live::socket::SILENCE_LIMIT;
use crate::live::tasks::Tasks;

/// How long a relay waits on a client that does not read what is written.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a closing connection waits for the client to finish its side.
const CLOSE_LINGER: Duration = Duration::from_secs(2);
/// How much a closing connection reads while it waits. A client that goes
/// on sending past it (say, the data of a frame refused for its declared
/// length) is cut off with a reset: with what the relay may have read
/// ahead for actix-ws ([`PIPE_LIMIT`] and a chunk), no connection is read
/// more than 64 KiB past its refusal.
const CLOSE_LINGER_BYTES: usize = 32 * 1024;
const _: () = assert!(PIPE_LIMIT + READ_CHUNK + CLOSE_LINGER_BYTES <= 64 * 1024);
/// Bytes read from a socket at a time; clients send little (pings).
const READ_CHUNK: usize = 1024;

/// The application: its state's parts, body limits, and every feature's routes.
pub fn app(
    parts: AppParts,
) -> App<
    impl ServiceFactory<
        actix_web::dev::ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = Error,
        InitError = (),
    >,
> {
    App::new()
        .wrap(actix_web::middleware::from_fn(limits::body_deadline))
        .wrap(actix_web::middleware::from_fn(
            limits::refuse_upgrade_with_body,
        ))
        .wrap(actix_web::middleware::from_fn(
            extractors::refresh_admin_session,
        ))
        .wrap(actix_web::middleware::from_fn(cookies::secure_cookies))
        .wrap(actix_web::middleware::from_fn(middleware::conventions))
        .wrap(actix_web::middleware::from_fn(cors::cors))
        .wrap(middleware::security_headers())
        .wrap(actix_web::middleware::from_fn(middleware::count_answers))
        .wrap(TracingLogger::<middleware::RedactedRootSpan>::new())
        .configure(|cfg| parts.register(cfg))
        .app_data(body_configs::json_config())
        .app_data(body_configs::form_config())
        .app_data(body_configs::query_config())
        .app_data(body_configs::path_config())
        .configure(visitor::routes)
        .configure(gate::routes)
        .configure(draw::routes)
        .configure(sockets::routes)
        .configure(admin::api::routes)
        .configure(admin::report::routes)
        .configure(admin::codes::routes)
        .configure(admin::page::routes)
        .configure(admin::report_page::routes)
        .configure(sale::routes)
        .configure(pages::routes)
        .configure(ops::routes)
        .configure(openapi::routes)
        .configure(push::routes)
        .configure(notify::routes)
        .configure(resume::routes)
        .default_service(web::to(not_found))
}

async fn not_found() -> Result<HttpResponse, ApiError> {
    Err(ApiError::NotFound("no such endpoint".into()))
}

/// Serves the application on `listener` until stopped; every connection's
/// writes have `--write-timeout-ms` (`super::write_guard`).
pub fn serve(
    parts: AppParts,
    listener: std::net::TcpListener,
    settings: &Settings,
    shutdown_grace: Duration,
) -> io::Result<Server> {
    let workers = settings.workers;
    let write_timeout = Duration::from_millis(settings.write_timeout_ms);
    let mut server = actix_server::Server::build()
        .disable_signals()
        .shutdown_timeout(shutdown_grace.as_secs())
        .max_concurrent_connections(50_000);
    if let Some(workers) = workers {
        server = server.workers(workers);
    }
    let server = server
        .listen("waitroom", listener, move || {
            let upgrade_parts = parts.clone();
            let http = HttpService::build()
                .upgrade(fn_factory(move || {
                    let tasks = upgrade_parts.live.tasks.clone();
                    let app = app(upgrade_parts.clone())
                        .into_factory()
                        .new_service(AppConfig::default());
                    async move {
                        let app = Rc::new(app.await?);
                        Ok::<_, ()>(fn_service(move |upgrade| {
                            upgrade_connection(app.clone(), tasks.clone(), upgrade)
                        }))
                    }
                }))
                .finish(map_config(
                    app(parts.clone())
                        .into_factory()
                        .map_err(|error| error.error_response()),
                    |_| AppConfig::default(),
                ));
            fn_service(move |io: TcpStream| {
                let peer = io.peer_addr().ok();
                let io = WriteGuard::new(io, write_timeout);
                std::future::ready(Ok::<_, DispatchError>((io, Protocol::Http1, peer)))
            })
            .and_then(http)
        })?
        .run();
    Ok(server)
}

/// Answers one upgrade request through `app`; a WebSocket it accepted goes
/// on in a relay task of its own, so the dispatcher's task ends here.
async fn upgrade_connection<S, B>(
    app: Rc<S>,
    tasks: Tasks,
    (request, framed): (Request, Framed<WriteGuard, h1::Codec>),
) -> Result<(), Infallible>
where
    S: Service<Request, Response = ServiceResponse<B>, Error = Error>,
    B: MessageBody + 'static,
{
    // A handshake under way when shutdown begins spawns its socket's tasks
    // later: shutdown waits for it, and so for them, which see shutdown and
    // close with 1012 at once.
    let _under_way = tasks.hold();
    let (mut payload_sender, payload) = pipe();
    let payload: actix_http::BoxedPayloadStream = Box::pin(payload);
    let (request, _) = request.replace_payload(actix_http::Payload::from(payload));
    let lane = Lane::new();
    let socket_body = SocketBody::default();
    request.extensions_mut().insert(lane.clone());
    request.extensions_mut().insert(socket_body.clone());
    request.extensions_mut().insert(AsksToUpgrade);
    let response: HttpResponse = match app.call(request).await {
        Ok(response) => response.map_into_boxed_body().into_parts().1,
        Err(error) => error.error_response(),
    };
    let response: actix_http::Response<BoxBody> = response.into();
    let (mut head, body) = response.into_parts();
    // A socket's own body was left aside by its route: the `101`'s (empty,
    // wrapped by the middleware) goes now, and the request's span with it.
    let socket_body = match head.status() {
        StatusCode::SWITCHING_PROTOCOLS => socket_body.take(),
        _ => None,
    };
    let Some(socket_body) = socket_body else {
        head.head_mut().set_connection_type(ConnectionType::Close);
        let body = to_bytes(body).await.unwrap_or_default();
        let _ = h1::SendResponse::new(framed, head.set_body(body)).await;
        return Ok(());
    };
    drop(body);
    let Ok(framed) = h1::SendResponse::new(framed, head).await else {
        lane.close();
        return Ok(());
    };
    let parts = framed.into_parts();
    // Bytes the client sent right behind its handshake, copied out so the
    // dispatcher's read buffer is freed with the rest.
    if !parts.read_buf.is_empty() {
        payload_sender.push(Bytes::copy_from_slice(&parts.read_buf));
    }
    let io = Arc::new(parts.io.into_inner());
    lane.attach(io.clone());
    let relay = relay(io, lane, payload_sender, socket_body);
    if tasks.stopping() {
        // Begun after shutdown stopped waiting for tasks (a later request
        // on a connection kept alive): this connection is what the server
        // waits for before its workers stop, and with them every task
        // spawned on this thread. Relayed here, the socket's 1012 is sent.
        relay.await;
    } else {
        tasks.spawn_local(relay);
    }
    Ok(())
}

/// Moves bytes between a bare connection and actix-ws until the socket
/// ends: what the client sends feeds the request payload (read only while
/// actix-ws wants more), the close frame the session sends is drained from
/// the response body into the socket's lane, whose waiting bytes it writes.
async fn relay(io: Arc<TcpStream>, lane: Arc<Lane>, mut payload: PipeWriter, body: BoxBody) {
    tune_for_websocket(&io);
    let mut body = pin!(body);
    let mut relay = Relay::default();
    let ended = poll_fn(|cx| relay.poll(cx, &io, &lane, &mut payload, body.as_mut())).await;
    lane.close();
    if ended == Ended::Closed {
        // Boxed: the wait's state (its 512-byte read buffer, a timer, a
        // readiness future) would otherwise be part of every relay's task
        // for the socket's whole life, though it is used only at the end
        // (the relay's future: 984 bytes unboxed, 200 boxed).
        Box::pin(linger(&io)).await;
    }
    // The lane gave up its handle on close: the connection ends here.
    drop(io);
}

/// Statuses are single small frames: each is sent at once (no Nagle). And
/// the kernel ends a connection whose sent bytes go unacknowledged for
/// `SILENCE_LIMIT`: that is how a socket the fan-out keeps busy is found
/// dead, since its heartbeat pings only quiet sockets (`live::socket`).
fn tune_for_websocket(io: &TcpStream) {
    let _ = io.set_nodelay(true);
    let _ = SockRef::from(io).set_tcp_user_timeout(Some(SILENCE_LIMIT));
}

/// How a relay ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// The session closed: its close frame was the last chunk written.
    Closed,
    /// The connection failed, or the client stopped reading for too long.
    Broken,
}

/// A relay's state between wake-ups. Written as a poll function rather
/// than a `select!` loop, so that a wake-up makes no future and registers
/// nothing beyond the connection's own two readiness slots: memory per
/// held socket 8.5 → 8.2 KiB, one run (BENCHMARKS.md, issue 14, "after the
/// lane").
#[derive(Default)]
struct Relay {
    /// Running while bytes wait for the client to read.
    stalled: Option<Pin<Box<Sleep>>>,
    /// The client ended its side, or actix-ws stopped reading.
    reading_done: bool,
}

impl Relay {
    fn poll(
        &mut self,
        cx: &mut Context<'_>,
        io: &TcpStream,
        lane: &Lane,
        payload: &mut PipeWriter,
        body: Pin<&mut BoxBody>,
    ) -> Poll<Ended> {
        if !self.reading_done && self.poll_read(cx, io, payload).is_ready() {
            return Poll::Ready(Ended::Broken);
        }
        self.poll_write(cx, lane, body)
    }

    /// Feeds what the client sent to actix-ws; ready only if the connection failed.
    fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        io: &TcpStream,
        payload: &mut PipeWriter,
    ) -> Poll<()> {
        loop {
            match payload.wants_more(cx) {
                Poll::Pending => return Poll::Pending,
                // actix-ws has stopped reading: wait for the body to end.
                Poll::Ready(false) => {
                    self.reading_done = true;
                    return Poll::Pending;
                }
                Poll::Ready(true) => {}
            }
            match io.poll_read_ready(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(_)) => {
                    payload.fail(PayloadError::Incomplete(None));
                    return Poll::Ready(());
                }
                Poll::Ready(Ok(())) => {}
            }
            let mut buf = BytesMut::with_capacity(READ_CHUNK);
            match io.try_read_buf(&mut buf) {
                Ok(0) => {
                    payload.end();
                    self.reading_done = true;
                    return Poll::Pending;
                }
                Ok(_) => payload.push(buf.freeze()),
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(error) => {
                    payload.fail(PayloadError::Io(error));
                    return Poll::Ready(());
                }
            }
        }
    }

    /// Writes what waits in the lane, then what actix-ws sends (the close
    /// frame), until neither has more for now; the response body's end is
    /// the socket's. actix-ws is not drained while bytes wait, so the close
    /// goes after every frame queued before it.
    fn poll_write(
        &mut self,
        cx: &mut Context<'_>,
        lane: &Lane,
        mut body: Pin<&mut BoxBody>,
    ) -> Poll<Ended> {
        loop {
            match lane.poll_flush(cx) {
                Poll::Pending => return self.poll_stalled(cx),
                Poll::Ready(Err(_)) => return Poll::Ready(Ended::Broken),
                Poll::Ready(Ok(())) => self.stalled = None,
            }
            match body.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(bytes))) => lane.push(bytes),
                Poll::Ready(Some(Err(_)) | None) => return Poll::Ready(Ended::Closed),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Gives up on a client that has not read for [`WRITE_TIMEOUT`].
    fn poll_stalled(&mut self, cx: &mut Context<'_>) -> Poll<Ended> {
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(WRITE_TIMEOUT)));
        stalled.as_mut().poll(cx).map(|()| Ended::Broken)
    }
}

/// Ends our side and waits (briefly, and for [`CLOSE_LINGER_BYTES`] at
/// most) for the client to end its own, so that unread bytes do not reset
/// the connection under the close frame. Returns the bytes it read.
async fn linger(io: &TcpStream) -> usize {
    let _ = SockRef::from(io).shutdown(std::net::Shutdown::Write);
    let mut read = 0;
    let drain = async {
        let mut discard = [0u8; 512];
        while read < CLOSE_LINGER_BYTES {
            if io.readable().await.is_err() {
                return;
            }
            let room = discard.len().min(CLOSE_LINGER_BYTES - read);
            match io.try_read(&mut discard[..room]) {
                Ok(0) => return,
                Ok(n) => read += n,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return,
            }
        }
    };
    let _ = tokio::time::timeout(CLOSE_LINGER, drain).await;
    read
}

/// Bytes read from a relayed connection and not yet taken by actix-ws.
/// Written by hand because actix-http's own pipe for this (the sending
/// half of `h1::Payload`) is not part of its public API.
#[derive(Default)]
struct Pipe {
    chunks: VecDeque<Bytes>,
    buffered: usize,
    ended: bool,
    error: Option<PayloadError>,
    /// The reader (actix-ws) waits for bytes; the writer (the relay) for room.
    reader: Option<Waker>,
    writer: Option<Waker>,
    reader_gone: bool,
}

/// How much the relay reads ahead of actix-ws before it waits.
const PIPE_LIMIT: usize = 16 * 1024;

fn pipe() -> (PipeWriter, PipeReader) {
    let shared = Rc::new(RefCell::new(Pipe::default()));
    (PipeWriter(shared.clone()), PipeReader(shared))
}

struct PipeWriter(Rc<RefCell<Pipe>>);

impl PipeWriter {
    /// Ready with `true` when there is room for more, `false` once nobody reads.
    fn wants_more(&self, cx: &mut Context<'_>) -> Poll<bool> {
        let mut pipe = self.0.borrow_mut();
        if pipe.reader_gone {
            Poll::Ready(false)
        } else if pipe.buffered < PIPE_LIMIT {
            Poll::Ready(true)
        } else {
            pipe.writer = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    fn push(&mut self, bytes: Bytes) {
        let mut pipe = self.0.borrow_mut();
        pipe.buffered += bytes.len();
        pipe.chunks.push_back(bytes);
        if let Some(reader) = pipe.reader.take() {
            reader.wake();
        }
    }

    fn end(&mut self) {
        let mut pipe = self.0.borrow_mut();
        pipe.ended = true;
        if let Some(reader) = pipe.reader.take() {
            reader.wake();
        }
    }

    fn fail(&mut self, error: PayloadError) {
        self.0.borrow_mut().error = Some(error);
        self.end();
    }
}

impl Drop for PipeWriter {
    fn drop(&mut self) {
        self.end();
    }
}

struct PipeReader(Rc<RefCell<Pipe>>);

impl Stream for PipeReader {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut pipe = self.0.borrow_mut();
        if let Some(bytes) = pipe.chunks.pop_front() {
            pipe.buffered -= bytes.len();
            if let Some(writer) = pipe.writer.take() {
                writer.wake();
            }
            if pipe.chunks.is_empty() {
                // A socket that is mostly idle keeps no queue.
                pipe.chunks = VecDeque::new();
            }
            return Poll::Ready(Some(Ok(bytes)));
        }
        if let Some(error) = pipe.error.take() {
            return Poll::Ready(Some(Err(error)));
        }
        if pipe.ended {
            return Poll::Ready(None);
        }
        pipe.reader = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for PipeReader {
    fn drop(&mut self) {
        let mut pipe = self.0.borrow_mut();
        pipe.reader_gone = true;
        if let Some(writer) = pipe.writer.take() {
            writer.wake();
        }
    }
}

/// The `--metrics-listen` server: `/metrics` alone, on one worker.
pub fn serve_metrics(
    ops: web::Data<Ops>,
    listener: std::net::TcpListener,
) -> io::Result<(Server, u16)> {
    let port = listener.local_addr()?.port();
    let server = actix_web::HttpServer::new(move || {
        App::new()
            .app_data(ops.clone())
            .route("/metrics", web::get().to(ops::metrics_only))
            .default_service(web::to(not_found))
    })
    .workers(1)
    .disable_signals()
    .listen(listener)?
    .run();
    Ok((server, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_websocket_connection_sends_at_once_and_has_the_silence_limit_as_its_user_timeout() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap());
        let (client, accepted) = tokio::join!(client, listener.accept());
        let (server, _) = accepted.unwrap();
        tune_for_websocket(&server);
        let socket = SockRef::from(&server);
        assert_eq!(socket.tcp_user_timeout().unwrap(), Some(SILENCE_LIMIT));
        assert!(server.nodelay().unwrap());
        drop(client);
    }

    async fn connected() -> (TcpStream, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap());
        let (client, accepted) = tokio::join!(client, listener.accept());
        (accepted.unwrap().0, client.unwrap())
    }

    #[tokio::test]
    async fn a_closing_connection_reads_its_budget_at_most_from_a_client_that_keeps_sending() {
        use tokio::io::AsyncWriteExt;
        let (server, mut client) = connected().await;
        let flood = tokio::spawn(async move {
            let data = vec![0u8; 16 * 1024];
            let mut written = 0usize;
            // Until the server's reset fails a write.
            while client.write_all(&data).await.is_ok() {
                written += data.len();
            }
            written
        });
        let read = linger(&server).await;
        assert_eq!(read, CLOSE_LINGER_BYTES);
        drop(server);
        let written = tokio::time::timeout(Duration::from_secs(10), flood)
            .await
            .expect("the client's writes fail once the connection is cut")
            .unwrap();
        assert!(written >= read, "{written}");
    }

    #[tokio::test]
    async fn a_closing_connection_ends_when_the_client_ends_its_side() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (server, mut client) = connected().await;
        client.write_all(b"the client's close frame").await.unwrap();
        client.shutdown().await.unwrap();
        let read = tokio::time::timeout(Duration::from_secs(10), linger(&server))
            .await
            .expect("no wait once the client has ended its side");
        assert_eq!(read, b"the client's close frame".len());
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "our side was ended cleanly");
    }
}
