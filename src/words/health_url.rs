//! A room's `health_url` (api.md, "Admission that follows the origin"),
//! read as config: the URL a node GETs to learn how the origin is doing.
//! Only its form is checked here (http or https, a host, no user info, a
//! bounded length); where it may lead (no private address, no redirect)
//! is the outbound probe's to guard (`live::outbound`, design rule 17),
//! since a name can resolve elsewhere tomorrow.
//!
//! By hand over `url`: each rule is a guard against one thing, named by
//! these tests.

use url::Url;

/// The longest `health_url` accepted, in characters: it is stored with the
/// room's config and sent to every node.
pub const MAX_HEALTH_URL_CHARS: usize = 2048;

/// Whether `raw` can be a `health_url`; if not, why, in words.
pub fn check(raw: &str) -> Result<(), String> {
    let chars = raw.chars().count();
    if chars > MAX_HEALTH_URL_CHARS {
        return Err(format!(
            "health_url holds at most {MAX_HEALTH_URL_CHARS} characters (it has {chars})"
        ));
    }
    let url = Url::parse(raw).map_err(|error| format!("health_url is not a URL: {error}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("health_url must be http:// or https://".into());
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("health_url names no host".into());
    }
    // Sent as Basic credentials to whatever the name resolves to.
    if !url.username().is_empty() || url.password().is_some() {
        return Err("health_url must not carry a user or password".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_and_https_urls_with_a_host_are_health_urls() {
        for good in [
            "http://origin.example/health",
            "https://origin.example:8443/health?deep=1",
            "http://203.0.113.7/",
            "http://[2001:db8::1]:8080/healthz",
        ] {
            assert_eq!(check(good), Ok(()), "{good}");
        }
    }

    #[test]
    fn user_info_is_refused_whether_a_user_a_password_or_both() {
        for bad in [
            "http://user@origin.example/health",
            "http://user:secret@origin.example/health",
            "https://:secret@origin.example/health",
        ] {
            let error = check(bad).unwrap_err();
            assert!(error.contains("user or password"), "{bad}: {error}");
        }
    }

    #[test]
    fn other_schemes_and_urls_without_a_host_are_refused() {
        for bad in [
            "ftp://origin.example/health",
            "file:///etc/passwd",
            "gopher://origin.example/",
            "unix:/run/origin.sock",
            "data:text/plain,ok",
            "/health",
            "origin.example/health",
            "",
        ] {
            assert!(check(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_url_longer_than_the_limit_is_refused() {
        let base = "https://origin.example/";
        let at_limit = format!("{base}{}", "a".repeat(MAX_HEALTH_URL_CHARS - base.len()));
        assert_eq!(check(&at_limit), Ok(()));
        let error = check(&format!("{at_limit}a")).unwrap_err();
        assert!(error.contains("at most 2048"), "{error}");
    }
}
