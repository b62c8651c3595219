//! The typed fields of records: where a record was measured, what it
//! timed, in which precision. Each serialises to the same string the JSON
//! and CSV contract has always had, and older files load unchanged.

use anyhow::{bail, Result};
use cnnbench_kernels::conv::Direction;
use cnnbench_layers::DType;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    Cpu,
    Gpu,
}

impl Device {
    pub fn name(self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Gpu => "gpu",
        }
    }

    pub fn parse(s: &str) -> Result<Device> {
        match s {
            "cpu" => Ok(Device::Cpu),
            // A peer's (PyTorch's) name for it.
            "gpu" | "cuda" => Ok(Device::Gpu),
            _ => bail!("unknown device '{s}' (cpu, gpu or cuda)"),
        }
    }
}

/// What a layer record timed: a convolution direction, a GEMM, or a
/// recurrent layer's pass (forward and backward data as a convolution's;
/// backward weights, its filter gradient).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Dir {
    #[serde(rename = "fwd")]
    Fwd,
    #[serde(rename = "bwd-data")]
    BwdData,
    #[serde(rename = "bwd-filter")]
    BwdFilter,
    #[serde(rename = "gemm")]
    Gemm,
    #[serde(rename = "bwd-weights")]
    BwdWeights,
}

impl Dir {
    pub fn name(self) -> &'static str {
        match self {
            Dir::Fwd => "fwd",
            Dir::BwdData => "bwd-data",
            Dir::BwdFilter => "bwd-filter",
            Dir::Gemm => "gemm",
            Dir::BwdWeights => "bwd-weights",
        }
    }

    pub fn parse(s: &str) -> Result<Dir> {
        [
            Dir::Fwd,
            Dir::BwdData,
            Dir::BwdFilter,
            Dir::Gemm,
            Dir::BwdWeights,
        ]
        .into_iter()
        .find(|d| d.name() == s)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "unknown direction '{s}' (fwd, bwd-data, bwd-filter, gemm or bwd-weights)"
            )
        })
    }
}

impl From<Direction> for Dir {
    fn from(d: Direction) -> Dir {
        match d {
            Direction::Fwd => Dir::Fwd,
            Direction::BwdData => Dir::BwdData,
            Direction::BwdFilter => Dir::BwdFilter,
        }
    }
}

macro_rules! display_by_name {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    )*};
}

display_by_name!(Device, Dir);

/// `#[serde(with = "dtype_name")]`: a [`DType`] as its name (`f32`, `tf32`,
/// `f16`, `bf16`).
pub mod dtype_name {
    use super::*;

    pub fn serialize<S: Serializer>(d: &DType, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(d.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<DType, D::Error> {
        let s = String::deserialize(d)?;
        DType::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_serialise_to_the_contract_strings() {
        assert_eq!(serde_json::to_string(&Device::Gpu).unwrap(), "\"gpu\"");
        assert_eq!(
            serde_json::to_string(&Dir::BwdFilter).unwrap(),
            "\"bwd-filter\""
        );
        let d: Dir = serde_json::from_str("\"bwd-data\"").unwrap();
        assert_eq!(d, Dir::BwdData);
        for d in [Dir::Fwd, Dir::BwdData, Dir::BwdFilter, Dir::Gemm] {
            assert_eq!(Dir::parse(d.name()).unwrap(), d);
            assert_eq!(serde_json::to_string(&d).unwrap(), format!("\"{d}\""));
        }
        assert!(Dir::parse("backward").is_err());
        assert!(Device::parse("tpu").is_err());
        assert!(serde_json::from_str::<Device>("\"tpu\"").is_err());
    }
}
