//! Visitor-facing texts of the waiting-room pages, in English and Korean, and
//! the choice between them from a request's `Accept-Language` header.
//!
//! Owns: every string a visitor sees on `/rooms/{room}` (rendered into the
//! template and, as JSON, handed to `static/room.js`) and on the 404 page for
//! an unknown room. The operator pages are English only and keep their texts
//! in their templates.
//!
//! Placeholders in texts are replaced by `room.js`: `{n}` (a number), `{h}`
//! and `{m}` (hours and minutes).

use serde::Serialize;

/// Everything the waiting page and the unknown-room page show, in one language.
#[derive(Debug, Serialize)]
pub struct Texts {
    /// `<title>` of the waiting page, after the room name.
    pub page_title: &'static str,
    /// Main heading while waiting.
    pub heading: &'static str,
    /// Heading once admitted.
    pub heading_admitted: &'static str,
    /// Heading once the room has closed.
    pub heading_closed: &'static str,
    /// Heading once the place is gone (expired or left).
    pub heading_lost: &'static str,
    /// One sentence under the heading.
    pub intro: &'static str,
    pub position_label: &'static str,
    pub waiting_label: &'static str,
    pub eta_label: &'static str,
    pub progress_label: &'static str,
    pub connection_label: &'static str,
    /// ETA while the server has none yet.
    pub eta_calculating: &'static str,
    /// ETA while admissions are paused.
    pub eta_paused: &'static str,
    pub eta_under_minute: &'static str,
    /// `{n}` = minutes.
    pub eta_minutes: &'static str,
    /// `{h}` = hours, `{m}` = minutes.
    pub eta_hours: &'static str,
    pub conn_connecting: &'static str,
    pub conn_live: &'static str,
    pub conn_reconnecting: &'static str,
    pub conn_polling: &'static str,
    pub conn_offline: &'static str,
    pub msg_joining: &'static str,
    pub msg_waiting: &'static str,
    pub msg_paused: &'static str,
    pub msg_admitted: &'static str,
    pub msg_admitted_no_link: &'static str,
    pub msg_closed: &'static str,
    pub msg_expired: &'static str,
    pub msg_left: &'static str,
    pub msg_retrying: &'static str,
    pub msg_not_found: &'static str,
    /// `{n}` = seconds until the next try.
    pub msg_rate_limited: &'static str,
    pub msg_sign_in: &'static str,
    pub msg_sign_in_again: &'static str,
    pub sign_in_link: &'static str,
    pub msg_checking: &'static str,
    pub msg_not_accepting: &'static str,
    pub msg_sold_out: &'static str,
    /// `{n}` = units or seats left.
    pub stock_left: &'static str,
    pub position_random: &'static str,
    /// Above the countdown to a scheduled opening.
    pub opening_label: &'static str,
    /// Under the countdown: why arriving early gives no advantage.
    pub opening_explained: &'static str,
    /// In place of a position before the draw.
    pub position_at_opening: &'static str,
    /// Once the countdown reaches zero, until the drawn position arrives.
    pub opening_drawing: &'static str,
    /// `{d}` days, `{h}` hours, `{m}` minutes, `{s}` seconds: the countdown.
    pub countdown_days: &'static str,
    pub countdown_clock: &'static str,
    /// Before the visitor's entry id in the draw.
    pub entry_label: &'static str,
    pub msg_pre_queue: &'static str,
    /// `{n}` = the drawn position, said once at the draw.
    pub announce_drawn: &'static str,
    pub join_again: &'static str,
    pub continue_link: &'static str,
    /// Screen-reader announcement; `{n}` = position.
    pub announce_position: &'static str,
    pub keep_open: &'static str,
    pub noscript: &'static str,
    pub missing_title: &'static str,
    pub missing_body: &'static str,
    pub missing_hint: &'static str,
}

pub static EN: Texts = Texts {
    page_title: "Waiting room",
    heading: "You're in line",
    heading_admitted: "It's your turn",
    heading_closed: "This waiting room has closed",
    heading_lost: "You're no longer in line",
    intro: "Thanks for your patience. When it's your turn you'll be taken to the site automatically.",
    position_label: "Your position",
    waiting_label: "People in line",
    eta_label: "Estimated wait",
    progress_label: "Your progress through the line",
    connection_label: "Connection",
    eta_calculating: "Calculating…",
    eta_paused: "Paused for now",
    eta_under_minute: "Under a minute",
    eta_minutes: "About {n} min",
    eta_hours: "About {h} h {m} min",
    conn_connecting: "Connecting…",
    conn_live: "Live",
    conn_reconnecting: "Reconnecting…",
    conn_polling: "Updating every few seconds",
    conn_offline: "Offline, retrying…",
    msg_joining: "Getting you a place in line…",
    msg_waiting: "You have a place in line. Keep this page open.",
    msg_paused: "Entry is paused for a moment. You keep your place in line.",
    msg_admitted: "It's your turn! Taking you there now…",
    msg_admitted_no_link: "It's your turn!",
    msg_closed: "This waiting room is closed.",
    msg_expired: "Your place in line has expired.",
    msg_left: "You left the line.",
    msg_retrying: "We can't reach the waiting room right now. Retrying…",
    msg_not_found: "This waiting room doesn't exist or has closed.",
    msg_rate_limited: "Too many attempts from your network. Trying again in {n} s…",
    msg_sign_in: "This line is for signed-in customers. Sign in on the site first, then follow its link back here.",
    msg_sign_in_again: "Your sign-in could not be checked (it may have expired). Sign in again on the site, then follow its link back here.",
    sign_in_link: "Go to the site to sign in",
    msg_checking: "Checking your browser… this takes a moment, and then you join the line.",
    msg_not_accepting: "This waiting room is not taking new arrivals now.",
    msg_sold_out: "Sold out. Everything on sale has found a buyer; thank you for waiting.",
    stock_left: "{n} left",
    position_random: "Drawn at random",
    opening_label: "Opens in",
    opening_explained: "Everyone who arrives before the opening is put in one random order when it opens: arriving earlier gives no advantage. Keep this page open.",
    position_at_opening: "Drawn at the opening",
    opening_drawing: "Drawing the order…",
    countdown_days: "{d} d {h}:{m}:{s}",
    countdown_clock: "{h}:{m}:{s}",
    entry_label: "Your entry in the draw",
    msg_pre_queue: "You are in the draw. Your place in line is decided at the opening.",
    announce_drawn: "The draw is done. Your position in line is {n}.",
    join_again: "Join again",
    continue_link: "Continue",
    announce_position: "Your position in line is now {n}.",
    keep_open: "Refreshing this page keeps your place. If you close it for a while, you may lose it.",
    noscript: "This page needs JavaScript turned on to keep your place in line up to date.",
    missing_title: "Waiting room not found",
    missing_body: "There is no waiting room with this name. It may have closed, or the link may be mistyped.",
    missing_hint: "Check the link you followed, or go back to the site that sent you here.",
};

pub static KO: Texts = Texts {
    page_title: "대기실",
    heading: "대기열에 들어왔습니다",
    heading_admitted: "내 차례입니다",
    heading_closed: "대기실이 종료되었습니다",
    heading_lost: "대기열에서 빠졌습니다",
    intro: "기다려 주셔서 감사합니다. 순서가 되면 자동으로 사이트로 이동합니다.",
    position_label: "내 순서",
    waiting_label: "대기 인원",
    eta_label: "예상 대기 시간",
    progress_label: "대기 진행 상황",
    connection_label: "연결 상태",
    eta_calculating: "계산 중…",
    eta_paused: "잠시 멈춤",
    eta_under_minute: "1분 미만",
    eta_minutes: "약 {n}분",
    eta_hours: "약 {h}시간 {m}분",
    conn_connecting: "연결 중…",
    conn_live: "실시간",
    conn_reconnecting: "다시 연결하는 중…",
    conn_polling: "몇 초마다 갱신 중",
    conn_offline: "오프라인, 다시 시도하는 중…",
    msg_joining: "대기열에 자리를 잡는 중입니다…",
    msg_waiting: "대기열에 자리가 있습니다. 이 페이지를 열어 두세요.",
    msg_paused: "입장이 잠시 멈췄습니다. 대기 순서는 그대로 유지됩니다.",
    msg_admitted: "내 차례입니다! 지금 이동합니다…",
    msg_admitted_no_link: "내 차례입니다!",
    msg_closed: "이 대기실은 종료되었습니다.",
    msg_expired: "대기열의 자리가 만료되었습니다.",
    msg_left: "대기열에서 나갔습니다.",
    msg_retrying: "지금 대기실에 연결할 수 없습니다. 다시 시도하는 중…",
    msg_not_found: "이 대기실은 없거나 종료되었습니다.",
    msg_rate_limited: "사용 중인 네트워크에서 시도가 너무 많습니다. {n}초 후에 다시 시도합니다…",
    msg_sign_in: "로그인한 고객만 줄을 설 수 있습니다. 먼저 사이트에서 로그인한 뒤 그 링크로 다시 오세요.",
    msg_sign_in_again: "로그인 정보를 확인할 수 없습니다(만료되었을 수 있습니다). 사이트에서 다시 로그인한 뒤 그 링크로 다시 오세요.",
    sign_in_link: "로그인하러 사이트로 가기",
    msg_checking: "브라우저를 확인하는 중입니다… 잠시 후 대기열에 들어갑니다.",
    msg_not_accepting: "이 대기실은 지금 새로 들어오는 분을 받지 않습니다.",
    msg_sold_out: "매진되었습니다. 준비된 상품이 모두 판매되었습니다. 기다려 주셔서 감사합니다.",
    stock_left: "{n}개 남음",
    position_random: "무작위 추첨",
    opening_label: "오픈까지",
    opening_explained: "오픈 전에 도착한 모든 분은 오픈 순간 하나의 무작위 순서로 정렬됩니다. 일찍 도착해도 유리하지 않습니다. 이 페이지를 열어 두세요.",
    position_at_opening: "오픈 시 추첨",
    opening_drawing: "순서를 추첨하는 중…",
    countdown_days: "{d}일 {h}:{m}:{s}",
    countdown_clock: "{h}:{m}:{s}",
    entry_label: "추첨 응모 번호",
    msg_pre_queue: "추첨에 참여했습니다. 대기 순서는 오픈 시 정해집니다.",
    announce_drawn: "추첨이 끝났습니다. 대기 순서는 {n}번입니다.",
    join_again: "다시 줄 서기",
    continue_link: "계속",
    announce_position: "현재 내 순서는 {n}번입니다.",
    keep_open: "새로 고쳐도 자리는 유지됩니다. 페이지를 오래 닫아 두면 자리를 잃을 수 있습니다.",
    noscript: "대기 순서를 갱신하려면 JavaScript를 켜야 합니다.",
    missing_title: "대기실을 찾을 수 없습니다",
    missing_body: "이 이름의 대기실이 없습니다. 종료되었거나 링크가 잘못되었을 수 있습니다.",
    missing_hint: "받은 링크를 확인하거나, 이곳으로 안내한 사이트로 돌아가세요.",
};

/// At most this many language ranges of one header are looked at; a longer
/// header is cut there (a browser sends a handful).
const MAX_RANGES: usize = 32;

/// Picks the language from an Accept-Language header (q-values honoured; ko or ko-KR → Korean; anything else / none / garbage → English).
///
/// Among the ranges the header lists, the supported language (`en`, `ko`,
/// matched on the primary subtag, so `ko-KR` counts as `ko`) with the highest
/// q-value wins; on a tie the one listed first. `q=0` means "not this one".
/// A range that names no supported language, `*`, or a malformed entry
/// counts for nothing, and English is the answer when nothing supported is
/// acceptable.
pub fn negotiate(accept_language: Option<&str>) -> (&'static str, &'static Texts) {
    let english = ("en", &EN);
    let Some(header) = accept_language else {
        return english;
    };
    // (q in thousandths, language) of the best candidate so far.
    let mut best: Option<(u16, &'static str)> = None;
    for range in header.split(',').take(MAX_RANGES) {
        let mut parts = range.split(';');
        let tag = parts.next().unwrap_or("").trim();
        let primary = tag.split(['-', '_']).next().unwrap_or("");
        let lang = if primary.eq_ignore_ascii_case("ko") {
            "ko"
        } else if primary.eq_ignore_ascii_case("en") {
            "en"
        } else {
            continue;
        };
        let mut q = Some(1000u16);
        for param in parts {
            let Some((key, value)) = param.split_once('=') else {
                continue;
            };
            if key.trim().eq_ignore_ascii_case("q") {
                q = parse_q(value.trim());
            }
        }
        let Some(q) = q else { continue };
        if q == 0 {
            continue;
        }
        if best.is_none_or(|(best_q, _)| q > best_q) {
            best = Some((q, lang));
        }
    }
    match best {
        Some((_, "ko")) => ("ko", &KO),
        _ => english,
    }
}

/// A q-value (RFC 9110 `qvalue`: `0`, `0.5`, `1.000`, …) in thousandths;
/// `None` if it is not one.
fn parse_q(value: &str) -> Option<u16> {
    let (int, frac) = match value.split_once('.') {
        Some((i, f)) => (i, f),
        None => (value, ""),
    };
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole: u16 = match int {
        "0" => 0,
        "1" => 1,
        _ => return None,
    };
    let mut thousandths: u16 = 0;
    for (i, b) in frac.bytes().enumerate() {
        thousandths += u16::from(b - b'0') * [100, 10, 1][i];
    }
    let q = whole * 1000 + thousandths;
    (q <= 1000).then_some(q)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lang(header: Option<&str>) -> &'static str {
        negotiate(header).0
    }

    #[test]
    fn no_header_is_english() {
        assert_eq!(lang(None), "en");
        assert_eq!(lang(Some("")), "en");
    }

    #[test]
    fn korean_browser_gets_korean() {
        assert_eq!(lang(Some("ko-KR,ko;q=0.9,en;q=0.8")), "ko");
        assert_eq!(lang(Some("ko")), "ko");
        assert_eq!(lang(Some("KO-kr")), "ko");
        let (code, texts) = negotiate(Some("ko"));
        assert_eq!(code, "ko");
        assert_eq!(texts.heading, KO.heading);
    }

    #[test]
    fn english_first_wins_over_lower_korean() {
        assert_eq!(lang(Some("en-US,ko;q=0.5")), "en");
        assert_eq!(negotiate(Some("en-US,ko;q=0.5")).1.heading, EN.heading);
    }

    #[test]
    fn q_values_decide_not_order() {
        assert_eq!(lang(Some("en;q=0.4, ko;q=0.6")), "ko");
        assert_eq!(lang(Some("ko;q=0.4, en;q=0.6")), "en");
        assert_eq!(lang(Some("en;q=0.5, ko")), "ko");
        // A tie keeps the first listed.
        assert_eq!(lang(Some("ko;q=0.5, en;q=0.5")), "ko");
        assert_eq!(lang(Some("en;q=0.5, ko;q=0.5")), "en");
    }

    #[test]
    fn unsupported_languages_are_passed_over() {
        assert_eq!(lang(Some("fr-FR, de;q=0.9")), "en");
        assert_eq!(lang(Some("fr-FR, ko;q=0.3")), "ko");
        assert_eq!(lang(Some("*")), "en");
        // "kok" (Konkani) is not Korean.
        assert_eq!(lang(Some("kok")), "en");
    }

    #[test]
    fn q_zero_means_not_acceptable() {
        assert_eq!(lang(Some("ko;q=0")), "en");
        assert_eq!(lang(Some("ko;q=0.000, en;q=0.1")), "en");
    }

    #[test]
    fn garbage_is_english_and_never_panics() {
        for header in [
            "garbage",
            ";;;,,,",
            "ko;q=abc",
            "ko;q=2",
            "ko;q=1.5",
            "ko;q=0.12345",
            "ko;q=-1",
            "ko;q=",
            "\u{0}\u{ffff}한국어",
            "-",
            "ko;q=0.9x",
            "ko;q=+0.9",
        ] {
            assert_eq!(lang(Some(header)), "en", "header {header:?}");
        }
        // Parameters that are not a q-value are ignored.
        assert_eq!(lang(Some("ko;=;q")), "ko");
        let long = "xx;q=0.1,".repeat(10_000) + "ko";
        assert_eq!(lang(Some(&long)), "en");
    }

    #[test]
    fn q_parsing() {
        assert_eq!(parse_q("1"), Some(1000));
        assert_eq!(parse_q("1.000"), Some(1000));
        assert_eq!(parse_q("1.001"), None);
        assert_eq!(parse_q("0.5"), Some(500));
        assert_eq!(parse_q("0.05"), Some(50));
        assert_eq!(parse_q("0."), Some(0));
        assert_eq!(parse_q(".5"), None);
    }

    #[test]
    fn texts_serialize_to_json() {
        let json = serde_json::to_value(&KO).unwrap();
        assert_eq!(json["heading"], KO.heading);
        assert!(json["eta_minutes"].as_str().unwrap().contains("{n}"));
    }
}
