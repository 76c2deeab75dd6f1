//! A protected site on a port of its own, for the tests of what stands in
//! front of one (nginx and the other proxies, the edge worker): it answers
//! every request 200 and keeps each request's head for the test to read.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the site answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Says {
    /// `protected`.
    Protected,
    /// `protected: ` and the `X-Waitroom-Visitor` it was sent (the edge
    /// worker names the pass's visitor so).
    ProtectedAndTheVisitor,
}

pub struct ProtectedOrigin {
    pub port: u16,
    /// Each request's head, lowercased.
    seen: Arc<Mutex<Vec<String>>>,
}

impl ProtectedOrigin {
    pub async fn start(says: Says) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let record = record.clone();
                tokio::spawn(async move {
                    let Some(head) = request_head(&mut stream).await else {
                        return;
                    };
                    let body = match says {
                        Says::Protected => "protected".to_string(),
                        Says::ProtectedAndTheVisitor => {
                            format!("protected: {}", header(&head, "x-waitroom-visitor"))
                        }
                    };
                    record.lock().unwrap().push(head.to_lowercase());
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\
                         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(answer.as_bytes()).await;
                });
            }
        });
        Self { port, seen }
    }

    /// How many requests it has answered.
    pub fn served(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// The last request's head, lowercased.
    pub fn last(&self) -> String {
        self.seen
            .lock()
            .unwrap()
            .last()
            .cloned()
            .unwrap_or_default()
    }
}

/// A request's head as it came, up to its blank line; `None` if the
/// connection ended first.
pub async fn request_head(stream: &mut TcpStream) -> Option<String> {
    let mut request = Vec::new();
    let mut buffer = [0u8; 4096];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => request.extend_from_slice(&buffer[..n]),
        }
    }
    Some(String::from_utf8_lossy(&request).into_owned())
}

/// A header's value in a request's head, `""` without it.
fn header(head: &str, name: &str) -> String {
    head.lines()
        .find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_string())
        })
        .unwrap_or_default()
}
