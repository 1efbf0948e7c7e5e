//! Request bodies read into their types: a serde [`Deserializer`] over a parsed JSON value whose
//! errors name the field, JSON-path style (`entries[2].body`,
//! `redrive_policy.max_receive_count`), and the rule it breaks, in the API's words (`is
//! required`, `must be an integer`, `is not a known field (expected one of: ...)`).
//!
//! A request type derives `Deserialize` with `deny_unknown_fields`; its fields say what is
//! required (a plain type) and what is optional (an `Option`, where `null` counts as absent).
//! A `null` given for a required field is `is required`, as an absent one is.
//!
//! # Paths
//!
//! Each value is read with its own path; an error raised by a type's visitor rather than by
//! the reading (a missing or unknown field, a rule of a custom type) is [`Error::placed`] at the
//! path of the object or value whose visitor raised it.

use std::fmt;

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, Expected, IntoDeserializer, MapAccess,
    SeqAccess, Unexpected, Visitor,
};
use serde::Deserialize;
use serde_json::{Map, Number, Value};

use crate::error::ApiError;

/// The field name used for the request body as a whole.
pub const REQUEST_BODY: &str = "request_body";

/// Reads `value` as a `T`; a value that does not fit is `invalid_argument` naming the field.
pub fn read<T: DeserializeOwned>(value: &Value) -> Result<T, ApiError> {
    T::deserialize(Reader::root(value)).map_err(ApiError::from)
}

/// Where a reading error is, and the rule the value breaks.
#[derive(Debug)]
pub struct Error {
    place: Place,
    rule: String,
}

#[derive(Debug)]
enum Place {
    /// Raised by a visitor: the value being read.
    Here,
    /// Raised by an object's visitor about one of its fields.
    Field(String),
    /// Placed: the full path (`""` for the body itself).
    Path(String),
}

impl Error {
    fn at(path: &str, rule: impl Into<String>) -> Error {
        Error {
            place: Place::Path(path.to_string()),
            rule: rule.into(),
        }
    }

    /// The error with its full path, for one raised by the visitor of the value at `path`.
    fn placed(self, path: &str) -> Error {
        let place = match self.place {
            Place::Here => Place::Path(path.to_string()),
            Place::Field(key) => Place::Path(join(path, &key)),
            placed @ Place::Path(_) => placed,
        };
        Error { place, ..self }
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        let field = match e.place {
            Place::Path(path) if !path.is_empty() => path,
            _ => REQUEST_BODY.to_string(),
        };
        ApiError::invalid(field, e.rule)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.place {
            Place::Here => write!(f, "{}", self.rule),
            Place::Field(path) | Place::Path(path) => write!(f, "{path}: {}", self.rule),
        }
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: fmt::Display>(message: T) -> Error {
        Error {
            place: Place::Here,
            rule: message.to_string(),
        }
    }

    fn invalid_type(_: Unexpected<'_>, expected: &dyn Expected) -> Error {
        Error::custom(format_args!("must be {expected}"))
    }

    fn invalid_value(_: Unexpected<'_>, expected: &dyn Expected) -> Error {
        Error::custom(format_args!("must be {expected}"))
    }

    fn missing_field(field: &'static str) -> Error {
        Error {
            place: Place::Field(field.to_string()),
            rule: "is required".into(),
        }
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Error {
        Error {
            place: Place::Field(field.to_string()),
            rule: format!(
                "is not a known field (expected one of: {})",
                expected.join(", ")
            ),
        }
    }
}

/// The path of `key` in the object at `path`.
fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Reads one JSON value at its path.
struct Reader<'a> {
    value: &'a Value,
    path: String,
    /// A field of an object, where `null` stands for a value not given.
    field: bool,
}

impl<'a> Reader<'a> {
    fn root(value: &'a Value) -> Reader<'a> {
        Reader {
            value,
            path: String::new(),
            field: false,
        }
    }

    /// The refusal of a value that is not `what`; `null` for a field is a field not given.
    fn refused(&self, what: &str) -> Error {
        if self.field && self.value.is_null() {
            Error::at(&self.path, "is required")
        } else {
            Error::at(&self.path, format!("must be {what}"))
        }
    }

    /// The integer of a JSON number (no fraction) that fits in an `i64`.
    fn integer(&self) -> Result<i64, Error> {
        let Value::Number(number) = self.value else {
            return Err(self.refused("an integer"));
        };
        match (number.as_i64(), number.as_u64()) {
            (Some(i), _) => Ok(i),
            (None, Some(_)) => Err(Error::at(&self.path, "is out of range")),
            (None, None) => Err(self.refused("an integer")),
        }
    }

    /// What a visitor read from this value, its errors placed at this value's path.
    fn placed<T>(&self, read: Result<T, Error>) -> Result<T, Error> {
        read.map_err(|e| e.placed(&self.path))
    }

    fn object(&self) -> Result<&'a Map<String, Value>, Error> {
        self.value
            .as_object()
            .ok_or_else(|| self.refused("a JSON object"))
    }

    fn fields(&self, map: &'a Map<String, Value>) -> Fields<'a> {
        Fields {
            entries: map.iter(),
            path: self.path.clone(),
            next: None,
        }
    }
}

/// Dispatches a value by its JSON kind.
fn visit_number<'de, V: Visitor<'de>>(number: &Number, visitor: V) -> Result<V::Value, Error> {
    if let Some(u) = number.as_u64() {
        visitor.visit_u64(u)
    } else if let Some(i) = number.as_i64() {
        visitor.visit_i64(i)
    } else {
        visitor.visit_f64(number.as_f64().unwrap_or(f64::NAN))
    }
}

impl<'de> Deserializer<'de> for Reader<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let read = match self.value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => visit_number(n, visitor),
            Value::String(s) => visitor.visit_str(s),
            Value::Array(items) => visitor.visit_seq(Items {
                items: items.iter().enumerate(),
                path: &self.path,
            }),
            Value::Object(map) => visitor.visit_map(self.fields(map)),
        };
        self.placed(read)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let b = self
            .value
            .as_bool()
            .ok_or_else(|| self.refused("true or false"))?;
        self.placed(visitor.visit_bool(b))
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let i = self.integer()?;
        self.placed(visitor.visit_i64(i))
    }

    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let u = u64::try_from(self.integer()?)
            .map_err(|_| Error::at(&self.path, "must be 0 or more"))?;
        self.placed(visitor.visit_u64(u))
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let f = self
            .value
            .as_f64()
            .ok_or_else(|| self.refused("a number"))?;
        self.placed(visitor.visit_f64(f))
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let s = self
            .value
            .as_str()
            .ok_or_else(|| self.refused("a string"))?;
        self.placed(visitor.visit_str(s))
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Null => visitor.visit_none(),
            _ => {
                let path = self.path.clone();
                visitor.visit_some(self).map_err(|e| e.placed(&path))
            }
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let items = self
            .value
            .as_array()
            .ok_or_else(|| self.refused("an array"))?;
        let items = Items {
            items: items.iter().enumerate(),
            path: &self.path,
        };
        let read = visitor.visit_seq(items);
        self.placed(read)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let map = self.object()?;
        let read = visitor.visit_map(self.fields(map));
        self.placed(read)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_map(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        i8 i16 i32 i128 u8 u16 u32 u128 f32 char bytes byte_buf unit unit_struct tuple
        tuple_struct enum identifier
    }
}

/// The elements of an array, each read at its index.
struct Items<'a, 'p> {
    items: std::iter::Enumerate<std::slice::Iter<'a, Value>>,
    path: &'p str,
}

impl<'de> SeqAccess<'de> for Items<'_, '_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        let Some((index, value)) = self.items.next() else {
            return Ok(None);
        };
        let reader = Reader {
            value,
            path: format!("{}[{index}]", self.path),
            field: false,
        };
        seed.deserialize(reader).map(Some)
    }
}

/// The fields of an object, each value read at its key.
struct Fields<'a> {
    entries: serde_json::map::Iter<'a>,
    path: String,
    /// The key and value after the last key handed out.
    next: Option<(&'a String, &'a Value)>,
}

impl<'de> MapAccess<'de> for Fields<'_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        self.next = Some((key, value));
        let key_reader: de::value::StrDeserializer<'_, Error> = key.as_str().into_deserializer();
        seed.deserialize(key_reader)
            .map(Some)
            .map_err(|e| e.placed(&self.path))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let Some((key, value)) = self.next.take() else {
            return Err(Error::at(&self.path, "a value was read before its key"));
        };
        seed.deserialize(Reader {
            value,
            path: join(&self.path, key),
            field: true,
        })
    }
}

/// A queue named in a body: its name, UUID or CRN as a string, or a resource reference object
/// as the API returns them, of which the `crn` is used, else the `id`, else the `name`.
#[derive(Debug)]
pub struct QueueReference(pub String);

impl<'de> Deserialize<'de> for QueueReference {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(QueueReferenceVisitor)
    }
}

/// The fields of a resource reference, in the order they are preferred.
const REFERENCE_FIELDS: &[&str] = &["crn", "id", "name"];

struct QueueReferenceVisitor;

impl<'de> Visitor<'de> for QueueReferenceVisitor {
    type Value = QueueReference;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a queue reference (name, UUID or CRN)")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<QueueReference, E> {
        Ok(QueueReference(text.to_string()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<QueueReference, A::Error> {
        let mut given: [Option<String>; 3] = Default::default();
        while let Some(key) = map.next_key::<String>()? {
            let Some(slot) = REFERENCE_FIELDS.iter().position(|f| *f == key) else {
                return Err(de::Error::unknown_field(&key, &["id", "name", "crn"]));
            };
            given[slot] = map.next_value()?;
        }
        given
            .into_iter()
            .flatten()
            .next()
            .map(QueueReference)
            .ok_or_else(|| de::Error::custom("must name the queue by crn, id or name"))
    }
}

/// Declares request bodies that share a list of fields, written once (serde's `flatten` would
/// lose the path of a field in errors, and cannot deny unknown fields). Each body gets its own
/// fields first, then the shared ones, and `split` into its own fields (a tuple) and the shared
/// ones (the plain struct named after `shared`):
///
/// ```ignore
/// sharing_fields! {
///     shared MessageFields { body: String, }
///     struct SendMessage {}
///     struct BatchEntry { id: String, }
/// }
/// ```
macro_rules! sharing_fields {
    (shared $shared:ident $fields:tt $($(#[$meta:meta])* struct $name:ident $own:tt)*) => {
        $crate::body::sharing_fields!(@shared $shared $fields);
        $($crate::body::sharing_fields!(@body $shared $fields $(#[$meta])* struct $name $own);)*
    };
    (@shared $shared:ident { $($(#[$_meta:meta])* $field:ident: $ty:ty,)* }) => {
        /// The fields the request bodies below share.
        pub struct $shared {
            $(pub $field: $ty,)*
        }
    };
    (
        @body $shared:ident { $($(#[$smeta:meta])* $sfield:ident: $sty:ty,)* }
        $(#[$meta:meta])* struct $name:ident { $($(#[$fmeta:meta])* $field:ident: $fty:ty,)* }
    ) => {
        #[derive(serde::Deserialize, utoipa::ToSchema)]
        #[serde(deny_unknown_fields)]
        $(#[$meta])*
        pub struct $name {
            $($(#[$fmeta])* $field: $fty,)*
            $($(#[$smeta])* $sfield: $sty,)*
        }

        impl $name {
            /// The body's own fields, and the shared ones.
            pub fn split(self) -> (($($fty,)*), $shared) {
                (($(self.$field,)*), $shared { $($sfield: self.$sfield,)* })
            }
        }
    };
}

pub(crate) use sharing_fields;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        count: Option<i64>,
        flag: Option<bool>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        name: String,
        inner: Option<Inner>,
        #[serde(default)]
        list: Vec<String>,
        target: Option<QueueReference>,
        id: Option<u64>,
        ratio: Option<f64>,
    }

    /// The field and message of the refusal of `body` as an [`Outer`].
    fn refusal(body: Value) -> (String, String) {
        let e = read::<Outer>(&body).expect_err("refused");
        (e.field.unwrap_or_default(), e.message)
    }

    #[test]
    fn refusals_name_the_field_and_the_rule() {
        let cases = [
            (json!([1]), "request_body: must be a JSON object"),
            (json!({}), "name: is required"),
            (json!({"name": null}), "name: is required"),
            (json!({"name": 5}), "name: must be a string"),
            (
                json!({"name": "n", "bogus": 1}),
                "bogus: is not a known field (expected one of: name, inner, list, target, id, \
                 ratio)",
            ),
            (
                json!({"name": "n", "inner": {"count": 1.5}}),
                "inner.count: must be an integer",
            ),
            (
                json!({"name": "n", "inner": {"count": 18446744073709551615u64}}),
                "inner.count: is out of range",
            ),
            (
                json!({"name": "n", "inner": {"flag": "yes"}}),
                "inner.flag: must be true or false",
            ),
            (
                json!({"name": "n", "inner": 3}),
                "inner: must be a JSON object",
            ),
            (json!({"name": "n", "list": "x"}), "list: must be an array"),
            (
                json!({"name": "n", "list": ["a", 7]}),
                "list[1]: must be a string",
            ),
            (json!({"name": "n", "id": -1}), "id: must be 0 or more"),
            (
                json!({"name": "n", "ratio": "x"}),
                "ratio: must be a number",
            ),
            (
                json!({"name": "n", "target": 5}),
                "target: must be a queue reference (name, UUID or CRN)",
            ),
            (
                json!({"name": "n", "target": {}}),
                "target: must name the queue by crn, id or name",
            ),
            (
                json!({"name": "n", "target": {"arn": "a"}}),
                "target.arn: is not a known field (expected one of: id, name, crn)",
            ),
        ];
        for (body, expected) in cases {
            let (field, message) = refusal(body.clone());
            assert_eq!(message, expected, "{body}");
            assert!(expected.starts_with(&format!("{field}: ")), "{body}");
        }
    }

    #[test]
    fn null_is_absent_for_optional_fields() {
        let body = json!({"name": "n", "inner": null, "target": null, "id": 3, "ratio": 1});
        let outer: Outer = read(&body).expect("read");
        assert_eq!(outer.name, "n");
        assert!(outer.inner.is_none() && outer.target.is_none() && outer.list.is_empty());
        assert_eq!((outer.id, outer.ratio), (Some(3), Some(1.0)));
        let body = json!({"name": "n", "inner": {"count": -3, "flag": true}});
        let inner = read::<Outer>(&body).expect("read").inner.expect("inner");
        assert_eq!((inner.count, inner.flag), (Some(-3), Some(true)));
    }

    #[test]
    fn queue_references_are_strings_or_resource_objects() {
        let target = |value: Value| {
            read::<Outer>(&json!({"name": "n", "target": value}))
                .expect("read")
                .target
                .map(|t| t.0)
        };
        assert_eq!(target(json!("dlq")).as_deref(), Some("dlq"));
        let all = json!({"id": "u", "name": "n", "crn": "c"});
        assert_eq!(target(all).as_deref(), Some("c"));
        assert_eq!(
            target(json!({"name": "n", "id": "u"})).as_deref(),
            Some("u")
        );
        assert_eq!(target(json!({"name": "n"})).as_deref(), Some("n"));
    }
}
