//! Plan commands the shaper carries out itself, with the effect of the program they name: a
//! write under /proc/sys is `sysctl -qw`, an unmount and an unlink are `ip netns del`.

use std::path::PathBuf;

use super::{in_netns, ExecError};
use crate::plan::Cmd;

/// The command's outcome when it is one the shaper does in place, else `None`.
pub(super) fn try_run(cmd: &Cmd) -> Option<Result<(), ExecError>> {
    if cmd.stdin.is_some() {
        return None;
    }
    if let Some(writes) = sysctl_writes(&cmd.argv) {
        let shown = cmd.to_string();
        let write = || write_all(&writes, &shown);
        return Some(match &cmd.ns {
            Some(ns) => in_netns(ns, &shown, write),
            None => write(),
        });
    }
    if cmd.ns.is_none() {
        if let Some(name) = netns_del(&cmd.argv) {
            return Some(delete_netns(name).map_err(|stderr| ExecError::Failed {
                cmd: cmd.to_string(),
                stderr,
            }));
        }
    }
    None
}

/// Whether [`try_run`] carries `cmd` out itself.
pub(super) fn is_inplace(cmd: &Cmd) -> bool {
    cmd.stdin.is_none()
        && (sysctl_writes(&cmd.argv).is_some()
            || (cmd.ns.is_none() && netns_del(&cmd.argv).is_some()))
}

/// The file under /proc/sys that a sysctl key names, if the key is one `sysctl` reads the
/// same way (dots as separators, nothing that climbs or is absolute).
fn sysctl_path(key: &str) -> Option<PathBuf> {
    let fine = !key.is_empty()
        && !key.contains('/')
        && key
            .split('.')
            .all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_graphic()));
    fine.then(|| PathBuf::from("/proc/sys").join(key.replace('.', "/")))
}

/// `sysctl -qw KEY=VALUE...` as (file, value) pairs.
fn sysctl_writes(argv: &[String]) -> Option<Vec<(PathBuf, String)>> {
    let [program, flags, settings @ ..] = argv else {
        return None;
    };
    if program != "sysctl" || flags != "-qw" || settings.is_empty() {
        return None;
    }
    settings
        .iter()
        .map(|s| {
            let (key, value) = s.split_once('=')?;
            Some((sysctl_path(key)?, value.to_string()))
        })
        .collect()
}

fn write_all(writes: &[(PathBuf, String)], shown: &str) -> Result<(), ExecError> {
    for (path, value) in writes {
        std::fs::write(path, format!("{value}\n")).map_err(|e| ExecError::Failed {
            cmd: shown.to_string(),
            stderr: format!("setting {}: {e}", path.display()),
        })?;
    }
    Ok(())
}

/// A sysctl's value as `ip netns exec NS sysctl -n KEY` prints it, read inside `ns`.
pub fn read_sysctl(ns: &str, key: &str) -> Result<String, ExecError> {
    let shown = format!("ip netns exec {ns} sysctl -n {key}");
    let path = sysctl_path(key).ok_or_else(|| ExecError::Failed {
        cmd: shown.clone(),
        stderr: "not a sysctl key".into(),
    })?;
    in_netns(ns, &shown, || {
        std::fs::read_to_string(&path)
            .map(|v| v.trim().to_string())
            .map_err(|e| ExecError::Failed {
                cmd: shown.clone(),
                stderr: format!("reading {}: {e}", path.display()),
            })
    })
}

/// The name in `ip netns del NAME`, when it is a plain file name under /run/netns.
fn netns_del(argv: &[String]) -> Option<&str> {
    let [ip, netns, del, name] = argv else {
        return None;
    };
    let plain = !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0']);
    (ip == "ip" && netns == "netns" && del == "del" && plain).then_some(name.as_str())
}

/// What `ip netns del` does: detach the namespace's bind mount, then remove its file.
fn delete_netns(name: &str) -> Result<(), String> {
    let path = format!("/run/netns/{name}");
    let c = std::ffi::CString::new(path.as_str()).map_err(|e| e.to_string())?;
    // SAFETY: a valid NUL-terminated path; a failure (not mounted) is what `ip` ignores too.
    // Not through a symlink: what sits in /run/netns under our name is unmounted, nothing else.
    unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH | libc::UMOUNT_NOFOLLOW) };
    std::fs::remove_file(&path).map_err(|e| format!("Cannot remove namespace file \"{path}\": {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn sysctl_writes_name_their_files() {
        let w = sysctl_writes(&argv(&[
            "sysctl",
            "-qw",
            "net.ipv4.conf.qb-tup.rp_filter=0",
            "net.ipv4.tcp_wmem=4096 65536 6710886",
        ]))
        .unwrap();
        assert_eq!(
            w,
            vec![
                (
                    PathBuf::from("/proc/sys/net/ipv4/conf/qb-tup/rp_filter"),
                    "0".to_string()
                ),
                (
                    PathBuf::from("/proc/sys/net/ipv4/tcp_wmem"),
                    "4096 65536 6710886".to_string()
                ),
            ]
        );
        // What the program would do differently, or what it would refuse, goes to the program.
        for refused in [
            &["sysctl", "-w", "a.b=1"][..],
            &["sysctl", "-qw"],
            &["sysctl", "-qw", "a.b"],
            &["sysctl", "-qw", "a/../b=1"],
            &["sysctl", "-qw", "a..b=1"],
            &["sysctl", "-qw", "=1"],
            &["sysctl", "-n", "a.b"],
        ] {
            assert_eq!(sysctl_writes(&argv(refused)), None, "{refused:?}");
        }
    }

    #[test]
    fn only_a_plain_namespace_name_is_deleted_in_place() {
        assert_eq!(
            netns_del(&argv(&["ip", "netns", "del", "qb-1-r"])),
            Some("qb-1-r")
        );
        for refused in [
            &["ip", "netns", "del", "../etc"][..],
            &["ip", "netns", "del", ".."],
            &["ip", "netns", "del", ""],
            &["ip", "netns", "del", "a", "b"],
            &["ip", "netns", "add", "a"],
            &["ip", "-all", "netns", "del"],
        ] {
            assert_eq!(netns_del(&argv(refused)), None, "{refused:?}");
        }
    }

    proptest! {
        #[test]
        fn any_argv_gives_writes_under_proc_sys_or_none(args in proptest::collection::vec(".{0,20}", 0..5)) {
            let mut a = vec!["sysctl".to_string(), "-qw".to_string()];
            a.extend(args);
            if let Some(w) = sysctl_writes(&a) {
                for (path, _) in w {
                    prop_assert!(path.starts_with("/proc/sys/"));
                    prop_assert!(!path.components().any(|c| matches!(c, std::path::Component::ParentDir)));
                }
            }
        }
    }
}
