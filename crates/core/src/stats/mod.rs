//! Descriptive statistics over per-run figures.

pub mod bootstrap;
pub mod cost;
pub mod effect;
pub mod metric;
pub mod noise;
pub mod nonparam;
pub mod rounds;
pub mod saturation;

use serde::{Deserialize, Serialize};

/// A p-value for a reader: two significant figures down to 0.0001 ("0.029", "0.0079"),
/// then in e-notation ("3.2e-6").
pub fn fmt_p(p: f64) -> String {
    if p >= 0.01 {
        format!("{p:.3}")
    } else if p >= 0.0001 {
        format!("{p:.4}")
    } else {
        format!("{p:.1e}")
    }
}

/// Mean, median and spread of a sample; all `None` when it is empty (never NaN in JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
            return Self {
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
        Self {
            n,
            mean: Some(mean),
            median: Some(median),
            sd,
            min: v.first().copied(),
            max: v.last().copied(),
        }
    }
}

/// Welch's unequal-variances t-test of two samples (two-sided).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Welch {
    pub t: f64,
    /// Welch-Satterthwaite degrees of freedom.
    pub df: f64,
    pub p: f64,
}

/// `None` when either sample has fewer than two values or both have zero variance.
pub fn welch(a: &[f64], b: &[f64]) -> Option<Welch> {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    let (sa, sb) = (Stats::of(a), Stats::of(b));
    let (ma, mb) = (sa.mean?, sb.mean?);
    let (va, vb) = (sa.sd?.powi(2), sb.sd?.powi(2));
    let (na, nb) = (sa.n as f64, sb.n as f64);
    let (qa, qb) = (va / na, vb / nb);
    let se2 = qa + qb;
    if se2 <= 0.0 {
        return None;
    }
    let t = (ma - mb) / se2.sqrt();
    let df = se2.powi(2) / (qa.powi(2) / (na - 1.0) + qb.powi(2) / (nb - 1.0));
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    let p = 2.0 * (1.0 - dist.cdf(t.abs()));
    Some(Welch { t, df, p })
}

/// Benjamini-Hochberg adjusted p-values (q-values), in the order given: a test is a
/// discovery at false discovery rate `q` when its adjusted value is at most `q`. Non-finite
/// p-values count as 1.
pub fn benjamini_hochberg(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let clean = |x: f64| {
        if x.is_finite() {
            x.clamp(0.0, 1.0)
        } else {
            1.0
        }
    };
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| clean(p[i]).total_cmp(&clean(p[j])));
    let mut q = vec![1.0; m];
    let mut running = 1.0_f64;
    for (rank, &i) in order.iter().enumerate().rev() {
        running = running.min(clean(p[i]) * m as f64 / (rank + 1) as f64);
        q[i] = running;
    }
    q
}

/// What false discovery rate control at `level` says of each test: its q-value, and whether
/// it is a discovery (q <= level). Tests without a p-value (`None`) take no part and get
/// `None`.
pub fn discoveries(p: &[Option<f64>], level: f64) -> Vec<Option<(f64, bool)>> {
    let present: Vec<f64> = p.iter().flatten().copied().collect();
    let mut q = benjamini_hochberg(&present).into_iter();
    p.iter()
        .map(|x| x.and_then(|_| q.next()).map(|q| (q, q <= level)))
        .collect()
}

/// Jain's fairness index of per-flow throughputs: 1 when equal, 1/n when one flow has all.
pub fn jain(x: &[f64]) -> Option<f64> {
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    (!x.is_empty() && sq > 0.0).then(|| sum * sum / (x.len() as f64 * sq))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn welch_matches_scipy() {
        // scipy.stats.ttest_ind(a, b, equal_var=False) 1.17.1
        let a = [
            812.0, 790.5, 845.2, 801.1, 830.0, 795.7, 808.3, 822.9, 815.4, 799.8,
        ];
        let b = [
            760.2, 771.9, 748.3, 790.0, 755.5, 765.1, 780.7, 759.9, 770.3, 752.6,
        ];
        let w = welch(&a, &b).unwrap();
        assert!((w.t - 6.924_582_863_250_035).abs() < 1e-9, "{w:?}");
        assert!((w.df - 16.886_033_306_494_717).abs() < 1e-9, "{w:?}");
        assert!((w.p - 2.548_744_314_582_955e-6).abs() < 1e-12, "{w:?}");
        let c = [1.0, 2.0, 3.0, 4.0];
        let d = [1.5, 2.5, 2.0, 3.5, 4.0, 1.0];
        let w = welch(&c, &d).unwrap();
        assert!((w.t - 0.104_144_068_409_178_53).abs() < 1e-9, "{w:?}");
        assert!((w.p - 0.920_427_062_719_431_9).abs() < 1e-9, "{w:?}");
        assert!(welch(&[1.0], &b).is_none());
        assert!(welch(&[2.0, 2.0], &[2.0, 2.0]).is_none());
    }

    #[test]
    fn benjamini_hochberg_matches_scipy() {
        // scipy.stats.false_discovery_control(p) 1.17.1 (method "bh").
        let p = [0.01, 0.04, 0.03, 0.005, 0.2, 0.5, 0.045, 0.001];
        let want = [
            0.026_666_666_666_666_665,
            0.06,
            0.06,
            0.02,
            0.228_571_428_571_428_56,
            0.5,
            0.06,
            0.008,
        ];
        for (q, w) in benjamini_hochberg(&p).iter().zip(want) {
            assert!((q - w).abs() < 1e-15, "{q} != {w}");
        }
        assert!(benjamini_hochberg(&[]).is_empty());
        assert_eq!(benjamini_hochberg(&[f64::NAN, 0.5]), vec![1.0, 1.0]);
        // Cells without a p-value are left out of the count.
        let d = discoveries(&[Some(0.01), None, Some(0.04)], 0.05);
        assert_eq!(d, vec![Some((0.02, true)), None, Some((0.04, true))]);
    }

    #[test]
    fn jain_index() {
        assert_eq!(jain(&[5.0, 5.0, 5.0]), Some(1.0));
        assert!((jain(&[1.0, 0.0, 0.0, 0.0]).unwrap() - 0.25).abs() < 1e-12);
        assert!((jain(&[3.0, 1.0]).unwrap() - 0.8).abs() < 1e-12);
        assert_eq!(jain(&[]), None);
    }

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
