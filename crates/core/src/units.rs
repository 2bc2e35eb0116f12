//! Sizes and rates with explicit, unambiguous units.
//!
//! Sizes: `KB`/`MB`/`GB`/`TB` are decimal (1 KB = 1000 B); `KiB`/`MiB`/`GiB`/`TiB` are binary.
//! Lower-case `b` means bits in network notation, so `5kb` or `5Mb` is rejected instead of guessed.
//! Rates are bits per second with SI prefixes, written the way `tc` writes them: `100mbit`, `10gbit`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("empty value")]
    Empty,
    #[error("`{0}` does not start with a number")]
    NoNumber(String),
    #[error(
        "unknown size unit `{unit}` in `{input}` (use B, KB, MB, GB, TB or KiB, MiB, GiB, TiB)"
    )]
    SizeUnit { input: String, unit: String },
    #[error(
        "unknown rate unit `{unit}` in `{input}` (use bit, kbit, mbit, gbit or tbit, per second)"
    )]
    RateUnit { input: String, unit: String },
    #[error("`{0}` is not a whole number of bytes")]
    Fraction(String),
    #[error("`{0}` is too large")]
    Overflow(String),
}

/// Splits `1.5MB` into (`1.5`, `MB`).
fn split_number(input: &str) -> Result<(f64, &str, &str), UnitError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(UnitError::Empty);
    }
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    let digits: String = num.chars().filter(|&c| c != '_').collect();
    if digits.is_empty() || digits.starts_with('.') && digits.len() == 1 {
        return Err(UnitError::NoNumber(input.to_string()));
    }
    let value: f64 = digits
        .parse()
        .map_err(|_| UnitError::NoNumber(input.to_string()))?;
    Ok((value, num, unit.trim()))
}

fn scale(input: &str, num_text: &str, value: f64, mult: u64) -> Result<u64, UnitError> {
    if !num_text.contains('.') {
        // Integer path keeps full u64 precision.
        let n: u64 = num_text
            .replace('_', "")
            .parse()
            .map_err(|_| UnitError::Overflow(input.to_string()))?;
        return n
            .checked_mul(mult)
            .ok_or_else(|| UnitError::Overflow(input.to_string()));
    }
    let v = value * mult as f64;
    if v > u64::MAX as f64 {
        return Err(UnitError::Overflow(input.to_string()));
    }
    if v.fract() != 0.0 {
        return Err(UnitError::Fraction(input.to_string()));
    }
    Ok(v as u64)
}

/// A number of bytes.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub const fn bytes(self) -> u64 {
        self.0
    }
}

impl FromStr for ByteSize {
    type Err = UnitError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let (value, num, unit) = split_number(input)?;
        let mult: u64 = match unit {
            "" | "B" => 1,
            "KB" | "kB" => 1_000,
            "MB" => 1_000_000,
            "GB" => 1_000_000_000,
            "TB" => 1_000_000_000_000,
            "KiB" => 1 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            "TiB" => 1 << 40,
            _ => {
                return Err(UnitError::SizeUnit {
                    input: input.to_string(),
                    unit: unit.to_string(),
                })
            }
        };
        scale(input, num, value, mult).map(ByteSize)
    }
}

impl fmt::Display for ByteSize {
    /// Shortest exact decimal form, so `parse(display(x)) == x`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 4] = [
            (1_000_000_000_000, "TB"),
            (1_000_000_000, "GB"),
            (1_000_000, "MB"),
            (1_000, "KB"),
        ];
        for (mult, name) in UNITS {
            if self.0 >= mult && self.0.is_multiple_of(mult) {
                return write!(f, "{}{}", self.0 / mult, name);
            }
        }
        write!(f, "{}B", self.0)
    }
}

/// A rate in bits per second.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct Rate(pub u64);

impl Rate {
    pub const fn bits_per_sec(self) -> u64 {
        self.0
    }
}

impl FromStr for Rate {
    type Err = UnitError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let (value, num, unit) = split_number(input)?;
        let lower = unit.to_ascii_lowercase();
        let base = lower.strip_suffix("/s").unwrap_or(&lower);
        let mult: u64 = match base {
            "bit" => 1,
            "kbit" => 1_000,
            "mbit" => 1_000_000,
            "gbit" => 1_000_000_000,
            "tbit" => 1_000_000_000_000,
            _ => {
                return Err(UnitError::RateUnit {
                    input: input.to_string(),
                    unit: unit.to_string(),
                })
            }
        };
        let v = value * mult as f64;
        if v > u64::MAX as f64 {
            return Err(UnitError::Overflow(input.to_string()));
        }
        let _ = num;
        Ok(Self(v.round() as u64))
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0 as f64;
        if b >= 1e9 {
            write!(f, "{:.2} Gbit/s", b / 1e9)
        } else if b >= 1e6 {
            write!(f, "{:.2} Mbit/s", b / 1e6)
        } else if b >= 1e3 {
            write!(f, "{:.2} kbit/s", b / 1e3)
        } else {
            write!(f, "{} bit/s", self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sizes_are_decimal_or_binary_as_written() {
        assert_eq!("5KB".parse::<ByteSize>().unwrap().0, 5_000);
        assert_eq!("5kB".parse::<ByteSize>().unwrap().0, 5_000);
        assert_eq!("5KiB".parse::<ByteSize>().unwrap().0, 5_120);
        assert_eq!("210MB".parse::<ByteSize>().unwrap().0, 210_000_000);
        assert_eq!("1GiB".parse::<ByteSize>().unwrap().0, 1 << 30);
        assert_eq!("1.5MB".parse::<ByteSize>().unwrap().0, 1_500_000);
        assert_eq!("1234".parse::<ByteSize>().unwrap().0, 1234);
        assert_eq!("0".parse::<ByteSize>().unwrap().0, 0);
        assert_eq!("1_000B".parse::<ByteSize>().unwrap().0, 1000);
    }

    #[test]
    fn ambiguous_or_bad_sizes_are_rejected() {
        for bad in [
            "5kb",
            "5Mb",
            "5k",
            "5m",
            "x",
            "",
            "KB",
            "1.0005KB",
            "99999999999TB",
        ] {
            assert!(bad.parse::<ByteSize>().is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn rates_are_bits_per_second() {
        assert_eq!("100mbit".parse::<Rate>().unwrap().0, 100_000_000);
        assert_eq!("10gbit".parse::<Rate>().unwrap().0, 10_000_000_000);
        assert_eq!("1.5Gbit/s".parse::<Rate>().unwrap().0, 1_500_000_000);
        assert_eq!("56kbit".parse::<Rate>().unwrap().0, 56_000);
        for bad in ["100mbps", "100MB", "fast", "10m"] {
            assert!(bad.parse::<Rate>().is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn rate_display_picks_prefix() {
        assert_eq!(Rate(6_700_000_000).to_string(), "6.70 Gbit/s");
        assert_eq!(Rate(5_000_000).to_string(), "5.00 Mbit/s");
    }

    proptest! {
        #[test]
        fn size_display_round_trips(n in any::<u64>()) {
            let s = ByteSize(n).to_string();
            prop_assert_eq!(s.parse::<ByteSize>().unwrap(), ByteSize(n));
        }
    }
}
