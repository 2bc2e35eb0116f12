//! Descriptive statistics over per-run figures.

use serde::{Deserialize, Serialize};

/// Mean, median and spread of a sample; all `None` when it is empty (never NaN in JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub n: usize,
    pub mean: Option<f64>,
    pub median: Option<f64>,
    /// Sample standard deviation (n - 1); `None` below two samples.
    pub sd: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl Stats {
    pub fn of(values: &[f64]) -> Self {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n == 0 {
            return Stats {
                n,
                mean: None,
                median: None,
                sd: None,
                min: None,
                max: None,
            };
        }
        let mean = v.iter().sum::<f64>() / n as f64;
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let sd = (n > 1)
            .then(|| (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt());
        Stats {
            n,
            mean: Some(mean),
            median: Some(median),
            sd,
            min: v.first().copied(),
            max: v.last().copied(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_reference_values() {
        // numpy: mean 3.5, median 3.5, std(ddof=1) 1.8708286933869707
        let s = Stats::of(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(s.mean, Some(3.5));
        assert_eq!(s.median, Some(3.5));
        assert!((s.sd.unwrap() - 1.870_828_693_386_970_7).abs() < 1e-12);
        let odd = Stats::of(&[9.0, 1.0, 5.0]);
        assert_eq!(odd.median, Some(5.0));
        assert_eq!((odd.min, odd.max), (Some(1.0), Some(9.0)));
    }

    #[test]
    fn empty_and_single() {
        assert_eq!(Stats::of(&[]).mean, None);
        let one = Stats::of(&[2.0, f64::NAN]);
        assert_eq!((one.n, one.sd), (1, None));
    }
}
