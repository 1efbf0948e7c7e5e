//! The text form of typed message attributes in REST and gRPC. `attributes` stays a map of
//! strings, as SPEC.md has it: a plain attribute (type `String`) is its value, a `Number` its
//! digits, a `Binary` its bytes in standard base64 (with padding). `attribute_types` maps the
//! name of each attribute whose type is not plain `String` to its data type (`Number`,
//! `Binary.jpg`, `String.label`...); an attribute it does not name is a `String`. So a client
//! that knows only plain attributes sends and reads exactly what it did before.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use raftq_engine::attributes::{base_type, BINARY, STRING};
use raftq_engine::{Attribute, AttributeValue};

use crate::error::ApiError;

/// The attributes of a request: `values` by name, typed by `types` (absent: `String`). `prefix`
/// leads the names of the fields in errors (`""`, or `entries[2].` in a batch). A type that
/// names no attribute, or a `Binary` value that is not base64, is refused.
pub fn from_text(
    values: BTreeMap<String, String>,
    mut types: BTreeMap<String, String>,
    prefix: &str,
) -> Result<BTreeMap<String, Attribute>, ApiError> {
    if let Some(orphan) = types.keys().find(|name| !values.contains_key(*name)) {
        return Err(ApiError::invalid(
            format!("{prefix}attribute_types.{orphan}"),
            "names no attribute of the message",
        ));
    }
    values
        .into_iter()
        .map(|(name, value)| {
            let data_type = types.remove(&name).unwrap_or_else(|| STRING.to_string());
            let attribute = if base_type(&data_type) == BINARY {
                let bytes = STANDARD.decode(value.as_bytes()).map_err(|_| {
                    ApiError::invalid(
                        format!("{prefix}attributes.{name}"),
                        "must be base64 (standard, padded) for a Binary attribute",
                    )
                })?;
                Attribute::bytes(data_type, bytes)
            } else {
                Attribute::text(data_type, value)
            };
            Ok((name, attribute))
        })
        .collect()
}

/// The text form of a message's attributes: the values by name, and the data types that are
/// not plain `String`.
pub fn to_text(
    attributes: &BTreeMap<String, Attribute>,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let values = attributes
        .iter()
        .map(|(name, attribute)| {
            let text = match &attribute.value {
                AttributeValue::Text(text) => text.clone(),
                AttributeValue::Bytes(bytes) => STANDARD.encode(bytes),
            };
            (name.clone(), text)
        })
        .collect();
    let types = attributes
        .iter()
        .filter(|(_, attribute)| !attribute.is_plain())
        .map(|(name, attribute)| (name.clone(), attribute.data_type.clone()))
        .collect();
    (values, types)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn typed_attributes_round_trip_through_their_text_form() {
        let values = map(&[("plain", "x"), ("n", "1.5"), ("img", "AP8Q")]);
        let types = map(&[("n", "Number.float"), ("img", "Binary.jpg")]);
        let typed = from_text(values.clone(), types.clone(), "").unwrap();
        assert_eq!(typed["plain"], Attribute::string("x"));
        assert_eq!(typed["n"], Attribute::text("Number.float", "1.5"));
        assert_eq!(
            typed["img"],
            Attribute::bytes("Binary.jpg", vec![0, 255, 16])
        );
        assert_eq!(to_text(&typed), (values, types));
    }

    #[test]
    fn plain_attributes_have_no_types() {
        let typed = from_text(map(&[("a", "1")]), map(&[("a", "String")]), "").unwrap();
        let (values, types) = to_text(&typed);
        assert_eq!(values, map(&[("a", "1")]));
        assert!(types.is_empty());
    }

    #[test]
    fn orphan_types_and_bad_base64_name_the_field() {
        let orphan = from_text(map(&[]), map(&[("x", "Number")]), "entries[1].").unwrap_err();
        assert_eq!(
            orphan.field.as_deref(),
            Some("entries[1].attribute_types.x")
        );
        let bad = from_text(map(&[("b", "not base64!")]), map(&[("b", "Binary")]), "").unwrap_err();
        assert_eq!(bad.field.as_deref(), Some("attributes.b"));
    }
}
