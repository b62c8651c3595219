//! What a run costs: a price per hour (given, or looked up in the
//! user-editable `results/instances.toml`), turned into dollars per million
//! images and the time and money of a full training run.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::Path;

/// ImageNet-1k's training set.
pub const IMAGENET_IMAGES: u64 = 1_281_167;
pub const DEFAULT_EPOCHS: u32 = 90;

pub use crate::results::price::Price;

/// One entry of `instances.toml`.
#[derive(Clone, Debug, Deserialize)]
pub struct Instance {
    pub usd_per_hour: f64,
    /// What the instance is (for people editing the list).
    #[serde(default)]
    #[allow(dead_code)]
    pub description: String,
    #[serde(default)]
    pub source: String,
    #[serde(default)]
    pub date: String,
}

#[derive(Deserialize)]
struct PriceList {
    instance: std::collections::BTreeMap<String, Instance>,
}

/// Reads a price list: `[instance.NAME]` tables with `usd_per_hour`.
pub fn read_price_list(path: &Path) -> Result<std::collections::BTreeMap<String, Instance>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read '{}'", path.display()))?;
    parse_price_list(&text).with_context(|| format!("in '{}'", path.display()))
}

pub fn parse_price_list(text: &str) -> Result<std::collections::BTreeMap<String, Instance>> {
    let list: PriceList = toml::from_str(text).map_err(|e| anyhow::anyhow!("{}", e.message()))?;
    for (name, i) in &list.instance {
        if !(i.usd_per_hour.is_finite() && i.usd_per_hour > 0.0) {
            bail!("instance '{name}': usd_per_hour must be a positive number");
        }
    }
    Ok(list.instance)
}

/// `--price-per-hour` or `--instance` (looked up in `list_path`).
pub fn resolve(
    price_per_hour: Option<f64>,
    instance: Option<&str>,
    list_path: &Path,
) -> Result<Option<Price>> {
    match (price_per_hour, instance) {
        (Some(_), Some(_)) => bail!("give --price-per-hour or --instance, not both"),
        (Some(p), None) => {
            if !(p.is_finite() && p > 0.0) {
                bail!("--price-per-hour must be a positive number of dollars, got {p}");
            }
            Ok(Some(Price {
                usd_per_hour: p,
                instance: None,
                source: "--price-per-hour".into(),
                date: String::new(),
            }))
        }
        (None, Some(name)) => {
            let list = read_price_list(list_path)?;
            let Some(i) = list.get(name) else {
                let names: Vec<&str> = list.keys().map(String::as_str).collect();
                bail!(
                    "unknown instance '{name}' in {} (known: {})",
                    list_path.display(),
                    names.join(", ")
                );
            };
            Ok(Some(Price {
                usd_per_hour: i.usd_per_hour,
                instance: Some(name.to_string()),
                source: i.source.clone(),
                date: i.date.clone(),
            }))
        }
        (None, None) => Ok(None),
    }
}

/// Dollars per million images at `images_per_sec`.
pub fn usd_per_million_images(images_per_sec: f64, usd_per_hour: f64) -> f64 {
    usd_per_hour / 3600.0 / images_per_sec * 1e6
}

/// Hours and dollars to train `epochs` passes over `dataset_images`.
pub fn training(
    images_per_sec: f64,
    usd_per_hour: f64,
    epochs: u32,
    dataset_images: u64,
) -> (f64, f64) {
    let hours = epochs as f64 * dataset_images as f64 / images_per_sec / 3600.0;
    (hours, hours * usd_per_hour)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_arithmetic() {
        // 1000 img/s at $3.60/h: 1e6 images take 1000 s = $1.
        assert!((usd_per_million_images(1000.0, 3.6) - 1.0).abs() < 1e-12);
        // 90 epochs of ImageNet at 1281.167 img/s: 90,000 s = 25 h, $75 at $3/h.
        let (h, usd) = training(1281.167, 3.0, 90, IMAGENET_IMAGES);
        assert!((h - 25.0).abs() < 1e-9, "{h}");
        assert!((usd - 75.0).abs() < 1e-9);
    }

    #[test]
    fn price_list_and_lookup() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("instances.toml");
        std::fs::write(
            &path,
            "[instance.\"gpu-x\"]\nusd_per_hour = 2.5\nsource = \"vendor page\"\ndate = \"2026-11-01\"\n",
        )
        .unwrap();
        let p = resolve(None, Some("gpu-x"), &path).unwrap().unwrap();
        assert_eq!(p.usd_per_hour, 2.5);
        assert_eq!(p.instance.as_deref(), Some("gpu-x"));
        let e = resolve(None, Some("tpu"), &path).unwrap_err().to_string();
        assert!(
            e.starts_with("unknown instance 'tpu'") && e.contains("gpu-x"),
            "{e}"
        );
        assert_eq!(
            resolve(Some(1.0), None, &path)
                .unwrap()
                .unwrap()
                .usd_per_hour,
            1.0
        );
        assert!(resolve(Some(-1.0), None, &path).is_err());
        assert!(resolve(Some(1.0), Some("gpu-x"), &path).is_err());
        assert!(parse_price_list("[instance.a]\nusd_per_hour = 0\n").is_err());
    }

    #[test]
    fn the_shipped_price_list_parses() {
        // Built in, so the packed test binary checks it on any machine.
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/results/instances.toml"
        ));
        let list = parse_price_list(text).unwrap();
        assert!(list.len() >= 4);
        assert!(list
            .values()
            .all(|i| !i.source.is_empty() && !i.date.is_empty()));
    }
}
