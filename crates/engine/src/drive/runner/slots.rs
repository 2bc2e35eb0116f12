//! The run's connection slots: what the run's end is for each, and what each saw, with the
//! connections opened in its place, recorded after the run.

use std::sync::{Arc, Mutex};

use qbench_core::recorder::ConnId;
use qbench_core::Recorder;

use super::Open;
use crate::drive::lock;
use crate::drive::until::Until;
use crate::transport::reopen::Reopens;
use crate::transport::Conn;
use crate::transport::RunEnd;

/// A slot that must reopen its connection during the run stops trying at `until`'s end;
/// `held`: the run is held for a time, so its failed attempts are paced.
pub(super) fn serves_until(c: &Arc<dyn Conn>, until: &Until, held: bool) {
    if let Some(slot) = c.as_slot() {
        slot.serve_until(Some(Arc::new(until.clone()) as Arc<dyn RunEnd>), held);
    }
}

/// Each connection's stream figures, after those of the connections it was reopened as.
pub(super) async fn record_streams(rec: &Mutex<Recorder>, conns: &Open, ids: Vec<ConnId>) {
    for ((c, _), id) in conns.iter().zip(ids) {
        let id = record_reopens(rec, id, c.reopens()).await;
        let facts = c.streams();
        let mut r = lock(rec);
        r.streams(id, facts.peer_limit, facts.peak);
        r.quic(id, facts.quic);
    }
}

/// Records the connections opened in place of connection `id` during the run, each with
/// what the one before it saw of streams; returns the id of the one open now.
async fn record_reopens(rec: &Mutex<Recorder>, mut id: ConnId, reopens: Reopens) -> ConnId {
    lock(rec).retried(reopens.retried);
    for r in reopens.opened {
        match r.outcome {
            Ok(new) => {
                // Settled by now: the connection has carried requests since.
                let info = match new.zero_rtt {
                    Some(accepted) => accepted.await,
                    None => new.info,
                };
                let mut rec = lock(rec);
                rec.streams(id, new.previous.peer_limit, new.previous.peak);
                rec.quic(id, new.previous.quic);
                id = rec.connection_reopened(r.started);
                rec.handshake_done(id, new.done, info);
            }
            Err(e) => {
                let mut rec = lock(rec);
                let failed = rec.connection_reopened(r.started);
                rec.connection_failed(failed, e.kind, &e.message);
            }
        }
    }
    id
}
