//! A room's branding (api.md "The page: branding and languages"): the
//! operator's title, headline, message, logo, colours and footer shown on
//! the waiting and sale pages, the rules they keep, and what a page needs
//! of them (the logo's origin for the CSP, whether a colour is dark).

use serde::{Deserialize, Serialize};

/// Up to this many characters across all the fields of a room's page.
pub const MAX_PAGE_CHARS: usize = 2_000;

/// A room's page: every field optional, `None` showing the default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PageBranding {
    /// The browser tab's title, instead of "{room name} · Waiting room".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The line at the top of the page, instead of the room's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headline: Option<String>,
    /// Plain text under the heading of the waiting page, instead of its
    /// default introduction; line breaks are kept, markup is shown as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `https://…`, or a path on this site starting with `/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logo_url: Option<String>,
    /// `#rrggbb`: buttons, links, the progress bar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accent_color: Option<String>,
    /// `#rrggbb`: the page's background (the text around it follows:
    /// light on a dark background, dark on a light one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background_color: Option<String>,
    /// Plain text at the foot of the page; line breaks are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub footer: Option<String>,
}

/// The page's fields, in the order the API lists them (a change of the
/// page names some of them: `words::config`).
pub const PAGE_FIELDS: &[&str] = &[
    "title",
    "headline",
    "message",
    "logo_url",
    "accent_color",
    "background_color",
    "footer",
];

/// What is wrong with a page, and which of its fields (`title`…; none for
/// the page as a whole).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageError {
    pub field: Option<&'static str>,
    pub message: String,
}

impl PageError {
    fn at(field: &'static str, message: String) -> Self {
        Self {
            field: Some(field),
            message,
        }
    }
}

/// The fields by name, in the order the API lists them.
macro_rules! each_field {
    ($mac:ident) => {
        $mac!(title);
        $mac!(headline);
        $mac!(message);
        $mac!(logo_url);
        $mac!(accent_color);
        $mac!(background_color);
        $mac!(footer);
    };
}

impl PageBranding {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// What is wrong with the page, naming the field (`page.…` in the message).
    pub fn validate(&self) -> Result<(), PageError> {
        let one_line = |name: &'static str, value: &Option<String>, max: usize| match value {
            Some(text) if text.chars().count() > max || text.chars().any(is_deceptive) => {
                Err(PageError::at(
                    name,
                    format!(
                        "page.{name} must be one line of at most {max} characters, without control characters or bidirectional overrides"
                    ),
                ))
            }
            _ => Ok(()),
        };
        let text = |name: &'static str, value: &Option<String>| match value {
            Some(text)
                if text
                    .chars()
                    .any(|c| is_deceptive(c) && c != '\n' && c != '\r') =>
            {
                Err(PageError::at(
                    name,
                    format!(
                        "page.{name} must be plain text without control characters (line breaks allowed) or bidirectional overrides"
                    ),
                ))
            }
            _ => Ok(()),
        };
        let colour = |name: &'static str, value: &Option<String>| match value {
            Some(value) if Colour::parse(value).is_none() => Err(PageError::at(
                name,
                format!(
                    "page.{name} must be a colour written #rrggbb (six hex digits), not {value:?}"
                ),
            )),
            _ => Ok(()),
        };
        one_line("title", &self.title, 200)?;
        one_line("headline", &self.headline, 200)?;
        text("message", &self.message)?;
        text("footer", &self.footer)?;
        if let Some(url) = &self.logo_url
            && !logo_url_ok(url)
        {
            return Err(PageError::at(
                "logo_url",
                "page.logo_url must be an https:// URL with a host, or a path starting with a single /"
                    .into(),
            ));
        }
        colour("accent_color", &self.accent_color)?;
        colour("background_color", &self.background_color)?;
        let total = self.total_chars();
        if total > MAX_PAGE_CHARS {
            return Err(PageError {
                field: None,
                message: format!(
                    "page must be at most {MAX_PAGE_CHARS} characters in all ({total} given)"
                ),
            });
        }
        Ok(())
    }

    fn total_chars(&self) -> usize {
        let mut total = 0;
        macro_rules! count {
            ($field:ident) => {
                total += self.$field.as_deref().map_or(0, |v| v.chars().count());
            };
        }
        each_field!(count);
        total
    }

    /// The origin of an `https://` logo (`https://cdn.example`), which the
    /// page's `img-src` must allow; `None` for a logo on this site.
    pub fn logo_origin(&self) -> Option<String> {
        let logo = self.logo_url.as_deref().filter(|url| logo_url_ok(url))?;
        let url = url::Url::parse(logo).ok()?;
        (url.scheme() == "https").then(|| url.origin().ascii_serialization())
    }

    /// The branding as a page shows it: a logo URL that would no longer
    /// pass validation (stored before a rule was added) is dropped.
    pub fn shown(mut self) -> Self {
        if self
            .logo_url
            .as_deref()
            .is_some_and(|url| !logo_url_ok(url))
        {
            self.logo_url = None;
        }
        self
    }

    /// The colours, parsed (validation made sure they parse).
    pub fn accent(&self) -> Option<Colour> {
        self.accent_color.as_deref().and_then(Colour::parse)
    }

    pub fn background(&self) -> Option<Colour> {
        self.background_color.as_deref().and_then(Colour::parse)
    }
}

/// A colour written `#rrggbb`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Colour([u8; 3]);

impl Colour {
    pub const fn rgb(r: u8, g: u8, b: u8) -> Self {
        Self([r, g, b])
    }

    pub fn parse(text: &str) -> Option<Self> {
        let hex = text.strip_prefix('#')?;
        if hex.len() != 6 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let byte = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).ok();
        Some(Self([byte(0)?, byte(2)?, byte(4)?]))
    }

    /// Whether text on it should be light: its relative luminance (WCAG
    /// 2) is below the point where white and near-black contrast alike.
    pub fn is_dark(self) -> bool {
        self.luminance() < 0.179
    }

    /// Relative luminance, as WCAG 2 defines it.
    fn luminance(self) -> f64 {
        let linear = |channel: u8| {
            let c = f64::from(channel) / 255.0;
            if c <= 0.039_28 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        };
        let [r, g, b] = self.0;
        0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b)
    }

    /// The contrast ratio of the two colours (WCAG 2): 1 to 21.
    pub fn contrast(self, other: Colour) -> f64 {
        let (a, b) = (self.luminance(), other.luminance());
        (a.max(b) + 0.05) / (a.min(b) + 0.05)
    }

    /// `#rrggbb`, lower case.
    pub fn css(self) -> String {
        let [r, g, b] = self.0;
        format!("#{r:02x}{g:02x}{b:02x}")
    }
}

/// Characters that make a text show something other than it says:
/// controls, and the bidirectional embeddings, overrides and isolates.
pub(crate) fn is_deceptive(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// An `https://` URL with a host, or a path on this site (`//host` and
/// `/\host` are other hosts to a browser).
fn logo_url_ok(url: &str) -> bool {
    if url.len() > 2048 || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    if let Some(rest) = url.strip_prefix('/') {
        return !rest.starts_with('/') && !rest.starts_with('\\');
    }
    url::Url::parse(url).is_ok_and(|parsed| {
        parsed.scheme() == "https"
            && parsed.username().is_empty()
            && parsed.password().is_none()
            && parsed.host_str().is_some_and(plain_host_name)
    })
}

/// A host name as the CSP's `img-src` may carry it: letters, digits, dots
/// and hyphens (an international name arrives here in its ASCII form). A
/// URL parser lets more through in a host (`,`, quotes, `;`), any of which
/// would end the policy's source or start another directive.
fn plain_host_name(host: &str) -> bool {
    !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    type Change = Box<dyn FnOnce(&mut PageBranding)>;

    fn with(change: impl FnOnce(&mut PageBranding)) -> Result<(), String> {
        let mut page = PageBranding::default();
        change(&mut page);
        page.validate().map_err(|error| error.message)
    }

    #[test]
    fn each_bad_field_is_named() {
        let cases: [(&str, Change); 7] = [
            ("page.title", Box::new(|p| p.title = Some("a\nb".into()))),
            (
                "page.headline",
                Box::new(|p| p.headline = Some("x\u{202E}y".into())),
            ),
            (
                "page.message",
                Box::new(|p| p.message = Some("\u{7}".into())),
            ),
            (
                "page.footer",
                Box::new(|p| p.footer = Some("\u{2066}".into())),
            ),
            (
                "page.logo_url",
                Box::new(|p| p.logo_url = Some("http://cdn.example/l.png".into())),
            ),
            (
                "page.accent_color",
                Box::new(|p| p.accent_color = Some("red".into())),
            ),
            (
                "page.background_color",
                Box::new(|p| p.background_color = Some("#12345".into())),
            ),
        ];
        for (field, change) in cases {
            let error = with(change).unwrap_err();
            assert!(error.starts_with(&format!("{field} ")), "{field}: {error}");
        }
    }

    #[test]
    fn good_values_pass() {
        let page = PageBranding {
            title: Some("Spring drop".into()),
            headline: Some("Spring drop — 봄".into()),
            message: Some("Line one\nLine two <b>not bold</b>".into()),
            logo_url: Some("https://cdn.example/logo.svg".into()),
            accent_color: Some("#0A7a3B".into()),
            background_color: Some("#ffffff".into()),
            footer: Some("© Shop\r\nTerms apply".into()),
        };
        assert_eq!(page.validate(), Ok(()));
        let field = PageBranding {
            footer: Some("\u{2066}".into()),
            ..PageBranding::default()
        };
        assert_eq!(field.validate().unwrap_err().field, Some("footer"));
        assert_eq!(page.logo_origin().as_deref(), Some("https://cdn.example"));
        for path in ["/static/logo.png", "/logo.svg?v=2"] {
            assert_eq!(with(|p| p.logo_url = Some(path.into())), Ok(()), "{path}");
        }
        for bad in [
            "//evil.example/x.png",
            "/\\evil.example",
            "javascript:x",
            "https://",
            "https://evil.example,script-src/x.png",
            "https://evil.example'/x.png",
            "https://evil.example\"/x.png",
            "https://evil.example;/x.png",
            "https://user@cdn.example/x.png",
        ] {
            assert!(with(|p| p.logo_url = Some(bad.into())).is_err(), "{bad}");
        }
        for good in [
            "https://cdn.example:8443/logo.svg",
            "https://bücher.example/logo.svg",
            "https://192.0.2.7/logo.svg",
        ] {
            assert_eq!(with(|p| p.logo_url = Some(good.into())), Ok(()), "{good}");
        }
    }

    #[test]
    fn a_bad_logo_already_stored_is_dropped_when_shown() {
        let stored = PageBranding {
            logo_url: Some("https://evil.example,script-src/x".into()),
            ..PageBranding::default()
        };
        assert_eq!(stored.logo_origin(), None, "nothing reaches the policy");
        assert_eq!(stored.shown().logo_url, None);
        let good = PageBranding {
            logo_url: Some("https://bücher.example/l.svg".into()),
            ..PageBranding::default()
        };
        assert_eq!(
            good.logo_origin().as_deref(),
            Some("https://xn--bcher-kva.example")
        );
    }

    #[test]
    fn the_page_has_one_budget_of_characters() {
        let error = with(|p| {
            p.message = Some("m".repeat(1_500));
            p.footer = Some("f".repeat(501));
        })
        .unwrap_err();
        assert!(error.starts_with("page must be at most 2000"), "{error}");
        assert_eq!(
            with(|p| {
                p.message = Some("m".repeat(1_500));
                p.footer = Some("f".repeat(500));
            }),
            Ok(())
        );
    }

    #[test]
    fn dark_colours_take_light_text() {
        assert!(Colour::parse("#101820").unwrap().is_dark());
        assert!(Colour::parse("#1f5fbf").unwrap().is_dark());
        assert!(!Colour::parse("#ffffff").unwrap().is_dark());
        assert!(!Colour::parse("#ffbf47").unwrap().is_dark());
        assert_eq!(Colour::parse("#0A7a3B").unwrap().css(), "#0a7a3b");
    }
}
