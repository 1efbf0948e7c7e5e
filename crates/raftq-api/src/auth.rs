//! The extractors that authenticate a request by its `Authorization: Bearer <key>` header
//! against the key table ([`crate::keys`]): [`Account`] for the queue routes, [`Admin`] for
//! cluster operations, and the [`Principal`] itself for routes whose answer depends on the role.

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use crate::error::ApiError;
use crate::keys::Principal;
use crate::shared::AppState;

/// The account a request is made for; refuses the request with `401` when its key is missing
/// or unknown.
pub(crate) struct Account(pub String);

impl FromRequestParts<AppState> for Account {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = parts.headers.get(AUTHORIZATION).map(|v| v.as_bytes());
        state
            .api
            .keys
            .authenticate(header)
            .map(|p| Account(p.account))
    }
}

/// Who a request is made by; refuses it with `401` when its key is missing or unknown.
impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = parts.headers.get(AUTHORIZATION).map(|v| v.as_bytes());
        state.api.keys.authenticate(header)
    }
}

/// A request made with an admin key; refuses it with `401` when its key is missing or unknown
/// and `403` when the key is an account's.
pub(crate) struct Admin;

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = parts.headers.get(AUTHORIZATION).map(|v| v.as_bytes());
        state.api.keys.authenticate(header)?.require_admin()?;
        Ok(Admin)
    }
}
