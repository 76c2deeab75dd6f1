//! A room's branding on its pages (api.md "The page: branding and
//! languages"): the per-room stylesheet that applies its colours (served
//! at `/rooms/{room}/style.css`, so no style is inline), and the
//! Content-Security-Policy of a page whose logo is on another origin.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, ResponseError, web};
use sha2::{Digest, Sha256};

use crate::http::error::ApiError;
use crate::http::middleware::CONTENT_SECURITY_POLICY;
use crate::http::paths::RoomPath;
use crate::store::{Store, StoreExt};
use crate::words::RoomId;
use crate::words::page::{Colour, PageBranding};

/// The palettes of static/style.css, one of which a room's background
/// takes whatever the visitor's colour scheme: the text must stay
/// readable on the operator's background, light or dark.
const LIGHT_PALETTE: &str = "--surface: #ffffff; --text: #1b2430; --muted: #4f5b69; \
    --border: #d5dbe2; --ok: #1d6b3a; --ok-soft: #e2f3e8; --warn: #8a4b00; \
    --warn-soft: #fff1dc; --bad: #a4262c; --bad-soft: #fbe6e7; color-scheme: light;";
const DARK_PALETTE: &str = "--surface: #1a212b; --text: #e8edf3; --muted: #a9b4c2; \
    --border: #2f3a48; --ok: #7fd6a0; --ok-soft: #173324; --warn: #ffc978; \
    --warn-soft: #3a2a12; --bad: #ff9a9f; --bad-soft: #3d1c1f; color-scheme: dark;";

/// The stylesheet of a room's colours; `None` when the page sets none.
pub fn stylesheet(room: &RoomId, page: &PageBranding) -> Option<String> {
    let (accent, background) = (page.accent(), page.background());
    if accent.is_none() && background.is_none() {
        return None;
    }
    let mut rules = String::new();
    if let Some(background) = background {
        let palette = if background.is_dark() {
            DARK_PALETTE
        } else {
            LIGHT_PALETTE
        };
        rules.push_str(&format!("  --bg: {}; {palette}\n", background.css()));
    }
    let mut dark_scheme = String::new();
    if let Some(accent) = accent {
        rules.push_str(&format!(
            "  --accent: {0}; --accent-text: {1}; \
             --accent-soft: color-mix(in srgb, {0} 16%, var(--surface));\n",
            accent.css(),
            readable_on(accent)
        ));
        // The accent as text: where it would not read, the palette's text.
        let grounds = match background {
            Some(background) if background.is_dark() => [background, DARK_SURFACE],
            Some(background) => [background, LIGHT_SURFACE],
            None => [LIGHT_BG, LIGHT_SURFACE],
        };
        rules.push_str(&format!(
            "  --accent-ink: {};\n",
            accent_ink(accent, grounds)
        ));
        if background.is_none() {
            // Without a background of its own the page follows the
            // visitor's scheme: the dark one has its own grounds.
            dark_scheme = format!(
                "@media (prefers-color-scheme: dark) {{\n  :root {{ --accent-ink: {}; }}\n}}\n",
                accent_ink(accent, [DARK_BG, DARK_SURFACE])
            );
        }
    }
    Some(format!(
        "/* The colours of room {room} (its config's `page`). */\n:root {{\n{rules}}}\n{dark_scheme}"
    ))
}

/// The grounds text lies on in static/style.css: the page and its cards.
const LIGHT_BG: Colour = Colour::rgb(0xf4, 0xf6, 0xf8);
const LIGHT_SURFACE: Colour = Colour::rgb(0xff, 0xff, 0xff);
const DARK_BG: Colour = Colour::rgb(0x11, 0x16, 0x1d);
const DARK_SURFACE: Colour = Colour::rgb(0x1a, 0x21, 0x2b);
/// WCAG AA for body text.
const READABLE_CONTRAST: f64 = 4.5;

/// The accent where it reads on every ground (AA), else the palette's
/// text colour: an operator's colour never makes a headline unreadable.
fn accent_ink(accent: Colour, grounds: [Colour; 2]) -> String {
    if grounds
        .iter()
        .all(|ground| accent.contrast(*ground) >= READABLE_CONTRAST)
    {
        accent.css()
    } else {
        "var(--text)".into()
    }
}

/// Text that reads on `colour`: white on a dark one, near-black on a light one.
fn readable_on(colour: Colour) -> &'static str {
    if colour.is_dark() {
        "#ffffff"
    } else {
        "#0b1524"
    }
}

/// The stylesheet's version: it changes whenever its text does.
fn version(css: &str) -> String {
    Sha256::digest(css.as_bytes())[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Where a page links the room's stylesheet, with its version (`?v=`),
/// so a page always gets the colours it was rendered with.
pub fn stylesheet_url(room: &RoomId, page: &PageBranding) -> Option<String> {
    let css = stylesheet(room, page)?;
    Some(format!("/rooms/{room}/style.css?v={}", version(&css)))
}

/// The page's Content-Security-Policy: the one of every answer, with an
/// `https://` logo's origin allowed as an image (nothing else widens).
pub fn content_security_policy(page: &PageBranding) -> String {
    match page.logo_origin() {
        Some(origin) => CONTENT_SECURITY_POLICY.replacen(
            "img-src 'self' data:",
            &format!("img-src 'self' data: {origin}"),
            1,
        ),
        None => CONTENT_SECURITY_POLICY.to_string(),
    }
}

/// Sets a branded page's policy on its answer.
pub fn with_policy(mut response: HttpResponse, page: &PageBranding) -> HttpResponse {
    if page.logo_origin().is_some()
        && let Ok(value) = header::HeaderValue::from_str(&content_security_policy(page))
    {
        response
            .headers_mut()
            .insert(header::CONTENT_SECURITY_POLICY, value);
    }
    response
}

#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StyleQuery {
    /// The version the page was rendered with: when it is the current
    /// one, the answer may be kept for a year.
    v: Option<String>,
}

#[utoipa::path(
    get,
    path = "/rooms/{room}/style.css",
    tag = "pages",
    summary = "A room's colours as a stylesheet",
    description = "The colours of the room's `page` config as CSS custom properties, linked by its waiting and sale pages (no inline style under the CSP). `ETag` is the version; with `?v=` equal to it the answer is immutable for a year. Empty (but 200) when the room sets no colour.",
    params(RoomPath, StyleQuery),
    responses(
        (status = 200, description = "The stylesheet", content_type = "text/css"),
        (status = 304, description = "Not modified (`If-None-Match`)"),
        (status = 404, description = "room_not_found"),
        (status = 503, description = "store_unavailable"),
    ),
)]
pub async fn room_stylesheet(
    req: HttpRequest,
    path: web::Path<String>,
    query: web::Query<StyleQuery>,
    store: web::Data<dyn Store>,
) -> HttpResponse {
    let Some(room) = RoomId::parse(&path) else {
        return ApiError::RoomNotFound(path.to_string()).error_response();
    };
    let page = match store.room(&room).await {
        Ok(info) => info.config.page,
        Err(error) => return ApiError::from(error).error_response(),
    };
    let css = stylesheet(&room, &page).unwrap_or_default();
    let current = version(&css);
    let etag = format!("\"{current}\"");
    let cache = if query.v.as_deref() == Some(current.as_str()) {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    let unchanged = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|sent| sent.split(',').any(|tag| tag.trim() == etag));
    let mut answer = if unchanged {
        HttpResponse::NotModified()
    } else {
        HttpResponse::Ok()
    };
    answer
        .insert_header((header::ETAG, etag))
        .insert_header((header::CACHE_CONTROL, cache));
    if unchanged {
        answer.finish()
    } else {
        answer.content_type("text/css; charset=utf-8").body(css)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room() -> RoomId {
        RoomId::parse("drop").unwrap()
    }

    #[test]
    fn a_page_without_colours_has_no_stylesheet() {
        assert_eq!(stylesheet(&room(), &PageBranding::default()), None);
        assert_eq!(stylesheet_url(&room(), &PageBranding::default()), None);
    }

    #[test]
    fn a_dark_background_takes_the_dark_palette() {
        let page = PageBranding {
            background_color: Some("#101820".into()),
            accent_color: Some("#FFBF47".into()),
            ..PageBranding::default()
        };
        let css = stylesheet(&room(), &page).unwrap();
        assert!(css.contains("--bg: #101820;"), "{css}");
        assert!(css.contains("color-scheme: dark"), "{css}");
        assert!(
            css.contains("--accent: #ffbf47; --accent-text: #0b1524;"),
            "{css}"
        );
        let url = stylesheet_url(&room(), &page).unwrap();
        assert!(url.starts_with("/rooms/drop/style.css?v="), "{url}");
    }

    #[test]
    fn an_accent_that_would_not_read_is_not_used_for_text() {
        let on = |background: Option<&str>, accent: &str| {
            let page = PageBranding {
                background_color: background.map(Into::into),
                accent_color: Some(accent.into()),
                ..PageBranding::default()
            };
            stylesheet(&room(), &page).unwrap()
        };
        // Yellow on a dark ground reads; green on it does not.
        assert!(on(Some("#101820"), "#FFBF47").contains("--accent-ink: #ffbf47;"));
        assert!(on(Some("#101820"), "#0a7a3b").contains("--accent-ink: var(--text);"));
        // Without a background: checked on the light page and the dark one.
        let css = on(None, "#1f5fbf");
        assert!(
            css.contains(":root {\n") && css.contains("--accent-ink: #1f5fbf;"),
            "{css}"
        );
        assert!(
            css.contains(
                "@media (prefers-color-scheme: dark) {\n  :root { --accent-ink: var(--text); }"
            ),
            "a dark blue on the dark scheme: {css}"
        );
    }

    #[test]
    fn only_an_https_logo_widens_img_src() {
        let mut page = PageBranding {
            logo_url: Some("/static/logo.png".into()),
            ..PageBranding::default()
        };
        assert_eq!(content_security_policy(&page), CONTENT_SECURITY_POLICY);
        page.logo_url = Some("https://cdn.example:8443/brand/logo.svg".into());
        let policy = content_security_policy(&page);
        assert!(
            policy.contains("img-src 'self' data: https://cdn.example:8443;"),
            "{policy}"
        );
        assert!(policy.contains("default-src 'self';"), "{policy}");
    }

    /// security.md, item 4: a logo stored before hosts were checked, whose
    /// host would split the policy, widens nothing.
    #[test]
    fn a_logo_host_that_is_not_a_plain_name_never_reaches_the_policy() {
        for stored in [
            "https://evil.example,script-src/x.png",
            "https://evil.example'/x.png",
        ] {
            let page = PageBranding {
                logo_url: Some(stored.into()),
                ..PageBranding::default()
            };
            assert_eq!(
                content_security_policy(&page),
                CONTENT_SECURITY_POLICY,
                "{stored}"
            );
        }
    }
}
