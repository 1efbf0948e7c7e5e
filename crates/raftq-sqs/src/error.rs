//! SQS's errors, and the one mapping from raftq's ([`ApiError`]) to them.
//!
//! Each [`Kind`] has what both protocols need: the shape name of the JSON protocol's `__type`
//! (`com.amazonaws.sqs#QueueDoesNotExist`), the code of the Query protocol and of the
//! `x-amzn-query-error` header (`AWS.SimpleQueueService.NonExistentQueue`), whether the sender
//! or the server is at fault, and the HTTP status, as SQS's service model gives them. Errors the
//! model does not list (the common ones: `InvalidParameterValue`, `MissingParameter`,
//! `InvalidAction`, ...) are named as SQS's Query protocol names them.
//!
//! | raftq | SQS |
//! |---|---|
//! | `invalid_argument` | `InvalidAttributeValue` for queue attributes, `ReceiptHandleIsInvalid` for receipts, `InvalidParameterValue` otherwise; the field is named as SQS names the parameter |
//! | `queue_not_found` | `QueueDoesNotExist` |
//! | `queue_exists` | `QueueNameExists` (`QueueAlreadyExists`) |
//! | `queue_in_use` | `UnsupportedOperation` (raftq keeps a dead-letter queue that others name) |
//! | `move_task_not_found` | `ResourceNotFoundException`, as is `queue_not_found` in a move task action |
//! | `move_task_running` | `InvalidParameterValue` |
//! | `move_task_not_running` | `UnsupportedOperation` |
//! | `lease_expired` | answered by the receipt actions themselves (`messages`): a repeated delete succeeds, as in SQS |
//! | `message_too_large` | `InvalidParameterValue` |
//! | `too_many_requests` | `RequestThrottled` |
//! | `unauthenticated`, `permission_denied` | `InvalidClientTokenId`, `AccessDenied` |
//! | `unavailable` | `ServiceUnavailable` |
//! | `storage_full` | `ServiceUnavailable` (503, the server's fault, retried by SDKs), with raftq's message: SQS has no error of its own for a full disk |
//! | anything else | `InternalFailure` |

use raftq_api::ApiError;
use raftq_engine::{validate, EngineError};

/// An SQS error: its kind and message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", .kind.code())]
pub struct SqsError {
    pub kind: Kind,
    pub message: String,
    /// Seconds to wait before a retry (`Retry-After`), for a throttled request.
    pub retry_after: Option<u64>,
}

/// Every error this endpoint answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    QueueDoesNotExist,
    QueueNameExists,
    InvalidAttributeName,
    InvalidAttributeValue,
    InvalidParameterValue,
    MissingParameter,
    InvalidAddress,
    InvalidMessageContents,
    ReceiptHandleIsInvalid,
    EmptyBatchRequest,
    TooManyEntriesInBatchRequest,
    BatchEntryIdsNotDistinct,
    InvalidBatchEntryId,
    UnsupportedOperation,
    /// A message move task, or the queue one names, that does not exist.
    ResourceNotFoundException,
    /// An action SQS does not have.
    InvalidAction,
    /// A JSON body that does not parse, or a value of the wrong JSON type.
    SerializationException,
    /// A form body that does not parse.
    MalformedQueryString,
    RequestEntityTooLarge,
    MissingAuthenticationToken,
    IncompleteSignature,
    SignatureDoesNotMatch,
    RequestExpired,
    InvalidClientTokenId,
    AccessDenied,
    RequestThrottled,
    ServiceUnavailable,
    InternalFailure,
}

impl Kind {
    /// The Query protocol's code, also the first part of `x-amzn-query-error`.
    pub fn code(self) -> &'static str {
        match self {
            Kind::QueueDoesNotExist => "AWS.SimpleQueueService.NonExistentQueue",
            Kind::QueueNameExists => "QueueAlreadyExists",
            Kind::EmptyBatchRequest => "AWS.SimpleQueueService.EmptyBatchRequest",
            Kind::TooManyEntriesInBatchRequest => {
                "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"
            }
            Kind::BatchEntryIdsNotDistinct => "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
            Kind::InvalidBatchEntryId => "AWS.SimpleQueueService.InvalidBatchEntryId",
            Kind::UnsupportedOperation => "AWS.SimpleQueueService.UnsupportedOperation",
            Kind::SerializationException => "SerializationException",
            other => other.name(),
        }
    }

    /// The shape name, the part after `#` of the JSON protocol's `__type`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::QueueDoesNotExist => "QueueDoesNotExist",
            Kind::QueueNameExists => "QueueNameExists",
            Kind::InvalidAttributeName => "InvalidAttributeName",
            Kind::InvalidAttributeValue => "InvalidAttributeValue",
            Kind::InvalidParameterValue => "InvalidParameterValue",
            Kind::MissingParameter => "MissingParameter",
            Kind::InvalidAddress => "InvalidAddress",
            Kind::InvalidMessageContents => "InvalidMessageContents",
            Kind::ReceiptHandleIsInvalid => "ReceiptHandleIsInvalid",
            Kind::EmptyBatchRequest => "EmptyBatchRequest",
            Kind::TooManyEntriesInBatchRequest => "TooManyEntriesInBatchRequest",
            Kind::BatchEntryIdsNotDistinct => "BatchEntryIdsNotDistinct",
            Kind::InvalidBatchEntryId => "InvalidBatchEntryId",
            Kind::UnsupportedOperation => "UnsupportedOperation",
            Kind::ResourceNotFoundException => "ResourceNotFoundException",
            Kind::InvalidAction => "InvalidAction",
            Kind::SerializationException => "SerializationException",
            Kind::MalformedQueryString => "MalformedQueryString",
            Kind::RequestEntityTooLarge => "RequestEntityTooLarge",
            Kind::MissingAuthenticationToken => "MissingAuthenticationToken",
            Kind::IncompleteSignature => "IncompleteSignature",
            Kind::SignatureDoesNotMatch => "SignatureDoesNotMatch",
            Kind::RequestExpired => "RequestExpired",
            Kind::InvalidClientTokenId => "InvalidClientTokenId",
            Kind::AccessDenied => "AccessDenied",
            Kind::RequestThrottled => "RequestThrottled",
            Kind::ServiceUnavailable => "ServiceUnavailable",
            Kind::InternalFailure => "InternalFailure",
        }
    }

    /// The JSON protocol's `__type`.
    pub fn json_type(self) -> String {
        match self {
            Kind::SerializationException => {
                "com.amazon.coral.service#SerializationException".into()
            }
            Kind::InvalidAction => "com.amazon.coral.service#UnknownOperationException".into(),
            other => format!("com.amazonaws.sqs#{}", other.name()),
        }
    }

    /// Whether the sender is at fault (`Sender`), not the server (`Receiver`).
    pub fn sender_fault(self) -> bool {
        !matches!(self, Kind::ServiceUnavailable | Kind::InternalFailure)
    }

    /// The HTTP status, as SQS's service model gives it (`httpError` and `awsQueryError`):
    /// 404 for `ReceiptHandleIsInvalid`, `InvalidAddress` and `ResourceNotFoundException`,
    /// 403 for the refusals of credentials and throttling, 400 for every other client error,
    /// `QueueDoesNotExist` included.
    pub fn status(self) -> u16 {
        match self {
            Kind::ReceiptHandleIsInvalid
            | Kind::InvalidAddress
            | Kind::ResourceNotFoundException => 404,
            Kind::InvalidClientTokenId
            | Kind::AccessDenied
            | Kind::RequestThrottled
            | Kind::MissingAuthenticationToken
            | Kind::SignatureDoesNotMatch => 403,
            Kind::RequestEntityTooLarge => 413,
            Kind::ServiceUnavailable => 503,
            Kind::InternalFailure => 500,
            _ => 400,
        }
    }
}

/// What a refused request was doing, which decides the SQS error of a raftq error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Doing {
    /// Creating a queue or setting its attributes: bad values are `InvalidAttributeValue`.
    Attributes,
    /// Moving messages: a queue or task that does not exist is `ResourceNotFoundException`.
    Moving,
    /// Anything else.
    Other,
}

impl SqsError {
    pub fn new(kind: Kind, message: impl Into<String>) -> SqsError {
        SqsError {
            kind,
            message: message.into(),
            retry_after: None,
        }
    }

    /// The Query protocol's code.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }

    pub fn queue_does_not_exist() -> SqsError {
        SqsError::new(
            Kind::QueueDoesNotExist,
            "The specified queue does not exist.",
        )
    }

    pub fn invalid_address(text: &str) -> SqsError {
        SqsError::new(
            Kind::InvalidAddress,
            format!("The address {text} is not valid for this endpoint: give the queue's URL (<base>/<account number>/<queue name>), its ARN or its name."),
        )
    }

    /// A receipt handle that is not one (SQS's text).
    pub fn invalid_receipt(receipt: &str) -> SqsError {
        SqsError::new(
            Kind::ReceiptHandleIsInvalid,
            format!("The input receipt handle \"{receipt}\" is not a valid receipt handle."),
        )
    }

    /// A receipt handle refused for `reason`, in SQS's words for the parameter `ReceiptHandle`.
    pub fn receipt_refused(receipt: &str, reason: &str) -> SqsError {
        SqsError::invalid_value("ReceiptHandle", receipt, reason)
    }

    /// The value `value` of `parameter`, refused for `reason` (SQS's text).
    pub fn invalid_value(parameter: &str, value: impl std::fmt::Display, reason: &str) -> SqsError {
        SqsError::new(
            Kind::InvalidParameterValue,
            format!("Value {value} for parameter {parameter} is invalid. Reason: {reason}."),
        )
    }

    /// An empty batch of `action` (SQS names its entry type: `SendMessageBatchRequestEntry`).
    pub fn empty_batch(entry_type: &str) -> SqsError {
        SqsError::new(
            Kind::EmptyBatchRequest,
            format!("There should be at least one {entry_type} in the request."),
        )
    }

    pub fn missing(parameter: &str) -> SqsError {
        SqsError::new(
            Kind::MissingParameter,
            format!("The request must contain the parameter {parameter}."),
        )
    }

    /// A parameter whose value breaks `rule`.
    pub fn invalid_parameter(parameter: &str, rule: impl std::fmt::Display) -> SqsError {
        SqsError::new(
            Kind::InvalidParameterValue,
            format!("Value for parameter {parameter} is invalid. Reason: {rule}."),
        )
    }

    /// A queue attribute whose value breaks `rule`.
    pub fn invalid_attribute_value(attribute: &str, rule: impl std::fmt::Display) -> SqsError {
        SqsError::new(
            Kind::InvalidAttributeValue,
            format!("Invalid value for the parameter {attribute}. Reason: {rule}."),
        )
    }

    /// A queue attribute name that SQS or raftq does not have, or that cannot be set.
    pub fn invalid_attribute_name(attribute: &str, why: impl std::fmt::Display) -> SqsError {
        SqsError::new(
            Kind::InvalidAttributeName,
            format!("Unsupported attribute {attribute}: {why}."),
        )
    }

    /// A FIFO queue's attribute given to a standard queue, in SQS's words: its older attribute
    /// is unknown there, its newer ones need `FifoQueue`.
    pub fn fifo_only(attribute: &str) -> SqsError {
        if attribute == "ContentBasedDeduplication" {
            return SqsError::unknown_attribute(attribute);
        }
        SqsError::new(
            Kind::InvalidAttributeName,
            format!("You can specify the {attribute} only when FifoQueue is set to true."),
        )
    }

    /// A queue attribute name SQS does not have (SQS's text).
    pub fn unknown_attribute(attribute: &str) -> SqsError {
        SqsError::new(
            Kind::InvalidAttributeName,
            format!("Unknown Attribute {attribute}."),
        )
    }

    pub fn unsupported(what: impl std::fmt::Display) -> SqsError {
        SqsError::new(Kind::UnsupportedOperation, what.to_string())
    }

    /// SQS's own error for raftq's `e`, met while `doing`, where SQS has one.
    fn in_sqs_words(e: Option<&EngineError>, doing: Doing) -> Option<SqsError> {
        let resource_missing = |parameter: &str| {
            SqsError::new(
                Kind::ResourceNotFoundException,
                format!(
                    "The resource that you specified for the {parameter} parameter doesn't exist."
                ),
            )
        };
        Some(match (e?, doing) {
            (EngineError::InvalidArgument { field, rule }, Doing::Attributes)
                if rule == validate::FIFO_ONLY =>
            {
                SqsError::fifo_only(&parameter_name(field))
            }
            (EngineError::QueueNotFound(_), Doing::Moving) => resource_missing("SourceArn"),
            (EngineError::InvalidArgument { rule, .. }, Doing::Moving)
                if rule == validate::NO_SUCH_DESTINATION =>
            {
                resource_missing("DestinationArn")
            }
            (EngineError::InvalidArgument { rule, .. }, Doing::Moving)
                if rule == validate::DESTINATION_REQUIRED =>
            {
                SqsError::new(
                    Kind::InvalidParameterValue,
                    "Source queue must be configured as a Dead Letter Queue.",
                )
            }
            (EngineError::MoveTaskNotFound(_), _) => {
                SqsError::new(Kind::ResourceNotFoundException, "Task does not exist.")
            }
            (EngineError::MoveTaskRunning(_), _) => SqsError::new(
                Kind::InvalidParameterValue,
                "There is already a task running. Only one active task is allowed for a source queue arn at a given time.",
            ),
            _ => return None,
        })
    }

    /// raftq's error `e`, met while `doing`.
    pub fn from_api(e: ApiError, doing: Doing) -> SqsError {
        if let Some(EngineError::MessageTooLarge { max, .. }) = e.engine.as_deref() {
            return SqsError::new(
                Kind::InvalidParameterValue,
                format!("One or more parameters are invalid. Reason: Message must be shorter than {max} bytes."),
            );
        }
        if let Some(known) = SqsError::in_sqs_words(e.engine.as_deref(), doing) {
            return known;
        }
        let kind = match (e.code, doing) {
            ("invalid_argument", _) if is_receipt(e.field.as_deref()) => {
                Kind::ReceiptHandleIsInvalid
            }
            ("invalid_argument", Doing::Attributes) if e.field.as_deref() != Some("name") => {
                Kind::InvalidAttributeValue
            }
            ("invalid_argument" | "message_too_large", _) => Kind::InvalidParameterValue,
            ("queue_not_found" | "move_task_not_found", Doing::Moving) => {
                Kind::ResourceNotFoundException
            }
            ("queue_not_found", _) => Kind::QueueDoesNotExist,
            ("move_task_not_running", _) => Kind::UnsupportedOperation,
            ("queue_exists", _) => Kind::QueueNameExists,
            ("queue_in_use", _) => Kind::UnsupportedOperation,
            ("lease_expired", _) => Kind::ReceiptHandleIsInvalid,
            ("too_many_requests", _) => Kind::RequestThrottled,
            ("unauthenticated", _) => Kind::InvalidClientTokenId,
            ("permission_denied", _) => Kind::AccessDenied,
            ("unavailable" | "storage_full", _) => Kind::ServiceUnavailable,
            _ => Kind::InternalFailure,
        };
        let message = match (kind, e.field.as_deref()) {
            (Kind::QueueDoesNotExist, _) => return SqsError::queue_does_not_exist(),
            (Kind::ReceiptHandleIsInvalid, _) if e.code == "lease_expired" => {
                "The receipt handle is no longer valid: the lease it names ended.".to_string()
            }
            (Kind::ReceiptHandleIsInvalid, _) => {
                "The input receipt handle is not a valid receipt handle.".to_string()
            }
            (_, Some(field)) => {
                let rule = e
                    .message
                    .strip_prefix(field)
                    .and_then(|rest| rest.strip_prefix(": "))
                    .unwrap_or(&e.message);
                let parameter = parameter_name(field);
                return match kind {
                    Kind::InvalidAttributeValue => {
                        SqsError::invalid_attribute_value(&parameter, rule)
                    }
                    Kind::InvalidParameterValue => SqsError::invalid_parameter(&parameter, rule),
                    _ => SqsError::new(kind, format!("{parameter}: {rule}")),
                };
            }
            _ => e.message,
        };
        SqsError {
            kind,
            message,
            retry_after: e.retry_after,
        }
    }
}

/// Whether an error's field is a receipt (`receipt`, `receipts[3]`).
pub fn is_receipt(field: Option<&str>) -> bool {
    field.is_some_and(|f| f == "receipt" || f.starts_with("receipts"))
}

/// The SQS name of raftq's field `field` (JSON-path style), for messages: `max_messages` is
/// `MaxNumberOfMessages`, `redrive_policy.max_receive_count` is `RedrivePolicy`...
pub fn parameter_name(field: &str) -> String {
    let head = field.split(['.', '[']).next().unwrap_or(field);
    let name = match head {
        "name" => "QueueName",
        "type" => "FifoQueue",
        "lease_seconds" => "VisibilityTimeout",
        "delay_seconds" => "DelaySeconds",
        "retention_seconds" => "MessageRetentionPeriod",
        "max_message_bytes" => "MaximumMessageSize",
        "content_based_deduplication" => "ContentBasedDeduplication",
        "deduplication_scope" => "DeduplicationScope",
        "fifo_throughput_limit" => "FifoThroughputLimit",
        "policy" => "Policy",
        "trace_header" => "MessageSystemAttributes.AWSTraceHeader",
        "priority" => "MessageAttributes.raftq.Priority",
        "deliver_at" => "MessageAttributes.raftq.DeliverAt",
        "redrive_policy" => "RedrivePolicy",
        "redrive_allow_policy" => "RedriveAllowPolicy",
        "body" => "MessageBody",
        "attributes" => "MessageAttributes",
        "message_group_id" => "MessageGroupId",
        "message_deduplication_id" => "MessageDeduplicationId",
        "max_messages" => "MaxNumberOfMessages",
        "wait_seconds" => "WaitTimeSeconds",
        "receive_wait_seconds" => "ReceiveMessageWaitTimeSeconds",
        "receive_attempt_id" => "ReceiveRequestAttemptId",
        "tags" => "Tags",
        "entries" | "receipts" => "Entries",
        "receipt" => "ReceiptHandle",
        "max_messages_per_second" => "MaxNumberOfMessagesPerSecond",
        "destination" => "DestinationArn",
        _ => return field.to_string(),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use raftq_engine::EngineError;

    use super::*;

    fn api(e: EngineError) -> ApiError {
        e.into()
    }

    #[test]
    fn kinds_have_the_codes_statuses_and_types_of_sqs() {
        // (kind, Query code, HTTP status), as SQS's service model gives them.
        let cases = [
            (
                Kind::QueueDoesNotExist,
                "AWS.SimpleQueueService.NonExistentQueue",
                400,
            ),
            (Kind::QueueNameExists, "QueueAlreadyExists", 400),
            (Kind::InvalidAttributeName, "InvalidAttributeName", 400),
            (Kind::InvalidAttributeValue, "InvalidAttributeValue", 400),
            (Kind::InvalidParameterValue, "InvalidParameterValue", 400),
            (Kind::MissingParameter, "MissingParameter", 400),
            (Kind::InvalidAddress, "InvalidAddress", 404),
            (Kind::InvalidMessageContents, "InvalidMessageContents", 400),
            (Kind::ReceiptHandleIsInvalid, "ReceiptHandleIsInvalid", 404),
            (
                Kind::EmptyBatchRequest,
                "AWS.SimpleQueueService.EmptyBatchRequest",
                400,
            ),
            (
                Kind::TooManyEntriesInBatchRequest,
                "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
                400,
            ),
            (
                Kind::BatchEntryIdsNotDistinct,
                "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
                400,
            ),
            (
                Kind::InvalidBatchEntryId,
                "AWS.SimpleQueueService.InvalidBatchEntryId",
                400,
            ),
            (
                Kind::UnsupportedOperation,
                "AWS.SimpleQueueService.UnsupportedOperation",
                400,
            ),
            (
                Kind::ResourceNotFoundException,
                "ResourceNotFoundException",
                404,
            ),
            (Kind::RequestThrottled, "RequestThrottled", 403),
            (Kind::InvalidClientTokenId, "InvalidClientTokenId", 403),
            (Kind::SignatureDoesNotMatch, "SignatureDoesNotMatch", 403),
            (
                Kind::MissingAuthenticationToken,
                "MissingAuthenticationToken",
                403,
            ),
            (Kind::RequestExpired, "RequestExpired", 400),
            (Kind::ServiceUnavailable, "ServiceUnavailable", 503),
            (Kind::InternalFailure, "InternalFailure", 500),
        ];
        for (kind, code, status) in cases {
            assert_eq!((kind.code(), kind.status()), (code, status), "{kind:?}");
            assert_eq!(kind.sender_fault(), status < 500, "{kind:?}");
        }
        assert_eq!(
            Kind::QueueDoesNotExist.json_type(),
            "com.amazonaws.sqs#QueueDoesNotExist"
        );
        assert_eq!(
            Kind::InvalidAction.json_type(),
            "com.amazon.coral.service#UnknownOperationException"
        );
    }

    #[test]
    fn engine_errors_map_by_what_the_request_was_doing() {
        let range = || {
            api(EngineError::invalid(
                "lease_seconds",
                "must be between 0 and 43200",
            ))
        };
        let e = SqsError::from_api(range(), Doing::Attributes);
        assert_eq!(e.kind, Kind::InvalidAttributeValue);
        assert_eq!(
            e.message,
            "Invalid value for the parameter VisibilityTimeout. Reason: must be between 0 and 43200."
        );
        let e = SqsError::from_api(range(), Doing::Other);
        assert_eq!(e.kind, Kind::InvalidParameterValue);
        assert!(
            e.message.contains("parameter VisibilityTimeout"),
            "{}",
            e.message
        );
        let name = api(EngineError::invalid("name", "must be 1-80 characters"));
        assert_eq!(
            SqsError::from_api(name, Doing::Attributes).kind,
            Kind::InvalidParameterValue
        );
        let receipt = api(EngineError::invalid(
            "receipts[0]",
            "is not a receipt issued by raftq",
        ));
        assert_eq!(
            SqsError::from_api(receipt, Doing::Other).kind,
            Kind::ReceiptHandleIsInvalid
        );
        let missing = api(EngineError::QueueNotFound("q".into()));
        let e = SqsError::from_api(missing, Doing::Other);
        assert_eq!(e, SqsError::queue_does_not_exist());
        let exists = api(EngineError::QueueExists("q".into()));
        assert_eq!(
            SqsError::from_api(exists, Doing::Attributes).kind,
            Kind::QueueNameExists
        );
        let large = api(EngineError::MessageTooLarge {
            field: "body".into(),
            size: 2,
            max: 1,
        });
        let e = SqsError::from_api(large, Doing::Other);
        assert_eq!(e.kind, Kind::InvalidParameterValue);
        assert_eq!(
            e.message,
            "One or more parameters are invalid. Reason: Message must be shorter than 1 bytes."
        );
    }

    #[test]
    fn errors_sqs_has_words_for_are_said_in_them() {
        let said = |e: EngineError, doing: Doing| {
            let e = SqsError::from_api(api(e), doing);
            (e.kind, e.message)
        };
        let fifo_only = |field: &str| EngineError::invalid(field, validate::FIFO_ONLY);
        assert_eq!(
            said(fifo_only("deduplication_scope"), Doing::Attributes),
            (
                Kind::InvalidAttributeName,
                "You can specify the DeduplicationScope only when FifoQueue is set to true.".into()
            )
        );
        assert_eq!(
            said(fifo_only("content_based_deduplication"), Doing::Attributes),
            (
                Kind::InvalidAttributeName,
                "Unknown Attribute ContentBasedDeduplication.".into()
            )
        );
        assert_eq!(
            said(EngineError::QueueNotFound("q".into()), Doing::Moving),
            (
                Kind::ResourceNotFoundException,
                "The resource that you specified for the SourceArn parameter doesn't exist.".into()
            )
        );
        let destination = |rule: &str| EngineError::invalid("destination", rule);
        assert_eq!(
            said(destination(validate::NO_SUCH_DESTINATION), Doing::Moving).0,
            Kind::ResourceNotFoundException
        );
        assert_eq!(
            said(destination(validate::DESTINATION_REQUIRED), Doing::Moving),
            (
                Kind::InvalidParameterValue,
                "Source queue must be configured as a Dead Letter Queue.".into()
            )
        );
        assert_eq!(
            said(EngineError::MoveTaskRunning("h".into()), Doing::Moving).0,
            Kind::InvalidParameterValue
        );
        assert_eq!(
            said(EngineError::MoveTaskNotFound("h".into()), Doing::Moving),
            (
                Kind::ResourceNotFoundException,
                "Task does not exist.".into()
            )
        );
    }

    #[test]
    fn server_failures_and_limits_keep_their_meaning() {
        let throttled = ApiError::too_many_requests("slow down", 3);
        let e = SqsError::from_api(throttled, Doing::Other);
        assert_eq!((e.kind, e.retry_after), (Kind::RequestThrottled, Some(3)));
        let e = SqsError::from_api(ApiError::internal("disk"), Doing::Other);
        assert_eq!(e.kind, Kind::InternalFailure);
        let full = ApiError {
            code: "storage_full",
            ..ApiError::internal("storage full: no room")
        };
        let e = SqsError::from_api(full, Doing::Other);
        assert_eq!(e.kind, Kind::ServiceUnavailable);
        assert_eq!(e.message, "storage full: no room");
        let e = SqsError::from_api(ApiError::unauthenticated("who"), Doing::Other);
        assert_eq!(e.kind, Kind::InvalidClientTokenId);
    }

    #[test]
    fn fields_are_named_as_sqs_names_its_parameters() {
        assert_eq!(parameter_name("max_messages"), "MaxNumberOfMessages");
        assert_eq!(
            parameter_name("redrive_policy.max_receive_count"),
            "RedrivePolicy"
        );
        assert_eq!(parameter_name("entries[3].id"), "Entries");
        assert_eq!(parameter_name("QueueUrl"), "QueueUrl");
    }
}
