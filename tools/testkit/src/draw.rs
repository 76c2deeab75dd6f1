//! The draw checked as a visitor would check it, from `GET /draw` and
//! `/draw/entries` alone, with api.md's recipe computed here (not with the
//! server's code): the seed matches the commitment published before the
//! first join, and the entries are sorted by HMAC-SHA256(seed, entry).

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{FetchJson, TestApp};

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len() / 2)
        .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The room's published draw (`GET /api/rooms/{room}/draw`).
pub async fn published(app: &TestApp, room: &str) -> Value {
    app.http
        .get(app.url(&format!("/api/rooms/{room}/draw")))
        .fetch_json()
        .await
}

/// The entries in drawn order, after checking the seed against
/// `commitment` and the order against the recipe.
pub async fn checked_order(app: &TestApp, room: &str, commitment: &str) -> Vec<String> {
    let draw = published(app, room).await;
    assert_eq!(
        draw["commitment"], commitment,
        "the commitment never changed"
    );
    let seed = unhex(draw["seed"].as_str().expect("the seed is revealed"));
    assert_eq!(seed.len(), 32);
    assert_eq!(
        hex(&Sha256::digest(&seed)),
        commitment,
        "sha256(seed) == commitment"
    );
    let response = app
        .http
        .get(app.url(&format!("/api/rooms/{room}/draw/entries")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let entries: Vec<String> = response
        .text()
        .await
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(entries.len() as u64, draw["entrants"].as_u64().unwrap());
    let key = |entry: &String| {
        let mut mac = Hmac::<Sha256>::new_from_slice(&seed).unwrap();
        mac.update(entry.as_bytes());
        mac.finalize().into_bytes().to_vec()
    };
    let keys: Vec<Vec<u8>> = entries.iter().map(key).collect();
    assert!(
        keys.windows(2).all(|pair| pair[0] < pair[1]),
        "the entries are in ascending HMAC-SHA256(seed, entry) order"
    );
    entries
}
