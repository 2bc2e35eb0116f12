use super::*;

const MOUNTINFO: &str = "\
25 30 0:23 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
26 25 0:24 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu
27 25 0:25 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
28 25 0:26 / /sys/fs/cgroup/un\\040ified rw,relatime - cgroup2 cgroup2 rw
";

#[test]
fn mounts_are_found_by_type_and_controller() {
    let m = parse_mountinfo(MOUNTINFO);
    assert_eq!(m.v1_cpu.as_deref(), Some(Path::new("/sys/fs/cgroup/cpu")));
    assert_eq!(m.v2.as_deref(), Some(Path::new("/sys/fs/cgroup/un ified")));
    let joint = "1 0 0:1 / /c rw - cgroup cgroup rw,cpu,cpuacct\n";
    assert_eq!(
        parse_mountinfo(joint).v1_cpu.as_deref(),
        Some(Path::new("/c"))
    );
    assert_eq!(
        parse_mountinfo("1 0 0:1 / /c rw - cgroup cgroup rw,cpuacct\n"),
        Mounts::default()
    );
}

#[test]
fn the_process_cgroups_of_both_versions() {
    let text = "4:memory:/x\n2:cpu,cpuacct:/user/1\n0::/init.scope\n";
    assert_eq!(
        parse_proc_cgroup(text),
        (Some("/init.scope".into()), Some("/user/1".into()))
    );
    assert_eq!(parse_proc_cgroup("1:cpuacct:/a\n"), (None, None));
    assert_eq!(under(Path::new("/m"), "/").to_str(), Some("/m"));
    assert_eq!(under(Path::new("/m"), "/a/b"), PathBuf::from("/m/a/b"));
}

#[test]
fn v2_when_it_offers_cpu_else_v1_else_an_error() {
    let both = parse_mountinfo(MOUNTINFO);
    let own = || (Some("/a".to_string()), Some("/".to_string()));
    let none = |_: &Path| None;
    let v2 = choose(&both, own(), |_| "cpuset cpu io".into(), none).unwrap();
    assert_eq!(v2.backend, CgroupBackend::CgroupV2);
    assert_eq!(v2.parent, PathBuf::from("/sys/fs/cgroup/un ified/a"));
    let v1 = choose(&both, own(), |_| "hugetlb".into(), none).unwrap();
    assert_eq!(v1.backend, CgroupBackend::CgroupV1);
    assert_eq!(v1.parent, PathBuf::from("/sys/fs/cgroup/cpu"));
    let v2_only = Mounts {
        v2: both.v2.clone(),
        v1_cpu: None,
    };
    let e = choose(&v2_only, own(), |_| "memory".into(), none)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("does not offer cpu") && e.contains("no cgroup v1"),
        "{e}"
    );
    let e = choose(&Mounts::default(), (None, None), |_| String::new(), none).unwrap_err();
    assert!(
        e.to_string().starts_with("no cgroup cpu controller here"),
        "{e}"
    );
    // Where v2 cannot hold a threaded child, v1 is taken if it is there, else the reason.
    let blocked = |_: &Path| Some("/a has processes in a child cgroup".to_string());
    let v1 = choose(&both, own(), |_| "cpu".into(), blocked).unwrap();
    assert_eq!(v1.backend, CgroupBackend::CgroupV1);
    let e = choose(&v2_only, own(), |_| "cpu".into(), blocked)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("processes in a child cgroup; run qbench from a leaf cgroup"),
        "{e}"
    );
}

#[test]
fn threaded_children_are_refused_beside_populated_children_that_are_not_threaded() {
    let root = std::env::temp_dir().join(format!("qb-cgtest-{}", std::process::id()));
    let parent = root.join("parent");
    let child = parent.join("other");
    fs::create_dir_all(&child).unwrap();
    let put = |p: PathBuf, text: &str| fs::write(p, text).unwrap();
    put(parent.join("cgroup.type"), "domain\n");
    put(child.join("cgroup.type"), "domain\n");
    put(child.join("cgroup.events"), "populated 0\nfrozen 0\n");
    assert_eq!(threaded_blocker(&parent), None);
    put(child.join("cgroup.events"), "populated 1\nfrozen 0\n");
    let why = threaded_blocker(&parent).unwrap();
    assert!(why.contains("processes in a child cgroup"), "{why}");
    put(child.join("cgroup.type"), "domain threaded\n");
    assert!(threaded_blocker(&parent).is_some());
    put(child.join("cgroup.type"), "threaded\n");
    assert_eq!(threaded_blocker(&parent), None);
    // The root cgroup (no cgroup.type) mixes both kinds.
    put(child.join("cgroup.type"), "domain\n");
    fs::remove_file(parent.join("cgroup.type")).unwrap();
    assert_eq!(threaded_blocker(&parent), None);
    assert!(has_children(&parent) && !has_children(&child));
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn only_our_names_are_ours() {
    assert!(is_ours("qb-0a1b2c3d-cpu"));
    assert_eq!(our_id("qb-0a1b2c3d-client"), Some(("0a1b2c3d", true)));
    assert!(!is_ours("qb-0a1b2c3d-client") && our_id("qb-0a1b2c3-client").is_none());
    for other in [
        "qb-0a1b2c3d-c",
        "qb-xyz-cpu",
        "user.slice",
        "qb-0a1b2c3d0-cpu",
    ] {
        assert!(!is_ours(other), "{other}");
    }
}

proptest::proptest! {
    #[test]
    fn parsers_never_panic(s in "\\PC{0,200}") {
        let _ = parse_mountinfo(&s);
        let _ = parse_proc_cgroup(&s);
        let _ = unescape(&s);
        let _ = is_ours(&s);
        let _ = our_id(&s);
    }
}
