use super::*;

fn cmd(ns: Option<&str>, argv: &[&str]) -> Cmd {
    Cmd::new(ns, argv)
}

/// `ip -n NS` and the words of `rest`, run from the root namespace.
fn ip_n(ns: &str, rest: &str) -> Cmd {
    let mut argv = vec!["ip", "-n", ns];
    argv.extend(rest.split_whitespace());
    Cmd::new(None, &argv)
}

#[test]
fn only_plain_ip_commands_in_one_namespace_are_batched() {
    let up = cmd(
        None,
        &["ip", "-n", "qb-1-r", "link", "set", "dev", "lo", "up"],
    );
    assert_eq!(batchable(&up), Some("qb-1-r"));
    for not in [
        cmd(None, &["ip", "netns", "add", "qb-1-r"]),
        cmd(None, &["ip", "-n", "qb-1-r", "netns", "list"]),
        cmd(Some("qb-1-r"), &["ip", "-n", "qb-1-r", "link", "show"]),
        cmd(None, &["tc", "-n", "qb-1-r", "qdisc", "show"]),
        cmd(
            None,
            &["ip", "-n", "qb-1-r", "link", "set", "dev", "a b", "up"],
        ),
        cmd(
            None,
            &["ip", "-n", "qb-1-r", "link", "set", "dev", "#x", "up"],
        ),
        cmd(None, &["ip", "-n", "qb-1-r"]),
    ] {
        assert_eq!(batchable(&not), None, "{not}");
    }
}

#[test]
fn the_failed_line_of_a_batch_is_read_from_ips_message() {
    let e = "Cannot find device \"qb-nx\"; Command failed -:3";
    assert_eq!(failed_line(e), Some(3));
    assert_eq!(failed_line("Command failed -:0"), None);
    assert_eq!(failed_line("Command failed -:"), None);
    assert_eq!(failed_line("RTNETLINK answers: File exists"), None);
}

/// A namespace of this test's own, deleted on drop even when the test fails.
struct Throwaway(String);

impl Drop for Throwaway {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.0])
            .stderr(Stdio::null())
            .status();
    }
}

/// Needs root, as every shaper test that builds namespaces: skipped (and said so) without it
/// on a developer's machine, failed under CI, which has it.
fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        assert!(std::env::var_os("CI").is_none(), "needs root, which CI has");
        eprintln!("skipped: needs root");
    }
    root
}

#[test]
fn a_plan_runs_as_its_commands_would_with_fewer_programs() {
    if !root() {
        return;
    }
    let name = format!("qb-exectest-{}", std::process::id());
    let ns = name.as_str();
    let guard = Throwaway(name.clone());
    let plan = [
        cmd(None, &["ip", "netns", "add", ns]),
        ip_n(ns, "link set dev lo up"),
        ip_n(ns, "link add qb-ta type veth peer name qb-tb"),
        ip_n(ns, "addr add 198.18.0.1/30 dev qb-ta"),
        cmd(Some(ns), &["sysctl", "-qw", "net.ipv4.tcp_reordering=7"]),
        cmd(
            Some(ns),
            &["sysctl", "-qw", "net.ipv4.conf.qb-ta.rp_filter=0"],
        ),
    ];
    let mut exec = Executor::default();
    exec.run_all(&plan).unwrap();
    assert_eq!(
        exec.done,
        plan.iter().map(Cmd::to_string).collect::<Vec<_>>()
    );
    assert_eq!(read_sysctl(ns, "net.ipv4.tcp_reordering").unwrap(), "7");
    assert_eq!(
        read_sysctl(ns, "net.ipv4.conf.qb-ta.rp_filter").unwrap(),
        "0"
    );
    // Set in the namespace, not in the one the test runs in.
    let here = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_reordering").unwrap();
    assert_ne!(here.trim(), "7", "the sysctl leaked out of {ns}");
    let addr = run(&cmd(
        Some(ns),
        &["ip", "-br", "addr", "show", "dev", "qb-ta"],
    ))
    .unwrap();
    assert!(addr.contains("198.18.0.1/30"), "{addr}");

    // A batch that fails names its failing command and keeps those before it as done.
    let failing = [
        ip_n(ns, "link set dev qb-tb up"),
        ip_n(ns, "link set dev qb-nx up"),
        ip_n(ns, "link set dev qb-ta up"),
    ];
    let mut exec = Executor::default();
    let err = exec.run_all(&failing).unwrap_err().to_string();
    assert!(err.contains("qb-nx"), "{err}");
    assert_eq!(exec.done, vec![failing[0].to_string()]);

    // A failing sysctl says which file, as the program would.
    let err = run(&cmd(Some(ns), &["sysctl", "-qw", "net.ipv4.no_such_key=1"]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("/proc/sys/net/ipv4/no_such_key"), "{err}");

    run(&cmd(None, &["ip", "netns", "del", ns])).unwrap();
    assert!(!std::path::Path::new(&format!("/run/netns/{ns}")).exists());
    let again = run(&cmd(None, &["ip", "netns", "del", ns])).unwrap_err();
    assert!(
        again.to_string().contains("Cannot remove namespace file"),
        "{again}"
    );
    drop(guard);
}

/// A mount of this test's own, unmounted on drop.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn deleting_a_namespace_never_unmounts_through_a_symlink() {
    if !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "qb-exectest"])
        .arg(dir.path())
        .status()
        .unwrap()
        .success();
    assert!(ok, "mount -t tmpfs");
    let mounted = Mounted(dir.path().to_path_buf());
    std::fs::write(dir.path().join("kept"), "x").unwrap();
    std::fs::create_dir_all("/run/netns").unwrap();
    let name = format!("qb-exectest-{}-link", std::process::id());
    let link = format!("/run/netns/{name}");
    std::os::unix::fs::symlink(dir.path(), &link).unwrap();
    let result = run(&cmd(None, &["ip", "netns", "del", &name]));
    let _ = std::fs::remove_file(&link);
    result.unwrap();
    assert!(
        std::fs::symlink_metadata(&link).is_err(),
        "the link is gone"
    );
    assert!(
        dir.path().join("kept").exists(),
        "the mount behind the link was left alone"
    );
    drop(mounted);
}
