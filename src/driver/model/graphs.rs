//! Which models a run takes: the zoo's graphs named on the command line,
//! less those that cannot run in the run's layout.

use crate::note::note;
use anyhow::{bail, Result};
use cnnbench_layers::net::Graph;
use cnnbench_layers::{zoo, Layout};

/// Some layers run in NHWC only, as each op's spec says (today the
/// recurrent ones: a sequence's features innermost, as cuDNN's RNN API
/// reads them, hence the wording): under `--layout nchw` a model named on
/// the command line with them is refused, and those `all` brought in are
/// left out, with a note.
pub fn sequences_in_nhwc(graphs: &mut Vec<Graph>, names: &[String], layout: Layout) -> Result<()> {
    if layout != Layout::Nchw {
        return Ok(());
    }
    let recurrent = |g: &Graph| g.nhwc_only();
    if let Some(g) = graphs
        .iter()
        .find(|g| recurrent(g) && names.contains(&g.name))
    {
        bail!(
            "{} has recurrent layers, which run in the nhwc layout only; use --layout nhwc",
            g.name
        );
    }
    let left: Vec<String> = graphs
        .iter()
        .filter(|g| recurrent(g))
        .map(|g| g.name.clone())
        .collect();
    if !left.is_empty() {
        note!(
            "cnnbench: leaving out {} (recurrent layers run in the nhwc layout only)",
            left.join(", ")
        );
        graphs.retain(|g| !recurrent(g));
    }
    Ok(())
}

/// Under `--data DIR` the loader feeds square RGB images: a model named on
/// the command line that reads anything else is refused, and those `all`
/// brought in are left out, with a note; both before the first model runs.
pub fn fed_by_folder(graphs: &mut Vec<Graph>, names: &[String], folder: bool) -> Result<()> {
    if !folder {
        return Ok(());
    }
    let unfed = |g: &Graph| super::input::input_side(g).err();
    if let Some(e) = graphs
        .iter()
        .filter(|g| names.contains(&g.name))
        .find_map(unfed)
    {
        return Err(e);
    }
    let left: Vec<String> = graphs
        .iter()
        .filter(|g| unfed(g).is_some())
        .map(|g| g.name.clone())
        .collect();
    if !left.is_empty() {
        note!(
            "cnnbench: leaving out {} (--data feeds square RGB images; they read other input)",
            left.join(", ")
        );
        graphs.retain(|g| unfed(g).is_none());
    }
    Ok(())
}

/// The graphs named on the command line (`all` expands), or a one-line
/// error naming the models there are.
pub fn resolve(names: &[String]) -> Result<Vec<Graph>> {
    let mut out = Vec::new();
    for n in names {
        if n == "all" {
            out.extend(zoo::NAMES.iter().filter_map(|m| zoo::build(m)));
            continue;
        }
        match zoo::build(n) {
            Some(g) => out.push(g),
            None => bail!(
                "unknown model '{n}'; there are: {}, or all",
                zoo::NAMES.join(", ")
            ),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_refuses_named_models_it_cannot_feed_and_leaves_out_the_rest() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let asked = names(&["resnet18", "mnist-mlp"]);
        let mut graphs = resolve(&asked).unwrap();
        let e = fed_by_folder(&mut graphs, &asked, true)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("mnist-mlp: --data feeds square RGB images"),
            "{e}"
        );
        // Synthetic input feeds every model.
        fed_by_folder(&mut graphs, &asked, false).unwrap();
        assert_eq!(graphs.len(), 2);
        let all = names(&["all"]);
        let mut graphs = resolve(&all).unwrap();
        fed_by_folder(&mut graphs, &all, true).unwrap();
        let kept: Vec<&str> = graphs.iter().map(|g| g.name.as_str()).collect();
        assert!(
            kept.contains(&"resnet50") && kept.contains(&"cifar10-cnn"),
            "{kept:?}"
        );
        assert!(
            !kept.contains(&"mnist-mlp") && !kept.contains(&"imdb-bilstm"),
            "{kept:?}"
        );
    }
}
