//! The classifier pool: costly models (RBF SVM) classify on their own
//! threads so a slow model can lag but never stall or drop packets (HPTRAC's
//! job ring).
//!
//! Contract: shards submit a [`Job`] (the flow's early packets, copied) with
//! a non-blocking `try_send` on a bounded channel shared by all shards — one
//! channel operation per flow, never per packet. A job that does not fit is
//! not queued; the shard retries at the flow's next packet and counts it
//! (`classify_queue_full`). Workers send each [`Done`] back on the submitting
//! shard's own channel; the shard applies verdicts at the start of each batch
//! after checking the slot still holds the same flow. Workers stop when every
//! shard has dropped its job sender and the queue is empty.

use std::sync::Arc;

use crossbeam_channel::{bounded, Receiver, Sender};

use super::{Classifier, FlowFeatures};
use crate::classify::Verdict;
use crate::features::early::{EarlyPkt, MAX_EARLY};

/// Jobs the shared queue holds.
pub const JOB_QUEUE: usize = 4096;

/// One flow to classify.
#[derive(Debug, Clone, Copy)]
pub struct Job {
    /// Submitting shard.
    pub shard: u16,
    /// Flow table slot.
    pub slot: u32,
    /// Identity of the flow in the slot (first timestamp, hash).
    pub ident: (u64, u32),
    /// Early packets (first `n` used).
    pub early: [EarlyPkt; MAX_EARLY],
    /// Early packets used.
    pub n: u8,
    /// IP protocol, client port, server port.
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
}

/// A verdict coming back to its shard.
#[derive(Debug, Clone, Copy)]
pub struct Done {
    /// Flow table slot.
    pub slot: u32,
    /// Identity of the flow the job was for.
    pub ident: (u64, u32),
    /// The verdict.
    pub verdict: Verdict,
}

/// A shard's ends of the pool's channels.
pub struct PoolLink {
    /// This shard's number.
    pub shard: u16,
    /// Shared job queue.
    pub jobs: Sender<Job>,
    /// Verdicts for this shard.
    pub done: Receiver<Done>,
}

/// Creates the channels for `shards` shards: one link per shard, and the
/// workers' ends (job receiver, per-shard verdict senders).
pub fn channels(shards: usize) -> (Vec<PoolLink>, Receiver<Job>, Vec<Sender<Done>>) {
    let (jtx, jrx) = bounded(JOB_QUEUE);
    let mut links = Vec::new();
    let mut senders = Vec::new();
    for i in 0..shards {
        let (dtx, drx) = bounded(JOB_QUEUE + 256);
        links.push(PoolLink {
            shard: i as u16,
            jobs: jtx.clone(),
            done: drx,
        });
        senders.push(dtx);
    }
    (links, jrx, senders)
}

/// A worker: classifies jobs until every shard is gone.
pub fn worker(model: Arc<dyn Classifier>, jobs: Receiver<Job>, done: Vec<Sender<Done>>) -> u64 {
    let mut n = 0;
    for j in jobs {
        let f = FlowFeatures {
            early: &j.early[..j.n as usize],
            proto: j.proto,
            sport: j.sport,
            dport: j.dport,
        };
        let verdict = model.classify(&f);
        n += 1;
        if let Some(tx) = done.get(j.shard as usize) {
            // The shard drains its verdicts every batch and before it
            // flushes; an error means it has already finished.
            let _ = tx.send(Done {
                slot: j.slot,
                ident: j.ident,
                verdict,
            });
        }
    }
    n
}
