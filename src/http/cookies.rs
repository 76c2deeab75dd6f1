//! Cookies over HTTPS: with `--secure-cookies` (the server is reached over
//! HTTPS, usually through a proxy that ends TLS), every cookie the server
//! sets carries `Secure`, so a browser never sends a ticket, a pass or an
//! admin session over plain HTTP. Done to every answer in one place, so no
//! handler can forget one.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{Error, web};

use super::state::ServerSettings;

pub async fn secure_cookies(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let secure = req
        .app_data::<web::Data<ServerSettings>>()
        .is_some_and(|settings| settings.secure_cookies);
    let mut response = next.call(req).await?;
    if secure {
        let headers = response.headers_mut();
        let cookies: Vec<HeaderValue> = headers.get_all(header::SET_COOKIE).cloned().collect();
        headers.remove(header::SET_COOKIE);
        for cookie in cookies {
            headers.append(header::SET_COOKIE, with_secure(cookie));
        }
    }
    Ok(response)
}

fn with_secure(cookie: HeaderValue) -> HeaderValue {
    let Ok(text) = cookie.to_str() else {
        return cookie;
    };
    let already = text
        .split(';')
        .any(|attribute| attribute.trim().eq_ignore_ascii_case("secure"));
    if already {
        return cookie;
    }
    HeaderValue::from_str(&format!("{text}; Secure")).unwrap_or(cookie)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secure_is_added_once() {
        let plain = HeaderValue::from_static("wr_pass=abc; Path=/; HttpOnly");
        assert_eq!(with_secure(plain), "wr_pass=abc; Path=/; HttpOnly; Secure");
        let already = HeaderValue::from_static("a=b; secure");
        assert_eq!(with_secure(already), "a=b; secure");
    }
}
