//! Names on the wire from a fixed set: the words' enums, each name written
//! once (in the enum's `#[strum(serialize_all)]`) and read and written by
//! serde through it ([`wire_enum`]); and constant names such as a message's
//! `type` ([`WireName`], [`one_of`]).

use std::fmt;

use serde::Deserializer;

/// An enum of names on the wire, snake case: each name is written once
/// (strum derives it from the variant, `#[strum(serialize_all)]`), and serde
/// writes it and reads back only one of them. Wraps the enum's definition,
/// so every such enum has the same derives: `Debug, Clone, Copy, PartialEq,
/// Eq`, `Display` and `&'static str` from it, `FromStr` and the list of
/// names (`VariantNames`), and its schema in the API description: a string,
/// one of those names.
macro_rules! wire_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $($body:tt)* }) => {
        $(#[$meta])*
        #[derive(
            Debug,
            Clone,
            Copy,
            PartialEq,
            Eq,
            strum::Display,
            strum::IntoStaticStr,
            strum::EnumString,
            strum::VariantNames,
        )]
        #[strum(serialize_all = "snake_case")]
        $vis enum $name { $($body)* }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(<&'static str>::from(*self))
            }
        }

        // The description's schema is the same list of names serde reads.
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                crate::words::wire::names_schema(<$name as strum::VariantNames>::VARIANTS)
            }
        }

        impl utoipa::ToSchema for $name {}

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                name.parse().map_err(|_| {
                    serde::de::Error::unknown_variant(
                        &name,
                        <$name as strum::VariantNames>::VARIANTS,
                    )
                })
            }
        }
    };
}
pub(crate) use wire_enum;

/// A name on the wire from a fixed set (a message's `type`, a place's
/// `state`, a sale's `kind`): the server writes a `&'static str`, and
/// [`one_of`] reads it back as the same static name, so a message type can
/// be read (by clients such as the load tool) and still be written without
/// allocating.
///
/// It is an alias, not `&'static str` spelled out, because serde's derive
/// borrows every field spelled `&str` from its input, and a `'static` one
/// would make the whole type readable from `'static` input only.
pub type WireName = &'static str;

/// Reads a [`WireName`] that must be one of `names`.
pub(crate) fn one_of<'de, D: Deserializer<'de>>(
    d: D,
    names: &'static [&'static str],
) -> Result<WireName, D::Error> {
    struct OneOf(&'static [&'static str]);

    impl serde::de::Visitor<'_> for OneOf {
        type Value = WireName;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "one of {:?}", self.0)
        }

        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<WireName, E> {
            self.0
                .iter()
                .find(|name| **name == v)
                .copied()
                .ok_or_else(|| E::unknown_variant(v, self.0))
        }
    }

    d.deserialize_str(OneOf(names))
}

/// A string schema that is one of `names` (an enum of wire names, or a
/// message's constant `type`).
pub fn names_schema(names: &[&str]) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(names.iter().copied()))
        .into()
}
