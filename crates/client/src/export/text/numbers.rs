//! How counts and rates read in text: large counts grouped by thousands (`100,000,000`), small
//! rates with the digits that keep them from reading as zero (`0.2`).

/// `n` with a comma between each group of three digits: `100000000` -> `100,000,000`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A rate (per second): whole and grouped from 10 up; below, one decimal, or two significant
/// digits under 1, so a slow but real rate (one object in 5 s) never shows as 0.
pub fn rate(v: f64) -> String {
    if !v.is_finite() || v <= 0.0 {
        return "0".into();
    }
    if v >= 10.0 {
        return count(v.round() as u64);
    }
    if v >= 1.0 {
        return format!("{v:.1}");
    }
    // Two significant digits: 0.2 -> "0.20", 0.0333 -> "0.033".
    let decimals = (1 - v.log10().floor() as i32).clamp(2, 9) as usize;
    format!("{v:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_grouped_by_thousands() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1_000), "1,000");
        assert_eq!(count(51_819), "51,819");
        assert_eq!(count(100_000_000), "100,000,000");
        assert_eq!(count(u64::MAX), "18,446,744,073,709,551,615");
    }

    #[test]
    fn small_rates_keep_their_digits_and_large_ones_are_grouped() {
        assert_eq!(rate(0.2), "0.20");
        assert_eq!(rate(0.0333), "0.033");
        assert_eq!(rate(0.004), "0.0040");
        assert_eq!(rate(2.46), "2.5");
        assert_eq!(rate(9.94), "9.9");
        assert_eq!(rate(17_220.4), "17,220");
        assert_eq!(rate(0.0), "0");
    }
}
