//! The shapes of SQS's requests and responses, as its service model gives them, for the two
//! protocols: AWS JSON 1.0 carries them as JSON objects under their member names, the Query
//! protocol as form fields and XML elements under other names, with lists and maps flattened
//! (`AttributeName.1`, `Attribute.1.Name`/`Attribute.1.Value`; repeated `<QueueUrl>` elements).
//! Handlers see every request as the JSON protocol's object: [`decode_form`] turns a Query
//! request into it, and [`write_xml`] turns the JSON protocol's answer into the Query protocol's
//! XML, both led by these shapes.

use std::collections::BTreeMap;

use quick_xml::events::{BytesEnd, BytesStart, BytesText, Event};
use quick_xml::Writer;
use serde_json::{Map, Number, Value};

use crate::error::{Kind, SqsError};

/// The type of a value.
#[derive(Debug, Clone, Copy)]
pub enum Shape {
    Text,
    Integer,
    Boolean,
    /// A flattened list: `<name>.1`, `<name>.2`... in a form; `<name>` repeated in XML.
    List(&'static Shape),
    /// A flattened map: `<name>.N.<key>` and `<name>.N.<value>`.
    Map {
        key: &'static str,
        value: &'static str,
        item: &'static Shape,
    },
    Struct(&'static [Member]),
}

/// A member of a structure: its JSON name, its Query name and its shape.
#[derive(Debug, Clone, Copy)]
pub struct Member {
    pub json: &'static str,
    pub query: &'static str,
    pub shape: Shape,
}

const fn member(json: &'static str, query: &'static str, shape: Shape) -> Member {
    Member { json, query, shape }
}

/// A member whose JSON and Query names are the same.
const fn text(name: &'static str) -> Member {
    member(name, name, Shape::Text)
}

const fn integer(name: &'static str) -> Member {
    member(name, name, Shape::Integer)
}

const STRINGS: Shape = Shape::List(&Shape::Text);
const NAMED_STRINGS: Shape = Shape::Map {
    key: "Name",
    value: "Value",
    item: &Shape::Text,
};
const TAGS: Shape = Shape::Map {
    key: "Key",
    value: "Value",
    item: &Shape::Text,
};
const ATTRIBUTE_VALUE: Shape = Shape::Struct(&[
    text("StringValue"),
    text("BinaryValue"),
    member("StringListValues", "StringListValue", STRINGS),
    member("BinaryListValues", "BinaryListValue", STRINGS),
    text("DataType"),
]);
const MESSAGE_ATTRIBUTES: Shape = Shape::Map {
    key: "Name",
    value: "Value",
    item: &ATTRIBUTE_VALUE,
};
const QUEUE_URL: Member = text("QueueUrl");
const ATTRIBUTES: Member = member("Attributes", "Attribute", NAMED_STRINGS);
const MESSAGE_ATTRIBUTES_MEMBER: Member =
    member("MessageAttributes", "MessageAttribute", MESSAGE_ATTRIBUTES);
const SYSTEM_ATTRIBUTES_MEMBER: Member = member(
    "MessageSystemAttributes",
    "MessageSystemAttribute",
    MESSAGE_ATTRIBUTES,
);
const PAGE: [Member; 2] = [text("NextToken"), integer("MaxResults")];
const BATCH_ERROR: Member = member(
    "Failed",
    "BatchResultErrorEntry",
    Shape::List(&Shape::Struct(&[
        text("Id"),
        member("SenderFault", "SenderFault", Shape::Boolean),
        text("Code"),
        text("Message"),
    ])),
);
const IDS: Shape = Shape::List(&Shape::Struct(&[text("Id")]));

/// The members of a message to send, after `$first`: the queue's URL of a `SendMessage`, the
/// `Id` of a `SendMessageBatch` entry.
macro_rules! send_members {
    ($first:expr) => {
        &[
            $first,
            text("MessageBody"),
            integer("DelaySeconds"),
            MESSAGE_ATTRIBUTES_MEMBER,
            SYSTEM_ATTRIBUTES_MEMBER,
            text("MessageDeduplicationId"),
            text("MessageGroupId"),
        ]
    };
}

/// One action: its name, the label its requests are counted by, the members of its request,
/// and those of its result (`None`: it answers nothing but its request ID).
#[derive(Debug)]
pub struct Action {
    pub name: &'static str,
    pub route: &'static str,
    pub input: &'static [Member],
    pub output: Option<&'static [Member]>,
}

macro_rules! action {
    ($name:literal, $input:expr, $output:expr) => {
        Action {
            name: $name,
            route: concat!("AmazonSQS.", $name),
            input: $input,
            output: $output,
        }
    };
}

/// Every action of SQS's API this endpoint knows, served or refused.
pub const ACTIONS: &[Action] = &[
    action!(
        "CreateQueue",
        &[text("QueueName"), ATTRIBUTES, member("tags", "Tag", TAGS)],
        Some(&[QUEUE_URL])
    ),
    action!(
        "GetQueueUrl",
        &[text("QueueName"), text("QueueOwnerAWSAccountId")],
        Some(&[QUEUE_URL])
    ),
    action!(
        "ListQueues",
        &[text("QueueNamePrefix"), PAGE[0], PAGE[1]],
        Some(&[member("QueueUrls", "QueueUrl", STRINGS), text("NextToken")])
    ),
    action!("DeleteQueue", &[QUEUE_URL], None),
    action!(
        "GetQueueAttributes",
        &[
            QUEUE_URL,
            member("AttributeNames", "AttributeName", STRINGS)
        ],
        Some(&[ATTRIBUTES])
    ),
    action!("SetQueueAttributes", &[QUEUE_URL, ATTRIBUTES], None),
    action!(
        "SendMessage",
        send_members!(QUEUE_URL),
        Some(&[
            text("MD5OfMessageBody"),
            text("MD5OfMessageAttributes"),
            text("MD5OfMessageSystemAttributes"),
            text("MessageId"),
            text("SequenceNumber"),
        ])
    ),
    action!(
        "SendMessageBatch",
        &[
            QUEUE_URL,
            member(
                "Entries",
                "SendMessageBatchRequestEntry",
                Shape::List(&Shape::Struct(send_members!(text("Id"))))
            )
        ],
        Some(&[
            member(
                "Successful",
                "SendMessageBatchResultEntry",
                Shape::List(&Shape::Struct(&[
                    text("Id"),
                    text("MessageId"),
                    text("MD5OfMessageBody"),
                    text("MD5OfMessageAttributes"),
                    text("MD5OfMessageSystemAttributes"),
                    text("SequenceNumber"),
                ]))
            ),
            BATCH_ERROR
        ])
    ),
    action!(
        "ReceiveMessage",
        &[
            QUEUE_URL,
            member("AttributeNames", "AttributeName", STRINGS),
            member(
                "MessageSystemAttributeNames",
                "MessageSystemAttributeName",
                STRINGS
            ),
            member("MessageAttributeNames", "MessageAttributeName", STRINGS),
            integer("MaxNumberOfMessages"),
            integer("VisibilityTimeout"),
            integer("WaitTimeSeconds"),
            text("ReceiveRequestAttemptId"),
        ],
        Some(&[member(
            "Messages",
            "Message",
            Shape::List(&Shape::Struct(&[
                text("MessageId"),
                text("ReceiptHandle"),
                text("MD5OfBody"),
                text("Body"),
                ATTRIBUTES,
                text("MD5OfMessageAttributes"),
                MESSAGE_ATTRIBUTES_MEMBER,
            ]))
        )])
    ),
    action!("DeleteMessage", &[QUEUE_URL, text("ReceiptHandle")], None),
    action!(
        "DeleteMessageBatch",
        &[
            QUEUE_URL,
            member(
                "Entries",
                "DeleteMessageBatchRequestEntry",
                Shape::List(&Shape::Struct(&[text("Id"), text("ReceiptHandle")]))
            )
        ],
        Some(&[
            member("Successful", "DeleteMessageBatchResultEntry", IDS),
            BATCH_ERROR
        ])
    ),
    action!(
        "ChangeMessageVisibility",
        &[
            QUEUE_URL,
            text("ReceiptHandle"),
            integer("VisibilityTimeout")
        ],
        None
    ),
    action!(
        "ChangeMessageVisibilityBatch",
        &[
            QUEUE_URL,
            member(
                "Entries",
                "ChangeMessageVisibilityBatchRequestEntry",
                Shape::List(&Shape::Struct(&[
                    text("Id"),
                    text("ReceiptHandle"),
                    integer("VisibilityTimeout"),
                ]))
            )
        ],
        Some(&[
            member("Successful", "ChangeMessageVisibilityBatchResultEntry", IDS),
            BATCH_ERROR
        ])
    ),
    action!("PurgeQueue", &[QUEUE_URL], None),
    action!(
        "ListDeadLetterSourceQueues",
        &[QUEUE_URL, PAGE[0], PAGE[1]],
        Some(&[member("queueUrls", "QueueUrl", STRINGS), text("NextToken")])
    ),
    action!("TagQueue", &[QUEUE_URL, member("Tags", "Tag", TAGS)], None),
    action!(
        "UntagQueue",
        &[QUEUE_URL, member("TagKeys", "TagKey", STRINGS)],
        None
    ),
    action!(
        "ListQueueTags",
        &[QUEUE_URL],
        Some(&[member("Tags", "Tag", TAGS)])
    ),
    action!("AddPermission", &[], None),
    action!("RemovePermission", &[], None),
    action!(
        "StartMessageMoveTask",
        &[
            text("SourceArn"),
            text("DestinationArn"),
            integer("MaxNumberOfMessagesPerSecond")
        ],
        Some(&[text("TaskHandle")])
    ),
    action!(
        "CancelMessageMoveTask",
        &[text("TaskHandle")],
        Some(&[integer("ApproximateNumberOfMessagesMoved")])
    ),
    action!(
        "ListMessageMoveTasks",
        &[text("SourceArn"), integer("MaxResults")],
        Some(&[member(
            "Results",
            "ListMessageMoveTasksResultEntry",
            Shape::List(&Shape::Struct(&[
                text("TaskHandle"),
                text("Status"),
                text("SourceArn"),
                text("DestinationArn"),
                integer("MaxNumberOfMessagesPerSecond"),
                integer("ApproximateNumberOfMessagesMoved"),
                integer("ApproximateNumberOfMessagesToMove"),
                text("FailureReason"),
                integer("StartedTimestamp"),
            ]))
        )])
    ),
];

/// The action named `name`.
pub fn action(name: &str) -> Option<&'static Action> {
    ACTIONS.iter().find(|a| a.name == name)
}

/// A Query request's fields, by name.
pub type Form = BTreeMap<String, String>;

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// The indices `N` of the fields `<prefix>.N` and `<prefix>.N.*`, ascending.
fn indices(form: &Form, prefix: &str) -> Vec<u32> {
    let lead = format!("{prefix}.");
    let mut found: Vec<u32> = form
        .range(lead.clone()..)
        .take_while(|(key, _)| key.starts_with(&lead))
        .filter_map(|(key, _)| key[lead.len()..].split('.').next()?.parse().ok())
        .collect();
    found.sort_unstable();
    found.dedup();
    found
}

/// The value of shape `shape` in the fields under `key`; `None` when there are none.
fn decode(form: &Form, key: &str, shape: Shape) -> Result<Option<Value>, SqsError> {
    let scalar = form.get(key);
    Ok(match shape {
        Shape::Text => scalar.map(|v| Value::String(v.clone())),
        Shape::Integer => match scalar {
            None => None,
            Some(v) => Some(Value::Number(Number::from(
                v.trim()
                    .parse::<i64>()
                    .map_err(|_| SqsError::invalid_parameter(key, "must be an integer"))?,
            ))),
        },
        Shape::Boolean => match scalar.map(|v| v.to_ascii_lowercase()).as_deref() {
            None => None,
            Some("true") => Some(Value::Bool(true)),
            Some("false") => Some(Value::Bool(false)),
            Some(_) => return Err(SqsError::invalid_parameter(key, "must be true or false")),
        },
        Shape::List(item) => {
            let mut items = Vec::new();
            for n in indices(form, key) {
                if let Some(value) = decode(form, &format!("{key}.{n}"), *item)? {
                    items.push(value);
                }
            }
            (!items.is_empty()).then_some(Value::Array(items))
        }
        Shape::Map {
            key: key_name,
            value: value_name,
            item,
        } => {
            let mut map = Map::new();
            for n in indices(form, key) {
                let entry = format!("{key}.{n}");
                let name = form
                    .get(&join(&entry, key_name))
                    .ok_or_else(|| SqsError::missing(&join(&entry, key_name)))?;
                let value = decode(form, &join(&entry, value_name), *item)?
                    .ok_or_else(|| SqsError::missing(&join(&entry, value_name)))?;
                map.insert(name.clone(), value);
            }
            (!map.is_empty()).then_some(Value::Object(map))
        }
        Shape::Struct(members) => {
            let object = decode_members(form, key, members)?;
            (!object.is_empty()).then_some(Value::Object(object))
        }
    })
}

fn decode_members(
    form: &Form,
    prefix: &str,
    members: &[Member],
) -> Result<Map<String, Value>, SqsError> {
    let mut object = Map::new();
    for m in members {
        if let Some(value) = decode(form, &join(prefix, m.query), m.shape)? {
            object.insert(m.json.to_string(), value);
        }
    }
    Ok(object)
}

/// A Query request's fields as the JSON protocol's request object of `action`. Fields the
/// action does not have (`Action`, `Version`, signature fields) are left out.
pub fn decode_form(form: &Form, action: &Action) -> Result<Value, SqsError> {
    Ok(Value::Object(decode_members(form, "", action.input)?))
}

/// The namespace of SQS's Query protocol replies.
pub const XML_NAMESPACE: &str = "http://queue.amazonaws.com/doc/2012-11-05/";

type Xml = Writer<Vec<u8>>;

fn start(xml: &mut Xml, name: &str) -> std::io::Result<()> {
    xml.write_event(Event::Start(BytesStart::new(name)))
}

fn end(xml: &mut Xml, name: &str) -> std::io::Result<()> {
    xml.write_event(Event::End(BytesEnd::new(name)))
}

fn element(xml: &mut Xml, name: &str, text: &str) -> std::io::Result<()> {
    start(xml, name)?;
    xml.write_event(Event::Text(BytesText::new(text)))?;
    end(xml, name)
}

/// Writes `value` of shape `shape` as element(s) `name`.
fn write_value(xml: &mut Xml, name: &str, value: &Value, shape: Shape) -> std::io::Result<()> {
    match (shape, value) {
        (Shape::List(item), Value::Array(items)) => {
            for value in items {
                write_value(xml, name, value, *item)?;
            }
            Ok(())
        }
        (
            Shape::Map {
                key,
                value: value_name,
                item,
            },
            Value::Object(map),
        ) => {
            for (k, v) in map {
                start(xml, name)?;
                element(xml, key, k)?;
                write_value(xml, value_name, v, *item)?;
                end(xml, name)?;
            }
            Ok(())
        }
        (Shape::Struct(members), Value::Object(object)) => {
            start(xml, name)?;
            write_members(xml, object, members)?;
            end(xml, name)
        }
        (_, Value::String(text)) => element(xml, name, text),
        (_, Value::Null) => Ok(()),
        (_, other) => element(xml, name, &other.to_string()),
    }
}

fn write_members(
    xml: &mut Xml,
    object: &Map<String, Value>,
    members: &[Member],
) -> std::io::Result<()> {
    for m in members {
        if let Some(value) = object.get(m.json) {
            write_value(xml, m.query, value, m.shape)?;
        }
    }
    Ok(())
}

/// The Query protocol's reply to `action`: its result (the JSON protocol's answer `result`)
/// and the request ID.
pub fn write_xml(action: &Action, result: &Value, request_id: &str) -> Result<Vec<u8>, SqsError> {
    let written = (|| -> std::io::Result<Vec<u8>> {
        let mut xml = Writer::new(Vec::new());
        let response = format!("{}Response", action.name);
        let mut root = BytesStart::new(response.as_str());
        root.push_attribute(("xmlns", XML_NAMESPACE));
        xml.write_event(Event::Start(root))?;
        if let (Some(members), Value::Object(object)) = (action.output, result) {
            let wrapper = format!("{}Result", action.name);
            start(&mut xml, &wrapper)?;
            write_members(&mut xml, object, members)?;
            end(&mut xml, &wrapper)?;
        }
        start(&mut xml, "ResponseMetadata")?;
        element(&mut xml, "RequestId", request_id)?;
        end(&mut xml, "ResponseMetadata")?;
        end(&mut xml, &response)?;
        Ok(xml.into_inner())
    })();
    written.map_err(|e| {
        SqsError::new(
            Kind::InternalFailure,
            format!("cannot write the reply: {e}"),
        )
    })
}

/// The Query protocol's error reply.
pub fn write_error_xml(error: &SqsError, request_id: &str) -> Vec<u8> {
    let written = (|| -> std::io::Result<Vec<u8>> {
        let mut xml = Writer::new(Vec::new());
        let mut root = BytesStart::new("ErrorResponse");
        root.push_attribute(("xmlns", XML_NAMESPACE));
        xml.write_event(Event::Start(root))?;
        start(&mut xml, "Error")?;
        let fault = if error.kind.sender_fault() {
            "Sender"
        } else {
            "Receiver"
        };
        element(&mut xml, "Type", fault)?;
        element(&mut xml, "Code", error.code())?;
        element(&mut xml, "Message", &error.message)?;
        xml.write_event(Event::Empty(BytesStart::new("Detail")))?;
        end(&mut xml, "Error")?;
        element(&mut xml, "RequestId", request_id)?;
        end(&mut xml, "ErrorResponse")?;
        Ok(xml.into_inner())
    })();
    // Writing into a Vec cannot fail.
    written.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn form(pairs: &[(&str, &str)]) -> Form {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn get(name: &str) -> &'static Action {
        action(name).unwrap()
    }

    #[test]
    fn flattened_lists_and_maps_become_the_json_protocols_objects() {
        let request = form(&[
            ("Action", "SendMessageBatch"),
            ("QueueUrl", "http://h/123456789012/q"),
            ("SendMessageBatchRequestEntry.2.Id", "b"),
            ("SendMessageBatchRequestEntry.2.MessageBody", "two"),
            ("SendMessageBatchRequestEntry.1.Id", "a"),
            ("SendMessageBatchRequestEntry.1.MessageBody", "one"),
            ("SendMessageBatchRequestEntry.1.DelaySeconds", "5"),
            (
                "SendMessageBatchRequestEntry.1.MessageAttribute.1.Name",
                "color",
            ),
            (
                "SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.DataType",
                "String",
            ),
            (
                "SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue",
                "red",
            ),
            ("SendMessageBatchRequestEntry.10.Id", "j"),
            ("SendMessageBatchRequestEntry.10.MessageBody", "ten"),
        ]);
        let value = decode_form(&request, get("SendMessageBatch")).unwrap();
        assert_eq!(
            value,
            json!({
                "QueueUrl": "http://h/123456789012/q",
                "Entries": [
                    {"Id": "a", "MessageBody": "one", "DelaySeconds": 5,
                     "MessageAttributes": {"color": {"DataType": "String", "StringValue": "red"}}},
                    {"Id": "b", "MessageBody": "two"},
                    {"Id": "j", "MessageBody": "ten"},
                ]
            })
        );
        let request = form(&[
            ("QueueName", "q"),
            ("Attribute.1.Name", "VisibilityTimeout"),
            ("Attribute.1.Value", "60"),
            ("Tag.1.Key", "team"),
            ("Tag.1.Value", "core"),
        ]);
        assert_eq!(
            decode_form(&request, get("CreateQueue")).unwrap(),
            json!({"QueueName": "q", "Attributes": {"VisibilityTimeout": "60"}, "tags": {"team": "core"}})
        );
        let request = form(&[("AttributeName.1", "All"), ("MaxNumberOfMessages", "10")]);
        assert_eq!(
            decode_form(&request, get("ReceiveMessage")).unwrap(),
            json!({"AttributeNames": ["All"], "MaxNumberOfMessages": 10})
        );
    }

    #[test]
    fn malformed_fields_are_refused_by_name() {
        let cases = [
            (
                ("MaxNumberOfMessages", "ten"),
                "ReceiveMessage",
                Kind::InvalidParameterValue,
                "MaxNumberOfMessages",
            ),
            (
                ("Attribute.1.Value", "1"),
                "SetQueueAttributes",
                Kind::MissingParameter,
                "Attribute.1.Name",
            ),
        ];
        for (field, action, kind, named) in cases {
            let e = decode_form(&form(&[field]), get(action)).unwrap_err();
            assert_eq!(e.kind, kind, "{action}");
            assert!(e.message.contains(named), "{e}");
        }
    }

    #[test]
    fn replies_are_sqs_xml_with_flattened_members() {
        let result = json!({
            "Messages": [{
                "MessageId": "m1",
                "ReceiptHandle": "r1",
                "MD5OfBody": "d",
                "Body": "<b>&",
                "Attributes": {"SentTimestamp": "1"},
                "MessageAttributes": {"color": {"DataType": "String", "StringValue": "red"}}
            }]
        });
        let xml =
            String::from_utf8(write_xml(get("ReceiveMessage"), &result, "req-1").unwrap()).unwrap();
        assert_eq!(
            xml,
            concat!(
                r#"<ReceiveMessageResponse xmlns="http://queue.amazonaws.com/doc/2012-11-05/">"#,
                "<ReceiveMessageResult><Message><MessageId>m1</MessageId><ReceiptHandle>r1</ReceiptHandle>",
                "<MD5OfBody>d</MD5OfBody><Body>&lt;b&gt;&amp;</Body>",
                "<Attribute><Name>SentTimestamp</Name><Value>1</Value></Attribute>",
                "<MessageAttribute><Name>color</Name><Value><StringValue>red</StringValue>",
                "<DataType>String</DataType></Value></MessageAttribute></Message></ReceiveMessageResult>",
                "<ResponseMetadata><RequestId>req-1</RequestId></ResponseMetadata></ReceiveMessageResponse>"
            )
        );
        let xml =
            String::from_utf8(write_xml(get("DeleteQueue"), &json!({}), "r").unwrap()).unwrap();
        assert!(
            xml.starts_with("<DeleteQueueResponse") && !xml.contains("Result"),
            "{xml}"
        );
        let failed =
            json!({"Failed": [{"Id": "a", "SenderFault": true, "Code": "X", "Message": "m"}]});
        let xml =
            String::from_utf8(write_xml(get("DeleteMessageBatch"), &failed, "r").unwrap()).unwrap();
        assert!(
            xml.contains(
                "<BatchResultErrorEntry><Id>a</Id><SenderFault>true</SenderFault><Code>X</Code>"
            ),
            "{xml}"
        );
        let urls = json!({"QueueUrls": ["u1", "u2"]});
        let xml = String::from_utf8(write_xml(get("ListQueues"), &urls, "r").unwrap()).unwrap();
        assert!(xml.contains("<ListQueuesResult><QueueUrl>u1</QueueUrl><QueueUrl>u2</QueueUrl></ListQueuesResult>"), "{xml}");
    }

    #[test]
    fn errors_are_sqs_error_responses() {
        let xml =
            String::from_utf8(write_error_xml(&SqsError::queue_does_not_exist(), "r")).unwrap();
        assert_eq!(
            xml,
            concat!(
                r#"<ErrorResponse xmlns="http://queue.amazonaws.com/doc/2012-11-05/"><Error><Type>Sender</Type>"#,
                "<Code>AWS.SimpleQueueService.NonExistentQueue</Code>",
                "<Message>The specified queue does not exist.</Message><Detail/></Error>",
                "<RequestId>r</RequestId></ErrorResponse>"
            )
        );
    }

    #[test]
    fn every_action_has_its_route_label() {
        assert_eq!(get("SendMessage").route, "AmazonSQS.SendMessage");
        assert!(action("Nope").is_none());
    }
}
