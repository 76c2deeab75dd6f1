//! What the applications a test binary starts log: one subscriber for the
//! whole binary (a process has one), written in the server's own text
//! format with a line for every request span as it closes, and kept in
//! memory for the tests that read the logs. Out of the test output, which
//! it would flood; `WAITROOM_TEST_LOG=1` sends it to stderr as well.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

static CAPTURED: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();

#[derive(Clone)]
struct Capture {
    buffer: Arc<Mutex<Vec<u8>>>,
    echo: bool,
}

impl Write for Capture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buffer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(bytes);
        if self.echo {
            std::io::stderr().write_all(bytes)?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the binary's subscriber, once.
pub fn init() {
    CAPTURED.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = Capture {
            buffer: buffer.clone(),
            echo: std::env::var_os("WAITROOM_TEST_LOG").is_some(),
        };
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
        // Another subscriber may be in place (a bench's): its logs then.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .try_init();
        buffer
    });
}

/// Everything logged so far.
pub fn captured() -> String {
    init();
    let buffer = CAPTURED.get().expect("installed above");
    String::from_utf8_lossy(&buffer.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
}
