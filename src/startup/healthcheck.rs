//! `waitroom healthcheck`: one `GET /healthz` to the node at `--listen`,
//! for a container's `HEALTHCHECK`. The slim runtime image has no curl or
//! wget, and adding them (with their TLS libraries) to every image for one
//! request on the loopback is a poor trade; a plain HTTP/1.1 GET over std's
//! `TcpStream` is a few lines, needs no runtime and no new crate.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// How long the check waits to connect, and then for the answer.
const TIMEOUT: Duration = Duration::from_secs(2);

/// Where to reach a node that listens on `listen`: an unspecified address
/// (`0.0.0.0`, `[::]`, what a container listens on) is reached on the
/// loopback of its family.
pub fn reach(listen: &str) -> Result<Vec<SocketAddr>, String> {
    let addresses: Vec<SocketAddr> = listen
        .to_socket_addrs()
        .map_err(|e| format!("--listen {listen:?} is not an address: {e}"))?
        .map(|mut address| {
            if address.ip().is_unspecified() {
                address.set_ip(match address.ip() {
                    IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                    IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
                });
            }
            address
        })
        .collect();
    if addresses.is_empty() {
        return Err(format!("--listen {listen:?} names no address"));
    }
    Ok(addresses)
}

/// Asks `/healthz` of the node at `listen`: `Ok` when it answers 200.
pub fn check(listen: &str) -> Result<(), String> {
    let mut last = String::new();
    for address in reach(listen)? {
        match get_healthz(address) {
            Ok(()) => return Ok(()),
            Err(reason) => last = format!("{address}: {reason}"),
        }
    }
    Err(last)
}

fn get_healthz(address: SocketAddr) -> Result<(), String> {
    let mut stream = TcpStream::connect_timeout(&address, TIMEOUT).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(TIMEOUT)))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .map_err(|e| e.to_string())?;
    // The status line is all that matters; it comes first and is short.
    let mut head = [0u8; 64];
    let mut read = 0;
    while read < head.len() {
        match stream.read(&mut head[read..]) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e) => return Err(e.to_string()),
        }
        if head[..read].contains(&b'\n') {
            break;
        }
    }
    let status_line = String::from_utf8_lossy(&head[..read]);
    let status_line = status_line.lines().next().unwrap_or_default();
    match status_line.split(' ').nth(1) {
        Some("200") => Ok(()),
        _ => Err(format!("answered {status_line:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A server that answers one connection with `answer`.
    fn answering(answer: &'static str) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = [0u8; 256];
            let _ = stream.read(&mut request).unwrap();
            assert!(request.starts_with(b"GET /healthz HTTP/1.1\r\n"));
            stream.write_all(answer.as_bytes()).unwrap();
        });
        format!("0.0.0.0:{}", address.port())
    }

    #[test]
    fn an_unspecified_address_is_reached_on_the_loopback() {
        assert_eq!(
            reach("0.0.0.0:8080").unwrap(),
            vec!["127.0.0.1:8080".parse().unwrap()]
        );
        assert_eq!(
            reach("[::]:8080").unwrap(),
            vec!["[::1]:8080".parse().unwrap()]
        );
        assert_eq!(
            reach("10.1.2.3:80").unwrap(),
            vec!["10.1.2.3:80".parse().unwrap()]
        );
        assert!(reach("no port").is_err());
    }

    #[test]
    fn only_a_200_is_healthy() {
        assert_eq!(
            check(&answering("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")),
            Ok(())
        );
        let error = check(&answering("HTTP/1.1 503 Service Unavailable\r\n\r\n")).unwrap_err();
        assert!(error.contains("503"), "{error}");
        let error = check(&answering("")).unwrap_err();
        assert!(error.contains("answered"), "{error}");
    }

    #[test]
    fn nothing_listening_is_unhealthy() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        assert!(check(&format!("127.0.0.1:{port}")).is_err());
    }
}
