//! Cluster and operations routes: `GET /v1/cluster` (leader, members and roles, term, commit
//! index), `POST /v1/cluster/nodes` and `DELETE /v1/cluster/nodes/{id}` (membership changes, for
//! admin keys), `GET /v1/cluster/state` (this node's applied index and a digest of its persisted state,
//! to compare nodes), `GET /healthz` (liveness, no key needed), `GET /metrics` (Prometheus text, no key
//! needed) and `GET /v1/openapi.json` (this API's OpenAPI document, no key needed).

use std::sync::LazyLock;

use axum::extract::{Path, State};
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::openapi::OpenApi;
use utoipa::ToSchema;

use raftq_node::{Change, NodeError};

use crate::auth::{Account, Admin};
use crate::error::ApiError;
use crate::input::JsonBody;
use crate::keys::Principal;
use crate::metrics::{Filesystem, Reading};
use crate::openapi;
use crate::shared::AppState;
use crate::status;

/// What `GET /v1/cluster/state` answers.
#[derive(Serialize, ToSchema)]
pub struct NodeState {
    /// The node answering.
    node_id: u64,
    /// The last log index this node applied; `null` before the first.
    #[schema(required = true)]
    applied_index: Option<u64>,
    /// The hex SHA-256 of this node's replicated state.
    state_digest: String,
    /// The same of every Raft group this node holds a replica of, group 1 first (group 1's is
    /// the node's own above).
    groups: Vec<GroupState>,
}

/// A node's replica of one Raft group, in `GET /v1/cluster/state`.
#[derive(Serialize, ToSchema)]
pub struct GroupState {
    group: u32,
    /// The last log index of the group this replica applied; `null` before the first.
    #[schema(required = true)]
    applied_index: Option<u64>,
    /// The hex SHA-256 of this replica's state.
    state_digest: String,
    /// The messages in the group's outbox on this replica: on their way to queues of other
    /// groups (dead-lettered, or moved by a task).
    outbox: usize,
}

/// What `GET /healthz` answers.
#[derive(Serialize, ToSchema)]
pub struct Health {
    /// `ok`.
    status: &'static str,
    /// The node answering.
    node_id: u64,
}

/// Cluster status
///
/// The leader, the members and their roles, the term and the commit index, as the answering
/// node sees them.
#[utoipa::path(
    get,
    path = "/v1/cluster",
    operation_id = "GetCluster",
    tag = "cluster",
    responses(
        (status = 200, description = "The cluster", body = status::RaftStatus),
        Account,
    )
)]
pub async fn show(State(state): State<AppState>, principal: Principal) -> Response {
    let status = status::of(&state.api.node, &state.api.region).await;
    Json(status.shown_to(&principal)).into_response()
}

/// A node to add.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"id": 4, "raft_addr": "node4:7000"}))]
pub struct AddNode {
    /// The new node's id, unused by any member.
    id: u64,
    /// The new node's peer (Raft) address, `HOST:PORT`; a raftq node must answer there.
    raft_addr: String,
}

/// Add a node
///
/// Adds the node as a learner, waits (at most two minutes) until it has caught up with the log,
/// then makes it a voter; answers once that change committed. Start the new node first with
/// `raftq serve --join`. One change runs at a time. In a cluster of several Raft groups, the
/// data groups' replicas then move onto the node in the background.
#[utoipa::path(
    post,
    path = "/v1/cluster/nodes",
    operation_id = "AddNode",
    tag = "cluster",
    request_body = AddNode,
    responses(
        (status = 200, description = "The cluster with the node added", body = status::RaftStatus),
        (status = 409, description = "`membership_conflict`: the id is already a voter, the node belongs to another cluster, another change is running, or the node did not catch up; nothing changed", body = openapi::ErrorBody),
        Admin,
        JsonBody,
        openapi::Replicated,
    )
)]
pub async fn add_node(
    State(state): State<AppState>,
    _admin: Admin,
    JsonBody(body): JsonBody<AddNode>,
) -> Result<Response, ApiError> {
    let AddNode { id, raft_addr } = body;
    let cluster = state
        .change_membership(Change::Add { id, raft_addr })
        .await?;
    Ok(Json(cluster).into_response())
}

/// Remove a node
///
/// Removes a voter or a learner; answers once the change committed. A leader that removes
/// itself first hands its leadership to the most caught-up remaining voter. Refused when it
/// would remove the last voter or leave fewer remaining voters answering than a majority. In a
/// cluster of several Raft groups, the node's replicas of the data groups first move to the
/// other nodes (at most three minutes; a timeout otherwise, and the moves go on).
#[utoipa::path(
    delete,
    path = "/v1/cluster/nodes/{id}",
    operation_id = "RemoveNode",
    tag = "cluster",
    params(("id" = u64, Path, description = "The node to remove")),
    responses(
        (status = 200, description = "The cluster without the node", body = status::RaftStatus),
        (status = 400, description = "`invalid_argument`: the id is not a number or not a member", body = openapi::ErrorBody),
        (status = 409, description = "`membership_conflict`: the last voter, no majority left, or another change is running; nothing changed", body = openapi::ErrorBody),
        Admin,
        openapi::Replicated,
    )
)]
pub async fn remove_node(
    State(state): State<AppState>,
    _admin: Admin,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let cluster = state
        .change_membership(Change::Remove { id: node_id(&id)? })
        .await?;
    Ok(Json(cluster).into_response())
}

/// Drain a node
///
/// A cluster of several Raft groups only: the node hands every group it leads over to another
/// member, and leads none until its drain ends (`DELETE`), though it serves on as a follower
/// (before a restart: nothing waits for an election). Answers once the node leads no group, at
/// most 5 s.
#[utoipa::path(
    post,
    path = "/v1/cluster/nodes/{id}/drain",
    operation_id = "DrainNode",
    tag = "cluster",
    params(("id" = u64, Path, description = "The node to drain")),
    responses(
        (status = 200, description = "The cluster, the node leading no group", body = status::RaftStatus),
        (status = 400, description = "`invalid_argument`: the id is not a number or not a node of the cluster", body = openapi::ErrorBody),
        (status = 501, description = "`unsupported`: a cluster of one group (stop the node with SIGTERM, which hands over first)", body = openapi::ErrorBody),
        (status = 503, description = "`unavailable`: the node still leads a group after 5 s (the drain stays), or no leader of group 1", body = openapi::ErrorBody),
        Admin,
    )
)]
pub async fn drain_node(
    State(state): State<AppState>,
    _admin: Admin,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    Ok(Json(state.drain(node_id(&id)?, true).await?).into_response())
}

/// End a node's drain
///
/// The node takes its share of the groups' leaders again.
#[utoipa::path(
    delete,
    path = "/v1/cluster/nodes/{id}/drain",
    operation_id = "UndrainNode",
    tag = "cluster",
    params(("id" = u64, Path, description = "The node drained")),
    responses(
        (status = 200, description = "The cluster", body = status::RaftStatus),
        (status = 400, description = "`invalid_argument`: the id is not a number or not a node of the cluster", body = openapi::ErrorBody),
        (status = 501, description = "`unsupported`: a cluster of one group", body = openapi::ErrorBody),
        Admin,
    )
)]
pub async fn undrain_node(
    State(state): State<AppState>,
    _admin: Admin,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    Ok(Json(state.drain(node_id(&id)?, false).await?).into_response())
}

/// A node id in a path.
fn node_id(id: &str) -> Result<u64, ApiError> {
    id.parse()
        .map_err(|_| ApiError::invalid("id", "must be a node id (a number)"))
}

/// This node's applied index and state digest
///
/// This node's own state, not forwarded: two nodes that applied the same entries answer the same
/// `applied_index` and `state_digest`; the same for each group's replicas in `groups`.
#[utoipa::path(
    get,
    path = "/v1/cluster/state",
    operation_id = "GetNodeState",
    tag = "cluster",
    responses(
        (status = 200, description = "This node's state", body = NodeState),
        (status = 500, description = "`internal`: the node cannot read its state", body = openapi::ErrorBody),
        Admin,
    )
)]
pub async fn state(State(state): State<AppState>, _admin: Admin) -> Response {
    let node = &state.api.node;
    let digests = match node.digests() {
        Ok(digests) => digests,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let groups: Vec<GroupState> = (digests.into_iter())
        .map(|replica| GroupState {
            group: replica.group.0,
            applied_index: replica.applied_index,
            state_digest: replica.state_digest,
            outbox: replica.outbox,
        })
        .collect();
    let Some(first) = groups.first() else {
        let none = NodeError::Storage("this node runs no group".into());
        return ApiError::from(none).into_response();
    };
    Json(NodeState {
        node_id: node.id(),
        applied_index: first.applied_index,
        state_digest: first.state_digest.clone(),
        groups,
    })
    .into_response()
}

/// What `GET /v1/accounts` answers.
#[derive(Serialize, ToSchema)]
pub struct Accounts {
    /// Every account that holds queues, by name.
    accounts: Vec<AccountEntry>,
}

/// An account that holds queues.
#[derive(Serialize, ToSchema)]
pub struct AccountEntry {
    account: String,
    /// How many queues it holds.
    queues: usize,
}

/// List accounts
///
/// Every account that holds queues, with how many; for admin keys.
#[utoipa::path(
    get,
    path = "/v1/accounts",
    operation_id = "ListAccounts",
    tag = "cluster",
    responses(
        (status = 200, description = "The accounts", body = Accounts),
        Admin,
        openapi::Replicated,
    )
)]
pub async fn accounts(State(state): State<AppState>, _admin: Admin) -> Result<Response, ApiError> {
    let accounts = state
        .accounts()
        .await?
        .into_iter()
        .map(|a| AccountEntry {
            account: a.account,
            queues: a.queues,
        })
        .collect();
    Ok(Json(Accounts { accounts }).into_response())
}

/// Liveness
///
/// No key needed.
#[utoipa::path(
    get,
    path = "/healthz",
    operation_id = "Healthz",
    tag = "cluster",
    security(),
    responses((status = 200, description = "The process serves", body = Health))
)]
pub async fn healthz(State(state): State<AppState>) -> Response {
    Json(Health {
        status: "ok",
        node_id: state.api.node.id(),
    })
    .into_response()
}

/// Prometheus metrics
///
/// Request counts and latencies, Raft gauges and per-queue gauges of this node, in the
/// Prometheus text format (see docs/api.md, Observability). No key needed.
#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "Metrics",
    tag = "cluster",
    security(),
    responses((status = 200, description = "Prometheus text", body = String, content_type = "text/plain; version=0.0.4; charset=utf-8"))
)]
pub async fn metrics(State(state): State<AppState>) -> Response {
    let status = status::of(&state.api.node, &state.api.region).await;
    let now = raftq_node::now_ms();
    let (queues, reclaiming, parked) = state
        .api
        .node
        .with_engine(|engine| {
            let backlog = engine.reclaim_backlog();
            (engine.queue_gauges(now), backlog, engine.parked_count())
        })
        .unwrap_or_default();
    let options = &state.api.metrics;
    let space = state.api.node.space();
    let reading = Reading {
        raft: &status,
        queues: &queues,
        reclaiming,
        parked,
        filesystem: options.data_dir.as_deref().and_then(Filesystem::of),
        log_syncs: raftq_node::log_sync_times(),
        refusing: space.refusing,
        log_room_waits: space.log_room_waits,
    };
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        state.metrics.render(&reading, options.per_queue),
    )
        .into_response()
}

/// The document, generated once.
static DOCUMENT: LazyLock<OpenApi> = LazyLock::new(super::document);

/// The OpenAPI 3.1 document of this API
///
/// No key needed.
#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    operation_id = "GetOpenApi",
    tag = "cluster",
    security(),
    responses((status = 200, description = "This document", body = Object))
)]
pub async fn openapi() -> Json<&'static OpenApi> {
    Json(&DOCUMENT)
}
