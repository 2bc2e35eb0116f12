//! Distribution-free statistics of two samples of per-round figures: the Mann-Whitney U test,
//! the Hodges-Lehmann shift with its confidence interval, and the median's own confidence
//! interval. None of them assumes normal timings, which heavy tails and bimodal rounds (a loss
//! burst, a retransmission timeout) are not.

use serde::{Deserialize, Serialize};
use statrs::distribution::{Binomial, ContinuousCDF, DiscreteCDF, Normal};

/// Below this many pairs (n1 x n2) the null distribution of U is counted exactly.
const EXACT_PAIRS: usize = 400;

/// The Mann-Whitney U test of two samples (two-sided), as scipy's `mannwhitneyu` computes it
/// by default: exact when a sample has at most 8 values and there are no ties, else the normal
/// approximation with tie and continuity corrections.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MannWhitney {
    /// U of the first sample (A): the number of pairs in which A's value is the larger, ties
    /// counting one half.
    pub u: f64,
    pub p: f64,
    /// Whether `p` comes from the exact distribution of U.
    pub exact: bool,
}

/// `None` when either sample is empty (non-finite values are left out).
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    let (a, b) = (finite(a), finite(b));
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    // Average ranks over runs of ties; the tie term sums t^3 - t over those runs.
    let (mut rank_a, mut tie_term, mut i) = (0.0, 0.0, 0);
    while i < all.len() {
        let j = i + all[i..].iter().take_while(|x| x.0 == all[i].0).count();
        let t = (j - i) as f64;
        let avg = (i + 1 + j) as f64 / 2.0;
        rank_a += avg * all[i..j].iter().filter(|x| x.1).count() as f64;
        tie_term += t * t * t - t;
        i = j;
    }
    let (f1, f2) = (n1 as f64, n2 as f64);
    let u1 = rank_a - f1 * (f1 + 1.0) / 2.0;
    let u = u1.max(f1 * f2 - u1);
    let exact = (n1 <= 8 || n2 <= 8) && tie_term == 0.0;
    let p = if exact {
        let counts = u_counts(n1, n2);
        let total: f64 = counts.iter().sum();
        // U is an integer without ties.
        let at_least: f64 = counts[u as usize..].iter().sum();
        2.0 * at_least / total
    } else {
        let n = f1 + f2;
        let var = f1 * f2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
        if var <= 0.0 {
            1.0
        } else {
            let z = (u - f1 * f2 / 2.0 - 0.5) / var.sqrt();
            2.0 * std_normal().sf(z)
        }
    };
    Some(MannWhitney {
        u: u1,
        p: p.clamp(0.0, 1.0),
        exact,
    })
}

/// The Hodges-Lehmann estimate of how far B lies from A (the median of all differences
/// b - a) and its distribution-free confidence interval (Moses: order statistics of those
/// differences at U's critical value).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shift {
    pub estimate: f64,
    /// `None` when the samples are too small for the level (with 2 and 2 values no interval
    /// reaches 95%).
    pub low: Option<f64>,
    pub high: Option<f64>,
}

/// `None` when either sample is empty.
pub fn hodges_lehmann(a: &[f64], b: &[f64], level: f64) -> Option<Shift> {
    let (a, b) = (finite(a), finite(b));
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let mut d: Vec<f64> = a
        .iter()
        .flat_map(|x| b.iter().map(move |y| y - x))
        .collect();
    let n = d.len();
    let estimate = if n % 2 == 1 {
        *select(&mut d, n / 2)
    } else {
        (*select(&mut d, n / 2 - 1) + *select(&mut d, n / 2)) / 2.0
    };
    let (low, high) = match critical_u(a.len(), b.len(), (1.0 - level) / 2.0) {
        Some(c) => (Some(*select(&mut d, c)), Some(*select(&mut d, n - 1 - c))),
        None => (None, None),
    };
    Some(Shift {
        estimate,
        low,
        high,
    })
}

/// The confidence interval of one sample's median from its order statistics (binomial,
/// distribution-free; Le Boudec, "Performance Evaluation of Computer and Communication
/// Systems", Theorem 2.1). `None` when the sample is too small for the level (below 6 values
/// at 95%).
pub fn median_ci(values: &[f64], level: f64) -> Option<(f64, f64)> {
    let mut v = finite(values);
    let n = v.len();
    let bin = Binomial::new(0.5, n as u64).ok()?;
    let tail = (1.0 - level) / 2.0;
    // The largest j with P(X < j) <= tail: [x(j), x(n+1-j)], 1-based.
    let j = (1..=n / 2)
        .take_while(|&j| bin.cdf(j as u64 - 1) <= tail)
        .last()?;
    v.sort_by(f64::total_cmp);
    Some((v[j - 1], v[n - j]))
}

/// The largest c with P(U <= c) <= tail under the null, or `None` when even P(U = 0) is
/// larger: the interval is then the whole line.
fn critical_u(n1: usize, n2: usize, tail: f64) -> Option<usize> {
    if n1 * n2 <= EXACT_PAIRS {
        let counts = u_counts(n1, n2);
        let total: f64 = counts.iter().sum();
        let mut cum = 0.0;
        let mut c = None;
        for (u, k) in counts.iter().enumerate() {
            cum += k;
            if cum / total > tail {
                break;
            }
            c = Some(u);
        }
        return c;
    }
    let (f1, f2) = (n1 as f64, n2 as f64);
    let z = std_normal().inverse_cdf(1.0 - tail);
    let c = f1 * f2 / 2.0 - z * (f1 * f2 * (f1 + f2 + 1.0) / 12.0).sqrt() - 0.5;
    (c >= 0.0).then(|| c.floor() as usize)
}

/// How many arrangements of n1 A's and n2 B's give each U from 0 to n1 x n2: the coefficients
/// of the Gaussian binomial [n1 + n2 choose n1] = prod (1 - q^(n2+i)) / (1 - q^i), i = 1..n1,
/// as power series cut at degree n1 x n2 (exact in integers).
fn u_counts(n1: usize, n2: usize) -> Vec<f64> {
    let deg = n1 * n2;
    let mut c = vec![0i128; deg + 1];
    c[0] = 1;
    for i in 1..=n1 {
        // Divide by (1 - q^i): c[k] += c[k - i], ascending.
        for k in i..=deg {
            c[k] += c[k - i];
        }
        // Multiply by (1 - q^(n2 + i)): c[k] -= c[k - n2 - i], descending.
        let s = n2 + i;
        for k in (s..=deg).rev() {
            c[k] -= c[k - s];
        }
    }
    c.into_iter().map(|x| x as f64).collect()
}

fn finite(v: &[f64]) -> Vec<f64> {
    v.iter().copied().filter(|x| x.is_finite()).collect()
}

/// The k-th smallest (from 0), in linear time.
fn select(v: &mut [f64], k: usize) -> &f64 {
    v.select_nth_unstable_by(k, f64::total_cmp).1
}

/// The smallest two-sided p `mann_whitney` can give for `n1` and `n2` values (sides that do
/// not overlap, no ties), without the values: any counts, in constant memory.
pub fn mann_whitney_least_p(n1: usize, n2: usize) -> Option<f64> {
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let (f1, f2) = (n1 as f64, n2 as f64);
    if n1 <= 8 || n2 <= 8 {
        // One rank order of C(n1 + n2, k) has U at its extreme: 2 / C.
        let k = n1.min(n2);
        let big = (n1 + n2) as f64;
        let c = (0..k).fold(1.0, |c, i| c * (big - i as f64) / (i as f64 + 1.0));
        return Some(2.0 / c);
    }
    let n = f1 + f2;
    let var = f1 * f2 / 12.0 * (n + 1.0);
    let z = (f1 * f2 - f1 * f2 / 2.0 - 0.5) / var.sqrt();
    Some(2.0 * std_normal().sf(z))
}

fn std_normal() -> Normal {
    Normal::new(0.0, 1.0).expect("the standard normal exists")
}

#[cfg(test)]
mod tests;
