//! Time for everything that decides: admission ticks, pass expiry, abandonment;
//! and how times are written on the wire (RFC 3339).
//!
//! All logic reads time through [`Clock`] so tests can drive it by hand
//! ([`ManualClock`]) instead of sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub type Millis = u64;

/// A source of wall-clock time in milliseconds.
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> Millis;
}

/// The real clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> Millis {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as Millis)
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to. Cheap to clone; clones share the time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
}

impl ManualClock {
    pub fn new(start: Millis) -> Self {
        Self {
            now: Arc::new(AtomicU64::new(start)),
        }
    }

    pub fn advance_ms(&self, by: Millis) {
        self.now.fetch_add(by, Ordering::SeqCst);
    }

    pub fn set_ms(&self, to: Millis) {
        self.now.store(to, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> Millis {
        self.now.load(Ordering::SeqCst)
    }
}

/// Shared handle to whichever clock the application runs on.
pub type SharedClock = Arc<dyn Clock>;

/// RFC 3339 with milliseconds, for clocks compared across machines.
pub fn rfc3339_ms(at: Millis) -> String {
    chrono::DateTime::from_timestamp_millis(at as i64)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// RFC 3339 in UTC, to the second, with milliseconds only when there are
/// any (`2026-06-01T09:00:00Z`, `2026-06-01T09:00:00.500Z`): a moment set
/// to the millisecond is written back as it was set.
pub fn rfc3339(at: Millis) -> String {
    chrono::DateTime::from_timestamp_millis(at as i64)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// A moment in a room's config (`closes_at`): milliseconds inside, RFC 3339
/// on the wire (`2026-06-01T09:00:00Z`, any offset accepted, UTC written).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Moment(pub Millis);

impl serde::Serialize for Moment {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&rfc3339(self.0))
    }
}

impl utoipa::PartialSchema for Moment {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .description(Some("RFC 3339, e.g. 2026-06-01T09:00:00Z (written in UTC)"))
            .into()
    }
}

impl utoipa::ToSchema for Moment {}

impl<'de> serde::Deserialize<'de> for Moment {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        chrono::DateTime::parse_from_rfc3339(&text)
            .ok()
            .and_then(|at| Millis::try_from(at.timestamp_millis()).ok())
            .map(Moment)
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "{text:?} is not an RFC 3339 time like 2026-06-01T09:00:00Z"
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_read_any_offset_and_write_utc() {
        let read: Moment = serde_json::from_str(r#""2026-01-01T09:00:00+09:00""#).unwrap();
        assert_eq!(read, Moment(1_767_225_600_000));
        assert_eq!(
            serde_json::to_string(&read).unwrap(),
            r#""2026-01-01T00:00:00Z""#
        );
        assert!(serde_json::from_str::<Moment>(r#""tomorrow""#).is_err());
        assert!(serde_json::from_str::<Moment>(r#""1960-01-01T00:00:00Z""#).is_err());
    }

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339(1_767_225_600_000), "2026-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_767_225_600_500), "2026-01-01T00:00:00.500Z");
        let set: Moment = serde_json::from_str(r#""2026-01-01T00:00:00.250Z""#).unwrap();
        assert_eq!(
            serde_json::to_string(&set).unwrap(),
            r#""2026-01-01T00:00:00.250Z""#,
            "a moment set to the millisecond is written back as it was set"
        );
    }
}
