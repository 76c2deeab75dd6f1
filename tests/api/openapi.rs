//! The API description (`GET /api/openapi.json`, src/http/openapi.rs) kept
//! true to the server: every route the app registers is described with its
//! methods and nothing else is; the committed copy `docs/openapi.json` is
//! what the server serves; the document validates (`openapi-spec-validator`);
//! and schemathesis, run against a live node, finds no 5xx and no answer
//! that breaks its schema. The two Python tools come from the venv that
//! `./scripts/test` installs (`target/openapi-tools`, or the directory in
//! `WAITROOM_OPENAPI_TOOLS`); a missing tool fails the test.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use syn::visit::Visit;
use waitroom_testkit::TestApp;
use waitroom_testkit::node::{ADMIN_TOKEN, Node};

const COPY: &str = "docs/openapi.json";
/// Set to refresh the committed copy from what the server serves.
const REFRESH: &str = "WAITROOM_REFRESH_OPENAPI";
/// The command that does it, as the failure and docs/src/openapi.md say.
const REFRESH_COMMAND: &str = "WAITROOM_REFRESH_OPENAPI=1 cargo test --test api the_committed_copy";
/// The methods a description and a `web::resource` both name.
const METHODS: [&str; 5] = ["get", "put", "post", "delete", "patch"];
/// The schemathesis runs' bounds: examples per operation, the seed, and
/// how long one run may take before the test takes it for hung (hypothesis
/// once hung on an internal error). Not a speed check: the run of every
/// operation takes 18 s on a quiet machine, and ten times as long while the
/// rest of the suite and something else share the two cores (a CI run took
/// 66 s for the twelve visitor operations that take 6 s here), so the
/// bound is far past that and still well inside the suite's 30 minutes.
const MAX_EXAMPLES: &str = "50";
const SEED: &str = "20261126";
const SCHEMATHESIS_DEADLINE: Duration = Duration::from_secs(480);

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A tool of the venv `./scripts/test` installs; fails loudly without it.
fn tool(name: &str) -> PathBuf {
    let dir = std::env::var_os("WAITROOM_OPENAPI_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/openapi-tools/bin"));
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{} is missing: run ./scripts/test, which installs it, or \
         `python3 -m venv target/openapi-tools && target/openapi-tools/bin/pip install \
         openapi-spec-validator 'schemathesis>=4,<5'`",
        path.display()
    );
    path
}

async fn served(app: &TestApp) -> Value {
    let answer = app
        .http
        .get(app.url("/api/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    answer.json().await.unwrap()
}

fn pretty(doc: &Value) -> String {
    serde_json::to_string_pretty(doc).unwrap() + "\n"
}

#[tokio::test]
async fn the_committed_copy_is_what_the_server_serves() {
    let app = TestApp::spawn().await;
    let served = pretty(&served(&app).await);
    let copy = root().join(COPY);
    if std::env::var_os(REFRESH).is_some() {
        std::fs::write(&copy, &served).unwrap();
    }
    let committed = std::fs::read_to_string(&copy).unwrap_or_default();
    assert!(
        committed == served,
        "{COPY} is not what GET /api/openapi.json serves; refresh it with\n  \
         {REFRESH_COMMAND}\nand commit it"
    );
    let chapter = std::fs::read_to_string(root().join("docs/src/openapi.md")).unwrap();
    assert!(
        chapter.contains(REFRESH_COMMAND),
        "docs/src/openapi.md gives another command"
    );
}

/// Every route registered with `web::resource("…")` in src/http, with the
/// methods its chain names (`.get(…)`, `.post(…)`, …), read from the source
/// as Rust: the same calls the app makes, so the list cannot go stale.
fn registered_routes() -> BTreeSet<(String, String)> {
    #[derive(Default)]
    struct Routes {
        methods: BTreeMap<String, BTreeSet<String>>,
        other_ways: Vec<String>,
    }

    impl<'ast> Visit<'ast> for Routes {
        fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
            let mut chain = vec![call.method.to_string()];
            let mut receiver = &*call.receiver;
            while let syn::Expr::MethodCall(inner) = receiver {
                chain.push(inner.method.to_string());
                receiver = &inner.receiver;
            }
            if let Some(path) = resource_path(receiver) {
                let methods = self.methods.entry(path).or_default();
                methods.extend(chain.into_iter().filter(|m| METHODS.contains(&m.as_str())));
            }
            if call.method == "route" || call.method == "to" {
                self.other_ways.push(format!("a .{}(…) call", call.method));
            }
            syn::visit::visit_expr_method_call(self, call);
        }

        fn visit_path(&mut self, path: &'ast syn::Path) {
            if path.segments.iter().any(|s| s.ident == "scope") {
                self.other_ways.push("web::scope".into());
            }
            syn::visit::visit_path(self, path);
        }
    }

    /// A path as OpenAPI writes it: `{original:.*}` (actix's segment with
    /// its pattern) is `{original}`.
    fn without_patterns(path: &str) -> String {
        let mut out = String::new();
        let mut in_pattern = false;
        for c in path.chars() {
            match c {
                ':' if out.rfind('{') > out.rfind('}') => in_pattern = true,
                '}' => {
                    in_pattern = false;
                    out.push(c);
                }
                _ if in_pattern => {}
                _ => out.push(c),
            }
        }
        out
    }

    /// The literal of a `web::resource("…")` call.
    fn resource_path(expr: &syn::Expr) -> Option<String> {
        let syn::Expr::Call(call) = expr else {
            return None;
        };
        let syn::Expr::Path(function) = &*call.func else {
            return None;
        };
        if function.path.segments.last()?.ident != "resource" {
            return None;
        }
        match call.args.first()? {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(path),
                ..
            }) => Some(without_patterns(&path.value())),
            _ => panic!("a web::resource whose path is not a literal"),
        }
    }

    fn files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    let mut sources = Vec::new();
    files(&root().join("src/http"), &mut sources);
    let mut routes = Routes::default();
    for file in &sources {
        let text = std::fs::read_to_string(file).unwrap();
        let parsed = syn::parse_file(&text).unwrap();
        let before = routes.other_ways.len();
        routes.visit_file(&parsed);
        // Routes are registered as `web::resource` alone, so this reading
        // sees them all.
        let found: Vec<_> = routes.other_ways.drain(before..).collect();
        assert!(
            found.is_empty(),
            "{} registers a route another way ({found:?}): register it with \
             web::resource(\"…\") so tests/api/openapi.rs sees it",
            file.display()
        );
    }
    assert!(
        routes.methods.len() > 20,
        "the reading of src/http found only {:?}",
        routes.methods
    );
    routes
        .methods
        .into_iter()
        .flat_map(|(path, methods)| methods.into_iter().map(move |m| (m, path.clone())))
        .collect()
}

fn described_routes(doc: &Value) -> BTreeSet<(String, String)> {
    let mut routes = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in METHODS {
            if item.get(method).is_some() {
                routes.insert((method.to_string(), path.clone()));
            }
        }
    }
    routes
}

#[tokio::test]
async fn every_route_is_described_and_nothing_else() {
    let app = TestApp::spawn().await;
    let described = described_routes(&served(&app).await);
    let registered = registered_routes();
    let undescribed: Vec<_> = registered.difference(&described).collect();
    let unregistered: Vec<_> = described.difference(&registered).collect();
    assert!(
        undescribed.is_empty() && unregistered.is_empty(),
        "routes without a description (add #[utoipa::path] to the handler and \
         name it in ApiDoc's paths, src/http/openapi.rs): {undescribed:?}\n\
         described but not registered: {unregistered:?}"
    );
}

#[tokio::test]
async fn every_error_answer_is_the_error_body_with_its_codes() {
    let app = TestApp::spawn().await;
    let doc = served(&app).await;
    let mut seen = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in METHODS {
            let Some(operation) = item.get(method) else {
                continue;
            };
            for (status, answer) in operation["responses"].as_object().unwrap() {
                let json = &answer["content"]["application/json"]["schema"];
                if status.as_str() < "400" || json.is_null() {
                    continue;
                }
                // An answer that is HTML or an error (the admin login's 400).
                if answer["content"].get("text/html").is_some()
                    && json["$ref"] == "#/components/schemas/Error"
                {
                    continue;
                }
                let codes = &json["allOf"][1]["properties"]["error"]["properties"]["code"]["enum"];
                assert!(
                    json["allOf"][0]["$ref"] == "#/components/schemas/Error"
                        && codes.as_array().is_some_and(|c| !c.is_empty()),
                    "{method} {path} {status}: {answer}"
                );
                seen += 1;
            }
        }
    }
    assert!(seen > 50, "only {seen} error answers");
    // The operator's lockout: 429 with Retry-After, on every admin route.
    let lockout = &doc["paths"]["/api/admin/rooms"]["get"]["responses"]["429"];
    assert_eq!(lockout["headers"]["Retry-After"]["required"], true);
    let codes = &lockout["content"]["application/json"]["schema"]["allOf"][1];
    assert_eq!(
        codes["properties"]["error"]["properties"]["code"]["enum"],
        serde_json::json!(["too_many_attempts"])
    );
}

#[tokio::test]
async fn the_description_validates() {
    let validator = tool("openapi-spec-validator");
    let app = TestApp::spawn().await;
    let file = std::env::temp_dir().join(format!("waitroom-openapi-{}.json", std::process::id()));
    std::fs::write(&file, pretty(&served(&app).await)).unwrap();
    let run = Command::new(validator).arg(&file).output().unwrap();
    let _ = std::fs::remove_file(&file);
    assert!(
        run.status.success(),
        "openapi-spec-validator refused the description:\n{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
}

/// schemathesis against the real binary on the memory store, with the
/// demo room (and its seat sale) for the examples to reach. Three runs, so
/// that the routes behind a visitor's credential are reached past their
/// 401: the sale's with a pass of the demo room as Bearer, the visitor's
/// with a ticket, and every route with the admin token. Each run has a
/// node of its own (the admin's may close the room), so they run side by
/// side.
#[tokio::test]
async fn schemathesis_finds_no_server_error_and_no_answer_off_its_schema() {
    let st = tool("st");
    let runs = [Credential::Pass, Credential::Ticket, Credential::Admin].map(|credential| {
        let st = st.clone();
        async move {
            let node = Node::start(env!("CARGO_BIN_EXE_waitroom"), &["--demo-room"]);
            let (authorization, only) = credential.on(&node).await;
            let url = node.url("/api/openapi.json");
            let text =
                tokio::task::spawn_blocking(move || schemathesis(&st, &url, &authorization, only))
                    .await
                    .unwrap();
            eprintln!("{text}");
            drop(node);
        }
    });
    futures_util::future::join_all(runs).await;
}

/// Whose credential a schemathesis run carries.
#[derive(Clone, Copy)]
enum Credential {
    /// A pass of the demo room, for the sale's operations.
    Pass,
    /// A ticket, for the visitor's operations.
    Ticket,
    /// The admin token, for every operation.
    Admin,
}

impl Credential {
    /// The `Authorization` header on `node`, and the tag of the operations
    /// it opens.
    async fn on(self, node: &Node) -> (String, Option<&'static str>) {
        let admin = format!("Bearer {ADMIN_TOKEN}");
        if let Credential::Admin = self {
            return (admin, None);
        }
        let http = reqwest::Client::new();
        // Passthrough admits at once, so one join holds both a ticket and a pass.
        let changed = http
            .patch(node.url("/api/admin/rooms/demo"))
            .header("Authorization", &admin)
            .json(&serde_json::json!({"queue_method": "passthrough"}))
            .send()
            .await
            .unwrap();
        assert_eq!(changed.status(), 200);
        let joined: Value = http
            .post(node.url("/api/rooms/demo/join"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(joined["state"], "admitted", "{joined}");
        match self {
            Credential::Pass => (
                format!("Bearer {}", joined["pass"].as_str().unwrap()),
                Some("sale"),
            ),
            _ => (
                format!("Bearer {}", joined["ticket"].as_str().unwrap()),
                Some("visitor"),
            ),
        }
    }
}

/// One schemathesis run (of the operations tagged `only`, or all), every
/// request carrying `authorization`; its output. Fails on any finding.
fn schemathesis(st: &Path, url: &str, authorization: &str, only: Option<&str>) -> String {
    let report = std::env::temp_dir().join(format!(
        "waitroom-schemathesis-{}-{}",
        std::process::id(),
        only.unwrap_or("all")
    ));
    let mut command = Command::new(st);
    command
        .args([
            "run",
            url,
            "--header",
            &format!("Authorization: {authorization}"),
            "--checks",
            // The two the issue asks for, and that every status, media type
            // and header of an answer is one the description gives.
            "not_a_server_error,response_schema_conformance,status_code_conformance,\
             content_type_conformance,response_headers_conformance",
            "--phases",
            "examples,coverage,fuzzing",
            "--max-examples",
            MAX_EXAMPLES,
            "--seed",
            SEED,
            // One worker: with two, a run once stopped on an internal error
            // of hypothesis and then hung.
            "--workers",
            "1",
            "--request-timeout",
            "10",
            "--no-color",
            "--report-dir",
        ])
        .arg(&report);
    if let Some(tag) = only {
        command.args(["--include-tag", tag]);
    }
    let mut run = command
        .current_dir(std::env::temp_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while run.try_wait().unwrap().is_none() {
        if started.elapsed() > SCHEMATHESIS_DEADLINE {
            run.kill().unwrap();
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let output = run.wait_with_output().unwrap();
    let _ = std::fs::remove_dir_all(&report);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let which = only.unwrap_or("every operation");
    assert!(
        started.elapsed() <= SCHEMATHESIS_DEADLINE,
        "schemathesis ({which}) ran past {SCHEMATHESIS_DEADLINE:?}:\n{text}"
    );
    assert!(
        output.status.success(),
        "schemathesis ({which}) found answers the description does not allow (or 5xx):\n{text}"
    );
    text
}

// What schemathesis found, each kept by a test of its own.

/// A closed room's refusals named it as Rust's debug form of its id
/// (`room RoomId("demo") is closed`); they name the id as the client wrote it.
#[tokio::test]
async fn refusals_name_the_room_as_its_id() {
    let app = TestApp::spawn().await;
    app.create_room("shut", serde_json::json!({})).await;
    let again = app
        .admin(reqwest::Method::POST, "/api/admin/rooms")
        .json(&serde_json::json!({"id": "shut", "name": "Shut", "target_url": "/x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 409);
    let body: Value = again.json().await.unwrap();
    assert_eq!(body["error"]["code"], "room_exists");
    assert_eq!(
        body["error"]["message"],
        "a room called \"shut\" already exists"
    );
    let closed = app
        .admin(reqwest::Method::DELETE, "/api/admin/rooms/shut")
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status(), 204);
    let entries = app
        .http
        .get(app.url("/api/rooms/shut/draw/entries"))
        .send()
        .await
        .unwrap();
    assert_eq!(entries.status(), 409);
    let body: Value = entries.json().await.unwrap();
    assert_eq!(body["error"]["code"], "room_closed");
    assert_eq!(body["error"]["message"], "room \"shut\" is closed");
}

/// The description gives the join's body as optional (`JoinBody` or null):
/// a JSON `null` joins as no body does, and anything else not an object is
/// still a 400.
#[tokio::test]
async fn a_join_with_a_null_body_joins() {
    let app = TestApp::spawn().await;
    app.create_room("open", serde_json::json!({})).await;
    let join = |body: &'static str| {
        app.http
            .post(app.url("/api/rooms/open/join"))
            .header("Content-Type", "application/json")
            .body(body)
            .send()
    };
    let joined = join("null").await.unwrap();
    assert_eq!(joined.status(), 200);
    let status: Value = joined.json().await.unwrap();
    assert!(status["ticket"].as_str().is_some_and(|t| !t.is_empty()));
    let refused = join("[]").await.unwrap();
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_json");
}
