//! The dashboard and the alerts in `deploy/` against the real thing:
//! `promtool check rules` and `promtool test rules` (the unit tests of every
//! alert, firing and not) pass; the dashboard parses, its queries are valid
//! PromQL (promtool checks them as rules); and every metric the dashboard's
//! queries and the alert rules name is exported by a running node's
//! `/metrics`, on the memory store and on Redis.

use support::FetchJson;
use support::repo;
use waitroom_testkit as support;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::next_status;
use support::node::{ADMIN_TOKEN, Node};
use support::redis::RedisServer;

const DASHBOARD: &str = "deploy/grafana/waitroom.json";
const ALERTS: &str = "deploy/prometheus/alerts.yml";
const ALERT_TESTS: &str = "deploy/prometheus/alerts.test.yml";
/// Series Prometheus makes itself for every target; no node exports them.
const MADE_BY_PROMETHEUS: &[&str] = &["up"];
/// How long a node may take to have run a tick and shown every series.
const SERIES_DEADLINE: Duration = Duration::from_secs(15);

fn read(path: &str) -> String {
    std::fs::read_to_string(repo(path)).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

/// promtool, from Debian's `prometheus` package (./scripts/test installs it).
fn promtool(args: &[&str]) -> (bool, String) {
    let output = Command::new("promtool").args(args).output().unwrap_or_else(|e| {
        panic!("promtool cannot run ({e}): install the Debian package `prometheus` (./scripts/test does)")
    });
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), said)
}

#[test]
fn the_alert_rules_pass_promtool_check_and_their_unit_tests() {
    let (ok, said) = promtool(&["check", "rules", repo(ALERTS).to_str().unwrap()]);
    assert!(ok, "promtool check rules:\n{said}");
    assert!(said.contains("SUCCESS"), "{said}");
    let (ok, said) = promtool(&["test", "rules", repo(ALERT_TESTS).to_str().unwrap()]);
    assert!(ok, "promtool test rules:\n{said}");
    // Every alert has unit tests, each with a time it fires and one it does not.
    let tests = read(ALERT_TESTS);
    for alert in alert_names(&read(ALERTS)) {
        let cases: Vec<&str> = tests
            .split("- eval_time:")
            .skip(1)
            .filter(|case| case.contains(&format!("alertname: {alert}\n")))
            .collect();
        assert!(
            cases.iter().any(|case| case.contains("exp_alerts: []")),
            "{alert} has no unit test where it does not fire"
        );
        assert!(
            cases.iter().any(|case| case.contains("exp_labels")),
            "{alert} has no unit test where it fires"
        );
    }
}

#[test]
fn the_dashboard_parses_and_its_queries_are_valid_promql() {
    let dashboard = dashboard();
    assert_eq!(dashboard["uid"], "waitroom");
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    assert!(
        variables.iter().any(|v| v["name"] == "room"),
        "the dashboard has a room variable"
    );
    let titles: Vec<&str> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["title"].as_str().unwrap())
        .collect();
    for wanted in [
        "Waiting",
        "Admitted / min",
        "Active vs cap",
        "ETA",
        "Joins refused by reason",
        "Store latency",
        "Store errors",
        "Sockets per node",
        "Tick lag",
        "5xx rate",
        "Waits to admission",
    ] {
        assert!(
            titles.iter().any(|t| t.starts_with(wanted)),
            "no panel {wanted:?} in {titles:?}"
        );
    }
    // promtool parses PromQL: each query, its Grafana variables given
    // values, becomes a recording rule of a file it checks.
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, query) in dashboard_queries(&dashboard).iter().enumerate() {
        let query = query
            .replace("$__rate_interval", "5m")
            .replace("$room", ".*");
        rules.push_str(&format!(
            "      - record: dashboard:query{i}\n        expr: {}\n",
            serde_json::to_string(&query).unwrap()
        ));
    }
    let dir = std::env::temp_dir().join(format!("waitroom-dashboard-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("queries.yml");
    std::fs::write(&file, &rules).unwrap();
    let (ok, said) = promtool(&["check", "rules", file.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(ok, "the dashboard's queries as rules:\n{rules}\n{said}");
}

#[test]
fn metric_names_are_read_from_promql_as_selectors_only() {
    let names = metric_names(
        r#"sum by (room, le) (rate(a_total{room=~"$room", x="b_c"}[$__rate_interval])) * 60
           / on (room) group_left (d) max without (e) (f_g offset 5m) > bool 1e3
           unless histogram_quantile(0.9, h_bucket) and count(i:j) or vector(1)"#,
    );
    let expected: BTreeSet<String> = ["a_total", "f_g", "h_bucket", "i:j"]
        .map(String::from)
        .into();
    assert_eq!(names, expected);
}

#[tokio::test]
async fn every_metric_the_dashboard_and_alerts_name_is_exported_on_the_memory_store() {
    let node = Node::start(env!("CARGO_BIN_EXE_waitroom"), &[]);
    let exported = busy_node_metrics(&node).await;
    assert_everything_named_is_exported(&exported);
    assert!(
        exported.contains(r#"waitroom_store_op_seconds_bucket{store="memory",op="join""#),
        "memory store latency by operation"
    );
}

#[tokio::test]
async fn every_metric_the_dashboard_and_alerts_name_is_exported_on_redis() {
    let redis = RedisServer::start();
    let url = redis.url();
    let node = Node::start(env!("CARGO_BIN_EXE_waitroom"), &["--redis-url", &url]);
    let exported = busy_node_metrics(&node).await;
    assert_everything_named_is_exported(&exported);
    assert!(
        exported.contains(r#"waitroom_store_op_seconds_bucket{store="redis",op="tick""#),
        "Redis store latency by operation"
    );
    for kind in ["timeout", "connection", "failover", "replicas", "other"] {
        assert!(
            exported.contains(&format!(
                r#"waitroom_store_errors_total{{store="redis",kind="{kind}"}} 0"#
            )),
            "Redis failures of kind {kind} counted from zero"
        );
    }
}

/// Joins that reach a node together on Redis go to Redis in shared calls,
/// and the histogram of joins per call counts each join once: its sum is
/// the joins made, over no more calls than joins.
#[tokio::test]
async fn joins_per_call_counts_every_join_a_node_sent_to_redis() {
    const JOINS: usize = 40;
    let redis = RedisServer::start();
    let url = redis.url();
    let node = Node::start(env!("CARGO_BIN_EXE_waitroom"), &["--redis-url", &url]);
    let http = reqwest::Client::new();
    let created = http
        .post(node.url("/api/admin/rooms"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"id": "line", "name": "Line", "target_url": "/x", "paused": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let joins = (0..JOINS).map(|_| http.post(node.url("/api/rooms/line/join")).send());
    for joined in futures_util::future::join_all(joins).await {
        assert_eq!(joined.unwrap().status(), 200);
    }
    let page = metrics_page(&node).await;
    let sum = sample(&page, "waitroom_redis_joins_per_call_sum");
    let calls = sample(&page, "waitroom_redis_joins_per_call_count");
    let full = sample(&page, r#"waitroom_redis_joins_per_call_bucket{le="64"}"#);
    assert_eq!(sum, Some(JOINS as f64), "every join counted once:\n{page}");
    assert!(
        calls.is_some_and(|calls| calls >= 1.0 && calls <= JOINS as f64) && full == calls,
        "{calls:?} calls, {full:?} of at most 64 joins"
    );
}

#[test]
fn the_docs_describe_every_metric_and_alert_named() {
    let docs = read("docs/src/observability.md");
    for name in named_metrics()
        .into_iter()
        .filter(|name| !MADE_BY_PROMETHEUS.contains(&name.as_str()))
    {
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            .unwrap_or(&name);
        assert!(
            docs.contains(&format!("`{base}`")),
            "docs/src/observability.md does not describe {base}"
        );
    }
    for alert in alert_names(&read(ALERTS)) {
        assert!(
            docs.contains(&format!("### {alert} (")),
            "docs/src/observability.md has no section on {alert}"
        );
    }
    assert!(
        read("docs/src/SUMMARY.md").contains("(observability.md)"),
        "the chapter is in the book's summary"
    );
}

/// Per-room gauges come from every tick answer, not only from the ticks
/// that ran on the node, so every node on one Redis shows a room's figures
/// (the dashboard takes the max over nodes): here a node started after
/// people joined a room whose next tick is a minute away, so that no tick
/// runs on it. (The node they joined on asked when the room woke, at the
/// first join: its figures are a tick old, as figures may be.)
#[tokio::test]
async fn every_node_shows_a_rooms_figures_between_its_ticks() {
    let redis = RedisServer::start();
    let url = redis.url();
    let first = Node::start(env!("CARGO_BIN_EXE_waitroom"), &["--redis-url", &url]);
    let http = reqwest::Client::new();
    let created = http
        .post(first.url("/api/admin/rooms"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"id": "slow", "name": "Slow", "target_url": "/x",
                      "max_active": 1, "admit_per_tick": 1, "tick_ms": 60_000}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    for _ in 0..3 {
        let joined = http
            .post(first.url("/api/rooms/slow/join"))
            .send()
            .await
            .unwrap();
        assert_eq!(joined.status(), 200);
    }
    let second = Node::start(env!("CARGO_BIN_EXE_waitroom"), &["--redis-url", &url]);
    let figures = [
        r#"waitroom_waiting{room="slow"} 2"#,
        r#"waitroom_active{room="slow"} 1"#,
        r#"waitroom_max_active{room="slow"} 1"#,
        r#"waitroom_room_paused{room="slow"} 0"#,
        r#"waitroom_room_opened{room="slow"} 1"#,
    ];
    let page = metrics_when(&second, |page| figures.iter().all(|f| page.contains(f))).await;
    for figure in figures {
        assert!(
            page.contains(figure),
            "{figure} on the second node:\n{page}"
        );
    }
    let cap = r#"waitroom_max_active{room="slow"} 1"#;
    assert!(
        metrics_when(&first, |page| page.contains(cap))
            .await
            .contains(cap)
    );
}

/// What the store alerts and the tick-lag alert read, through a real
/// outage: Redis (with its data on disk) killed under a busy room for
/// `OUTAGE`, then started again.
#[tokio::test]
async fn a_redis_outage_shows_in_store_up_store_errors_and_tick_lag() {
    const OUTAGE: Duration = Duration::from_millis(2_500);
    let mut redis = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let url = redis.url();
    let node = Node::start(env!("CARGO_BIN_EXE_waitroom"), &["--redis-url", &url]);
    busy_node_metrics(&node).await;
    let lag_over_a_second = |page: &str| {
        let count = sample(page, "waitroom_tick_lag_seconds_count").unwrap_or(0.0);
        let within = sample(page, r#"waitroom_tick_lag_seconds_bucket{le="1"}"#).unwrap_or(0.0);
        count - within
    };
    let before = metrics_page(&node).await;
    assert_eq!(
        sample(&before, r#"waitroom_store_up{store="redis"}"#),
        Some(1.0)
    );
    let late_before = lag_over_a_second(&before);

    redis.stop();
    let stopped = Instant::now();
    let down = metrics_when(&node, |page| {
        sample(page, r#"waitroom_store_up{store="redis"}"#) == Some(0.0)
    })
    .await;
    assert_eq!(
        sample(&down, r#"waitroom_store_up{store="redis"}"#),
        Some(0.0),
        "the node's store calls fail"
    );
    let failures: f64 = ["timeout", "connection", "failover", "other"]
        .iter()
        .filter_map(|kind| {
            sample(
                &down,
                &format!(r#"waitroom_store_errors_total{{store="redis",kind="{kind}"}}"#),
            )
        })
        .sum();
    assert!(failures > 0.0, "the failed calls counted by kind:\n{down}");
    // The outage's length is what is measured: it is waited out.
    tokio::time::sleep(OUTAGE.saturating_sub(stopped.elapsed())).await;
    redis.restart();

    let back = metrics_when(&node, |page| {
        sample(page, r#"waitroom_store_up{store="redis"}"#) == Some(1.0)
            && lag_over_a_second(page) > late_before
    })
    .await;
    assert!(
        lag_over_a_second(&back) > late_before,
        "the first tick after the outage counted as more than a second late:\n{back}"
    );
}

async fn metrics_page(node: &Node) -> String {
    reqwest::get(node.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The node's `/metrics` once `ready` says so (or, after the deadline, as
/// it is, for the caller's assertion to show).
async fn metrics_when(node: &Node, ready: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + SERIES_DEADLINE;
    loop {
        let page = metrics_page(node).await;
        if ready(&page) || Instant::now() > deadline {
            return page;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The value of the sample `series` (name and labels, as exported).
fn sample(page: &str, series: &str) -> Option<f64> {
    page.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}

/// A test of the test: a dashboard naming a metric no node exports is
/// caught (here, `waitroom_waiting` renamed).
#[test]
fn a_metric_no_node_exports_is_caught() {
    let names_in = |dashboard: &Value| -> BTreeSet<String> {
        dashboard_queries(dashboard)
            .iter()
            .flat_map(|q| metric_names(q))
            .collect()
    };
    // A node exporting exactly what the dashboard names…
    let exported: String = names_in(&dashboard())
        .iter()
        .map(|name| format!("{name}{{room=\"a\"}} 1\n"))
        .collect();
    assert!(missing(&names_in(&dashboard()), &exported).is_empty());
    // …is caught once the dashboard names one it does not.
    let renamed = read(DASHBOARD).replace("waitroom_waiting", "waitroom_waiting_renamed");
    let renamed: Value = serde_json::from_str(&renamed).unwrap();
    assert_eq!(
        missing(&names_in(&renamed), &exported),
        ["waitroom_waiting_renamed".to_string()].into()
    );
}

fn dashboard() -> Value {
    serde_json::from_str(&read(DASHBOARD)).expect("the dashboard is JSON")
}

/// Every PromQL query of the dashboard: its panels' targets and its
/// variables' queries (`label_values(metric, label)` names a metric too).
fn dashboard_queries(dashboard: &Value) -> Vec<String> {
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            queries.push(target["expr"].as_str().unwrap().to_string());
        }
    }
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        let definition = variable["definition"].as_str().unwrap_or_default();
        if let Some(inner) = definition
            .strip_prefix("label_values(")
            .and_then(|rest| rest.split_once(','))
        {
            queries.push(inner.0.to_string());
        }
    }
    assert!(!queries.is_empty());
    queries
}

/// The names the alert rules give their alerts.
fn alert_names(rules: &str) -> Vec<String> {
    rules
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- alert: "))
        .map(|name| name.trim().to_string())
        .collect()
}

/// The `expr` of every rule. The file is read as the small part of YAML it
/// uses (an `expr:` on one line, or a `|` block under it) rather than with
/// a YAML crate, which nothing else here needs; promtool, which reads it
/// as YAML, checks the same file above, so a rule this missed would have
/// to be one promtool rejects.
fn alert_exprs(rules: &str) -> Vec<String> {
    let mut exprs = Vec::new();
    let mut lines = rules.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(value) = line.trim_start().strip_prefix("expr:") else {
            continue;
        };
        let value = value.trim();
        if value != "|" {
            exprs.push(value.to_string());
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let mut block = String::new();
        while let Some(next) = lines.peek() {
            let deeper = next.len() - next.trim_start().len() > indent;
            if !(deeper || next.trim().is_empty()) {
                break;
            }
            block.push_str(next.trim());
            block.push('\n');
            lines.next();
        }
        exprs.push(block);
    }
    assert_eq!(exprs.len(), alert_names(rules).len(), "one expr per alert");
    exprs
}

/// The metric names a PromQL expression selects: every identifier that is
/// not a function, an aggregation, a keyword or a label (inside `{}`, or
/// listed after `by`, `without`, `on`, `ignoring`, `group_left`,
/// `group_right`), outside strings and `[]` ranges. Written here because
/// only the names are needed, and a PromQL parser crate would bring a
/// parser generator into the tests' build for it; promtool validates the
/// expressions themselves.
fn metric_names(expr: &str) -> BTreeSet<String> {
    const AGGREGATIONS: &[&str] = &[
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "limitk",
        "limit_ratio",
    ];
    const KEYWORDS: &[&str] = &[
        "and", "or", "unless", "bool", "offset", "inf", "nan", "atan2",
    ];
    const LABEL_LISTS: &[&str] = &[
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    // Skips from an opening `open` to just past its `close`.
    let skip = |i: &mut usize, close: char| {
        while *i < chars.len() && chars[*i] != close {
            if chars[*i] == '"' || chars[*i] == '\'' {
                let quote = chars[*i];
                *i += 1;
                while *i < chars.len() && chars[*i] != quote {
                    *i += if chars[*i] == '\\' { 2 } else { 1 };
                }
            }
            *i += 1;
        }
        *i += 1;
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' {
            i += 1;
            skip(&mut i, c);
            continue;
        }
        if c == '{' {
            skip(&mut i, '}');
            continue;
        }
        if c == '[' {
            skip(&mut i, ']');
            continue;
        }
        if c.is_ascii_digit() || c == '$' || c == '.' {
            // A number (1e3, 0.5), a duration or a Grafana variable.
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || "._$".contains(chars[i]))
            {
                i += 1;
            }
            continue;
        }
        if !(c.is_ascii_alphabetic() || c == '_' || c == ':') {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len()
            && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
        {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        let mut next = i;
        while next < chars.len() && chars[next].is_whitespace() {
            next += 1;
        }
        let called = chars.get(next) == Some(&'(');
        if LABEL_LISTS.contains(&word.as_str()) {
            if called {
                i = next + 1;
                skip(&mut i, ')');
            }
            continue;
        }
        if called || AGGREGATIONS.contains(&word.as_str()) || KEYWORDS.contains(&word.as_str()) {
            continue;
        }
        names.insert(word);
    }
    names
}

/// Every metric the dashboard's queries and the alert rules name.
fn named_metrics() -> BTreeSet<String> {
    let mut named: BTreeSet<String> = dashboard_queries(&dashboard())
        .iter()
        .flat_map(|query| metric_names(query))
        .collect();
    named.extend(
        alert_exprs(&read(ALERTS))
            .iter()
            .flat_map(|expr| metric_names(expr)),
    );
    named
}

/// The names in `named` that `exported` (a `/metrics` page) has no sample of.
fn missing(named: &BTreeSet<String>, exported: &str) -> BTreeSet<String> {
    named
        .iter()
        .filter(|name| !MADE_BY_PROMETHEUS.contains(&name.as_str()))
        .filter(|name| {
            !exported.lines().any(|line| {
                line.strip_prefix(name.as_str())
                    .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
            })
        })
        .cloned()
        .collect()
}

fn assert_everything_named_is_exported(exported: &str) {
    let named = named_metrics();
    for expected in [
        "waitroom_waiting",
        "waitroom_max_active",
        "waitroom_eta_seconds",
        "waitroom_turned_away_total",
        "waitroom_store_op_seconds_bucket",
        "waitroom_tick_lag_seconds_bucket",
        "waitroom_http_responses_total",
        "waitroom_room_paused",
        "process_max_fds",
    ] {
        assert!(
            named.contains(expected),
            "{expected} not read from {named:?}"
        );
    }
    let missing = missing(&named, exported);
    assert!(
        missing.is_empty(),
        "named by the dashboard or the alerts but not exported: {missing:?}\n{exported}"
    );
}

/// A node put through what makes every series exist: a room with a cap and
/// people waiting in it, a socket, a refused join, ticks that ran when due.
/// Returns its `/metrics` once every named series is there (or, after the
/// deadline, as it is, for the assertion to say what is missing).
async fn busy_node_metrics(node: &Node) -> String {
    let http = reqwest::Client::new();
    let admin = |path: &str, body: Value| {
        http.post(node.url(path))
            .bearer_auth(ADMIN_TOKEN)
            .json(&body)
            .send()
    };
    let created = admin(
        "/api/admin/rooms",
        json!({"id": "capped", "name": "Capped", "target_url": "/x",
               "max_active": 1, "admit_per_tick": 1, "tick_ms": 100}),
    )
    .await
    .unwrap();
    assert_eq!(created.status(), 201);
    // A line that moves: the second of two joins waits for the next tick,
    // and its wait is recorded (`waitroom_wait_seconds`).
    let created = admin(
        "/api/admin/rooms",
        json!({"id": "flowing", "name": "Flowing", "target_url": "/x",
               "admit_per_tick": 1, "tick_ms": 100}),
    )
    .await
    .unwrap();
    assert_eq!(created.status(), 201);
    for _ in 0..2 {
        let joined = http
            .post(node.url("/api/rooms/flowing/join"))
            .send()
            .await
            .unwrap();
        assert_eq!(joined.status(), 200);
    }
    let created = admin(
        "/api/admin/rooms",
        json!({"id": "shut", "name": "Shut", "target_url": "/x", "queue_method": "reject"}),
    )
    .await
    .unwrap();
    assert_eq!(created.status(), 201);
    let mut tickets = Vec::new();
    for _ in 0..3 {
        let joined: Value = http
            .post(node.url("/api/rooms/capped/join"))
            .fetch_json()
            .await;
        tickets.push(joined["ticket"].as_str().unwrap().to_string());
    }
    let refused = http
        .post(node.url("/api/rooms/shut/join"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let unknown = http
        .post(node.url("/api/rooms/nowhere/join"))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    let (mut socket, _) = tokio_tungstenite::connect_async(format!(
        "ws://127.0.0.1:{}/api/rooms/capped/ws?ticket={}",
        node.port,
        tickets.last().unwrap()
    ))
    .await
    .unwrap();
    next_status(&mut socket).await;
    let named = named_metrics();
    let deadline = Instant::now() + SERIES_DEADLINE;
    loop {
        let exported = http
            .get(node.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let ready = missing(&named, &exported).is_empty()
            && exported.contains(r#"waitroom_max_active{room="capped"} 1"#)
            && exported.contains(r#"waitroom_waiting{room="capped"} 2"#);
        if ready || Instant::now() > deadline {
            assert!(
                exported.contains(
                    r#"waitroom_turned_away_total{room="shut",reason="room_not_accepting"} 1"#
                ),
                "the refusal counted by room and reason"
            );
            assert!(
                exported.contains(r#"waitroom_turned_away_total{reason="room_not_found"} 1"#),
                "a join to no room counted, without a room label"
            );
            assert!(
                !exported.contains("nowhere"),
                "a made-up room id became a label"
            );
            assert!(
                !exported.contains("waitroom_max_active{room=\"shut\""),
                "no cap, no gauge"
            );
            drop(socket);
            return exported;
        }
        // The series appear with the room's next ticks (every 100 ms).
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Autotune on `/metrics`: the rate the ticks admit at, and each change
/// counted once, by the node whose tick made it (a real node, on its own
/// clock, against an origin on loopback that answers 503).
#[tokio::test]
async fn autotunes_rate_and_its_changes_are_exported() {
    let origin = support::health_origin::HealthOrigin::start().await;
    origin.set_status(503);
    let node = Node::start(
        env!("CARGO_BIN_EXE_waitroom"),
        &["--outbound-allow-networks", "127.0.0.0/8"],
    );
    let http = reqwest::Client::new();
    let created = http
        .post(node.url("/api/admin/rooms"))
        .bearer_auth(ADMIN_TOKEN)
        .json(
            &json!({"id": "tuned", "name": "Tuned", "target_url": "/x", "admit_per_tick": 10,
            "tick_ms": 200, "max_active": 1, "abandon_after_s": 3600,
            "autotune": {"health_url": origin.url(), "latency_target_ms": 100}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    for _ in 0..5 {
        http.post(node.url("/api/rooms/tuned/join"))
            .send()
            .await
            .unwrap();
    }
    let changes = r#"waitroom_autotune_changes_total{room="tuned",direction="down"}"#;
    let page = metrics_when(&node, |page| {
        sample(page, changes).is_some_and(|n| n >= 2.0)
    })
    .await;
    let counted = sample(&page, changes).expect("changes counted");
    let effective = sample(&page, r#"waitroom_admit_per_tick_effective{room="tuned"}"#)
        .expect("the effective rate exported");
    assert!(effective < 10.0, "cut: {effective}\n{page}");
    // Each change once: as many as the room's own record of them.
    let room: Value = http
        .get(node.url("/api/admin/rooms/tuned"))
        .bearer_auth(ADMIN_TOKEN)
        .fetch_json()
        .await;
    let recorded = room["stats"]["autotune"]["changes"]
        .as_array()
        .unwrap()
        .len() as f64;
    assert!(
        counted <= recorded && counted >= recorded - 1.0,
        "counted {counted}, recorded {recorded} (a change may land between the two reads)"
    );
}

/// An empty room's schedule entry applies at its time: the promoter asks
/// an idle room for its tick at the entry, not at its next heartbeat
/// (minutes away), so the room's figures show the change then.
#[tokio::test]
async fn an_idle_rooms_schedule_entry_applies_at_its_time() {
    let node = Node::start(env!("CARGO_BIN_EXE_waitroom"), &[]);
    let at = std::time::SystemTime::now() + Duration::from_millis(1_500);
    let at = chrono::DateTime::<chrono::Utc>::from(at).to_rfc3339();
    let created = reqwest::Client::new()
        .post(node.url("/api/admin/rooms"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"id": "later", "name": "Later", "target_url": "/x",
            "schedule": [{"at": at, "set": {"paused": true}}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let paused = r#"waitroom_room_paused{room="later"}"#;
    let page = metrics_when(&node, |page| sample(page, paused) == Some(1.0)).await;
    assert_eq!(
        sample(&page, paused),
        Some(1.0),
        "paused by its entry, nothing else asking:\n{page}"
    );
}
