//! The texts of the visitor and operator pages, one catalogue per language
//! (`static/i18n/{lang}.json`), and the choice among them from a request's
//! `Accept-Language` header.
//!
//! Owns: the catalogues (embedded at build time, parsed once), the lookups
//! the templates make (`t.text("room.heading")`), the part of a catalogue a
//! page's script receives (as JSON in `<script id="wr-texts">`, read by
//! `static/lib-i18n.js`), and the negotiation.
//!
//! Keys are `page.name`: `room.` (the waiting page, its countdown
//! included), `missing.` (the unknown-room page), `sale.` (the sale page),
//! `admin.` (the operator pages). Placeholders `{name}` in a text are filled by the
//! scripts or by [`Catalogue::fill`]. Adding a language is adding its file
//! and one line to `LANGUAGES`; the tests below fail when a language lacks
//! a key (operator keys are required in `ADMIN_LANGUAGES` only), or a
//! template or script uses a key the English catalogue lacks.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::sync::LazyLock;

/// Every language with a catalogue: its code (a primary language subtag,
/// as `<html lang>` and `Accept-Language` name it) and its file. The first
/// is the default and the reference: a key it lacks exists nowhere.
const LANGUAGES: &[(&str, &str)] = &[
    ("en", include_str!("../../../static/i18n/en.json")),
    ("ko", include_str!("../../../static/i18n/ko.json")),
];

/// The languages the operator pages are offered in: these must carry every
/// `admin.` key; the others may leave them out.
pub const ADMIN_LANGUAGES: &[&str] = &["en", "ko"];

/// A catalogue file that is not a JSON object of strings.
#[derive(Debug, thiserror::Error)]
pub enum CatalogueError {
    #[error("the {lang} catalogue is not a JSON object of strings: {source}")]
    Malformed {
        lang: &'static str,
        source: serde_json::Error,
    },
}

/// Every text of the pages in one language, by key.
#[derive(Debug)]
pub struct Catalogue {
    lang: &'static str,
    texts: BTreeMap<String, String>,
}

static CATALOGUES: LazyLock<Vec<Catalogue>> = LazyLock::new(|| {
    LANGUAGES
        .iter()
        .map(|&(lang, json)| {
            Catalogue::parse(lang, json).unwrap_or_else(|error| {
                // The tests parse every catalogue, so this is a build that
                // skipped them: its texts fall back to English, then to keys.
                tracing::error!(%error, "catalogue unusable");
                Catalogue {
                    lang,
                    texts: BTreeMap::new(),
                }
            })
        })
        .collect()
});

impl Catalogue {
    fn parse(lang: &'static str, json: &str) -> Result<Self, CatalogueError> {
        let texts = serde_json::from_str(json)
            .map_err(|source| CatalogueError::Malformed { lang, source })?;
        Ok(Self { lang, texts })
    }

    /// The language's code, for `<html lang>`.
    pub fn lang(&self) -> &'static str {
        self.lang
    }

    /// The text of `key`: this language's, else English's, else the key
    /// itself (the tests keep that from happening).
    pub fn text<'a>(&'a self, key: &'a str) -> &'a str {
        self.texts
            .get(key)
            .or_else(|| english().texts.get(key))
            .map_or(key, String::as_str)
    }

    /// The text of `key` with its `{name}` placeholder replaced by `value`.
    pub fn fill(&self, key: &str, name: &str, value: impl Display) -> String {
        self.text(key)
            .replace(&format!("{{{name}}}"), &value.to_string())
    }

    /// The texts whose keys start with `prefix` (English ones where this
    /// language has none): what one page's script receives.
    pub fn page_texts(&self, prefix: &str) -> BTreeMap<&str, &str> {
        english()
            .texts
            .keys()
            .filter(|key| key.starts_with(prefix))
            .map(|key| (key.as_str(), self.text(key)))
            .collect()
    }
}

/// The default catalogue.
pub fn english() -> &'static Catalogue {
    &CATALOGUES[0]
}

/// The catalogue for a visitor page: any language there is a file for.
pub fn negotiate(accept_language: Option<&str>) -> &'static Catalogue {
    pick(accept_language, |_| true)
}

/// The catalogue for an operator page: one of `ADMIN_LANGUAGES`.
pub fn negotiate_admin(accept_language: Option<&str>) -> &'static Catalogue {
    pick(accept_language, |lang| ADMIN_LANGUAGES.contains(&lang))
}

/// At most this many language ranges of one header are looked at; a longer
/// header is cut there (a browser sends a handful).
const MAX_RANGES: usize = 32;

/// Picks the language from an Accept-Language header among those `offered`
/// (q-values honoured; `ko` or `ko-KR` → Korean; anything else / none /
/// garbage → English).
///
/// Among the ranges the header lists, the offered language (matched on the
/// primary subtag, so `ko-KR` counts as `ko`) with the highest
/// q-value wins; on a tie the one listed first. `q=0` means "not this one".
/// A range that names no supported language, `*`, or a malformed entry
/// counts for nothing, and English is the answer when nothing supported is
/// acceptable.
fn pick(accept_language: Option<&str>, offered: impl Fn(&str) -> bool) -> &'static Catalogue {
    let Some(header) = accept_language else {
        return english();
    };
    // (q in thousandths, catalogue) of the best candidate so far.
    let mut best: Option<(u16, &'static Catalogue)> = None;
    for range in header.split(',').take(MAX_RANGES) {
        let mut parts = range.split(';');
        let tag = parts.next().unwrap_or("").trim();
        let primary = tag.split(['-', '_']).next().unwrap_or("");
        let Some(lang) = CATALOGUES
            .iter()
            .find(|c| c.lang.eq_ignore_ascii_case(primary) && offered(c.lang))
        else {
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
    best.map_or_else(english, |(_, catalogue)| catalogue)
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
    use std::collections::BTreeSet;
    use std::path::Path;

    /// The prefix of the operator pages' keys.
    const ADMIN_PREFIX: &str = "admin.";

    fn lang(header: Option<&str>) -> &'static str {
        negotiate(header).lang()
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
        let t = negotiate(Some("ko"));
        assert_eq!(t.lang(), "ko");
        assert_eq!(t.text("room.heading"), "대기열에 들어왔습니다");
    }

    #[test]
    fn english_first_wins_over_lower_korean() {
        assert_eq!(lang(Some("en-US,ko;q=0.5")), "en");
        assert_eq!(
            negotiate(Some("en-US,ko;q=0.5")).text("room.heading"),
            "You're in line"
        );
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
    fn operator_pages_are_offered_in_the_admin_languages_only() {
        assert_eq!(negotiate_admin(Some("ko-KR")).lang(), "ko");
        assert_eq!(negotiate_admin(None).lang(), "en");
        for &(code, _) in LANGUAGES {
            let chosen = negotiate_admin(Some(code)).lang();
            assert!(ADMIN_LANGUAGES.contains(&chosen), "{code} gave {chosen}");
        }
    }

    #[test]
    fn a_page_script_gets_its_own_texts_only() {
        let texts = negotiate(Some("ko")).page_texts("room.");
        assert_eq!(texts["room.heading"], "대기열에 들어왔습니다");
        assert!(texts["room.eta_minutes"].contains("{n}"));
        assert!(texts.keys().all(|key| key.starts_with("room.")));
        let json = serde_json::to_value(&texts).unwrap();
        assert_eq!(json["room.conn_live"], "실시간");
    }

    #[test]
    fn fill_replaces_a_placeholder() {
        assert_eq!(
            english().fill("admin.wait_seconds", "s", 42),
            english().text("admin.wait_seconds").replace("{s}", "42")
        );
        assert_eq!(english().text("no.such.key"), "no.such.key");
    }

    // --- the catalogues against each other and against their users ----------

    fn parsed(lang: &'static str, json: &str) -> Catalogue {
        Catalogue::parse(lang, json).unwrap_or_else(|error| panic!("{error}"))
    }

    /// The `{name}` placeholders of a text.
    fn placeholders(text: &str) -> BTreeSet<&str> {
        text.split('{')
            .skip(1)
            .filter_map(|part| part.split_once('}').map(|(name, _)| name))
            .collect()
    }

    #[test]
    fn every_language_has_every_key_with_the_same_placeholders() {
        let english = parsed("en", LANGUAGES[0].1);
        let mut faults = Vec::new();
        for &(code, json) in LANGUAGES {
            let other = parsed(code, json);
            let admin_required = ADMIN_LANGUAGES.contains(&code);
            for (key, text) in &english.texts {
                match other.texts.get(key) {
                    None if key.starts_with(ADMIN_PREFIX) && !admin_required => {}
                    None => faults.push(format!("{code}: missing {key}")),
                    Some(theirs) if theirs.trim().is_empty() => {
                        faults.push(format!("{code}: {key} is empty"));
                    }
                    Some(theirs) if placeholders(theirs) != placeholders(text) => {
                        faults.push(format!("{code}: {key} has other placeholders"));
                    }
                    Some(_) => {}
                }
            }
            for key in other.texts.keys() {
                if !english.texts.contains_key(key) {
                    faults.push(format!("{code}: {key} is not in the English catalogue"));
                }
            }
        }
        for admin in ADMIN_LANGUAGES {
            if !LANGUAGES.iter().any(|(code, _)| code == admin) {
                faults.push(format!("admin language {admin} has no catalogue"));
            }
        }
        assert!(faults.is_empty(), "{faults:#?}");
    }

    /// The keys in `source` after each `opener` (`t('`, `t.text("`):
    /// what a script's `t('room.heading')` or a template's
    /// `t.text("room.heading")` names. `Err` for an opener not followed by
    /// a literal key, which no scan could check.
    fn keys_after<'a>(source: &'a str, opener: &str, quote: char) -> Vec<Result<&'a str, usize>> {
        let mut found = Vec::new();
        for (at, _) in source.match_indices(opener) {
            let before = source[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.' || c == '$') {
                continue;
            }
            let rest = &source[at + opener.len()..];
            match rest.strip_prefix(quote).and_then(|r| r.split_once(quote)) {
                Some((key, _)) => found.push(Ok(key)),
                None => found.push(Err(at)),
            }
        }
        found
    }

    fn files(dir: &str, ext: &str) -> Vec<(String, String)> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == ext) {
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                out.push((name, std::fs::read_to_string(&path).unwrap()));
            }
        }
        out.sort();
        out
    }

    /// The key prefix a page script may use: its page's (the script gets
    /// that part of the catalogue only).
    fn script_prefix(file: &str) -> Option<&'static str> {
        ["room", "sale", "admin"]
            .into_iter()
            .find(|page| file.starts_with(page))
            .map(|page| match page {
                "room" => "room.",
                "sale" => "sale.",
                _ => ADMIN_PREFIX,
            })
    }

    #[test]
    fn templates_and_scripts_use_only_keys_the_english_catalogue_has() {
        let english = parsed("en", LANGUAGES[0].1);
        let mut used = BTreeSet::new();
        let mut faults = Vec::new();
        let mut check = |file: &str,
                         found: Vec<Result<&str, usize>>,
                         prefix: Option<&str>,
                         faults: &mut Vec<String>| {
            for key in found {
                match key {
                    Err(at) => {
                        faults.push(format!("{file}: a key that is not a literal at byte {at}"))
                    }
                    Ok(key) if !english.texts.contains_key(key) => {
                        faults.push(format!("{file}: {key} is not in the English catalogue"));
                    }
                    Ok(key) if prefix.is_some_and(|p| !key.starts_with(p)) => {
                        faults.push(format!("{file}: {key} is another page's"));
                    }
                    Ok(key) => {
                        used.insert(key.to_string());
                    }
                }
            }
        };
        for (file, source) in files("templates", "html") {
            let mut found = keys_after(&source, "t.text(", '"');
            found.extend(keys_after(&source, "t.fill(", '"'));
            check(&file, found, None, &mut faults);
        }
        for (file, source) in files("static", "js") {
            // lib-i18n.js defines t() itself.
            if file == "lib-i18n.js" {
                continue;
            }
            let prefix = script_prefix(&file);
            let found = keys_after(&source, "t(", '\'');
            if prefix.is_none() && !found.is_empty() {
                faults.push(format!("{file}: a shared script names page texts"));
            }
            check(&file, found, prefix, &mut faults);
        }
        // The operator pages' server-side messages.
        let admin = include_str!("../admin/page.rs");
        let mut found = keys_after(admin, "t.text(", '"');
        found.extend(keys_after(admin, "t.fill(", '"'));
        check(
            "src/http/admin/page.rs",
            found,
            Some(ADMIN_PREFIX),
            &mut faults,
        );
        // The waiting page's defaults that the branding may replace.
        let pages = include_str!("mod.rs");
        let mut found = keys_after(pages, "t.text(", '"');
        found.extend(keys_after(pages, "t.fill(", '"'));
        check("src/http/pages/mod.rs", found, None, &mut faults);
        for key in english.texts.keys() {
            if !used.contains(key) {
                faults.push(format!("{key} is used nowhere"));
            }
        }
        assert!(faults.is_empty(), "{faults:#?}");
    }
}
