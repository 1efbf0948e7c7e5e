//! Messages as SQS shows them: typed message attributes (their wire form, their checks and how
//! they are kept in raftq), the characters a body may hold, which attributes a receive asked
//! for, and the system attributes of a delivered message.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use raftq_engine::{attributes, Attribute, AttributeValue as Stored, Delivery, Payload};
use serde::{Deserialize, Serialize};

use crate::error::{Kind, SqsError};
use crate::names::Names;

/// A message attribute as both protocols carry it (`BinaryValue` in base64).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AttributeValue {
    #[serde(default)]
    pub data_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string_value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary_value: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub string_list_values: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub binary_list_values: Vec<String>,
}

/// A checked message attribute: its data type (`String`, `Number` or `Binary`, each with an
/// optional custom suffix such as `Number.float`) and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Typed {
    pub data_type: String,
    pub value: TypedValue,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypedValue {
    Text(String),
    Binary(Vec<u8>),
}

/// The base type of a data type: `Number.float` is a `Number`.
fn base_type(data_type: &str) -> Option<&str> {
    let (base, custom) = match data_type.split_once('.') {
        Some((base, custom)) => (base, Some(custom)),
        None => (data_type, None),
    };
    let custom_ok = custom.is_none_or(|c| {
        !c.is_empty() && c.len() <= 256 && c.bytes().all(|b| (0x21..=0x7e).contains(&b))
    });
    (matches!(base, "String" | "Number" | "Binary") && custom_ok).then_some(base)
}

impl AttributeValue {
    /// Checks the attribute named `name` (in parameter `parameter`, e.g. `MessageAttributes`).
    pub fn checked(&self, parameter: &str, name: &str) -> Result<Typed, SqsError> {
        let field = format!("{parameter}.{name}");
        let invalid = |rule: &str| SqsError::invalid_parameter(&field, rule);
        let data_type = self
            .data_type
            .as_deref()
            .ok_or_else(|| invalid("the DataType is required"))?;
        let base = base_type(data_type).ok_or_else(|| {
            invalid("the DataType must be String, Number or Binary, optionally with a custom suffix (Number.float)")
        })?;
        if !self.string_list_values.is_empty() || !self.binary_list_values.is_empty() {
            return Err(invalid(
                "StringListValues and BinaryListValues are reserved by SQS and not supported",
            ));
        }
        let value = match (base, &self.string_value, &self.binary_value) {
            ("Binary", None, Some(encoded)) => TypedValue::Binary(
                STANDARD
                    .decode(encoded)
                    .map_err(|_| invalid("the BinaryValue must be base64"))?,
            ),
            ("Binary", _, _) => return Err(invalid("a Binary attribute takes a BinaryValue only")),
            (_, Some(text), None) => {
                if text.is_empty() {
                    let owner = if parameter == "MessageAttributes" {
                        "(user)"
                    } else {
                        "system"
                    };
                    return Err(SqsError::new(
                        Kind::InvalidParameterValue,
                        format!("Message {owner} attribute '{name}' must contain a non-empty value of type '{base}'."),
                    ));
                }
                check_characters(&field, text)?;
                if base == "Number" && !is_number(text) {
                    return Err(invalid("a Number attribute's StringValue must be a number"));
                }
                TypedValue::Text(text.clone())
            }
            _ => {
                return Err(invalid(
                    "a String or Number attribute takes a StringValue only",
                ))
            }
        };
        Ok(Typed {
            data_type: data_type.to_string(),
            value,
        })
    }
}

/// A decimal number as SQS takes it: a sign, digits with at most one point, an exponent.
fn is_number(text: &str) -> bool {
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((m, e)) => (m, Some(e)),
        None => (unsigned, None),
    };
    let digits = mantissa.replacen('.', "", 1);
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit())
    });
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && exponent_ok
}

impl Typed {
    /// The wire form.
    pub fn wire(&self) -> AttributeValue {
        let (string_value, binary_value) = match &self.value {
            TypedValue::Text(text) => (Some(text.clone()), None),
            TypedValue::Binary(bytes) => (None, Some(STANDARD.encode(bytes))),
        };
        AttributeValue {
            data_type: Some(self.data_type.clone()),
            string_value,
            binary_value,
            ..AttributeValue::default()
        }
    }
}

/// Checks every attribute of `attributes` (parameter `parameter`).
pub fn checked_attributes(
    parameter: &str,
    attributes: &BTreeMap<String, AttributeValue>,
) -> Result<BTreeMap<String, Typed>, SqsError> {
    attributes
        .iter()
        .map(|(name, value)| Ok((name.clone(), value.checked(parameter, name)?)))
        .collect()
}

/// Typed attributes as raftq keeps them, checked by SQS's rules for names and values
/// ([`attributes::check_sqs`]; raftq's own rules are checked when the message is sent).
pub fn to_stored(
    parameter: &str,
    typed: &BTreeMap<String, Typed>,
) -> Result<BTreeMap<String, Attribute>, SqsError> {
    let stored: BTreeMap<String, Attribute> = typed
        .iter()
        .map(|(name, t)| {
            let attribute = match &t.value {
                TypedValue::Text(text) => Attribute::text(t.data_type.clone(), text.clone()),
                TypedValue::Binary(bytes) => Attribute::bytes(t.data_type.clone(), bytes.clone()),
            };
            (name.clone(), attribute)
        })
        .collect();
    attributes::check_sqs(&stored).map_err(|e| {
        let rule = match e {
            raftq_engine::EngineError::InvalidArgument { field, rule } => {
                format!("{field}: {rule}")
            }
            other => other.to_string(),
        };
        SqsError::invalid_parameter(parameter, rule)
    })?;
    Ok(stored)
}

/// The typed attributes of a stored message.
pub fn from_stored(stored: &BTreeMap<String, Attribute>) -> BTreeMap<String, Typed> {
    stored
        .iter()
        .map(|(name, attribute)| {
            let value = match &attribute.value {
                Stored::Text(text) => TypedValue::Text(text.clone()),
                Stored::Bytes(bytes) => TypedValue::Binary(bytes.clone()),
            };
            let typed = Typed {
                data_type: attribute.data_type.clone(),
                value,
            };
            (name.clone(), typed)
        })
        .collect()
}

/// Refuses text with characters SQS does not allow in a message: those outside `#x9 #xA #xD`,
/// `#x20-#xD7FF`, `#xE000-#xFFFD` and `#x10000-#x10FFFF` (what XML 1.0 can carry).
pub fn check_characters(parameter: &str, text: &str) -> Result<(), SqsError> {
    let bad = text.chars().find(|&c| {
        !matches!(c, '\u{9}' | '\u{a}' | '\u{d}' | '\u{20}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
    });
    match bad {
        None => Ok(()),
        Some(c) => Err(SqsError::new(
            Kind::InvalidMessageContents,
            format!(
                "Invalid binary character '#x{:X}' was found in {parameter}, the set of allowed characters is #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF",
                u32::from(c)
            ),
        )),
    }
}

/// Which names a receive asked for: all of them (`All` or `.*`), those with a prefix
/// (`orders.*`), or exact names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    all: bool,
    prefixes: Vec<String>,
    names: Vec<String>,
}

impl Selection {
    pub fn of(requested: &[String]) -> Selection {
        let mut selection = Selection::default();
        for name in requested {
            if name == "All" || name == ".*" {
                selection.all = true;
            } else if let Some(prefix) = name.strip_suffix(".*") {
                selection.prefixes.push(format!("{prefix}."));
            } else {
                selection.names.push(name.clone());
            }
        }
        selection
    }

    pub fn wants(&self, name: &str) -> bool {
        self.all
            || self.names.iter().any(|n| n == name)
            || self.prefixes.iter().any(|p| name.starts_with(p.as_str()))
    }
}

/// The system attributes of a delivered message that `selection` asks for: those raftq has.
/// `sender` is the account number of the queue's account, the only one that can send to it.
pub fn system_attributes(
    delivery: &Delivery,
    payload: &Payload,
    selection: &Selection,
    sender: &str,
    names: &Names,
) -> BTreeMap<String, String> {
    let meta = &delivery.meta;
    let mut all = vec![
        ("SenderId", Some(sender.to_string())),
        ("SentTimestamp", Some(payload.sent_at.to_string())),
        (
            "ApproximateReceiveCount",
            Some(meta.receive_count.to_string()),
        ),
        (
            "ApproximateFirstReceiveTimestamp",
            meta.first_received_at.map(|at| at.to_string()),
        ),
        ("MessageGroupId", payload.message_group_id.clone()),
        (
            "MessageDeduplicationId",
            payload.message_deduplication_id.clone(),
        ),
        ("SequenceNumber", meta.fifo.then(|| meta.seq.to_string())),
        ("AWSTraceHeader", payload.trace_header.clone()),
        (
            "DeadLetterQueueSourceArn",
            meta.dead_letter_source
                .as_ref()
                .map(|source| names.arn(sender, &source.name)),
        ),
    ];
    all.retain(|(name, _)| selection.wants(name));
    all.into_iter()
        .filter_map(|(name, value)| Some((name.to_string(), value?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(data_type: &str, text: Option<&str>, binary: Option<&str>) -> AttributeValue {
        AttributeValue {
            data_type: Some(data_type.into()),
            string_value: text.map(str::to_string),
            binary_value: binary.map(str::to_string),
            ..AttributeValue::default()
        }
    }

    #[test]
    fn attributes_are_checked_by_their_data_type() {
        let typed = value("Number.float", Some("-1.5e3"), None).checked("MessageAttributes", "n");
        assert_eq!(typed.unwrap().value, TypedValue::Text("-1.5e3".into()));
        let typed = value("Binary", None, Some("AAEC/w==")).checked("MessageAttributes", "b");
        assert_eq!(typed.unwrap().value, TypedValue::Binary(vec![0, 1, 2, 255]));
        for bad in [
            AttributeValue::default(),
            value("Integer", Some("1"), None),
            value("String.", Some("x"), None),
            value("Number", Some("one"), None),
            value("Number", Some("1e"), None),
            value("String", None, Some("AA==")),
            value("Binary", Some("x"), None),
            value("Binary", None, Some("not base64!")),
            value("String", Some("\u{1}"), None),
        ] {
            let e = bad.checked("MessageAttributes", "a").unwrap_err();
            assert!(e.message.contains("MessageAttributes.a"), "{bad:?}: {e}");
        }
        let empty = value("String", Some(""), None).checked("MessageAttributes", "a");
        assert_eq!(
            empty.unwrap_err().message,
            "Message (user) attribute 'a' must contain a non-empty value of type 'String'."
        );
    }

    #[test]
    fn typed_attributes_round_trip_their_wire_form() {
        let wire = value("Binary.png", None, Some("AAEC/w=="));
        assert_eq!(wire.checked("M", "b").unwrap().wire(), wire);
    }

    #[test]
    fn typed_attributes_are_stored_as_they_are() {
        let typed = checked_attributes(
            "MessageAttributes",
            &BTreeMap::from([
                ("a".to_string(), value("String", Some("x"), None)),
                ("n".to_string(), value("Number.int", Some("1"), None)),
                ("b".to_string(), value("Binary", None, Some("AAEC/w=="))),
            ]),
        )
        .unwrap();
        let stored = to_stored("MessageAttributes", &typed).unwrap();
        assert_eq!(stored["n"], Attribute::text("Number.int", "1"));
        assert_eq!(stored["b"], Attribute::bytes("Binary", vec![0, 1, 2, 255]));
        assert_eq!(from_stored(&stored), typed);
        let reserved = checked_attributes(
            "MessageAttributes",
            &BTreeMap::from([("AWS.x".to_string(), value("String", Some("1"), None))]),
        )
        .unwrap();
        let e = to_stored("MessageAttributes", &reserved).unwrap_err();
        assert!(e.message.contains("AWS."), "{e}");
    }

    #[test]
    fn bodies_may_hold_what_xml_can_carry() {
        assert!(check_characters("MessageBody", "tab\there\r\n✓ 😀").is_ok());
        let e = check_characters("MessageBody", "a\u{0}b").unwrap_err();
        assert_eq!(e.code(), "InvalidMessageContents");
        assert!(e.message.contains("#x0"), "{e}");
        assert!(check_characters("MessageBody", "\u{fffe}").is_err());
    }

    #[test]
    fn selections_take_all_prefixes_and_names() {
        let s = Selection::of(&["orders.*".into(), "exact".into()]);
        assert!(s.wants("orders.id") && s.wants("exact"));
        assert!(!s.wants("orders") && !s.wants("other"));
        assert!(Selection::of(&["All".into()]).wants("x"));
        assert!(Selection::of(&[".*".into()]).wants("x"));
        assert!(!Selection::of(&[]).wants("x"));
    }
}
