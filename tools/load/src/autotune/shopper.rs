//! One visitor of `autotune` mode: the waiting page's sequence as `drop`
//! mode plays it (join, socket, admission, verify), then the shop's: the
//! checkout's requests to the test origin, one after another.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::drop::visitor::{self, Gauge, Settled, Shared, Visit, http_kind};
use crate::error::Failure;

/// Where a shopper was when the run's time was up.
pub(super) const STAGES: [&str; 4] = ["joining", "waiting", "verifying", "checking out"];

/// What the shoppers share besides the page's connections.
pub(super) struct Shop {
    pub(super) page: Shared,
    /// To the origin: no bound of this tool's own (the origin's queue is
    /// what is measured), keep-alive.
    pub(super) origin: reqwest::Client,
    pub(super) checkout_url: String,
    /// Requests each admitted shopper sends the origin.
    pub(super) checkouts: u32,
    pub(super) checked_out: AtomicU64,
}

/// How a shopper's visit ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Ended {
    /// Admitted, pass verified, every checkout request answered 200.
    CheckedOut,
    /// Still at this stage (of [`STAGES`]) when the time was up.
    GaveUp(&'static str),
    /// A step that is not retried failed (why).
    Failed(String),
    /// The room said it is over for them.
    Finished(String),
}

/// What one shopper saw.
#[derive(Debug)]
pub(super) struct Outcome {
    /// The page's figures (join, line, socket), as `drop` keeps them.
    pub(super) visit: Visit,
    pub(super) stage: &'static str,
    /// When the admission reached the shopper.
    pub(super) admitted_at: Option<Instant>,
    pub(super) checkouts_answered: u32,
    pub(super) ended: Ended,
}

/// One shopper, from its scheduled arrival to the end of the run at most.
pub(super) async fn shopper(shop: Arc<Shop>, index: u64, arrival: Instant) -> Outcome {
    let mut outcome = Outcome {
        visit: Visit {
            lag_us: arrival.elapsed().as_micros() as u64,
            ..Visit::default()
        },
        stage: STAGES[0],
        admitted_at: None,
        checkouts_answered: 0,
        ended: Ended::GaveUp(STAGES[0]),
    };
    shop.page.progress.arrived.fetch_add(1, Ordering::Relaxed);
    let deadline = shop.page.deadline;
    outcome.ended = match tokio::time::timeout_at(
        deadline.into(),
        shop_once(&shop, index, arrival, &mut outcome),
    )
    .await
    {
        Ok(ended) => ended,
        Err(_) => Ended::GaveUp(outcome.stage),
    };
    outcome
}

async fn shop_once(shop: &Shop, index: u64, arrival: Instant, outcome: &mut Outcome) -> Ended {
    let page = &shop.page;
    let node_index = index as usize % page.nodes.len();
    let node = &page.nodes[node_index];
    let (ticket, admitted) =
        match visitor::join(page, node, index, arrival, &mut outcome.visit).await {
            Ok(joined) => joined,
            Err(end) => return ended_by(end),
        };
    let admission = match admitted {
        Some(admission) => {
            outcome.visit.admitted_at_join = true;
            admission
        }
        None => {
            outcome.stage = STAGES[1];
            let in_line = Gauge::up(&page.progress.in_line);
            let waited = visitor::wait_in_line(
                page,
                node_index,
                index,
                &ticket,
                arrival,
                &mut outcome.visit,
            )
            .await;
            drop(in_line);
            match waited {
                Settled::Admitted(admission) => admission,
                Settled::Finished(what) => return Ended::Finished(what),
            }
        }
    };
    outcome.admitted_at = Some(admission.at);
    page.progress.admitted.fetch_add(1, Ordering::Relaxed);

    outcome.stage = STAGES[2];
    let verify = page.http.get(&node.verify).bearer_auth(&admission.pass);
    match page.send(verify).await {
        Ok(answer) if answer.status == 204 => {
            page.progress.verified.fetch_add(1, Ordering::Relaxed);
        }
        Ok(answer) => return Ended::Failed(format!("verify: {}", http_kind(&answer))),
        Err(kind) => return Ended::Failed(format!("verify: {kind}")),
    }

    outcome.stage = STAGES[3];
    for _ in 0..shop.checkouts {
        if let Err(failure) = checkout(shop, &admission.pass).await {
            return Ended::Failed(format!("checkout: {failure}"));
        }
        outcome.checkouts_answered += 1;
    }
    shop.checked_out.fetch_add(1, Ordering::Relaxed);
    Ended::CheckedOut
}

/// One request of the checkout, as the shop's page would send it.
async fn checkout(shop: &Shop, pass: &str) -> Result<(), Failure> {
    let response = shop
        .origin
        .post(&shop.checkout_url)
        .bearer_auth(pass)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body("{}")
        .send()
        .await?;
    let status = response.status().as_u16();
    response.bytes().await?;
    match status {
        200 => Ok(()),
        status => Err(Failure(format!("HTTP {status}"))),
    }
}

/// A join's end, in this mode's words.
fn ended_by(end: visitor::End) -> Ended {
    match end {
        visitor::End::Finished(what) => Ended::Finished(what),
        visitor::End::Failed(stage) => Ended::Failed(format!("{} failed", stage.name())),
        visitor::End::GaveUp(stage) => Ended::GaveUp(match stage {
            visitor::Stage::Joining => STAGES[0],
            _ => STAGES[1],
        }),
        visitor::End::Done => Ended::CheckedOut,
    }
}
