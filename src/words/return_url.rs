//! Where an admitted visitor may be sent back to: the URL a forward-auth
//! gate saw them ask for (`return`), honoured only on the origin of the
//! room's `target_url`, so a waiting room can never be made an open
//! redirect. Also the deployment's public URL (`--public-url`), which a
//! path `target_url` is on.
//!
//! By hand over `url`: the rules are few and each is a guard against one
//! known trick (`//evil`, userinfo, backslashes, other scheme or port),
//! which these tests name one by one.

use url::{Origin, Url};

/// The longest `return` kept: it rides in the visitor's ticket.
pub const MAX_RETURN_BYTES: usize = 2048;

/// The query parameter a pass is handed to the protected site in.
pub const PASS_PARAMETER: &str = "wr_pass";

/// The waiting room's public base URL (`--public-url`): absolute, http or
/// https, without userinfo, query or fragment; any path is a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl {
    /// Without a trailing slash.
    base: String,
    origin: Origin,
}

impl PublicUrl {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let url = Url::parse(raw.trim()).map_err(|error| format!("not a URL: {error}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err("the scheme must be http or https".into());
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err("it names no host".into());
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err("it must not carry a user or password".into());
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err("it must not carry a query or fragment".into());
        }
        Ok(Self {
            base: url.as_str().trim_end_matches('/').to_string(),
            origin: url.origin(),
        })
    }

    /// The base URL with `path` (which starts with `/`) under it.
    pub fn join(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn origin(&self) -> &Origin {
        &self.origin
    }
}

/// A `return` as sent, if it can be one: an absolute http(s) URL, written
/// plainly (no backslash, whitespace or control character a browser might
/// read otherwise), without userinfo, at most `MAX_RETURN_BYTES`. Any
/// `wr_pass` in its query is dropped (a pass must not be carried back).
/// Anything else is `None`: a malformed return is ignored, not an error.
pub fn parse_return(raw: &str) -> Option<Url> {
    if raw.len() > MAX_RETURN_BYTES
        || raw
            .chars()
            .any(|c| c == '\\' || c.is_whitespace() || c.is_control())
    {
        return None;
    }
    let lower = raw.get(..8).unwrap_or(raw).to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return None;
    }
    let url = Url::parse(raw).ok()?;
    if !matches!(url.scheme(), "http" | "https")
        || url.host_str().is_none_or(str::is_empty)
        || !url.username().is_empty()
        || url.password().is_some()
    {
        return None;
    }
    Some(without_pass(url))
}

/// `url` without any `wr_pass` query parameter.
pub fn without_pass(mut url: Url) -> Url {
    if url.query_pairs().any(|(name, _)| name == PASS_PARAMETER) {
        let kept: Vec<(String, String)> = url
            .query_pairs()
            .filter(|(name, _)| name != PASS_PARAMETER)
            .map(|(name, value)| (name.into_owned(), value.into_owned()))
            .collect();
        if kept.is_empty() {
            url.set_query(None);
        } else {
            url.query_pairs_mut().clear().extend_pairs(kept);
        }
    }
    url
}

/// The origin a room's `target_url` is on: its own when absolute, the
/// public URL's when it is a path, none otherwise (nothing may return).
pub fn target_origin(target_url: &str, public: Option<&PublicUrl>) -> Option<Origin> {
    if target_url.starts_with('/') && !target_url.starts_with("//") {
        return public.map(|public| public.origin().clone());
    }
    let url = Url::parse(target_url).ok()?;
    matches!(url.scheme(), "http" | "https").then(|| url.origin())
}

/// Whether `url` is on the origin of `target_url` (see [`target_origin`]).
pub fn on_target_origin(url: &Url, target_url: &str, public: Option<&PublicUrl>) -> bool {
    target_origin(target_url, public)
        .is_some_and(|origin| origin.is_tuple() && url.origin() == origin)
}

/// Where an admitted visitor goes: `ret` when it is a return
/// (`parse_return`) on the origin of `target_url`, else the target.
pub fn destination(ret: Option<&str>, target_url: &str, public: Option<&PublicUrl>) -> String {
    ret.and_then(parse_return)
        .filter(|ret| on_target_origin(ret, target_url, public))
        .map(String::from)
        .unwrap_or_else(|| target_url.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TARGET: &str = "https://target.example/shop";

    fn dest(ret: &str) -> String {
        destination(Some(ret), TARGET, None)
    }

    #[test]
    fn a_return_on_the_targets_origin_is_honoured() {
        for ok in [
            "https://target.example/",
            "https://target.example/cart?item=3#top",
            "https://TARGET.example:443/x",
            "HTTPS://target.example/x",
        ] {
            assert_ne!(dest(ok), TARGET, "{ok}");
        }
        assert_eq!(
            dest("https://target.example/a?b=1&wr_pass=old"),
            "https://target.example/a?b=1"
        );
        assert_eq!(
            dest("https://target.example/a?wr_pass=old"),
            "https://target.example/a"
        );
    }

    #[test]
    fn no_open_redirect() {
        for refused in [
            "//evil.example/",
            "/relative",
            "https://target.example.evil/",
            "https://evil.example/?https://target.example/",
            "https://target.example@evil.example/",
            "https://user:pw@target.example/",
            "http://target.example/",
            "https://target.example:8443/",
            "https:\\\\evil.example",
            "https://target.example\\@evil.example/",
            "https:/evil.example",
            "https:evil.example",
            "javascript:alert(1)//https://target.example/",
            "data:text/html,https://target.example/",
            " https://target.example/",
            "https://target.example/\n",
            "https://tar\tget.example/",
            "ftp://target.example/",
            "",
        ] {
            assert_eq!(dest(refused), TARGET, "{refused:?}");
        }
        let long = format!("https://target.example/{}", "a".repeat(MAX_RETURN_BYTES));
        assert_eq!(dest(&long), TARGET);
    }

    #[test]
    fn a_path_target_is_on_the_public_urls_origin() {
        let public = PublicUrl::parse("https://queue.example/wait/").unwrap();
        assert_eq!(
            public.join("/rooms/a"),
            "https://queue.example/wait/rooms/a"
        );
        assert_eq!(
            destination(Some("https://queue.example/x"), "/shop", Some(&public)),
            "https://queue.example/x"
        );
        assert_eq!(
            destination(Some("https://other.example/x"), "/shop", Some(&public)),
            "/shop"
        );
        // Without a public URL, a path target has no origin to return to.
        assert_eq!(
            destination(Some("https://queue.example/x"), "/shop", None),
            "/shop"
        );
        assert_eq!(
            destination(
                Some("https://queue.example/x"),
                "//queue.example/",
                Some(&public)
            ),
            "//queue.example/"
        );
    }

    #[test]
    fn the_public_url_is_checked() {
        for refused in [
            "queue.example",
            "/rooms",
            "ftp://queue.example",
            "https://u:p@queue.example",
            "https://queue.example/?a=1",
            "https://queue.example/#x",
        ] {
            assert!(PublicUrl::parse(refused).is_err(), "{refused}");
        }
        assert_eq!(
            PublicUrl::parse("https://queue.example")
                .unwrap()
                .join("/rooms/a"),
            "https://queue.example/rooms/a"
        );
    }
}
