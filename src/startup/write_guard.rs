//! A deadline on every HTTP connection's writes: a client that reads
//! nothing of an answer for `--write-timeout-ms` is cut off. Nothing else
//! bounds it: actix's HTTP/1 dispatcher times the request's head and an
//! idle keep-alive, not an answer waiting for its reader, and a streamed
//! answer (`/draw/entries`, a million lines) is not even polled while the
//! client's window is shut, so a deadline inside the body would never fire.
//! Only time spent with bytes waiting counts: each write that goes through
//! starts the clock again, and an idle connection has none running.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use socket2::SockRef;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

/// A connection whose writes give up after `limit` without progress.
pub struct WriteGuard<T = TcpStream> {
    io: T,
    limit: Duration,
    /// Running while a write waits for the client to read.
    stalled: Option<Pin<Box<Sleep>>>,
}

/// What a connection does when it is cut off.
pub trait Cut {
    fn cut(&self);
}

impl Cut for TcpStream {
    /// Closed with a reset, not a FIN queued behind bytes the client will
    /// never read: the kernel lets go of them at once.
    fn cut(&self) {
        let _ = SockRef::from(self).set_linger(Some(Duration::ZERO));
    }
}

impl<T: Cut> WriteGuard<T> {
    pub fn new(io: T, limit: Duration) -> Self {
        Self {
            io,
            limit,
            stalled: None,
        }
    }

    /// The bare connection (a WebSocket's relay keeps a deadline of its own).
    pub fn into_inner(self) -> T {
        self.io
    }

    /// A write's outcome, or the end of the connection once writes have
    /// waited `limit` in a row.
    fn deadline<R>(
        &mut self,
        cx: &mut Context<'_>,
        attempt: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if attempt.is_ready() {
            self.stalled = None;
            return attempt;
        }
        let limit = self.limit;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        if stalled.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.stalled = None;
        metrics::counter!("waitroom_slow_readers_cut_total").increment(1);
        tracing::debug!(
            limit_ms = limit.as_millis() as u64,
            "a client read nothing of its answer for too long; cut off"
        );
        self.io.cut();
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the client read nothing for too long",
        )))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteGuard<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<T: Cut + AsyncWrite + Unpin> AsyncWrite for WriteGuard<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let attempt = Pin::new(&mut this.io).poll_write(cx, buf);
        this.deadline(cx, attempt)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let attempt = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.deadline(cx, attempt)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let attempt = Pin::new(&mut this.io).poll_flush(cx);
        this.deadline(cx, attempt)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    impl Cut for DuplexStream {
        fn cut(&self) {}
    }

    /// A connection whose client side holds 64 KiB unread at most.
    fn connected() -> (DuplexStream, WriteGuard<DuplexStream>) {
        let (client, server) = tokio::io::duplex(64 * 1024);
        (client, WriteGuard::new(server, Duration::from_secs(30)))
    }

    /// On tokio's paused clock: a client that reads nothing holds the
    /// writes up to the limit, not a moment past it.
    #[tokio::test(start_paused = true)]
    async fn a_client_that_stops_reading_is_cut_off_after_the_limit() {
        let (_client, mut guarded) = connected();
        let chunk = vec![b'x'; 16 * 1024];
        let started = tokio::time::Instant::now();
        let cut = loop {
            if let Err(error) = guarded.write_all(&chunk).await {
                break error;
            }
        };
        assert_eq!(cut.kind(), io::ErrorKind::TimedOut);
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(30),
            "cut off when the limit passed without progress"
        );
    }

    /// A slow reader that keeps reading keeps its connection, however long
    /// the whole answer takes.
    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_that_reads_is_never_cut_off() {
        let (mut client, mut guarded) = connected();
        let answer = 4 * 1024 * 1024;
        let reader = tokio::spawn(async move {
            let mut buf = vec![0; 64 * 1024];
            let mut read = 0;
            while read < answer {
                tokio::time::sleep(Duration::from_secs(20)).await;
                read += client.read(&mut buf).await.unwrap();
            }
        });
        let started = tokio::time::Instant::now();
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..answer / chunk.len() {
            guarded.write_all(&chunk).await.unwrap();
        }
        reader.await.unwrap();
        assert!(
            started.elapsed() > Duration::from_secs(600),
            "20 minutes of answer, 20 s at a time"
        );
    }
}
