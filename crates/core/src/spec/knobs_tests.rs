use super::*;

/// The knob's sample value, which every knob must have.
fn sample(flag: &str) -> &'static str {
    let k = knob(flag).unwrap_or_else(|| panic!("--{flag} is no knob"));
    assert!(
        !k.sample.is_empty(),
        "--{flag} has no sample value: give it one"
    );
    k.sample
}

/// A spec where `flag` means something: the samples of the knobs it needs are set.
fn start(flag: &str) -> RunSpec {
    let mut s = RunSpec::default();
    for need in knob(flag).unwrap().needs {
        let k = knob(need).unwrap_or_else(|| panic!("--{flag} needs --{need}, no knob"));
        (k.set)(&mut s, k.sample).unwrap();
    }
    s
}

#[test]
fn every_knob_is_raised_as_it_was_set() {
    for k in KNOBS {
        let mut s = start(k.flag);
        assert_eq!((k.get)(&s), None, "--{} at its default", k.flag);
        (k.set)(&mut s, sample(k.flag)).unwrap_or_else(|e| panic!("--{}: {e}", k.flag));
        assert_ne!(s, start(k.flag), "--{} changed nothing", k.flag);
        let raised = (k.get)(&s).unwrap_or_else(|| panic!("--{} is not raised", k.flag));
        assert_eq!(raised.is_empty(), k.switch, "--{}", k.flag);
        let mut again = start(k.flag);
        let value = if k.switch { "true" } else { &raised };
        (k.set)(&mut again, value).unwrap_or_else(|e| panic!("--{} {value}: {e}", k.flag));
        assert_eq!(again, s, "--{} {value}", k.flag);
    }
}

#[test]
fn every_side_knob_is_raised_and_applied_as_it_was_set() {
    for (k, side) in side_knobs() {
        let mut o = SideOverrides::default();
        assert_eq!((side.get)(&o), None, "--a.{}", k.flag);
        (side.set)(&mut o, sample(k.flag)).unwrap_or_else(|e| panic!("--a.{}: {e}", k.flag));
        let raised = (side.get)(&o).unwrap_or_else(|| panic!("--a.{} is not raised", k.flag));
        let mut again = SideOverrides::default();
        (side.set)(&mut again, &raised).unwrap();
        assert_eq!(again, o, "--a.{} {raised}", k.flag);
        // The side's value reaches the run as the common flag's would.
        let mut common = RunSpec::default();
        (k.set)(&mut common, sample(k.flag)).unwrap();
        assert_eq!(
            o.apply(&RunSpec::default(), Protocol::H3),
            common,
            "--a.{}",
            k.flag
        );
    }
}

#[test]
fn flags_and_axes_are_named_once() {
    let mut flags: Vec<&str> = KNOBS.iter().map(|k| k.flag).collect();
    flags.sort_unstable();
    flags.dedup();
    assert_eq!(flags.len(), KNOBS.len());
    let mut bases: Vec<&str> = KNOBS.iter().filter_map(|k| k.base).collect();
    let n = bases.len();
    bases.sort_unstable();
    bases.dedup();
    assert_eq!(bases.len(), n);
}

#[test]
fn values_out_of_their_bound_are_refused_with_the_range() {
    let mut s = RunSpec::default();
    for (flag, bad, want) in [
        ("connections", "0", "1 to 25000 connections"),
        ("connections", "25001", "1 to 25000 connections"),
        ("reorder-threshold", "1001", "1 to 1000 packets"),
        ("client-threads", "257", "1 to 256 threads"),
        ("streams", "0", "1 or more streams"),
        ("cwnd-cap", "0", "1 or more packets"),
    ] {
        assert_eq!((knob(flag).unwrap().set)(&mut s, bad), Err(want.into()));
    }
    assert_eq!(s, RunSpec::default());
}

proptest::proptest! {
    #[test]
    fn setting_any_text_is_a_value_or_an_error(i in 0..KNOBS.len(), v in "\\PC{0,24}") {
        let mut s = RunSpec::default();
        let _ = (KNOBS[i].set)(&mut s, &v);
        if let Some(side) = &KNOBS[i].side {
            let _ = (side.set)(&mut SideOverrides::default(), &v);
        }
    }
}
