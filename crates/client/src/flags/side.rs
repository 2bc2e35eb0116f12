//! `--a.X` and `--b.X`: what one side of `qbench compare` changes from the common flags. One
//! flag for each knob the table gives a side (`side_knobs()`), read by that knob's own parser,
//! the one a scenario's `[base.a]` goes through; its value name and possible values are the
//! common flag's (`CompareArgs` gives the common flags first). A knob given a side in the table
//! has its flags here without a line more.

use clap::builder::PossibleValuesParser;
use clap::error::ErrorKind;
use clap::{Arg, ArgMatches, Args, Command, FromArgMatches};
use qbench_core::spec::knobs::{side_knobs, Knob, SideKnob};
use qbench_core::spec::SideOverrides;

use crate::flags::values::parse_side_cpu;

/// One side's flags: `--a.X` where `SIDE` is `'a'`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Side<const SIDE: char>(pub SideOverrides);

pub type SideA = Side<'a'>;
pub type SideB = Side<'b'>;

fn id(side: char, k: &Knob) -> String {
    format!("{side}.{}", k.flag)
}

/// `v` as the side's knob reads it, and a share of a core held to this machine's cores, which
/// only the command line knows (a scenario's is checked when its run starts).
fn check(k: &'static Knob, s: &'static SideKnob, v: &str) -> Result<String, String> {
    if k.flag == "client-cpu" {
        parse_side_cpu(v)?;
    }
    (s.set)(&mut SideOverrides::default(), v)?;
    Ok(v.to_string())
}

fn side_arg(side: char, k: &'static Knob, s: &'static SideKnob, common: Option<&Arg>) -> Arg {
    let id = id(side, k);
    let mut arg = Arg::new(id.clone())
        .long(id)
        .help(format!("--{} for this side{}", k.flag, s.note));
    let values: Vec<_> = common.map_or_else(Vec::new, Arg::get_possible_values);
    if let Some(names) = common.and_then(Arg::get_value_names) {
        arg = arg.value_names(names.to_vec());
    }
    if values.is_empty() {
        arg.value_parser(move |v: &str| check(k, s, v))
    } else {
        arg.value_parser(PossibleValuesParser::new(values))
    }
}

impl<const SIDE: char> Args for Side<SIDE> {
    fn augment_args(cmd: Command) -> Command {
        side_knobs().fold(cmd, |cmd, (k, s)| {
            let common = cmd.get_arguments().find(|a| a.get_long() == Some(k.flag));
            let arg = side_arg(SIDE, k, s, common);
            cmd.arg(arg)
        })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl<const SIDE: char> FromArgMatches for Side<SIDE> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut o = SideOverrides::default();
        for (k, s) in side_knobs() {
            let id = id(SIDE, k);
            let bad =
                |e: String| clap::Error::raw(ErrorKind::ValueValidation, format!("--{id}: {e}\n"));
            if let Some(v) = m
                .try_get_one::<String>(&id)
                .map_err(|e| bad(e.to_string()))?
            {
                (s.set)(&mut o, v).map_err(bad)?;
            }
        }
        Ok(Self(o))
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<(SideA, SideB), clap::Error> {
        #[derive(Debug, clap::Parser)]
        struct Both {
            #[command(flatten)]
            a: SideA,
            #[command(flatten)]
            b: SideB,
        }
        let both = <Both as clap::Parser>::try_parse_from(
            std::iter::once("qbench").chain(args.iter().copied()),
        )?;
        Ok((both.a, both.b))
    }

    /// Every side knob of the table has its two flags, each reading its sample as the knob
    /// does: what one side sets, the other does not.
    #[test]
    fn every_side_knob_has_its_flags_read_by_the_knob() {
        for (k, s) in side_knobs() {
            let mut want = SideOverrides::default();
            (s.set)(&mut want, k.sample).unwrap();
            let flag = format!("--b.{}", k.flag);
            let (a, b) = parse(&[&flag, k.sample]).unwrap();
            assert_eq!(b.0, want, "{flag} {}", k.sample);
            assert_eq!(a.0, SideOverrides::default(), "{flag} set side A");
        }
        let e = parse(&["--a.connections", "0"]).unwrap_err().to_string();
        assert!(e.contains("1 to 25000 connections"), "{e}");
    }
}
