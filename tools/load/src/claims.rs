//! `claims` mode: the sale behind the gate under load. Creates a room that
//! lets everyone straight through, puts a sale on it, joins V visitors to
//! get their passes, then claims one unit per visitor from C keep-alive
//! connections spread over the nodes, and checks that exactly
//! min(stock, visitors) claims succeeded, numbered 1, 2, 3… once each.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;
use waitroom::words::sale::{ClaimView, SaleRequest, SaleView};
use waitroom::words::status::{State, Status};
use waitroom::words::{RoomConfig, RoomId};

use super::common::{self, CpuUse, ErrorKinds, Joins, Latency, Node, create_room, say};
use super::error::{Failure, LoadError};

/// The longest the join phase (joins and any status polls) may take.
const JOIN_PHASE_LIMIT: Duration = Duration::from_secs(120);
/// How often a visitor still waiting asks for its status again.
const POLL_EVERY: Duration = Duration::from_millis(200);

pub struct ClaimsRun<'a> {
    pub nodes: &'a [Node],
    pub room: &'a RoomId,
    pub admin_token: &'a str,
    pub visitors: u64,
    pub stock: u64,
    pub concurrency: usize,
    pub join_concurrency: usize,
    /// The claim phase stops sending at this bound, claimed or not.
    pub claim_limit: Duration,
    /// Server processes whose CPU time the claim phase reports (same machine).
    pub server_pids: &'a [u32],
    pub json: bool,
}

/// The server's error answer, `{"error":{"code":"…","message":"…"}}`. The
/// server writes it with `json!` (in `waitroom::http::error`), so there is no
/// type in its library to read it with; this reads the one field used.
#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Deserialize)]
struct ErrorDetail {
    code: String,
}

/// The code of an error answer's body, if it is one.
pub fn error_code(body: &[u8]) -> Option<String> {
    serde_json::from_slice::<ErrorBody>(body)
        .ok()
        .map(|b| b.error.code)
}

/// Puts `sale` on `room` through `node` (replacing any sale it had).
pub async fn put_sale(
    http: &reqwest::Client,
    node: &Node,
    admin_token: &str,
    room: &RoomId,
    sale: &SaleRequest,
) -> Result<(), LoadError> {
    let response = http
        .put(format!("{}/api/admin/rooms/{room}/sale", node.base))
        .bearer_auth(admin_token)
        .json(sale)
        .send()
        .await
        .map_err(|e| {
            LoadError::Node(format!(
                "{}: putting the sale: {}",
                node.base,
                common::error_kind(&e)
            ))
        })?;
    let status = response.status();
    if status != 200 {
        let text = response.text().await.unwrap_or_default();
        return Err(LoadError::Node(format!(
            "{}: putting the sale answered {status}: {text}",
            node.base
        )));
    }
    Ok(())
}

/// One store's sale: the nodes that share it and the claims sent to them.
#[derive(Debug, Serialize)]
struct Store {
    nodes: Vec<String>,
    claims_sent: u64,
    expected_created: u64,
    created: u64,
    sequences_once_each: bool,
    stock_left: Option<u64>,
    stock_left_expected: Option<u64>,
}

#[derive(Default)]
struct ClaimWorker {
    /// Claims sent (answered or not) on this worker's store.
    sent: u64,
    created: u64,
    /// The sequence of every 201.
    sequences: Vec<u64>,
    /// 409s by their error code.
    refused: ErrorKinds,
    errors: ErrorKinds,
    micros: Vec<u64>,
}

pub async fn run(run: ClaimsRun<'_>) -> Result<(), LoadError> {
    let http = common::http_client(1);
    let layout = create_open_room(&http, &run).await?;
    put_sales(&http, &run, &layout).await?;
    drop(http);
    let (passes, joins) = join_phase(&run).await;
    let claims: Arc<[String]> = passes.into_iter().flatten().collect();
    let figures = claim_phase(&run, &layout, claims).await;
    let stores = check_stores(&run, &layout, &figures).await;
    let check = stores.iter().all(|s| {
        s.created == s.expected_created
            && s.sequences_once_each
            && s.stock_left.is_some()
            && s.stock_left == s.stock_left_expected
    }) && figures.errors == 0
        && figures.not_sent == 0;
    report_claims(&run, &figures);
    report_stores(&run, &stores, check);
    if run.json {
        print_summary(&run, &joins, &figures, &stores, check);
    }
    Ok(())
}

/// Which store each node uses: node i's sale is the one on store
/// `store_of[i]`, created through node `store_nodes[store]`.
struct Layout {
    store_of: Vec<usize>,
    store_nodes: Vec<usize>,
}

/// Step 1: a room that admits everyone at once: no line, no cap.
async fn create_open_room(
    http: &reqwest::Client,
    run: &ClaimsRun<'_>,
) -> Result<Layout, LoadError> {
    let room = run.room;
    let room_config = RoomConfig {
        admit_per_tick: 100_000,
        tick_ms: 1000,
        max_active: None,
        pass_ttl_s: 3600,
        abandon_after_s: 86_400,
        paused: false,
        ..common::room_config(room)
    };
    // The room must be new on the first node: a sale on an old room would
    // meet an old line and old claims. On every other node, 409 means it
    // shares the first node's store (Redis); 201 means it has its own
    // (memory store), and then its own sale and stock.
    let mut store_of = Vec::new();
    let mut store_nodes = Vec::new();
    for (i, node) in run.nodes.iter().enumerate() {
        let created = create_room(http, node, run.admin_token, room, &room_config).await?;
        if i == 0 && !created {
            return Err(LoadError::Usage(format!(
                "{}: room {room} already exists; claims mode needs a new room (give another --room)",
                node.base
            )));
        }
        say(
            run.json,
            format!(
                "{}: room {room} {}",
                node.base,
                match (i, created) {
                    (0, _) => "created (100000 admitted per tick, no cap)",
                    (_, true) => "created here too: this node has its own store",
                    (_, false) => "already there: this node shares the first node's store",
                }
            ),
        );
        if created {
            store_of.push(store_nodes.len());
            store_nodes.push(i);
        } else {
            store_of.push(0);
        }
    }
    Ok(Layout {
        store_of,
        store_nodes,
    })
}

/// Step 2: the sale, on each store once.
async fn put_sales(
    http: &reqwest::Client,
    run: &ClaimsRun<'_>,
    layout: &Layout,
) -> Result<(), LoadError> {
    let stock = run.stock;
    let separate = layout.store_nodes.len() > 1;
    let sale = SaleRequest {
        stock: Some(stock),
        seats: None,
        per_user_limit: Some(1),
        hold_ttl_s: Some(3600),
    };
    for node in layout.store_nodes.iter().map(|&i| &run.nodes[i]) {
        put_sale(http, node, run.admin_token, run.room, &sale).await?;
        say(
            run.json,
            format!(
                "{}: sale of {stock} units, 1 per visitor{}",
                node.base,
                if separate {
                    " (this node's own store)"
                } else {
                    " (one store for every node)"
                }
            ),
        );
    }
    Ok(())
}

/// Step 3: passes.
async fn join_phase(run: &ClaimsRun<'_>) -> (Vec<Option<String>>, Joins) {
    let visitors = run.visitors;
    let joined_at = Instant::now();
    let (passes, errors) =
        join_for_passes(run.nodes, run.room, visitors, run.join_concurrency).await;
    let joins = Joins::tally(run.json, &passes, errors, joined_at, |joined, seconds| {
        format!(
            "{joined} of {visitors} visitors joined and hold a pass after {seconds:.2} s ({} errors)",
            visitors - joined
        )
    });
    (passes, joins)
}

/// What the claim phase measured.
struct ClaimFigures {
    connections: usize,
    total: ClaimWorker,
    sent_per_store: Vec<u64>,
    sequences_per_store: Vec<Vec<u64>>,
    elapsed_s: f64,
    cpu: Option<CpuUse>,
    answered: u64,
    not_sent: u64,
    refused: u64,
    errors: u64,
    per_s: f64,
    latency: Option<Latency>,
    server_cpu_us: Option<f64>,
}

/// Step 4: one claim per visitor that has a pass, each on the node of the
/// connection that sends it (and so on that node's store).
async fn claim_phase(run: &ClaimsRun<'_>, layout: &Layout, claims: Arc<[String]>) -> ClaimFigures {
    let (nodes, room, server_pids) = (run.nodes, run.room, run.server_pids);
    let store_count = layout.store_nodes.len();
    let body: Arc<[u8]> = Arc::from(&br#"{"quantity":1}"#[..]);
    let next = Arc::new(AtomicU64::new(0));
    let cpu_start = common::cpu_mark(server_pids);
    let started = Instant::now();
    let deadline = started + run.claim_limit;
    let connections = run.concurrency.min(claims.len()).max(1);
    let mut workers = Vec::new();
    for w in 0..connections {
        let node = &nodes[w % nodes.len()];
        let url = format!("{}/api/rooms/{room}/sale/claims", node.base);
        workers.push(tokio::spawn(claim_worker(
            url,
            claims.clone(),
            body.clone(),
            next.clone(),
            deadline,
        )));
    }
    let mut total = ClaimWorker::default();
    let mut sent_per_store = vec![0u64; store_count];
    let mut sequences_per_store = vec![Vec::new(); store_count];
    for (w, worker) in workers.into_iter().enumerate() {
        match worker.await {
            Ok(done) => {
                let store = layout.store_of[w % nodes.len()];
                sent_per_store[store] += done.sent;
                sequences_per_store[store].extend(done.sequences);
                total.created += done.created;
                common::merge(&mut total.refused, done.refused);
                common::merge(&mut total.errors, done.errors);
                total.micros.extend(done.micros);
            }
            Err(error) => common::count(&mut total.errors, format!("worker failed: {error}")),
        }
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    let cpu = match (cpu_start, common::cpu_mark(server_pids)) {
        (Some(start), Some(end)) => Some(end.since(&start)),
        _ => None,
    };
    let answered = total.micros.len() as u64;
    ClaimFigures {
        connections,
        not_sent: claims.len() as u64 - answered,
        refused: total.refused.values().sum(),
        errors: total.errors.values().sum(),
        per_s: answered as f64 / elapsed_s.max(1e-9),
        latency: Latency::from_micros(std::mem::take(&mut total.micros)),
        server_cpu_us: cpu
            .and_then(|c| c.server_cores)
            .filter(|_| answered > 0)
            .map(|cores| cores * elapsed_s * 1e6 / answered as f64),
        total,
        sent_per_store,
        sequences_per_store,
        elapsed_s,
        cpu,
        answered,
    }
}

/// Step 5: the checks, per store: exactly min(stock, claims sent there) got
/// 201, numbered 1..n once each, and the stock left says the same.
async fn check_stores(run: &ClaimsRun<'_>, layout: &Layout, figures: &ClaimFigures) -> Vec<Store> {
    let (nodes, room, stock) = (run.nodes, run.room, run.stock);
    let http = common::http_client(1);
    let mut stores = Vec::new();
    for (store, sequences) in figures.sequences_per_store.iter().enumerate() {
        let sent = figures.sent_per_store[store];
        let mut sequences = sequences.clone();
        sequences.sort_unstable();
        let created = sequences.len() as u64;
        let once_each = sequences.iter().copied().eq(1..=created);
        let node = &nodes[layout.store_nodes[store]];
        let stock_left = match http
            .get(format!("{}/api/rooms/{room}/sale", node.base))
            .send()
            .await
        {
            Ok(response) if response.status() == 200 => {
                response.json::<SaleView>().await.ok().map(|v| v.stock_left)
            }
            _ => None,
        };
        stores.push(Store {
            nodes: (0..nodes.len())
                .filter(|i| layout.store_of[*i] == store)
                .map(|i| nodes[i].base.clone())
                .collect(),
            claims_sent: sent,
            expected_created: stock.min(sent),
            created,
            sequences_once_each: once_each,
            stock_left,
            stock_left_expected: stock.checked_sub(created),
        });
    }
    stores
}

fn report_claims(run: &ClaimsRun<'_>, figures: &ClaimFigures) {
    let json = run.json;
    let ClaimFigures {
        total,
        answered,
        elapsed_s,
        per_s,
        refused,
        errors,
        not_sent,
        ..
    } = figures;
    say(
        json,
        format!(
            "{} connection(s) over {} node(s): {answered} claims answered in {elapsed_s:.2} s \
             = {per_s:.0} claims/s; latency {}",
            figures.connections,
            run.nodes.len(),
            figures
                .latency
                .map(|l| l.to_string())
                .unwrap_or_else(|| "no requests".into())
        ),
    );
    say(
        json,
        format!(
            "  201 created: {}; 409 refused: {refused}{}; errors: {errors}; not sent (time bound): {not_sent}",
            total.created,
            if total.refused.is_empty() {
                String::new()
            } else {
                format!(
                    " ({})",
                    total
                        .refused
                        .iter()
                        .map(|(code, n)| format!("{n} {code}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        ),
    );
    for (kind, n) in &total.errors {
        say(json, format!("  {n} × {kind}"));
    }
    if let Some(cpu) = figures.cpu {
        let mut line = format!("  during the claims, {cpu}");
        if let Some(us) = figures.server_cpu_us {
            line.push_str(&format!(" = {us:.1} µs of server CPU per claim"));
        }
        say(json, line);
    }
}

fn report_stores(run: &ClaimsRun<'_>, stores: &[Store], check: bool) {
    let (json, stock) = (run.json, run.stock);
    for store in stores {
        say(
            json,
            format!(
                "  sale on {}: {} of {} claims got 201 (expected min(stock {stock}, claims) = {}); \
                 sequences 1..{} once each: {}; stock_left {} (expected {})",
                store.nodes.join(", "),
                store.created,
                store.claims_sent,
                store.expected_created,
                store.created,
                if store.sequences_once_each {
                    "yes"
                } else {
                    "NO"
                },
                store
                    .stock_left
                    .map_or("unreadable".into(), |n| n.to_string()),
                store
                    .stock_left_expected
                    .map_or("none: more 201s than stock".into(), |n| n.to_string())
            ),
        );
    }
    say(
        json,
        format!(
            "check: {}",
            if check {
                "passed"
            } else {
                "FAILED (see above)"
            }
        ),
    );
}

/// The one-line JSON summary (`--json`).
fn print_summary(
    run: &ClaimsRun<'_>,
    joins: &Joins,
    figures: &ClaimFigures,
    stores: &[Store],
    check: bool,
) {
    let summary = json!({
        "mode": "claims",
        "nodes": run.nodes.iter().map(|n| &n.base).collect::<Vec<_>>(),
        "room": run.room,
        "stock": run.stock,
        "visitors": run.visitors,
        "joined": joins.joined,
        "join_errors": joins.errors,
        "join_s": joins.seconds,
        "concurrency": run.concurrency,
        "answered": figures.answered,
        "created": figures.total.created,
        "refused": figures.refused,
        "refused_codes": figures.total.refused,
        "errors": figures.errors,
        "error_kinds": figures.total.errors,
        "not_sent": figures.not_sent,
        "elapsed_s": figures.elapsed_s,
        "per_s": figures.per_s,
        "latency": figures.latency,
        "cpu": figures.cpu,
        "server_cpu_us_per_claim": figures.server_cpu_us,
        "stores": stores,
        "check_passed": check,
    });
    println!("{summary}");
}

/// Joins `n` new visitors (visitor i on node i mod nodes) from
/// `concurrency` keep-alive workers and returns each one's pass. A visitor
/// that is still waiting polls its status until it is admitted, within the
/// join phase's time bound.
async fn join_for_passes(
    nodes: &[Node],
    room: &RoomId,
    n: u64,
    concurrency: usize,
) -> (Vec<Option<String>>, ErrorKinds) {
    let next = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + JOIN_PHASE_LIMIT;
    let bases: Arc<[String]> = nodes.iter().map(|node| node.base.clone()).collect();
    let mut workers = Vec::new();
    for _ in 0..concurrency.min(n as usize).max(1) {
        let (next, bases, room) = (next.clone(), bases.clone(), room.clone());
        workers.push(tokio::spawn(async move {
            let http = common::http_client(1);
            let mut passes = Vec::new();
            let mut errors = ErrorKinds::new();
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= n || Instant::now() >= deadline {
                    break;
                }
                let base = &bases[index as usize % bases.len()];
                match pass_for_one(&http, base, &room, deadline).await {
                    Ok(pass) => passes.push((index as usize, pass)),
                    Err(kind) => common::count(&mut errors, kind),
                }
            }
            (passes, errors)
        }));
    }
    common::gather_indexed(workers, n as usize).await
}

/// One visitor: joins, then polls its status while it waits.
async fn pass_for_one(
    http: &reqwest::Client,
    base: &str,
    room: &RoomId,
    deadline: Instant,
) -> Result<String, Failure> {
    let mut what = "join";
    let mut body = read_status(http.post(format!("{base}/api/rooms/{room}/join")), what).await?;
    let mut ticket: Option<String> = None;
    loop {
        let status: Status = serde_json::from_slice(&body)
            .map_err(|e| Failure(format!("{what}: not a status: {e}")))?;
        match (status.state, status.pass) {
            (State::Admitted, Some(pass)) => return Ok(pass),
            (State::Waiting, _) => {}
            (state, _) => return Err(Failure(format!("{what}: state {state}, no pass"))),
        }
        // The join's ticket, which every status answer repeats.
        let bearer = ticket.get_or_insert_with(|| status.ticket.to_string());
        if Instant::now() + POLL_EVERY >= deadline {
            return Err(Failure("still waiting at the join phase time limit".into()));
        }
        tokio::time::sleep(POLL_EVERY).await;
        what = "status";
        let request = http
            .get(format!("{base}/api/rooms/{room}/status"))
            .bearer_auth(bearer);
        body = read_status(request, what).await?;
    }
}

/// The body of a 200 answer to a join or a status request.
async fn read_status(
    request: reqwest::RequestBuilder,
    what: &str,
) -> Result<bytes::Bytes, Failure> {
    let failed = |e: reqwest::Error| Failure(format!("{what}: {}", common::error_kind(&e)));
    match request.send().await {
        Ok(response) if response.status() == 200 => response.bytes().await.map_err(failed),
        Ok(response) => Err(Failure(format!("{what}: HTTP {}", response.status()))),
        Err(error) => Err(failed(error)),
    }
}

/// Claims `{"quantity":1}` for the next visitor until every visitor has
/// claimed once or the time bound passes; one keep-alive connection.
async fn claim_worker(
    url: String,
    claims: Arc<[String]>,
    body: Arc<[u8]>,
    next: Arc<AtomicU64>,
    deadline: Instant,
) -> ClaimWorker {
    let http = common::http_client(1);
    let mut done = ClaimWorker::default();
    loop {
        let index = next.fetch_add(1, Ordering::Relaxed) as usize;
        if index >= claims.len() || Instant::now() >= deadline {
            break;
        }
        let pass = &claims[index];
        done.sent += 1;
        let begin = Instant::now();
        let sent = http
            .post(&url)
            .bearer_auth(pass)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_vec())
            .send()
            .await;
        let outcome = match sent {
            Ok(response) => {
                let status = response.status().as_u16();
                match response.bytes().await {
                    Ok(bytes) => Ok((status, bytes)),
                    Err(error) => Err(Failure::from(error)),
                }
            }
            Err(error) => Err(Failure::from(error)),
        };
        done.micros.push(begin.elapsed().as_micros() as u64);
        match outcome {
            Ok((201, bytes)) => match serde_json::from_slice::<ClaimView>(&bytes) {
                Ok(claimed) if !claimed.claim_id.is_empty() => {
                    done.created += 1;
                    done.sequences.push(claimed.sequence);
                }
                _ => common::count(&mut done.errors, "201 without a readable Claim"),
            },
            Ok((409, bytes)) => match serde_json::from_slice::<ErrorBody>(&bytes) {
                Ok(refusal) => common::count(&mut done.refused, refusal.error.code),
                Err(_) => common::count(&mut done.errors, "409 without an error code"),
            },
            Ok((status, bytes)) => {
                let code = serde_json::from_slice::<ErrorBody>(&bytes)
                    .map(|b| format!(" {}", b.error.code))
                    .unwrap_or_default();
                common::count(&mut done.errors, format!("HTTP {status}{code}"));
            }
            Err(kind) => common::count(&mut done.errors, kind),
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_read_from_their_bodies() {
        let refusal: ErrorBody =
            serde_json::from_str(r#"{"error":{"code":"sold_out","message":"gone"}}"#).unwrap();
        assert_eq!(refusal.error.code, "sold_out");
    }
}
