//! Labels that tell runs apart in a report: each environment named by its
//! explicit label, else by the facts in which it differs from the others.
//! Layer runs ([`super::merge`]) and model runs ([`super::models`]) are
//! labelled the same way.

use crate::results::Environment;

/// The facts a label may use, by name.
fn facts(e: &Environment) -> Vec<(&'static str, String)> {
    let g = e.gpu.as_ref();
    vec![
        ("label", e.label.clone().unwrap_or_default()),
        ("host", e.host.clone()),
        ("device", g.map_or(e.cpu.clone(), |g| g.name.clone())),
        (
            "threads",
            if g.is_some() {
                String::new()
            } else {
                e.threads.to_string()
            },
        ),
        (
            "isa",
            if g.is_some() {
                String::new()
            } else {
                e.isa.clone()
            },
        ),
        ("cudnn", g.map_or(String::new(), |g| g.cudnn.clone())),
        ("cublas", g.map_or(String::new(), |g| g.cublas.clone())),
        ("driver", g.map_or(String::new(), |g| g.driver_cuda.clone())),
        ("cnnbench", e.cnnbench.git.clone()),
    ]
}

/// One label per environment: its explicit label, else the facts in which
/// the environments differ (else the device).
pub fn labels(envs: &[&Environment]) -> Vec<String> {
    let all: Vec<Vec<(&str, String)>> = envs.iter().map(|e| facts(e)).collect();
    // Once per fact, not once per environment and fact (quadratic in runs).
    let n_facts = all.first().map_or(0, Vec::len);
    let differ: Vec<bool> = (0..n_facts)
        .map(|k| all.iter().any(|f| f[k].1 != all[0][k].1))
        .collect();
    let differs = |k: usize| differ[k];
    all.iter()
        .map(|f| {
            if !f[0].1.is_empty() {
                return f[0].1.clone();
            }
            let parts: Vec<String> = (1..f.len())
                .filter(|&k| differs(k) && !f[k].1.is_empty())
                .map(|k| {
                    if f[k].0 == "device" {
                        f[k].1.clone()
                    } else {
                        format!("{}={}", f[k].0, f[k].1)
                    }
                })
                .collect();
            if parts.is_empty() {
                f[2].1.clone()
            } else {
                parts.join(" ")
            }
        })
        .collect()
}
