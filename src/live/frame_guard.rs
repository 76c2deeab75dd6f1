//! Refuses a WebSocket frame whose declared length is over the limit as soon
//! as its header has arrived. Written by hand because actix-http's frame
//! parser (under actix-ws) compares a frame with its limit only once the
//! whole declared frame is buffered: a header declaring 2^40 bytes, followed
//! by a stream of data, would grow that buffer without bound. The guard sits
//! on the raw request payload and reads only frame headers; frames are still
//! parsed by actix. It also sums the frames of a fragmented message, so a
//! message over the limit is refused (1009) at the header of the fragment
//! that takes it over, as a single frame would be.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use actix_web::error::PayloadError;
use actix_web::web::Bytes;
use futures_util::Stream;

/// The longest frame header: 2 bytes, an 8-byte length, a 4-byte mask.
const MAX_HEADER: usize = 14;

pub struct FrameGuard<S> {
    inner: S,
    limit: u64,
    header: [u8; MAX_HEADER],
    /// Header bytes of the current frame read so far.
    have: usize,
    /// Payload bytes of the current frame still to come.
    payload_left: u64,
    /// Payload bytes of the current data message so far, its fragments
    /// summed (control frames, which may come between them, aside).
    message_len: u64,
    /// Set when a frame was refused, for the socket's loop to close with 1009.
    oversized: Arc<AtomicBool>,
}

impl<S> FrameGuard<S> {
    pub fn new(inner: S, limit: usize) -> (Self, Arc<AtomicBool>) {
        let oversized = Arc::new(AtomicBool::new(false));
        let guard = Self {
            inner,
            limit: limit as u64,
            header: [0; MAX_HEADER],
            have: 0,
            payload_left: 0,
            message_len: 0,
            oversized: oversized.clone(),
        };
        (guard, oversized)
    }

    /// Follows frame boundaries through one chunk; false at the first
    /// header that declares too much.
    fn scan(&mut self, mut chunk: &[u8]) -> bool {
        while !chunk.is_empty() {
            if self.payload_left > 0 {
                let skip = self.payload_left.min(chunk.len() as u64);
                self.payload_left -= skip;
                chunk = &chunk[skip as usize..];
                continue;
            }
            self.header[self.have] = chunk[0];
            self.have += 1;
            chunk = &chunk[1..];
            let header = &self.header[..self.have];
            if header_len(header).is_some_and(|needed| self.have == needed) {
                let declared = declared_len(header);
                if declared > self.limit {
                    return false;
                }
                let (fin, opcode) = (header[0] & 0x80 != 0, header[0] & 0x0f);
                // 0 continues a message; 1 to 7 start one; 8 and up are control frames.
                if opcode < 8 {
                    let so_far = if opcode == 0 { self.message_len } else { 0 };
                    self.message_len = so_far + declared;
                    if self.message_len > self.limit {
                        return false;
                    }
                    if fin {
                        self.message_len = 0;
                    }
                }
                self.payload_left = declared;
                self.have = 0;
            }
        }
        true
    }
}

/// The length of a header that starts with `start`, once its second byte is known.
fn header_len(start: &[u8]) -> Option<usize> {
    let second = *start.get(1)?;
    let length_bytes = match second & 0x7f {
        126 => 2,
        127 => 8,
        _ => 0,
    };
    let mask_bytes = if second & 0x80 != 0 { 4 } else { 0 };
    Some(2 + length_bytes + mask_bytes)
}

/// The payload length a whole header declares.
fn declared_len(header: &[u8]) -> u64 {
    match header[1] & 0x7f {
        126 => u64::from(u16::from_be_bytes([header[2], header[3]])),
        127 => u64::from_be_bytes(header[2..10].try_into().expect("8 bytes")),
        short => u64::from(short),
    }
}

impl<S> Stream for FrameGuard<S>
where
    S: Stream<Item = Result<Bytes, PayloadError>> + Unpin,
{
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.oversized.load(Ordering::Relaxed) {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_next(cx) {
            Poll::Ready(Some(Ok(bytes))) if !this.scan(&bytes) => {
                this.oversized.store(true, Ordering::Relaxed);
                Poll::Ready(Some(Err(PayloadError::Overflow)))
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    /// A masked client frame header declaring `len` bytes: a whole text message.
    fn header(len: u64) -> Vec<u8> {
        frame_header(0x81, len)
    }

    /// A masked client frame header with its first byte (FIN and opcode).
    fn frame_header(first: u8, len: u64) -> Vec<u8> {
        let mut h = vec![first];
        match len {
            0..=125 => h.push(0x80 | len as u8),
            126..=0xffff => {
                h.push(0x80 | 126);
                h.extend_from_slice(&(len as u16).to_be_bytes());
            }
            _ => {
                h.push(0x80 | 127);
                h.extend_from_slice(&len.to_be_bytes());
            }
        }
        h.extend_from_slice(&[1, 2, 3, 4]);
        h
    }

    async fn run(chunks: Vec<Vec<u8>>) -> (usize, bool) {
        let stream = futures_util::stream::iter(chunks.into_iter().map(|c| Ok(Bytes::from(c))));
        let (guard, oversized) = FrameGuard::new(stream, 4096);
        let passed = guard
            .take_while(|c| std::future::ready(c.is_ok()))
            .count()
            .await;
        (passed, oversized.load(Ordering::Relaxed))
    }

    #[tokio::test]
    async fn frames_within_the_limit_pass_in_any_split() {
        let mut bytes = header(5);
        bytes.extend_from_slice(b"hello");
        bytes.extend(header(4096));
        bytes.extend(vec![0; 4096]);
        bytes.extend(header(0));
        // One byte at a time: headers split anywhere are still followed.
        let chunks: Vec<Vec<u8>> = bytes.iter().map(|b| vec![*b]).collect();
        let count = chunks.len();
        assert_eq!(run(chunks).await, (count, false));
    }

    #[tokio::test]
    async fn a_huge_declared_length_is_refused_at_its_header() {
        let mut first = header(3);
        first.extend_from_slice(b"abc");
        // The 2^40-byte frame's header arrives alone: refused before any of its data.
        let chunks = vec![first, header(1 << 40), vec![0; 1024], vec![0; 1024]];
        assert_eq!(run(chunks).await, (1, true));
        assert_eq!(run(vec![header(4097)]).await, (0, true));
        assert_eq!(
            run(vec![
                header(70_000)[..3].to_vec(),
                header(70_000)[3..].to_vec()
            ])
            .await,
            (1, true)
        );
    }

    /// A fragmented message is measured whole: refused at the header of
    /// the fragment that takes it past the limit, whatever control frames
    /// come between; the next message starts from nothing.
    #[tokio::test]
    async fn a_fragmented_message_over_the_limit_is_refused_at_its_fragment() {
        let frame = |first: u8, len: usize| {
            let mut bytes = frame_header(first, len as u64);
            bytes.extend(vec![b'x'; len]);
            bytes
        };
        // Text without FIN, a ping, a continuation, the last one: 4096 in all.
        let whole = vec![
            frame(0x01, 2000),
            frame(0x89, 4),
            frame(0x00, 2000),
            frame(0x80, 96),
            frame(0x81, 4096),
        ];
        assert_eq!(run(whole).await, (5, false));
        let over = vec![
            frame(0x01, 2000),
            frame(0x00, 2000),
            frame_header(0x80, 97),
            vec![b'x'; 97],
        ];
        assert_eq!(run(over).await, (2, true));
    }
}
