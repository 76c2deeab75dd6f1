//! An origin token (`--origin-token`): the protected site's narrow token,
//! which may revoke passes and call `/api/verify`, and nothing else; and
//! the rooms it may revoke in, where the operator limits it.
//!
//! Written `TOKEN` (every room) or `TOKEN@ROOM+ROOM…`: neither `@` nor
//! `+` can be in a room id, and `@` may not be in a token (nor is it in
//! hex or either base64 alphabet, so tokens made as the docs say keep
//! working), so no limited token reads as another token; commas, which the
//! flag's variable splits on, are in neither.

use super::RoomId;

/// One origin token, and the rooms it may act in.
#[derive(Clone, PartialEq, Eq)]
pub struct OriginToken {
    token: String,
    /// `None`: every room.
    rooms: Option<Vec<RoomId>>,
}

/// Why an origin token was refused. Its text never says the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OriginTokenError {
    #[error(
        "it must be at least {min} characters (it has {given}); make one with, say, `openssl rand -hex 32`"
    )]
    TooShort { min: usize, given: usize },
    #[error(
        "after `@` it must name rooms, joined by `+` (`TOKEN@spring-sale+autumn-sale`); {0:?} is no room id"
    )]
    NotARoom(String),
}

impl OriginToken {
    pub fn parse(text: &str, min_chars: usize) -> Result<Self, OriginTokenError> {
        let (token, rooms) = match text.split_once('@') {
            None => (text, None),
            Some((token, rooms)) => {
                let rooms = rooms
                    .split('+')
                    .map(|room| {
                        RoomId::parse(room).ok_or_else(|| OriginTokenError::NotARoom(room.into()))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                (token, Some(rooms))
            }
        };
        let given = token.chars().count();
        if given < min_chars {
            return Err(OriginTokenError::TooShort {
                min: min_chars,
                given,
            });
        }
        Ok(Self {
            token: token.to_string(),
            rooms,
        })
    }

    /// The token itself, to compare what a request sends with.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Whether the token may act in `room`.
    pub fn covers(&self, room: &RoomId) -> bool {
        self.rooms.as_ref().is_none_or(|rooms| rooms.contains(room))
    }
}

impl std::fmt::Debug for OriginToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OriginToken")
            .field("token", &"[redacted]")
            .field("rooms", &self.rooms)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: &str = "0123456789abcdef0123456789abcdef";

    fn room(id: &str) -> RoomId {
        RoomId::parse(id).unwrap()
    }

    #[test]
    fn a_token_alone_covers_every_room() {
        let token = OriginToken::parse(LONG, 32).unwrap();
        assert_eq!(token.token(), LONG);
        assert!(token.covers(&room("anything")));
        // As `openssl rand -base64 32` makes them: `+`, `/` and `=` are its own.
        let base64 = "q+3/Zl0WkM8hZ2S9x1c5p2J8a6v0y4b7n3m1k9j5h2g=";
        assert_eq!(OriginToken::parse(base64, 32).unwrap().token(), base64);
    }

    #[test]
    fn a_token_limited_to_rooms_covers_those_alone() {
        let token = OriginToken::parse(&format!("{LONG}@spring-sale+autumn-sale"), 32).unwrap();
        assert_eq!(token.token(), LONG, "the rooms are no part of the token");
        assert!(token.covers(&room("spring-sale")));
        assert!(token.covers(&room("autumn-sale")));
        assert!(!token.covers(&room("winter-sale")));
    }

    #[test]
    fn what_cannot_be_read_as_one_token_and_its_rooms_is_refused_without_saying_the_token() {
        for (text, refused) in [
            (
                format!("{LONG}@"),
                OriginTokenError::NotARoom(String::new()),
            ),
            (
                format!("{LONG}@a+"),
                OriginTokenError::NotARoom(String::new()),
            ),
            (
                format!("{LONG}@Shop"),
                OriginTokenError::NotARoom("Shop".into()),
            ),
            // A token holding `@`: what follows is no room.
            (
                format!("{LONG}@p@ss"),
                OriginTokenError::NotARoom("p@ss".into()),
            ),
            (
                "abc@shop".into(),
                OriginTokenError::TooShort { min: 32, given: 3 },
            ),
        ] {
            let error = OriginToken::parse(&text, 32).unwrap_err();
            assert_eq!(error, refused, "{text}");
            assert!(!error.to_string().contains(LONG), "{error}");
        }
    }
}
