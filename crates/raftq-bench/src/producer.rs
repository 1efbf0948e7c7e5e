//! Single sends over one `SendMessageStream`: the gRPC driver's senders share a stream per
//! connection, the way the peers' clients pipeline publishes over their connection. Each send
//! gets its own answer; the server answers in request order, so answers are matched to callers
//! by order.

use anyhow::{anyhow, Result};
use futures_util::stream;
use raftq_proto::v1 as pb;
use tokio::sync::{mpsc, oneshot};

use pb::queues_client::QueuesClient;
use pb::send_message_stream_result::Outcome;

use raftq_h2::H2Channel;

type Answer = oneshot::Sender<pb::SendMessageStreamResult>;

/// One open stream; clones share it. It is not reopened: once the stream ends (the connection
/// broke, the server ended it), every send fails.
#[derive(Clone)]
pub struct Producer {
    requests: mpsc::UnboundedSender<(pb::SendMessageRequest, Answer)>,
}

impl Producer {
    /// Opens a stream on `client`'s connection.
    pub async fn open(mut client: QueuesClient<H2Channel>) -> Result<Producer> {
        let (requests, mut incoming) = mpsc::unbounded_channel::<(_, Answer)>();
        // Answers waiting for their result, in request order: queued as their request leaves.
        let (waiting, mut answers) = mpsc::unbounded_channel();
        let outgoing = stream::poll_fn(move |cx| {
            incoming.poll_recv(cx).map(|next| {
                next.map(|(request, answer)| {
                    let _ = waiting.send(answer);
                    request
                })
            })
        });
        let mut results = client.send_message_stream(outgoing).await?.into_inner();
        tokio::spawn(async move {
            while let Ok(Some(result)) = results.message().await {
                let Some(answer) = answers.recv().await else {
                    return;
                };
                // A caller that gave up is no error here.
                let _ = answer.send(result);
            }
        });
        Ok(Producer { requests })
    }

    /// Sends one message and waits for its answer; a send the server refused is an error.
    pub async fn send(&self, request: pb::SendMessageRequest) -> Result<()> {
        let (answer, result) = oneshot::channel();
        self.requests
            .send((request, answer))
            .map_err(|_| anyhow!("the send stream has ended"))?;
        let result = result
            .await
            .map_err(|_| anyhow!("the send stream ended before this send was answered"))?;
        match result.outcome {
            Some(Outcome::Sent(_)) => Ok(()),
            Some(Outcome::Error(e)) => Err(anyhow!("{}: {}", e.code, e.message)),
            None => Err(anyhow!("a stream result without an outcome")),
        }
    }
}
