use proptest::prelude::*;

use super::*;

fn cpuinfo(vendor: &str, family: &str, flags: &str) -> String {
    format!(
        "processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: 17\n\
         flags\t\t: {flags}\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n\
         flags\t\t: fpu\n"
    )
}

fn zen4() -> Cpu {
    parse_cpuinfo(&cpuinfo("AuthenticAMD", "25", "fpu sse2 avx2 erms fsrm")).unwrap()
}

#[test]
fn reads_the_first_cpu() {
    assert_eq!(
        zen4(),
        Cpu {
            vendor: "AuthenticAMD".into(),
            erms: true
        }
    );
    let no_erms = parse_cpuinfo(&cpuinfo("AuthenticAMD", "25", "fpu ermsx fsrm")).unwrap();
    assert!(!no_erms.erms, "only the whole flag counts");
}

#[test]
fn names_what_is_missing_or_wrong() {
    assert_eq!(
        parse_cpuinfo("processor : 0\nvendor_id : AuthenticAMD\ncpu family : 25\n"),
        Err(CpuInfoError::Missing("flags"))
    );
    // The family is not read: a kernel that words it otherwise changes nothing.
    assert_eq!(
        parse_cpuinfo(&cpuinfo("AuthenticAMD", "0x19", "erms")).map(|c| c.erms),
        Ok(true)
    );
    // Only the first block is the first CPU.
    assert_eq!(
        parse_cpuinfo("processor : 0\n\nvendor_id : AuthenticAMD\ncpu family : 25\nflags : erms\n"),
        Err(CpuInfoError::Missing("vendor_id"))
    );
}

#[test]
fn only_amd_with_erms_slows_down() {
    assert!(zen4().slows_on_page_aliasing());
    let zen5 = parse_cpuinfo(&cpuinfo("AuthenticAMD", "26", "erms")).unwrap();
    assert!(zen5.slows_on_page_aliasing());
    for (vendor, family, flags) in [
        ("AuthenticAMD", "25", "fsrm"),
        ("GenuineIntel", "6", "erms fsrm"),
        ("HygonGenuine", "24", "erms"),
    ] {
        let cpu = parse_cpuinfo(&cpuinfo(vendor, family, flags)).unwrap();
        assert!(!cpu.slows_on_page_aliasing(), "{cpu:?}");
    }
}

#[test]
fn finds_the_threshold_among_other_tunables() {
    assert_eq!(
        tunable_in("glibc.cpu.x86_rep_movsb_threshold=4096"),
        Some("4096")
    );
    assert_eq!(
        tunable_in("glibc.malloc.tcache_count=0:glibc.cpu.x86_rep_movsb_threshold=0x800"),
        Some("0x800")
    );
    assert_eq!(tunable_in("glibc.cpu.x86_rep_stosb_threshold=1"), None);
    assert_eq!(tunable_in(""), None);
}

#[test]
fn raising_keeps_the_users_other_tunables() {
    assert_eq!(
        with_raised(None),
        "glibc.cpu.x86_rep_movsb_threshold=0x1000000"
    );
    assert_eq!(with_raised(Some("")), with_raised(None));
    let kept = with_raised(Some("glibc.malloc.tcache_count=0"));
    assert_eq!(
        kept,
        "glibc.malloc.tcache_count=0:glibc.cpu.x86_rep_movsb_threshold=0x1000000"
    );
    assert_eq!(tunable_in(&kept), Some(RAISED_TO));
}

#[test]
fn restarts_only_an_affected_cpu_left_to_glibc() {
    let cpu = zen4();
    assert_eq!(
        decide(Some(&cpu), None, Choice::Raise),
        Start::Restart(with_raised(None))
    );
    assert_eq!(
        decide(
            Some(&cpu),
            Some("glibc.cpu.x86_rep_movsb_threshold=1234"),
            Choice::Raise
        ),
        Start::Stay(State::User("1234".into()))
    );
    assert_eq!(
        decide(Some(&cpu), None, Choice::Keep),
        Start::Stay(State::Kept)
    );
    assert_eq!(
        decide(None, None, Choice::Raise),
        Start::Stay(State::Default)
    );
    let intel = parse_cpuinfo(&cpuinfo("GenuineIntel", "6", "erms fsrm")).unwrap();
    assert_eq!(
        decide(Some(&intel), None, Choice::Raise),
        Start::Stay(State::Default)
    );
}

#[test]
fn the_variable_says_keep_or_raise_or_nothing() {
    use std::ffi::OsStr;
    assert_eq!(parse_choice(None), Ok(Choice::Raise));
    assert_eq!(parse_choice(Some(OsStr::new(""))), Ok(Choice::Raise));
    assert_eq!(parse_choice(Some(OsStr::new("raise"))), Ok(Choice::Raise));
    assert_eq!(parse_choice(Some(OsStr::new("keep"))), Ok(Choice::Keep));
    let bad = parse_choice(Some(OsStr::new("Keep")))
        .unwrap_err()
        .to_string();
    assert_eq!(
        bad,
        "QBENCH_REP_MOVSB: `Keep` is neither `keep` nor `raise`"
    );
}

#[test]
fn the_report_says_who_set_the_threshold() {
    assert_eq!(State::Default.describe(), None);
    assert!(State::Raised
        .describe()
        .unwrap()
        .contains("raised by qbench"));
    assert!(State::User("0x800".into())
        .describe()
        .unwrap()
        .starts_with("0x800, from GLIBC_TUNABLES"));
    assert!(State::Kept.describe().unwrap().contains(KEEP_VAR));
}

proptest! {
    #[test]
    fn cpuinfo_is_a_value_or_an_error(text in ".{0,400}") {
        let _ = parse_cpuinfo(&text);
    }

    #[test]
    fn cpuinfo_lines_in_any_order(family in 0u32..1000, erms in any::<bool>(), flip in any::<bool>()) {
        let flags = if erms { "sse erms avx" } else { "sse avx" };
        let text = if flip {
            format!("flags : {flags}\ncpu family : {family}\nvendor_id : AuthenticAMD\n")
        } else {
            format!("vendor_id : AuthenticAMD\ncpu family : {family}\nflags : {flags}\n")
        };
        let cpu = parse_cpuinfo(&text).unwrap();
        prop_assert_eq!(cpu.erms, erms);
        prop_assert_eq!(cpu.slows_on_page_aliasing(), erms);
    }

    #[test]
    fn tunables_are_a_value_or_none(text in "[a-z._=:0-9x]{0,120}") {
        if let Some(v) = tunable_in(&text) {
            let needle = format!("{TUNABLE}={v}");
            prop_assert!(text.contains(&needle));
        }
        let raised = with_raised(Some(&text));
        prop_assert!(tunable_in(&raised).is_some());
    }

    #[test]
    fn the_variable_is_a_choice_or_an_error(text in ".{0,60}") {
        match parse_choice(Some(std::ffi::OsStr::new(&text))) {
            Ok(Choice::Keep) => prop_assert_eq!(text.as_str(), "keep"),
            Ok(Choice::Raise) => prop_assert!(text.is_empty() || text == "raise"),
            Err(e) => prop_assert!(e.to_string().starts_with(KEEP_VAR)),
        }
    }
}
