//! Typed message attributes, as SQS has them: each attribute has a data type (`String`,
//! `Number` or `Binary`, each with an optional custom suffix such as `Number.float` or
//! `Binary.jpg`) and a value, text for `String` and `Number`, bytes for `Binary`. A plain
//! attribute of SPEC.md (a string) is one of type `String`.
//!
//! The rules every attribute follows, whichever front sent it, are [`check`]'s; SQS's stricter
//! rules for names and values, which the REST API does not have, are [`check_sqs`]'s, for the
//! SQS front to apply before it sends.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{EngineError, Result};
use crate::model::limits;

/// The base data types.
pub const STRING: &str = "String";
pub const NUMBER: &str = "Number";
pub const BINARY: &str = "Binary";

/// Most significant digits of a `Number` (SQS: 38).
const NUMBER_DIGITS_MAX: usize = 38;
/// The decimal exponents a non-zero `Number` may have: from 10^-128 to below 10^126.
const NUMBER_EXPONENT_MIN: i64 = -128;
const NUMBER_EXPONENT_MAX: i64 = 125;

/// An attribute's value: text for `String` and `Number` types, bytes for `Binary` types.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AttributeValue {
    Text(String),
    Bytes(Vec<u8>),
}

/// One message attribute: its data type and its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attribute {
    pub data_type: String,
    pub value: AttributeValue,
}

impl Attribute {
    /// A plain attribute: type `String`.
    pub fn string(value: impl Into<String>) -> Attribute {
        Attribute {
            data_type: STRING.to_string(),
            value: AttributeValue::Text(value.into()),
        }
    }

    /// An attribute of `data_type` with text `value` (`String` and `Number` types).
    pub fn text(data_type: impl Into<String>, value: impl Into<String>) -> Attribute {
        Attribute {
            data_type: data_type.into(),
            value: AttributeValue::Text(value.into()),
        }
    }

    /// An attribute of `data_type` with bytes `value` (`Binary` types).
    pub fn bytes(data_type: impl Into<String>, value: Vec<u8>) -> Attribute {
        Attribute {
            data_type: data_type.into(),
            value: AttributeValue::Bytes(value),
        }
    }

    /// Whether the attribute is a plain one (type exactly `String`), as SPEC.md's are.
    pub fn is_plain(&self) -> bool {
        self.data_type == STRING
    }

    /// The base type of the data type: `String`, `Number` or `Binary` (or the data type itself
    /// when it has none of them).
    pub fn base_type(&self) -> &str {
        base_type(&self.data_type)
    }

    /// The bytes the attribute counts toward the message size: its name, its value and, unless
    /// it is a plain `String`, its data type.
    pub fn size(&self, name: &str) -> u64 {
        let value = match &self.value {
            AttributeValue::Text(text) => text.len(),
            AttributeValue::Bytes(bytes) => bytes.len(),
        };
        let data_type = if self.is_plain() {
            0
        } else {
            self.data_type.len()
        };
        (name.len() + value + data_type) as u64
    }
}

/// Plain attributes from a map of strings.
pub fn plain(map: BTreeMap<String, String>) -> BTreeMap<String, Attribute> {
    map.into_iter()
        .map(|(name, value)| (name, Attribute::string(value)))
        .collect()
}

/// The part of a data type before its custom suffix.
pub fn base_type(data_type: &str) -> &str {
    data_type
        .split_once('.')
        .map_or(data_type, |(base, _)| base)
}

/// Checks a message's attributes against the rules of every front: at most 10; names 1-256
/// characters; a data type of `String`, `Number` or `Binary` with an optional suffix of
/// `A-Z a-z 0-9 _ - .`, at most 256 characters; a value of its type's kind; `Number` values as
/// SQS reads them. Returns their size in bytes.
pub fn check(attributes: &BTreeMap<String, Attribute>) -> Result<u64> {
    if attributes.len() > limits::ATTRIBUTES_MAX {
        return Err(EngineError::invalid(
            "attributes",
            format!("at most {} attributes", limits::ATTRIBUTES_MAX),
        ));
    }
    let mut size = 0;
    for (name, attribute) in attributes {
        let chars = name.chars().count();
        if chars == 0 || chars > limits::ATTRIBUTE_NAME_MAX {
            return Err(EngineError::invalid(
                "attributes",
                format!(
                    "attribute names must be 1-{} characters",
                    limits::ATTRIBUTE_NAME_MAX
                ),
            ));
        }
        data_type(name, &attribute.data_type)?;
        let value_field = || format!("attributes.{name}");
        match (attribute.base_type(), &attribute.value) {
            (NUMBER, AttributeValue::Text(text)) => number(&value_field(), text)?,
            (STRING, AttributeValue::Text(_)) | (BINARY, AttributeValue::Bytes(_)) => {}
            (BINARY, AttributeValue::Text(_)) => {
                return Err(EngineError::invalid(
                    value_field(),
                    "a Binary attribute takes a binary value",
                ))
            }
            _ => {
                return Err(EngineError::invalid(
                    value_field(),
                    "a String or Number attribute takes a string value",
                ))
            }
        }
        size += attribute.size(name);
    }
    Ok(size)
}

/// A data type: `String`, `Number` or `Binary`, optionally followed by `.` and a custom label
/// of `A-Z a-z 0-9 _ - .`; at most 256 characters.
fn data_type(name: &str, data_type: &str) -> Result<()> {
    let field = || format!("attribute_types.{name}");
    if data_type.len() > limits::ATTRIBUTE_TYPE_MAX {
        return Err(EngineError::invalid(
            field(),
            format!("must be at most {} characters", limits::ATTRIBUTE_TYPE_MAX),
        ));
    }
    let (base, label) = match data_type.split_once('.') {
        Some((base, label)) => (base, Some(label)),
        None => (data_type, None),
    };
    let label_ok = label.is_none_or(|l| {
        !l.is_empty()
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
    });
    if !matches!(base, STRING | NUMBER | BINARY) || !label_ok {
        return Err(EngineError::invalid(
            field(),
            "must be String, Number or Binary, optionally followed by . and a label of \
             A-Z a-z 0-9 _ - .",
        ));
    }
    Ok(())
}

/// A `Number` value as SQS reads it: an optional sign, digits with at most one decimal point,
/// an optional exponent (`e` or `E`, an optional sign, digits); at most 38 significant digits
/// (leading and trailing zeros do not count), and 0 or a magnitude from 10^-128 to below
/// 10^126.
pub fn number(field: &str, text: &str) -> Result<()> {
    let refuse = |rule: &str| Err(EngineError::invalid(field, rule));
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((m, e)) => (m, Some(e)),
        None => (unsigned, None),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits_only = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.len() + fraction.len() == 0 || !digits_only(whole) || !digits_only(fraction) {
        return refuse("must be a number: digits with an optional sign, point and exponent");
    }
    let exponent: i64 = match exponent {
        None => 0,
        Some(e) => {
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !digits_only(digits) {
                return refuse("must be a number: its exponent needs digits");
            }
            // Any exponent beyond this range puts a non-zero number out of range.
            e.parse::<i64>().unwrap_or(if e.starts_with('-') {
                i64::MIN / 2
            } else {
                i64::MAX / 2
            })
        }
    };
    let all: Vec<u8> = whole.bytes().chain(fraction.bytes()).collect();
    let Some(first) = all.iter().position(|&b| b != b'0') else {
        return Ok(());
    };
    let last = all.iter().rposition(|&b| b != b'0').unwrap_or(first);
    if last - first + 1 > NUMBER_DIGITS_MAX {
        return refuse("must have at most 38 significant digits");
    }
    // The decimal exponent of the first significant digit.
    let magnitude = exponent.saturating_add(whole.len() as i64 - 1 - first as i64);
    if !(NUMBER_EXPONENT_MIN..=NUMBER_EXPONENT_MAX).contains(&magnitude) {
        return refuse("must be 0 or between 10^-128 and 10^126 in magnitude");
    }
    Ok(())
}

/// SQS's rules for attributes beyond [`check`]'s, which the SQS front applies: names of
/// `A-Z a-z 0-9 _ - .` that do not start with `AWS.` or `Amazon.` (in any case), nor start or
/// end with a period or hold two in a row; values that are not empty.
pub fn check_sqs(attributes: &BTreeMap<String, Attribute>) -> Result<()> {
    for (name, attribute) in attributes {
        let field = || format!("attributes.{name}");
        let lower = name.to_ascii_lowercase();
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
        {
            return Err(EngineError::invalid(
                field(),
                "names may contain only A-Z a-z 0-9 _ - .",
            ));
        }
        if lower.starts_with("aws.") || lower.starts_with("amazon.") {
            return Err(EngineError::invalid(
                field(),
                "names must not start with AWS. or Amazon.",
            ));
        }
        if name.starts_with('.') || name.ends_with('.') || name.contains("..") {
            return Err(EngineError::invalid(
                field(),
                "names must not start or end with a period or hold two in a row",
            ));
        }
        let empty = match &attribute.value {
            AttributeValue::Text(text) => text.is_empty(),
            AttributeValue::Bytes(bytes) => bytes.is_empty(),
        };
        if empty {
            return Err(EngineError::invalid(field(), "must not be empty"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::refused_field as field;

    fn one(name: &str, attribute: Attribute) -> BTreeMap<String, Attribute> {
        BTreeMap::from([(name.to_string(), attribute)])
    }

    #[test]
    fn numbers_are_read_as_sqs_reads_them() {
        let cases: &[(&str, bool)] = &[
            // The form: an optional sign, digits with at most one point, an optional exponent.
            ("0", true),
            ("-0", true),
            ("+12", true),
            ("1.5", true),
            (".5", true),
            ("5.", true),
            ("1e10", true),
            ("1.25E-3", true),
            ("000123.4500", true),
            ("", false),
            ("-", false),
            (".", false),
            ("1.2.3", false),
            ("1e", false),
            ("e5", false),
            ("1e+", false),
            ("abc", false),
            (" 1", false),
            ("1 ", false),
            ("0x10", false),
            // The magnitude: 0, or from 10^-128 to below 10^126.
            ("1e125", true),
            ("9.99e125", true),
            ("1e126", false),
            ("1e-128", true),
            ("1e-129", false),
            ("0e999999999999999999999", true),
            ("1e99999999999999999999", false),
            // At most 38 significant digits.
            (&"1".repeat(38), true),
            (&"1".repeat(39), false),
            (&format!("0.{}000", "7".repeat(38)), true),
            (&format!("1{}1", "0".repeat(37)), false),
        ];
        for &(text, valid) in cases {
            assert_eq!(number("n", text).is_ok(), valid, "{text}");
        }
    }

    #[test]
    fn data_types_have_a_base_and_an_optional_label() {
        for good in [
            "String",
            "Number",
            "Binary",
            "Number.float",
            "Binary.jpg",
            "String.a-b_c.d",
        ] {
            let value = if good.starts_with(BINARY) {
                Attribute::bytes(good, vec![1])
            } else {
                Attribute::text(good, "1")
            };
            assert!(check(&one("a", value)).is_ok(), "{good}");
        }
        let long_label = format!("String.{}", "x".repeat(250));
        for bad in [
            "string",
            "Text",
            "String.",
            "Number.a b",
            "Binary.é",
            "",
            &long_label,
        ] {
            let r = check(&one("a", Attribute::text(bad, "1")));
            assert_eq!(field(r), "attribute_types.a", "{bad}");
        }
    }

    #[test]
    fn values_match_their_types_kind() {
        assert_eq!(
            field(check(&one("b", Attribute::text("Binary", "x")))),
            "attributes.b"
        );
        assert_eq!(
            field(check(&one("s", Attribute::bytes("String", vec![1])))),
            "attributes.s"
        );
        assert_eq!(
            field(check(&one("n", Attribute::text("Number.int", "x1")))),
            "attributes.n"
        );
        assert!(check(&one("s", Attribute::string(""))).is_ok());
        assert!(check(&one("b", Attribute::bytes("Binary", Vec::new()))).is_ok());
    }

    #[test]
    fn sizes_count_names_values_and_types_other_than_string() {
        let attrs = BTreeMap::from([
            ("plain".to_string(), Attribute::string("abc")),
            ("num".to_string(), Attribute::text("Number.f", "1.5")),
            (
                "bin".to_string(),
                Attribute::bytes("Binary", vec![0, 1, 2, 3]),
            ),
        ]);
        assert_eq!(check(&attrs).unwrap(), (5 + 3) + (3 + 3 + 8) + (3 + 4 + 6));
    }

    #[test]
    fn counts_and_names_follow_the_rest_rules() {
        let many: BTreeMap<String, Attribute> = (0..11)
            .map(|i| (format!("a{i}"), Attribute::string("v")))
            .collect();
        assert_eq!(field(check(&many)), "attributes");
        assert_eq!(field(check(&one("", Attribute::string("v")))), "attributes");
        let long = "n".repeat(257);
        assert_eq!(
            field(check(&one(&long, Attribute::string("v")))),
            "attributes"
        );
        assert!(check(&one(&"é".repeat(256), Attribute::string("v"))).is_ok());
        assert!(check(&one("a b", Attribute::string("v"))).is_ok());
    }

    #[test]
    fn sqs_names_and_values_are_stricter() {
        for good in ["a", "a.b", "A-b_c.9", &"n".repeat(256)] {
            assert!(
                check_sqs(&one(good, Attribute::string("v"))).is_ok(),
                "{good}"
            );
        }
        for bad in [
            "a b", "é", "AWS.x", "aws.x", "Amazon.y", "AMAZON.z", ".a", "a.", "a..b",
        ] {
            let r = check_sqs(&one(bad, Attribute::string("v")));
            assert_eq!(field(r), format!("attributes.{bad}"), "{bad}");
        }
        assert!(check_sqs(&one("AWSx", Attribute::string("v"))).is_ok());
        assert_eq!(
            field(check_sqs(&one("e", Attribute::string("")))),
            "attributes.e"
        );
        assert_eq!(
            field(check_sqs(&one("e", Attribute::bytes("Binary", Vec::new())))),
            "attributes.e"
        );
    }
}
