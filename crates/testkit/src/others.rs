//! Which `qb-` objects on the host belong to someone else: a link whose owner lock (see
//! `qbench_shaper::owner`) a live process holds that is neither this test process nor one of
//! its children. A test that looks for what it left behind leaves those out, so that another
//! suite, a CI job or a held load on the same host never fails it, and it never judges theirs.

use std::os::unix::io::AsRawFd;
use std::path::Path;

/// The pid in the owner file of link `id`, when a live process holds its lock.
pub fn live_owner(id: &str) -> Option<u32> {
    let path = Path::new(qbench_shaper::owner::DIR).join(qbench_shaper::owner::link(id));
    let file = std::fs::File::open(&path).ok()?;
    // SAFETY: flock on a descriptor this function owns; a shared lock we get is let go at once.
    let free = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } == 0;
    if free {
        unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
        return None;
    }
    // Held: the holder wrote its pid when it took the lock (an instant before, at worst).
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    Some(text.trim().parse().unwrap_or(0))
}

/// Whether `pid` is this process or a descendant of it (bounded walk up the parents).
pub fn ours(pid: u32) -> bool {
    let me = std::process::id();
    let mut at = pid;
    for _ in 0..32 {
        if at == me {
            return true;
        }
        if at <= 1 {
            return false;
        }
        match parent(at) {
            Some(p) => at = p,
            None => return false,
        }
    }
    false
}

fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid ...`: comm may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Whether namespace `ns` (`qb-ID-c|r|s`, or a chain's `qb-ID-...`) is part of a link that
/// a live process other than this test's holds.
pub fn someone_elses(ns: &str) -> bool {
    let Some(rest) = ns.strip_prefix("qb-") else {
        return false;
    };
    let id = rest.split('-').next().unwrap_or("");
    // An owner file with no readable pid (0) is someone's too: it is held.
    live_owner(id).is_some_and(|pid| pid == 0 || !ours(pid))
}

/// Whether namespace `ns` is a capability probe's throwaway one (`qbench_shaper::probe`) whose
/// prober still holds it: any qbench, even a `--dry-run` of a test that changes nothing,
/// makes one for an instant and deletes it before it lets go; one whose prober died is left
/// behind like any other.
pub fn probing(ns: &str) -> bool {
    let Some(id) = ns.strip_prefix("qb-").and_then(|r| r.split('-').next()) else {
        return false;
    };
    live_owner(id).is_some_and(|pid| pid != 0 && qbench_shaper::probe::probe_id(pid) == id)
}

/// Whether a test looking for what it left behind must leave `ns` out: someone else's link,
/// a probe's namespace while it is probing, or one gone since it was listed (its owner
/// deletes it before letting go of the lock, so it is looked for after the lock).
pub fn not_judged(ns: &str) -> bool {
    someone_elses(ns) || probing(ns) || !Path::new("/run/netns").join(ns).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_and_its_children_are_ours() {
        let _turn = crate::FORK_TURN.lock().unwrap_or_else(|e| e.into_inner());
        assert!(ours(std::process::id()));
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        assert!(ours(child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!ours(1));
    }

    /// A held link is someone else's unless its owner file names this process (or a child);
    /// one nobody holds is nobody's. The lock here is taken in this process, on a descriptor
    /// of its own, as another process's would conflict.
    #[test]
    fn a_held_link_is_someone_elses_unless_its_pid_is_ours() {
        let _turn = crate::FORK_TURN.lock().unwrap_or_else(|e| e.into_inner());
        let id = format!("t{}", std::process::id());
        let dir = Path::new(qbench_shaper::owner::DIR);
        if std::fs::create_dir_all(dir).is_err() {
            return; // not root: there is no owner directory to hold a link in
        }
        let path = dir.join(qbench_shaper::owner::link(&id));
        let ns = format!("qb-{id}-c");
        assert!(!someone_elses(&ns), "nobody holds it yet");
        let held = std::fs::File::create(&path).unwrap();
        // SAFETY: flock on a descriptor this test owns.
        assert_eq!(unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_EX) }, 0);
        assert_eq!(live_owner(&id), Some(0));
        assert!(
            someone_elses(&ns),
            "a holder that wrote no pid is not known to be ours"
        );
        std::fs::write(&path, "1\n").unwrap();
        assert!(someone_elses(&ns), "pid 1 is not ours");
        std::fs::write(&path, format!("{}\n", std::process::id())).unwrap();
        assert!(!someone_elses(&ns), "this process holds it");
        drop(held);
        assert!(live_owner(&id).is_none());
        assert!(!someone_elses(&ns));
        let _ = std::fs::remove_file(&path);
    }

    /// A probe's namespace is left out while a live process holds it under its own pid's
    /// probe id; not once the lock is let go, nor under a pid the id does not name.
    #[test]
    fn a_probe_namespace_is_left_out_only_while_its_prober_holds_it() {
        let _turn = crate::FORK_TURN.lock().unwrap_or_else(|e| e.into_inner());
        let dir = Path::new(qbench_shaper::owner::DIR);
        if std::fs::create_dir_all(dir).is_err() {
            return; // not root: there is no owner directory to hold a link in
        }
        let me = std::process::id();
        let id = qbench_shaper::probe::probe_id(me);
        let ns = format!("qb-{id}-r");
        assert!(!probing(&ns), "nobody holds it yet");
        let path = dir.join(qbench_shaper::owner::link(&id));
        let held = std::fs::File::create(&path).unwrap();
        // SAFETY: flock on a descriptor this test owns.
        assert_eq!(unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_EX) }, 0);
        std::fs::write(&path, "1\n").unwrap();
        assert!(!probing(&ns), "pid 1's probe has another id");
        std::fs::write(&path, format!("{me}\n")).unwrap();
        assert!(probing(&ns) && not_judged(&ns));
        assert!(!probing("qb-1234-r") && !probing("qbx"));
        drop(held);
        assert!(!probing(&ns), "a prober that let go left it behind");
        let _ = std::fs::remove_file(&path);
    }
}
