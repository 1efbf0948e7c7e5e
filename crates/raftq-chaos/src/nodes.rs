//! The cluster as clients see it: one API client per node (node N is compose service `nodeN`),
//! leader discovery through `GET /v1/cluster`, and health waits.

use std::time::Duration;

use raftq_client::Client;
use rand::Rng;
use serde_json::Value;
use tokio::time::{sleep, Instant};

#[derive(Debug, Clone)]
pub struct Nodes {
    /// Clients for node 1, 2, 3... in order.
    pub clients: Vec<Client>,
}

impl Nodes {
    pub fn services(&self) -> Vec<String> {
        (1..=self.clients.len())
            .map(|i| format!("node{i}"))
            .collect()
    }

    pub fn client(&self, i: usize) -> &Client {
        &self.clients[i % self.clients.len()]
    }

    /// The leader's id as the first answering node reports it.
    pub async fn leader(&self) -> Option<u64> {
        for c in &self.clients {
            if let Ok(v) = c.cluster().await {
                if let Some(l) = v["leader"].as_u64() {
                    return Some(l);
                }
            }
        }
        None
    }

    pub async fn leader_service(&self) -> Option<String> {
        self.leader().await.map(|id| format!("node{id}"))
    }

    pub fn follower_service(&self, leader: Option<&str>, rng: &mut impl Rng) -> String {
        let candidates: Vec<String> = self
            .services()
            .into_iter()
            .filter(|s| Some(s.as_str()) != leader)
            .collect();
        candidates[rng.random_range(0..candidates.len())].clone()
    }

    /// Every node's `/v1/cluster` answer (`Value::Null` for a node that did not answer).
    pub async fn cluster_views(&self) -> Vec<Value> {
        let mut views = Vec::new();
        for c in &self.clients {
            views.push(c.cluster().await.unwrap_or(Value::Null));
        }
        views
    }

    /// Waits (up to `limit`) until every node answers and all name the same leader.
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
