//! The texts of the visitor and operator pages, one catalogue per language
//! (`static/i18n/{code}.json`), and the choice among them: `?lang=`, else
//! the `wr_lang` cookie, else `Accept-Language`, else the room's `language`.
//!
//! Owns: the catalogues (embedded at build time, parsed once), the lookups
//! the templates make (`t.text("room.heading")`), the part of a catalogue a
//! page's script receives (as JSON in `<script id="wr-texts">`, read by
//! `static/lib-i18n.js`), and the choice of language. Which tags name a
//! language is `words::language`'s.
//!
//! Keys are `page.name`: `room.` (the waiting page, its countdown
//! included), `missing.` (the unknown-room page), `resume.` (the page of a
//! notification's resume link), `sale.` (the sale page),
//! `admin.` (the operator pages). Placeholders `{name}` in a text are filled by the
//! scripts or by [`Catalogue::fill`]. Adding a language is adding its file,
//! its variant in `words::language::Language` and one line to `LANGUAGES`;
//! the tests below fail when a language lacks a key (operator keys are
//! required in `ADMIN_LANGUAGES` only), has a key or a placeholder English
//! lacks, or a template or script uses a key the English catalogue lacks.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::sync::LazyLock;

use crate::words::language::Language;

/// Every language with a catalogue, and its file. The first is the default
/// and the reference: a key it lacks exists nowhere.
const LANGUAGES: &[(Language, &str)] = &[
    (
        Language::English,
        include_str!("../../../static/i18n/en.json"),
    ),
    (
        Language::Korean,
        include_str!("../../../static/i18n/ko.json"),
    ),
    (
        Language::Japanese,
        include_str!("../../../static/i18n/ja.json"),
    ),
    (
        Language::SimplifiedChinese,
        include_str!("../../../static/i18n/zh-Hans.json"),
    ),
    (
        Language::Spanish,
        include_str!("../../../static/i18n/es.json"),
    ),
    (
        Language::French,
        include_str!("../../../static/i18n/fr.json"),
    ),
    (
        Language::German,
        include_str!("../../../static/i18n/de.json"),
    ),
    (
        Language::BrazilianPortuguese,
        include_str!("../../../static/i18n/pt-BR.json"),
    ),
];

/// The languages the operator pages are offered in: these must carry every
/// `admin.` key; the others leave them out.
pub const ADMIN_LANGUAGES: &[Language] = &[Language::English, Language::Korean];

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
    language: Language,
    texts: BTreeMap<String, String>,
}

static CATALOGUES: LazyLock<Vec<Catalogue>> = LazyLock::new(|| {
    LANGUAGES
        .iter()
        .map(|&(language, json)| {
            Catalogue::parse(language, json).unwrap_or_else(|error| {
                // The tests parse every catalogue, so this is a build that
                // skipped them: its texts fall back to English, then to keys.
                tracing::error!(%error, "catalogue unusable");
                Catalogue {
                    language,
                    texts: BTreeMap::new(),
                }
            })
        })
        .collect()
});

impl Catalogue {
    fn parse(language: Language, json: &str) -> Result<Self, CatalogueError> {
        let texts = serde_json::from_str(json).map_err(|source| CatalogueError::Malformed {
            lang: language.code(),
            source,
        })?;
        Ok(Self { language, texts })
    }

    /// The language's code, for `<html lang>`.
    pub fn lang(&self) -> &'static str {
        self.language.code()
    }

    pub fn language(&self) -> Language {
        self.language
    }

    /// The text of `key`: this language's, else English's, else the key
    /// itself (the tests keep that from happening).
    pub fn text<'a>(&'a self, key: &'a str) -> &'a str {
        self.texts
            .get(key)
            .or_else(|| english().texts.get(key))
            .map_or(key, String::as_str)
    }

    /// The admin page's label of a config field: `admin.field_<name>`,
    /// which every field of `words::config::FIELDS` a form shows has (a
    /// test holds them together).
    pub fn field_label(&'static self, field: &str) -> &'static str {
        let key = format!("admin.field_{field}");
        self.texts
            .get(&key)
            .or_else(|| english().texts.get(&key))
            .map_or("", String::as_str)
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

/// The catalogue of `language` (every language has one: a test says so).
pub fn catalogue(language: Language) -> &'static Catalogue {
    CATALOGUES
        .iter()
        .find(|c| c.language == language)
        .unwrap_or_else(english)
}

/// What a visitor's request says about the language it wants, strongest
/// first. Each is read as `Language::from_tag` reads a tag; one that names
/// no language we speak counts for nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Asked<'a> {
    /// `?lang=` of the page's address.
    pub query: Option<&'a str>,
    /// The `wr_lang` cookie: an earlier `?lang=`, kept.
    pub cookie: Option<&'a str>,
    pub accept_language: Option<&'a str>,
}

impl Asked<'_> {
    /// The `?lang=` this request asks for, if it names a language: the one
    /// to keep in the cookie.
    pub fn query_language(&self) -> Option<Language> {
        self.query.and_then(Language::from_tag)
    }
}

/// The catalogue for a visitor page: `?lang=`, else the cookie, else
/// `Accept-Language`, else the room's language (`en` where there is no room).
pub fn choose(asked: &Asked<'_>, room_language: Language) -> &'static Catalogue {
    let language = asked
        .query_language()
        .or_else(|| asked.cookie.and_then(Language::from_tag))
        .or_else(|| from_accept_language(asked.accept_language, |_| true))
        .unwrap_or(room_language);
    catalogue(language)
}

/// The catalogue for an operator page: one of `ADMIN_LANGUAGES`, by the
/// `Accept-Language` header, else English.
pub fn negotiate_admin(accept_language: Option<&str>) -> &'static Catalogue {
    from_accept_language(accept_language, |language| {
        ADMIN_LANGUAGES.contains(&language)
    })
    .map_or_else(english, catalogue)
}

/// At most this many language ranges of one header are looked at; a longer
/// header is cut there (a browser sends a handful).
const MAX_RANGES: usize = 32;

/// The language an Accept-Language header prefers among those `offered`
/// (q-values honoured; each range read as `Language::from_tag` reads it:
/// `ko-KR` is Korean, `zh-CN` Simplified Chinese, `pt-PT` Brazilian
/// Portuguese); `None` when it names none of them.
///
/// Among the ranges the header lists, the offered language with the
/// highest q-value wins; on a tie the one listed first. `q=0` means "not
/// this one". A range that names no supported language, `*`, or a
/// malformed entry counts for nothing.
fn from_accept_language(
    accept_language: Option<&str>,
    offered: impl Fn(Language) -> bool,
) -> Option<Language> {
    // (q in thousandths, language) of the best candidate so far.
    let mut best: Option<(u16, Language)> = None;
    for range in accept_language?.split(',').take(MAX_RANGES) {
        let mut parts = range.split(';');
        let tag = parts.next().unwrap_or("");
        let Some(language) = Language::from_tag(tag).filter(|&l| offered(l)) else {
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
            best = Some((q, language));
        }
    }
    best.map(|(_, language)| language)
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

    fn negotiate(accept_language: Option<&str>) -> &'static Catalogue {
        let asked = Asked {
            accept_language,
            ..Asked::default()
        };
        choose(&asked, Language::English)
    }

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
        assert_eq!(lang(Some("it-IT, nl;q=0.9")), "en");
        assert_eq!(lang(Some("it-IT, ko;q=0.3")), "ko");
        assert_eq!(lang(Some("*")), "en");
        // "kok" (Konkani) is not Korean; Traditional Chinese is not Simplified.
        assert_eq!(lang(Some("kok")), "en");
        assert_eq!(lang(Some("zh-TW, zh-HK;q=0.9, ja;q=0.2")), "ja");
    }

    #[test]
    fn each_language_is_found_as_its_browsers_send_it() {
        for (header, expected) in [
            ("ja-JP,ja;q=0.9,en-US;q=0.8", "ja"),
            ("zh-CN,zh;q=0.9", "zh-Hans"),
            ("zh-SG", "zh-Hans"),
            ("zh-Hans-CN", "zh-Hans"),
            ("es-MX,es;q=0.9", "es"),
            ("fr-CA", "fr"),
            ("de-DE,de;q=0.9,en;q=0.5", "de"),
            ("pt-BR,pt;q=0.9", "pt-BR"),
            ("pt-PT", "pt-BR"),
            ("pt", "pt-BR"),
        ] {
            assert_eq!(lang(Some(header)), expected, "{header}");
        }
        assert_eq!(
            negotiate(Some("de-DE")).text("room.heading"),
            "Sie sind in der Warteschlange"
        );
    }

    fn chosen(query: Option<&str>, cookie: Option<&str>, header: Option<&str>) -> &'static str {
        let asked = Asked {
            query,
            cookie,
            accept_language: header,
        };
        choose(&asked, Language::French).lang()
    }

    #[test]
    fn the_query_beats_the_cookie_beats_the_header_beats_the_room() {
        assert_eq!(chosen(Some("ja"), Some("de"), Some("ko")), "ja");
        assert_eq!(chosen(None, Some("de"), Some("ko")), "de");
        assert_eq!(chosen(None, None, Some("ko")), "ko");
        assert_eq!(chosen(None, None, None), "fr");
        // Aliases, in any case, at every step.
        assert_eq!(chosen(Some("ZH-cn"), None, None), "zh-Hans");
        assert_eq!(chosen(None, Some("pt-PT"), None), "pt-BR");
    }

    #[test]
    fn a_choice_naming_no_language_falls_through_to_the_next() {
        assert_eq!(chosen(Some("klingon"), Some("de"), Some("ko")), "de");
        assert_eq!(chosen(Some(""), Some("zh-TW"), Some("ko")), "ko");
        assert_eq!(chosen(Some("xx"), Some("yy"), Some("it")), "fr");
        let asked = Asked {
            query: Some("klingon"),
            ..Asked::default()
        };
        assert_eq!(asked.query_language(), None);
        assert_eq!(
            Asked {
                query: Some("zh"),
                ..Asked::default()
            }
            .query_language(),
            Some(Language::SimplifiedChinese)
        );
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
        assert_eq!(negotiate_admin(Some("ja, ko;q=0.5")).lang(), "ko");
        for &(language, _) in LANGUAGES {
            let chosen = negotiate_admin(Some(language.code())).language();
            assert!(
                ADMIN_LANGUAGES.contains(&chosen),
                "{language} gave {chosen}"
            );
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

    fn parsed(language: Language, json: &str) -> Catalogue {
        Catalogue::parse(language, json).unwrap_or_else(|error| panic!("{error}"))
    }

    #[test]
    fn every_language_has_a_catalogue_english_first() {
        assert_eq!(LANGUAGES[0].0, Language::English);
        for language in Language::ALL {
            let files = LANGUAGES.iter().filter(|(l, _)| *l == language).count();
            assert_eq!(files, 1, "{language} has {files} catalogues");
            assert_eq!(catalogue(language).language(), language);
        }
    }

    /// The `{name}` placeholders of a text.
    fn placeholders(text: &str) -> BTreeSet<&str> {
        text.split('{')
            .skip(1)
            .filter_map(|part| part.split_once('}').map(|(name, _)| name))
            .collect()
    }

    #[test]
    fn every_language_has_every_key() {
        let english = parsed(Language::English, LANGUAGES[0].1);
        let mut faults = Vec::new();
        for &(language, json) in LANGUAGES {
            let other = parsed(language, json);
            let admin_required = ADMIN_LANGUAGES.contains(&language);
            for key in english.texts.keys() {
                match other.texts.get(key) {
                    None if key.starts_with(ADMIN_PREFIX) && !admin_required => {}
                    None => faults.push(format!("{language}: missing {key}")),
                    Some(theirs) if theirs.trim().is_empty() => {
                        faults.push(format!("{language}: {key} is empty"));
                    }
                    Some(_) => {}
                }
            }
        }
        for admin in ADMIN_LANGUAGES {
            if !LANGUAGES.iter().any(|(language, _)| language == admin) {
                faults.push(format!("admin language {admin} has no catalogue"));
            }
        }
        assert!(faults.is_empty(), "{faults:#?}");
    }

    /// A key English lacks is a text no page shows; a placeholder other
    /// than English's is a value the script never fills in (or one it
    /// fills that the visitor never sees).
    #[test]
    fn no_language_has_a_key_or_a_placeholder_english_lacks() {
        let english = parsed(Language::English, LANGUAGES[0].1);
        let mut faults = Vec::new();
        for &(language, json) in &LANGUAGES[1..] {
            let other = parsed(language, json);
            for (key, theirs) in &other.texts {
                match english.texts.get(key) {
                    None => {
                        faults.push(format!("{language}: {key} is not in the English catalogue"))
                    }
                    Some(text) if placeholders(theirs) != placeholders(text) => {
                        faults.push(format!(
                            "{language}: {key} has {:?}, English {:?}",
                            placeholders(theirs),
                            placeholders(text)
                        ))
                    }
                    Some(_) => {}
                }
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
        let english = parsed(Language::English, LANGUAGES[0].1);
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
        // The schedule's and autotune's words.
        let drop = include_str!("../admin/drop_view.rs");
        let mut found = keys_after(drop, "t.text(", '"');
        found.extend(keys_after(drop, "t.fill(", '"'));
        check(
            "src/http/admin/drop_view.rs",
            found,
            Some(ADMIN_PREFIX),
            &mut faults,
        );
        // The room forms' words.
        let forms = include_str!("../admin/room_form.rs");
        let mut found = keys_after(forms, "t.text(", '"');
        found.extend(keys_after(forms, "t.fill(", '"'));
        check(
            "src/http/admin/room_form.rs",
            found,
            Some(ADMIN_PREFIX),
            &mut faults,
        );
        // The waiting page's defaults that the branding may replace.
        let pages = include_str!("mod.rs");
        let mut found = keys_after(pages, "t.text(", '"');
        found.extend(keys_after(pages, "t.fill(", '"'));
        check("src/http/pages/mod.rs", found, None, &mut faults);
        // Each config field's label on the admin page (`admin.field_<name>`,
        // which `field_label` reads).
        for field in crate::words::config::FIELDS {
            if field.input == crate::words::config::Input::None {
                continue;
            }
            let key = format!("admin.field_{}", field.name);
            if !english.texts.contains_key(&key) {
                faults.push(format!(
                    "the config field {} has no label {key}",
                    field.name
                ));
            }
            used.insert(key);
        }
        for key in english.texts.keys() {
            if !used.contains(key) {
                faults.push(format!("{key} is used nowhere"));
            }
        }
        assert!(faults.is_empty(), "{faults:#?}");
    }
}
