//! The edt backend where it cannot run (this machine's kernel has tc BPF but no sch_fq; the
//! VM tests in edt_kernel.rs run it): what it cannot do is refused by field before anything
//! is built, the program passes this kernel's verifier through tc, and `--dry-run` shows the
//! commands and what each object carries.

use crate::common;

use common::links::{edt_objects_left, ours};
use common::needs::{require, Need};
use common::qbench_plain;

#[test]
fn what_edt_cannot_carry_is_refused_by_field() {
    require!(Need::Link);
    let before = ours();
    for (link, field) in [
        ("rate=1gbit,rtt=2ms,jitter=1ms", "`up.jitter`"),
        ("rate=1gbit,down.rate=1..2gbit/1s", "`down.rate`"),
    ] {
        let out = qbench_plain(&["--objects", "1x1KB", "--backend", "edt", "--link", link]);
        assert_eq!(out.code, Some(1), "{link}: {}", out.stderr);
        let first = out.stderr.lines().next().unwrap_or("");
        assert!(
            first.starts_with("error: --link: --backend edt: link field") && first.contains(field),
            "{link}: {}",
            out.stderr
        );
    }
    let caps = qbench_shaper::probe::probe();
    if !caps.fq {
        let out = qbench_plain(&[
            "--objects",
            "1x1KB",
            "--backend",
            "edt",
            "--link",
            "rate=1gbit",
        ]);
        assert_eq!(out.code, Some(1), "{}", out.stderr);
        assert_eq!(
            out.stderr.trim(),
            "error: --link: --backend edt: this kernel has no sch_fq (CONFIG_NET_SCH_FQ)"
        );
    }
    assert_eq!(ours(), before, "namespaces left behind");
    assert!(edt_objects_left().is_empty(), "{:?}", edt_objects_left());
}

/// The probe loads the program on a veth's egress hook, so the kernel's verifier has passed
/// it; CI builds with clang, so a build that lost the program fails here.
#[test]
fn the_program_loads_through_tc_here() {
    require!(Need::Link);
    match qbench_shaper::edt::object() {
        Ok(_) => assert!(qbench_shaper::probe::probe().tc_bpf),
        Err(e) => assert!(std::env::var_os("QBENCH_REQUIRE_EDT").is_none(), "{e}"),
    }
    assert!(edt_objects_left().is_empty(), "{:?}", edt_objects_left());
}

#[test]
fn dry_run_shows_the_program_and_its_parameters() {
    require!(Need::Link);
    let out = qbench_plain(&[
        "--backend",
        "edt",
        "--link",
        "rate=10gbit,rtt=2ms,up.rate=1gbit,up.queue=5ms,loss=0.5%",
        "--dry-run",
    ]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let s = &out.stdout;
    assert!(s.starts_with("# backend: Edt"), "{s}");
    for want in [
        "tc qdisc replace dev qb-rs root handle 1: fq limit",
        "tc filter add dev qb-rs egress bpf da obj /tmp/qbench-edt-ID/edt-up.o sec tc",
        "tc filter add dev qb-rc egress bpf da obj /tmp/qbench-edt-ID/edt-down.o sec tc",
        "numgen random mod 1000000 < 5000 counter drop",
        "edt-up.o: crates/shaper/bpf/edt.bpf.c built by clang, with rate_bytes_per_s=125000000 delay_ns=1000000 queue_ns=5000000",
        "edt-down.o: crates/shaper/bpf/edt.bpf.c built by clang, with rate_bytes_per_s=1250000000 delay_ns=1000000 queue_ns=50000000",
    ] {
        assert!(s.contains(want), "no `{want}` in\n{s}");
    }
    assert!(!s.contains("tbf") && !s.contains("tuntap"), "{s}");
}
