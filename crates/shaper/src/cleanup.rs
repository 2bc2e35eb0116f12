//! `qbench-shaper cleanup`: the `qb-` namespaces and cpu cgroups left behind by runs that died
//! (`kill -9`). An object whose owner (`crate::owner`) is alive belongs to a run still going and
//! is left alone unless forced.

use crate::netns;
use crate::owner::{self, Owner};
use crate::plan::{self, Names};

/// What `cleanup` may touch.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// Remove objects whose owner is alive too.
    pub force: bool,
    /// Only these ids (a link's `qb-ID-c|r|s`, a cgroup's `qb-ID-cpu` or
    /// `qb-ID-client`); every id when empty.
    pub ids: Vec<String>,
}

impl Scope {
    pub fn covers(&self, id: &str) -> bool {
        self.ids.is_empty() || self.ids.iter().any(|i| i == id)
    }
}

/// What `cleanup` found, by object name.
#[derive(Debug, Default)]
pub struct Cleaned {
    pub removed: Vec<String>,
    /// Left alone: a live process owns them.
    pub held: Vec<String>,
}

/// The link ids of the namespaces named like ours (`qb-<hex>-c|r|s`), each with its namespaces.
fn links() -> Vec<(String, Vec<String>)> {
    let mut by_id: Vec<(String, Vec<String>)> = Vec::new();
    for ns in netns::list() {
        if !Names::is_ours(&ns) {
            continue;
        }
        let Some((id, _)) = ns.strip_prefix("qb-").and_then(|r| r.rsplit_once('-')) else {
            continue;
        };
        match by_id.iter_mut().find(|(i, _)| i == id) {
            Some((_, v)) => v.push(ns),
            None => by_id.push((id.to_string(), vec![ns])),
        }
    }
    by_id.sort();
    by_id
}

/// Deletes the namespaces named like ours whose link has no live owner; touches nothing else.
pub fn namespaces(scope: &Scope) -> Cleaned {
    let mut out = Cleaned::default();
    for (id, mut list) in links() {
        if !scope.covers(&id) {
            continue;
        }
        list.sort();
        // Held across the deletion, so that a run starting with this id meanwhile waits its
        // turn (it finds the id taken) instead of losing its namespaces.
        let owner = Owner::claim(&owner::link(&id));
        let claimed = matches!(owner, Ok(Some(_)));
        if !claimed && !scope.force {
            out.held.extend(list);
            continue;
        }
        for ns in list {
            let del = plan::Cmd::new(None, &["ip", "netns", "del", &ns]);
            if crate::exec::run(&del).is_ok() {
                out.removed.push(ns);
            }
        }
        drop(owner);
    }
    // A run killed before its namespaces or cgroup existed leaves only its lock file.
    owner::sweep_stale(|name| {
        scope.ids.is_empty()
            || scope
                .ids
                .iter()
                .any(|id| name == owner::link(id) || name == format!("qb-{id}-cpu"))
    });
    out
}
