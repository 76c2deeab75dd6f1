//! Headless Chromium for the browser tests: chromedriver on a free port,
//! one browser session per test, both killed when dropped (panics
//! included). Without Debian's `chromium` and `chromium-driver` (or the
//! paths in `WAITROOM_CHROMIUM` / `WAITROOM_CHROMEDRIVER`) a test fails
//! with the command that installs them; it never skips.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::ports::spawn_listening;

const DEFAULT_CHROMIUM: &str = "/usr/bin/chromium";
const DEFAULT_CHROMEDRIVER: &str = "/usr/bin/chromedriver";

pub fn tool(var: &str, default: &str) -> PathBuf {
    let path = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default));
    assert!(
        path.is_file(),
        "browser tests need {} (set {var} to use another path); on Debian: \
         `apt-get install -y chromium chromium-driver`",
        path.display()
    );
    path
}

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(label: &str) -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let path = std::env::temp_dir().join(format!(
            "waitroom-{label}-{}-{nanos}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).expect("a temp dir");
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// chromedriver on its own port; killed when dropped, panics included.
pub struct Driver {
    child: Child,
    port: u16,
    // Dropped after the child is killed (fields drop in order after `drop`).
    profile: TempDir,
}

impl Driver {
    pub async fn start() -> Self {
        let chromedriver = tool("WAITROOM_CHROMEDRIVER", DEFAULT_CHROMEDRIVER);
        tool("WAITROOM_CHROMIUM", DEFAULT_CHROMIUM);
        // Listening is not ready: it answers /status once it is.
        let (child, port) = tokio::task::spawn_blocking(move || {
            spawn_listening("chromedriver", Duration::from_secs(20), |port| {
                let mut command = Command::new(&chromedriver);
                command
                    .arg(format!("--port={port}"))
                    .arg("--allowed-ips=127.0.0.1")
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null());
                command
            })
        })
        .await
        .expect("chromedriver starts");
        let driver = Self {
            child,
            port,
            profile: TempDir::new("chromium-profile"),
        };
        driver.wait_until_ready().await;
        driver
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    async fn wait_until_ready(&self) {
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(response) = http.get(format!("{}/status", self.url())).send().await
                && let Ok(status) = response.json::<Value>().await
                && status["value"]["ready"] == true
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver did not answer on port {} within 20 s",
                self.port
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A new headless browser session of the given window size; `prefs` are
    /// Chromium preferences (e.g. the accepted languages).
    pub async fn browser(&self, width: u32, height: u32, prefs: Value) -> Client {
        let chromium = tool("WAITROOM_CHROMIUM", DEFAULT_CHROMIUM);
        let args = vec![
            "--headless=new".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--hide-scrollbars".into(),
            format!("--window-size={width},{height}"),
            format!("--user-data-dir={}", self.profile.0.display()),
        ];
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({"binary": chromium, "args": args, "prefs": prefs}),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&self.url())
            .await
            .expect("a browser session from chromedriver");
        // Headless windows may start at another size; make it the asked one.
        let _ = client.set_window_size(width, height).await;
        client
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A browser whose session was never closed (a failed test) outlives
        // chromedriver: end it too, found by the profile dir only it uses.
        for pid in processes_using(&self.profile.0) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Ids of the processes whose command line names `dir` (Linux `/proc`).
fn processes_using(dir: &Path) -> Vec<u32> {
    let needle = format!("--user-data-dir={}", dir.display());
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            cmdline
                .split(|&b| b == 0)
                .any(|arg| arg == needle.as_bytes())
                .then_some(pid)
        })
        .collect()
}

/// Signs `browser` in on `app`'s admin page with its admin token, and waits
/// for the signed-in page.
pub async fn admin_login(browser: &Client, app: &crate::TestApp) {
    browser.goto(&app.url("/admin")).await.unwrap();
    browser
        .find(Locator::Id("token"))
        .await
        .expect("the login form")
        .send_keys(&app.admin_token)
        .await
        .unwrap();
    browser
        .find(Locator::Id("login-submit"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    crate::eventually("the signed-in admin page", crate::PATIENCE, || async {
        browser.find(Locator::Id("logout")).await.ok()
    })
    .await;
}
