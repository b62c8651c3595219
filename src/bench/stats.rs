//! Summary statistics of timed samples.

use serde::{Deserialize, Serialize};

/// Milliseconds: min, median, max, mean and sample standard deviation.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    #[serde(deserialize_with = "f64_or_nan")]
    pub min: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub median: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub max: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub mean: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub stddev: f64,
}

/// Reads an `f64` field that JSON may hold as `null`: serde_json writes a
/// NaN or an infinity (a check of an output left unwritten, a rate over a
/// zero time) as `null`, and the file must still load; it reads back as
/// NaN.
pub fn f64_or_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

impl Stats {
    /// `None` for an empty sample.
    pub fn of(samples: &[f64]) -> Option<Stats> {
        if samples.is_empty() {
            return None;
        }
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        Some(Stats {
            min: v[0],
            median,
            max: v[n - 1],
            mean,
            stddev: var.sqrt(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_even_and_single() {
        let s = Stats::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.min, s.median, s.max, s.mean), (1.0, 2.0, 3.0, 2.0));
        assert!((s.stddev - 1.0).abs() < 1e-12);
        assert_eq!(Stats::of(&[4.0, 1.0, 2.0, 3.0]).unwrap().median, 2.5);
        let one = Stats::of(&[5.0]).unwrap();
        assert_eq!((one.median, one.stddev), (5.0, 0.0));
        assert!(Stats::of(&[]).is_none());
    }
}
