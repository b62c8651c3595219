//! The links a projection to more GPUs sends gradients over
//! (`--interconnect INTRA[,INTER]`): a named link with its datasheet
//! bandwidth and NCCL's own latency figures, or one given as `GBps:us`.
//!
//! Latencies are those of NCCL's tuning model for the Simple protocol (the
//! one large all-reduces use): `hwLat` in src/graph/tuning.cc of NCCL
//! 2.20.3, per ring step and per tree hop, for NVLink, PCI and the network.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// One kind of link between GPUs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Link {
    /// The name it was given by (`nvlink4`), or the `GBps:us` text.
    pub name: String,
    /// Bandwidth per GPU and per direction, in GB/s (1e9 bytes a second).
    pub gbytes_per_s: f64,
    /// Latency of one step of a ring, in microseconds.
    pub latency_us: f64,
    /// Latency of one hop of a tree, in microseconds (NCCL models it far
    /// above a ring step: its Simple-protocol tree moves 256 kB chunks).
    pub tree_latency_us: f64,
    /// Where the bandwidth and the latencies come from.
    pub cite: String,
}

/// The link inside a node and the one between nodes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interconnect {
    pub intra: Link,
    pub inter: Link,
}

/// NCCL 2.20.3, src/graph/tuning.cc, `hwLat[...][Ring|Tree][Simple]`.
const NCCL: &str = "latency: NCCL 2.20.3 tuning model (src/graph/tuning.cc hwLat, Simple protocol)";

/// The assumption behind every network link's per-GPU bandwidth.
const NIC_PER_GPU: &str = "one NIC per GPU (as in a DGX H100 / DGX A100)";

/// A named link: name, GB/s per GPU per direction, ring step us, tree hop
/// us, and where the bandwidth comes from.
struct Known {
    name: &'static str,
    gbytes_per_s: f64,
    ring_us: f64,
    tree_us: f64,
    bandwidth: &'static str,
    latency: &'static str,
}

const KNOWN: &[Known] = &[
    Known {
        name: "nvlink4",
        gbytes_per_s: 450.0,
        ring_us: 3.4,
        tree_us: 28.0,
        bandwidth: "NVIDIA H100 Tensor Core GPU datasheet (SXM): NVLink 900 GB/s in both \
                    directions per GPU, 450 GB/s each way",
        latency: "NVLink row",
    },
    Known {
        name: "nvlink3",
        gbytes_per_s: 300.0,
        ring_us: 3.4,
        tree_us: 28.0,
        bandwidth: "NVIDIA A100 Tensor Core GPU datasheet (SXM): NVLink 600 GB/s in both \
                    directions per GPU, 300 GB/s each way",
        latency: "NVLink row",
    },
    Known {
        name: "pcie4",
        gbytes_per_s: 31.5,
        ring_us: 5.7,
        tree_us: 28.0,
        bandwidth: "PCI Express Base Specification 4.0: x16 at 16 GT/s per lane with \
                    128b/130b encoding, 31.5 GB/s each way",
        latency: "PCI row",
    },
    Known {
        name: "pcie5",
        gbytes_per_s: 63.0,
        ring_us: 5.7,
        tree_us: 28.0,
        bandwidth: "PCI Express Base Specification 5.0: x16 at 32 GT/s per lane with \
                    128b/130b encoding, 63.0 GB/s each way",
        latency: "PCI row",
    },
    Known {
        name: "ib-hdr",
        gbytes_per_s: 25.0,
        ring_us: 14.0,
        tree_us: 28.0,
        bandwidth: "InfiniBand HDR, 200 Gb/s per port (NVIDIA ConnectX-6; the DGX A100 has \
                    eight single-port HDR adapters for its eight GPUs): 25 GB/s each way, \
                    one NIC per GPU (as in a DGX H100 / DGX A100)",
        latency: "NET row",
    },
    Known {
        name: "ib-ndr",
        gbytes_per_s: 50.0,
        ring_us: 14.0,
        tree_us: 28.0,
        bandwidth: "InfiniBand NDR, 400 Gb/s per port (NVIDIA ConnectX-7; the DGX H100 has \
                    eight single-port NDR adapters for its eight GPUs): 50 GB/s each way, \
                    one NIC per GPU (as in a DGX H100 / DGX A100)",
        latency: "NET row",
    },
    Known {
        name: "eth100",
        gbytes_per_s: 12.5,
        ring_us: 14.0,
        tree_us: 28.0,
        bandwidth: "100 Gb/s Ethernet (IEEE 802.3): 12.5 GB/s each way, one NIC per GPU \
                    (as in a DGX H100 / DGX A100)",
        latency: "NET row, which NCCL uses for any network: RoCE or TCP sockets may be slower",
    },
];

/// The known names, for messages.
fn known_names() -> String {
    KNOWN.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
}

/// Whether the link leaves the node (its bandwidth is one NIC's).
#[cfg(test)]
pub fn is_network(link: &Link) -> bool {
    KNOWN
        .iter()
        .any(|k| k.name == link.name && k.latency.starts_with("NET"))
}

/// The assumption every network link makes, for the projection's notes.
pub fn nic_assumption() -> &'static str {
    NIC_PER_GPU
}

/// A named link (`nvlink4`, `ib-ndr`, ...; any case) or `GBps:us`, e.g.
/// `25:5`: 25 GB/s per GPU per direction and 5 us per step, used for ring
/// steps and tree hops alike.
pub fn parse(s: &str) -> Result<Link> {
    let text = s.trim();
    if let Some(k) = KNOWN.iter().find(|k| k.name.eq_ignore_ascii_case(text)) {
        return Ok(Link {
            name: k.name.to_string(),
            gbytes_per_s: k.gbytes_per_s,
            latency_us: k.ring_us,
            tree_latency_us: k.tree_us,
            cite: format!(
                "bandwidth: {}; {}, {}: {} us per ring step, {} us per tree hop",
                k.bandwidth, NCCL, k.latency, k.ring_us, k.tree_us
            ),
        });
    }
    let Some((bw, lat)) = text.split_once(':') else {
        bail!(
            "unknown interconnect {s:?}: known links are {}, or GBps:us (e.g. 25:5)",
            known_names()
        );
    };
    if bw.trim().is_empty() || lat.trim().is_empty() {
        bail!("interconnect {s:?}: GBps:us needs both a bandwidth and a latency (e.g. 25:5)");
    }
    let gbytes_per_s = positive(s, "bandwidth (GB/s)", bw)?;
    let latency_us = positive(s, "latency (us)", lat)?;
    Ok(Link {
        name: text.to_string(),
        gbytes_per_s,
        latency_us,
        tree_latency_us: latency_us,
        cite: "given on the command line (GBps:us); the latency is used for ring steps and \
               tree hops alike"
            .to_string(),
    })
}

/// `--interconnect INTRA[,INTER]`: the link inside a node and the one
/// between nodes; one link alone is used for both.
pub fn parse_pair(s: &str) -> Result<Interconnect> {
    let parts: Vec<&str> = s.split(',').collect();
    match parts[..] {
        [one] => {
            let link = parse(one)?;
            Ok(Interconnect {
                intra: link.clone(),
                inter: link,
            })
        }
        [intra, inter] => Ok(Interconnect {
            intra: parse(intra)?,
            inter: parse(inter)?,
        }),
        _ => bail!(
            "--interconnect {s:?}: give INTRA[,INTER], one link inside a node and optionally \
             one between nodes"
        ),
    }
}

/// A positive, finite number: part `what` of link `s`.
fn positive(s: &str, what: &str, text: &str) -> Result<f64> {
    let Ok(v) = text.trim().parse::<f64>() else {
        bail!("interconnect {s:?}: the {what} {text:?} is not a number");
    };
    if !(v.is_finite() && v > 0.0) {
        bail!("interconnect {s:?}: the {what} must be positive and finite, not {text}");
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(s: &str) -> String {
        parse_pair(s).unwrap_err().to_string()
    }

    #[test]
    fn named_links_have_their_figures() {
        let figures = |s: &str| {
            let l = parse(s).unwrap();
            (l.gbytes_per_s, l.latency_us, l.tree_latency_us)
        };
        assert_eq!(figures("nvlink4"), (450.0, 3.4, 28.0));
        assert_eq!(figures("NVLink3"), (300.0, 3.4, 28.0));
        assert_eq!(figures("pcie4"), (31.5, 5.7, 28.0));
        assert_eq!(figures("pcie5"), (63.0, 5.7, 28.0));
        assert_eq!(figures("ib-hdr"), (25.0, 14.0, 28.0));
        assert_eq!(figures(" ib-ndr "), (50.0, 14.0, 28.0));
        assert_eq!(figures("eth100"), (12.5, 14.0, 28.0));
        // PCIe 4.0 x16: 16 GT/s x 16 lanes x 128/130 / 8 bits = 31.5 GB/s.
        assert!((16.0 * 16.0 * 128.0 / 130.0 / 8.0 - 31.5f64).abs() < 0.02);
        for k in KNOWN {
            let l = parse(k.name).unwrap();
            assert_eq!(l.name, k.name);
            assert!(l.cite.contains("NCCL 2.20.3"), "{}", l.cite);
            assert_eq!(is_network(&l), l.cite.contains(NIC_PER_GPU), "{}", l.name);
        }
        assert!(is_network(&parse("ib-ndr").unwrap()));
        assert!(!is_network(&parse("nvlink4").unwrap()));
    }

    #[test]
    fn custom_links_take_bandwidth_and_latency() {
        let l = parse("25:5").unwrap();
        assert_eq!(
            (
                l.name.as_str(),
                l.gbytes_per_s,
                l.latency_us,
                l.tree_latency_us
            ),
            ("25:5", 25.0, 5.0, 5.0)
        );
        let l = parse("0.5:1e3").unwrap();
        assert_eq!((l.gbytes_per_s, l.latency_us), (0.5, 1000.0));
    }

    #[test]
    fn pairs_name_the_links_inside_and_between_nodes() {
        let p = parse_pair("nvlink4,ib-ndr").unwrap();
        assert_eq!(
            (p.intra.name.as_str(), p.inter.name.as_str()),
            ("nvlink4", "ib-ndr")
        );
        let p = parse_pair("pcie4").unwrap();
        assert_eq!(p.intra, p.inter);
        let p = parse_pair("nvlink3, 10:20").unwrap();
        assert_eq!((p.inter.gbytes_per_s, p.inter.latency_us), (10.0, 20.0));
    }

    #[test]
    fn bad_links_are_refused_in_one_line() {
        assert_eq!(
            err("nvlink5"),
            "unknown interconnect \"nvlink5\": known links are nvlink4, nvlink3, pcie4, pcie5, \
             ib-hdr, ib-ndr, eth100, or GBps:us (e.g. 25:5)"
        );
        assert!(err("").starts_with("unknown interconnect \"\""));
        for s in ["25:", ":5", " : "] {
            assert!(
                err(s).contains("needs both a bandwidth and a latency"),
                "{s}"
            );
        }
        assert_eq!(
            err("fast:5"),
            "interconnect \"fast:5\": the bandwidth (GB/s) \"fast\" is not a number"
        );
        assert!(err("25:5:1").contains("the latency (us) \"5:1\" is not a number"));
        for s in ["0:5", "-1:5", "inf:5", "NaN:5", "25:0", "25:-3", "25:inf"] {
            assert!(
                err(s).contains("must be positive and finite"),
                "{s}: {}",
                err(s)
            );
        }
        for s in ["nvlink4,ib-ndr,eth100", "nvlink4,", ","] {
            let e = err(s);
            assert!(!e.contains('\n'), "{e}");
            assert!(
                e.contains("INTRA[,INTER]") || e.contains("unknown interconnect \"\""),
                "{s}: {e}"
            );
        }
    }
}
