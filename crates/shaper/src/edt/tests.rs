use std::time::Duration;

use proptest::prelude::*;

use super::*;

fn link(s: &str) -> LinkSpec {
    s.parse().unwrap()
}

/// The object, or `None` on a build without clang; CI sets QBENCH_REQUIRE_EDT so that a build
/// that silently lost the program fails here.
fn built() -> Option<&'static [u8]> {
    match object() {
        Ok(o) => Some(o),
        Err(e) => {
            assert!(std::env::var_os("QBENCH_REQUIRE_EDT").is_none(), "{e}");
            None
        }
    }
}

#[test]
fn patching_writes_the_parameters_once() {
    let Some(original) = built() else { return };
    let p = Params {
        rate_bytes_per_s: 125_000_000,
        delay_ns: 5_000_000,
        queue_ns: 50_000_000,
    };
    let obj = patched(&p).unwrap();
    assert_eq!(obj.len(), original.len());
    let i = obj
        .windows(8)
        .position(|w| w == MAGIC.to_le_bytes())
        .unwrap();
    let field = |k: usize| u64::from_le_bytes(obj[i + 8 * k..i + 8 * k + 8].try_into().unwrap());
    assert_eq!(
        (field(1), field(2), field(3)),
        (125_000_000, 5_000_000, 50_000_000)
    );
    let changed = obj.iter().zip(original).filter(|(a, b)| a != b).count();
    assert!(changed <= 24, "{changed} bytes changed");
}

#[test]
fn parameters_follow_the_spec() {
    let l = link("rate=1gbit,rtt=10ms,up.rate=100mbit,up.queue=1MB");
    let down = Params::of(&l.down, 1500).unwrap();
    assert_eq!(down.rate_bytes_per_s, 125_000_000);
    assert_eq!(down.delay_ns, 5_000_000);
    // The default queue: 50 ms at the rate.
    assert_eq!(down.queue_ns, 50_000_000);
    let up = Params::of(&l.up, 1500).unwrap();
    assert_eq!(up.rate_bytes_per_s, 12_500_000);
    assert_eq!(up.queue_ns, 80_000_000);
    let delay_only = Params::of(&link("rtt=40ms").up, 1500).unwrap();
    assert_eq!(
        (delay_only.rate_bytes_per_s, delay_only.delay_ns),
        (0, 20_000_000)
    );
    assert_eq!(Params::of(&link("loss=1%").up, 1500), None);
}

#[test]
fn what_edt_cannot_do_names_the_field() {
    let e = supports(&link("rate=1gbit,rtt=10ms,jitter=2ms")).unwrap_err();
    assert!(e.to_string().contains("`up.jitter`"), "{e}");
    let e = supports(&link("rate=1gbit,down.rate=10..20mbit/1s")).unwrap_err();
    assert!(e.to_string().contains("`down.rate`"), "{e}");
    assert!(supports(&link("rate=10gbit,rtt=2ms,loss=0.1%")).is_ok());
}

#[test]
fn auto_takes_edt_from_a_gigabit() {
    assert!(suits_auto(&link("rate=25gbit,rtt=2ms")));
    assert!(suits_auto(&link("rate=1gbit")));
    assert!(suits_auto(&link("rate=10mbit,down.rate=2gbit")));
    assert!(!suits_auto(&link("rate=999mbit,rtt=2ms")));
    assert!(!suits_auto(&link("rtt=2ms")));
    assert!(!suits_auto(&link("rate=10gbit,jitter=1ms")));
}

#[test]
fn commands_put_fq_under_the_program() {
    let l = link("rate=10gbit,rtt=2ms");
    let cmds = commands("r", "qb-rs", &l.up, 1500, Path::new("/x/edt-up.o"));
    let text: Vec<String> = cmds.iter().map(ToString::to_string).collect();
    assert_eq!(text.len(), 3, "{text:?}");
    assert!(text[0].contains("root handle 1: fq limit"), "{}", text[0]);
    assert!(text[0].ends_with("horizon_drop"), "{}", text[0]);
    assert!(text[1].ends_with("qb-rs clsact"), "{}", text[1]);
    assert!(
        text[2].ends_with("egress bpf da obj /x/edt-up.o sec tc"),
        "{}",
        text[2]
    );
    assert!(commands("r", "qb-rs", &link("loss=2%").up, 1500, Path::new("/x")).is_empty());
}

proptest! {
    /// Any rate, delay and queue give parameters fq and the program can hold: a horizon past
    /// the longest wait and a limit within u32.
    #[test]
    fn parameters_never_overflow(bps in 1u64..u64::MAX, delay_us in 0u64..u64::MAX / 4_000, queue in 0u64..u64::MAX) {
        let mut d = link("rate=1gbit").up;
        d.rate = Some(RateSpec::Fixed { bps: Rate(bps) });
        d.delay = Duration::from_micros(delay_us);
        d.queue = Some(qbench_core::spec::link::Queue::Bytes(qbench_core::units::ByteSize(queue)));
        let p = Params::of(&d, 1500).unwrap();
        prop_assert!(p.rate_bytes_per_s >= 1);
        prop_assert!(p.horizon_us() >= p.delay_ns.saturating_add(p.queue_ns) / 1000);
        let l = p.fq_limit(1500);
        prop_assert!((10_000..=u64::from(u32::MAX / 2)).contains(&l));
    }
}
