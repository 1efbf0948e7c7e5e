//! One request as the actions see it ([`Call`]: who makes it, and where), and what every action
//! does with it: read its request object, find the queue it names, turn raftq's errors into SQS's.

use raftq_api::ops::Shared;
use raftq_api::{ApiError, Caller};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

use crate::attributes::Reader;
use crate::error::{Doing, Kind, SqsError};
use crate::names::Names;

/// One request, as the actions see it: who makes it, and where.
pub struct Call<'a> {
    pub ops: &'a Shared,
    pub names: &'a Names,
    pub account: String,
    /// The account's number.
    pub number: String,
    pub caller: Caller,
    /// The request's path: a Query request may name its queue by being posted to its URL.
    pub path: &'a str,
}

/// The request object as the action's input type.
pub fn parse<T: DeserializeOwned>(input: Value) -> Result<T, SqsError> {
    serde_json::from_value(input)
        .map_err(|e| SqsError::new(Kind::SerializationException, e.to_string()))
}

pub fn required<'a>(value: &'a Option<String>, parameter: &str) -> Result<&'a str, SqsError> {
    value.as_deref().ok_or_else(|| SqsError::missing(parameter))
}

/// `Err(e)` of raftq as SQS's error, met while `doing`.
pub fn sqs<T>(result: Result<T, ApiError>, doing: Doing) -> Result<T, SqsError> {
    result.map_err(|e| SqsError::from_api(e, doing))
}

impl Call<'_> {
    /// The raftq reference (the name) of the queue a request names by `QueueUrl`, or by the
    /// path it was posted to.
    pub(crate) fn queue(&self, url: &Option<String>) -> Result<String, SqsError> {
        let text = match url.as_deref() {
            Some(url) => url,
            None if self.names.queue_path(self.path).is_some() => self.path,
            None => return Err(SqsError::missing("QueueUrl")),
        };
        self.names.own_queue(text, &self.number).map(str::to_string)
    }

    pub(crate) fn url(&self, name: &str) -> String {
        self.names.queue_url(&self.number, name)
    }

    pub(crate) fn reader(&self) -> Reader<'_> {
        Reader {
            names: self.names,
            account_number: &self.number,
        }
    }

    pub(crate) fn account(&self) -> String {
        self.account.clone()
    }
}

/// The request of the actions that take only a queue.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct QueueOnly {
    pub queue_url: Option<String>,
}
