//! The languages the visitor pages speak (api.md "The page: branding and
//! languages"): their codes, the aliases and regional tags that mean one of
//! them, and a room's `language` (the page's language when the visitor asks
//! for none we speak).
//!
//! Owns: the list of languages and the reading of a language tag. Which
//! texts a language has, and the choice among `?lang=`, the cookie and
//! `Accept-Language`, belong to the pages (`http::pages::i18n`).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A language the pages speak. Its code is what `?lang=`, the `wr_lang`
/// cookie, a room's `language` and the page's `<html lang>` say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Language {
    #[default]
    English,
    Korean,
    Japanese,
    SimplifiedChinese,
    Spanish,
    French,
    German,
    BrazilianPortuguese,
}

/// Tags that name Simplified Chinese: the script, and the regions that
/// write it. `zh-TW` and `zh-HK` write Traditional Chinese: not these.
const SIMPLIFIED_CHINESE_TAGS: &[&str] = &["zh", "zh-hans", "zh-cn", "zh-sg"];

/// Tags that name Portuguese: Brazilian is the one we have, and a reader
/// of European Portuguese is better served by it than by English.
const PORTUGUESE_TAGS: &[&str] = &["pt", "pt-br", "pt-pt"];

impl Language {
    /// Every language, English (the default and the reference) first.
    pub const ALL: [Self; 8] = [
        Self::English,
        Self::Korean,
        Self::Japanese,
        Self::SimplifiedChinese,
        Self::Spanish,
        Self::French,
        Self::German,
        Self::BrazilianPortuguese,
    ];

    /// The language's code (a BCP 47 tag).
    pub fn code(self) -> &'static str {
        match self {
            Self::English => "en",
            Self::Korean => "ko",
            Self::Japanese => "ja",
            Self::SimplifiedChinese => "zh-Hans",
            Self::Spanish => "es",
            Self::French => "fr",
            Self::German => "de",
            Self::BrazilianPortuguese => "pt-BR",
        }
    }

    /// The language a tag names, in any case, `_` read as `-`: a code
    /// (`ko`, `zh-Hans`, `pt-BR`); `zh`, `zh-CN`, `zh-SG` (and `zh-Hans-…`)
    /// for Simplified Chinese; `pt`, `pt-PT` for Brazilian Portuguese; and
    /// for the other six their code with a region or more (`de-AT`,
    /// `en-GB`, `ko-KR`). `None` for any other tag (`zh-TW`, `pt-AO`, `kok`,
    /// `*`): the caller falls through to its next choice.
    pub fn from_tag(tag: &str) -> Option<Self> {
        let tag = tag.trim().replace('_', "-").to_ascii_lowercase();
        if SIMPLIFIED_CHINESE_TAGS.contains(&tag.as_str()) || tag.starts_with("zh-hans-") {
            return Some(Self::SimplifiedChinese);
        }
        if PORTUGUESE_TAGS.contains(&tag.as_str()) {
            return Some(Self::BrazilianPortuguese);
        }
        let primary = tag.split('-').next().unwrap_or_default();
        Self::ALL
            .into_iter()
            .filter(|language| {
                !matches!(
                    language,
                    Self::SimplifiedChinese | Self::BrazilianPortuguese
                )
            })
            .find(|language| language.code() == primary)
    }

    /// What a room's `language` must be, for an operator who gave another.
    pub fn expected() -> String {
        let codes: Vec<&str> = Self::ALL.iter().map(|l| l.code()).collect();
        format!(
            "one of {} (or zh, zh-CN, zh-SG for zh-Hans; pt, pt-PT for pt-BR)",
            codes.join(", ")
        )
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl Serialize for Language {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.code())
    }
}

/// Read as [`Language::from_tag`] reads a tag, so a stored config written
/// with an alias still reads back.
impl<'de> Deserialize<'de> for Language {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let tag = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Self::from_tag(&tag).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "language {tag:?} is not one we speak: {}",
                Self::expected()
            ))
        })
    }
}

impl utoipa::PartialSchema for Language {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        let codes: Vec<&str> = Self::ALL.iter().map(|l| l.code()).collect();
        super::wire::names_schema(&codes)
    }
}

impl utoipa::ToSchema for Language {}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(tag: &str) -> Option<&'static str> {
        Language::from_tag(tag).map(Language::code)
    }

    #[test]
    fn every_code_reads_back_as_itself() {
        for language in Language::ALL {
            assert_eq!(Language::from_tag(language.code()), Some(language));
            assert_eq!(
                Language::from_tag(&language.code().to_uppercase()),
                Some(language)
            );
        }
    }

    #[test]
    fn the_aliases_mean_their_language() {
        for tag in ["zh", "zh-CN", "ZH-cn", "zh_SG", "zh-Hans", "zh-Hans-CN"] {
            assert_eq!(code(tag), Some("zh-Hans"), "{tag}");
        }
        for tag in ["pt", "pt-PT", "PT-br", "pt_pt"] {
            assert_eq!(code(tag), Some("pt-BR"), "{tag}");
        }
        assert_eq!(code("ko-KR"), Some("ko"));
        assert_eq!(code("de-AT"), Some("de"));
        assert_eq!(code("en-GB"), Some("en"));
        assert_eq!(code("es-419"), Some("es"));
    }

    #[test]
    fn other_tags_name_no_language() {
        for tag in [
            "", "*", "kok", "zh-TW", "zh-HK", "zh-Hant", "pt-AO", "xx", "english", "-", "zh-",
        ] {
            assert_eq!(code(tag), None, "{tag:?}");
        }
    }

    #[test]
    fn a_config_reads_aliases_and_names_a_bad_value() {
        let read = |json: &str| serde_json::from_str::<Language>(json);
        assert_eq!(read(r#""zh-CN""#).unwrap(), Language::SimplifiedChinese);
        assert_eq!(
            serde_json::to_string(&Language::BrazilianPortuguese).unwrap(),
            r#""pt-BR""#
        );
        let error = read(r#""klingon""#).unwrap_err().to_string();
        assert!(error.contains("\"klingon\""), "{error}");
        assert!(error.contains("zh-Hans"), "{error}");
    }
}
