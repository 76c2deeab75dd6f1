//! A server of the tool's own on 127.0.0.1 (the autotune scenario's test
//! origin, the notify scenario's webhook receiver): a thread with its own
//! runtime, so its answers never wait for the tool's load, serving until
//! it is stopped or dropped.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use crate::error::LoadError;

pub struct Loopback {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Loopback {
    /// Binds a free port and serves each connection on it with
    /// `connection`, in a task of its own; `what` names the server in
    /// errors and its thread.
    pub fn start<F>(
        what: &'static str,
        connection: impl Fn(TcpStream) -> F + Send + 'static,
    ) -> Result<Loopback, LoadError>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(LoadError::io(format!("{what}: binding 127.0.0.1:0")))?;
        listener
            .set_nonblocking(true)
            .map_err(LoadError::io(format!("{what}: its listener")))?;
        let addr = listener
            .local_addr()
            .map_err(LoadError::io(format!("{what}: its address")))?;
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(what.into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime for a loopback server");
                runtime.block_on(async move {
                    let listener = TcpListener::from_std(listener).expect("a tokio listener");
                    tokio::select! {
                        () = accept_forever(listener, connection) => {}
                        _ = stopped => {}
                    }
                });
            })
            .map_err(LoadError::io(format!("{what}: its thread")))?;
        Ok(Loopback {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Stops serving: open connections are cut.
    pub fn halt(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.halt();
    }
}

async fn accept_forever<F>(listener: TcpListener, connection: impl Fn(TcpStream) -> F)
where
    F: Future<Output = ()> + Send + 'static,
{
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(connection(stream));
            }
            // Out of descriptors, say: try again shortly.
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}
