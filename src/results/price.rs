//! What the machine a run ran on costs: part of the run's environment,
//! which `report` turns into dollars per image and per training run.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Price {
    pub usd_per_hour: f64,
    /// The instance it was looked up as, if any, and where its price
    /// comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub date: String,
}
