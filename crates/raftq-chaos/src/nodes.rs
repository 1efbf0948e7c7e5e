//! The cluster as clients see it: one API client per node slot (node N is compose service
//! `nodeN`), the slots that are members now, leader discovery through `GET /v1/cluster`, and
//! health waits. The workload and the faults use the members only; a spare slot (a node the
//! `grow` fault may add) is not asked anything until it is one.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use futures_util::future::join_all;
use raftq_client::Client;
use rand::Rng;
use serde_json::Value;
use tokio::time::{sleep, Instant};

/// How long a worker leaves a node alone after a request to it went unanswered.
const AVOID: Duration = Duration::from_secs(3);

/// The nodes a worker leaves alone for a while: those whose last request went unanswered (timed
/// out or refused), as a client with several endpoints moves on to another. A node that
/// answered an error, `503` included, is not avoided: the worker's next request goes to any
/// node, as an SDK retries.
#[derive(Debug, Default)]
pub struct Avoided(HashMap<u64, Instant>);

impl Avoided {
    /// Records how a request to node `id` ended.
    pub fn note(&mut self, id: u64, answered: bool) {
        if answered {
            self.0.remove(&id);
        } else {
            self.0.insert(id, Instant::now() + AVOID);
        }
    }

    fn avoids(&self, id: u64) -> bool {
        self.0.get(&id).is_some_and(|until| Instant::now() < *until)
    }
}

#[derive(Debug, Clone)]
pub struct Nodes {
    /// Clients for node 1, 2, 3... in order, members or not.
    clients: Vec<Client>,
    /// The node ids (1-based) that are members now.
    members: Arc<RwLock<BTreeSet<u64>>>,
}

/// The compose service of node `id`.
pub fn service(id: u64) -> String {
    format!("node{id}")
}

impl Nodes {
    /// Nodes `1..=clients.len()`, of which the first `members` are members.
    pub fn new(clients: Vec<Client>, members: usize) -> Nodes {
        Nodes {
            members: Arc::new(RwLock::new((1..=members as u64).collect())),
            clients,
        }
    }

    /// Every node id this run may use, members or not.
    pub fn all(&self) -> Vec<u64> {
        (1..=self.clients.len() as u64).collect()
    }

    /// The members' ids, lowest first.
    pub fn members(&self) -> Vec<u64> {
        self.members
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .copied()
            .collect()
    }

    /// Records that node `id` is (or is no longer) a member.
    pub fn set_member(&self, id: u64, member: bool) {
        let mut members = self.members.write().unwrap_or_else(PoisonError::into_inner);
        if member {
            members.insert(id);
        } else {
            members.remove(&id);
        }
    }

    /// The nodes that are not members.
    pub fn spares(&self) -> Vec<u64> {
        let members = self.members();
        self.all()
            .into_iter()
            .filter(|id| !members.contains(id))
            .collect()
    }

    pub fn services(&self) -> Vec<String> {
        self.members().into_iter().map(service).collect()
    }

    /// The client of node `id`.
    pub fn client_of(&self, id: u64) -> &Client {
        &self.clients[(id as usize).saturating_sub(1) % self.clients.len()]
    }

    /// The client of the `i`-th member (modulo their number).
    pub fn client(&self, i: usize) -> &Client {
        let members = self.members();
        self.client_of(members[i % members.len()])
    }

    /// A member chosen by `rng` among those `avoided` does not avoid (among all members when
    /// it avoids every one), and its client.
    pub fn pick(&self, avoided: &Avoided, rng: &mut impl Rng) -> (u64, &Client) {
        let members = self.members();
        let willing: Vec<u64> = members
            .iter()
            .copied()
            .filter(|id| !avoided.avoids(*id))
            .collect();
        let from = if willing.is_empty() {
            &members
        } else {
            &willing
        };
        let id = from[rng.random_range(0..from.len())];
        (id, self.client_of(id))
    }

    /// The leader's id as the first answering member reports it.
    pub async fn leader(&self) -> Option<u64> {
        for id in self.members() {
            if let Ok(v) = self.client_of(id).cluster().await {
                if let Some(l) = v["leader"].as_u64() {
                    return Some(l);
                }
            }
        }
        None
    }

    /// A member other than `leader`, chosen by `rng`.
    pub fn follower(&self, leader: Option<u64>, rng: &mut impl Rng) -> u64 {
        let candidates: Vec<u64> = self
            .members()
            .into_iter()
            .filter(|id| Some(*id) != leader)
            .collect();
        candidates[rng.random_range(0..candidates.len())]
    }

    /// Sets the members to the voters the leader reports (after a membership change whose
    /// outcome is unclear, so the run goes on with the cluster as it is).
    pub async fn sync_members(&self) {
        let Some(leader) = self.leader().await else {
            return;
        };
        let Ok(view) = self.client_of(leader).cluster().await else {
            return;
        };
        let Some(voters) = view["nodes"].as_array().map(|nodes| {
            nodes
                .iter()
                .filter(|n| n["role"] != "learner")
                .filter_map(|n| n["id"].as_u64())
                .collect::<BTreeSet<u64>>()
        }) else {
            return;
        };
        if !voters.is_empty() {
            *self.members.write().unwrap_or_else(PoisonError::into_inner) = voters;
        }
    }

    /// Waits (up to `limit`) until node `id` answers on its API.
    pub async fn wait_answering(&self, id: u64, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        while self.client_of(id).health().await.is_err() {
            if Instant::now() > deadline {
                return Err(format!("node {id} did not answer within {limit:?}"));
            }
            sleep(Duration::from_millis(250)).await;
        }
        Ok(())
    }

    /// Every member's `/v1/cluster` answer (`Value::Null` for a node that did not answer).
    pub async fn cluster_views(&self) -> Vec<Value> {
        let mut views = Vec::new();
        for id in self.members() {
            views.push(self.client_of(id).cluster().await.unwrap_or(Value::Null));
        }
        views
    }

    /// Waits (up to `limit`) until each node of `ids` answers and names the leader that a
    /// majority of the members name; answers the nodes of `ids` that do not by then (every one
    /// of them when no leader has a majority), none when all came back.
    pub async fn wait_recovered(&self, ids: &[u64], limit: Duration) -> Vec<u64> {
        let deadline = Instant::now() + limit;
        loop {
            let members = self.members();
            let views = join_all(members.iter().map(|id| self.client_of(*id).cluster())).await;
            let leaders: Vec<(u64, Option<u64>)> = members
                .iter()
                .zip(views)
                .map(|(id, view)| (*id, view.ok().and_then(|v| v["leader"].as_u64())))
                .collect();
            let behind = not_following(&leaders, ids);
            if behind.is_empty() || Instant::now() >= deadline {
                return behind;
            }
            sleep(Duration::from_millis(250)).await;
        }
    }

    /// Waits (up to `limit`) until every member answers and all name the same leader.
    pub async fn wait_healthy(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            let views = self.cluster_views().await;
            let leaders: Vec<Option<u64>> = views.iter().map(|v| v["leader"].as_u64()).collect();
            if leaders.iter().all(|l| l.is_some() && *l == leaders[0]) {
                return true;
            }
            sleep(Duration::from_millis(250)).await;
        }
        false
    }
}

/// The nodes of `ids` that do not name the leader a majority of the members name, given each
/// member's id and the leader it names (`None`: it did not answer, or knows no leader). With no
/// such leader, all of `ids`: the cluster itself is not back.
fn not_following(leaders: &[(u64, Option<u64>)], ids: &[u64]) -> Vec<u64> {
    let mut counts: HashMap<u64, usize> = HashMap::new();
    for leader in leaders.iter().filter_map(|(_, l)| *l) {
        *counts.entry(leader).or_default() += 1;
    }
    let majority = counts
        .into_iter()
        .find(|(_, n)| *n > leaders.len() / 2)
        .map(|(leader, _)| leader);
    ids.iter()
        .copied()
        .filter(|id| {
            majority.is_none()
                || !leaders
                    .iter()
                    .any(|(member, leader)| member == id && *leader == majority)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_back_when_it_follows_the_majority_s_leader() {
        let all_back = [(1, Some(2)), (2, Some(2)), (3, Some(2))];
        assert!(not_following(&all_back, &[1, 2, 3]).is_empty());
        let silent = [(1, Some(2)), (2, Some(2)), (3, None)];
        assert_eq!(not_following(&silent, &[3]), [3]);
        assert!(not_following(&silent, &[1]).is_empty());
        let elsewhere = [(1, Some(2)), (2, Some(2)), (3, Some(3))];
        assert_eq!(not_following(&elsewhere, &[1, 3]), [3]);
    }

    #[test]
    fn without_a_majority_leader_no_node_is_back() {
        let split = [(1, Some(1)), (2, None), (3, Some(3))];
        assert_eq!(not_following(&split, &[1, 2, 3]), [1, 2, 3]);
        let none = [(1, None), (2, None), (3, None)];
        assert_eq!(not_following(&none, &[2]), [2]);
        // A node that is not a member is not back either.
        let back = [(1, Some(1)), (2, Some(1)), (3, Some(1))];
        assert_eq!(not_following(&back, &[4]), [4]);
    }
}
