//! Convolution problem descriptors in oneDNN benchdnn's syntax.
//!
//! `mb16ic64ih56oc64oh56kh3ph1`, `g2mb2ic96ih27oc256kh5ph2`,
//! `mb4_ic1ih161iw700_oc32_kh5kw20_sh2sw2_ph0pw0_n"deepspeech:conv1"`.
//!
//! Rules, as benchdnn has them: `_` is ignored; `n"..."` names the problem;
//! mb defaults to 2, stride to 1, padding and dilation to 0, groups to 1.
//! When only the h value of a pair is given (ih, kh, oh, sh, ph, dh) the w
//! value copies it; a w value given alone leaves h at its default (a 1-D
//! problem). Dilation is oneDNN's: `dh0` is dense, `dh1` skips one pixel.
//! oh/ow are computed when absent and must match when given.

use super::fields::{scan, Fault, Fields, Syntax};
use anyhow::{bail, Context, Result};
use cnnbench_kernels::conv::ConvShape;
use std::fmt;

/// A parsed, validated convolution problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvProblem {
    pub shape: ConvShape,
    pub name: Option<String>,
}

/// benchdnn's 2-D convolution descriptor, for the shared scanner.
struct ConvSyntax;

/// Keys of 3-D problems, recognised only to reject them clearly.
const KEYS_3D: [&str; 6] = ["id", "od", "kd", "sd", "pd", "dd"];

impl Syntax for ConvSyntax {
    /// The keys benchdnn knows for 2-D convolutions, longest first so that
    /// greedy matching is unambiguous (the name, `n`, is read apart).
    const KEYS: &'static [&'static str] = &[
        "mb", "ic", "ih", "iw", "oc", "oh", "ow", "kh", "kw", "sh", "sw", "ph", "pw", "dh", "dw",
        "g",
    ];

    fn refuse(rest: &str, desc: &str) -> Result<()> {
        if let Some(k3) = KEYS_3D.iter().find(|k| rest.starts_with(**k)) {
            bail!("'{k3}' in '{desc}': only 2-D convolutions are supported");
        }
        Ok(())
    }

    /// `n"..."`, quoted, anywhere among the keys.
    fn name(desc: &str, after: &str, named: bool) -> Result<(String, usize)> {
        let Some(body) = after.strip_prefix('"') else {
            bail!("name in '{desc}' must be quoted: n\"...\"");
        };
        let Some(end) = body.find('"') else {
            bail!("unterminated name n\"... in '{desc}'");
        };
        if named {
            bail!("'n' given twice in '{desc}'");
        }
        Ok((body[..end].to_string(), 1 + end + 1))
    }

    fn fault(fault: Fault<'_>, desc: &str) -> String {
        match fault {
            Fault::NumberWithoutKey(bad) => format!("number '{bad}' in '{desc}' has no key before it (expected one of g mb ic ih iw oc oh ow kh kw sh sw ph pw dh dw)"),
            Fault::UnknownToken(bad) => format!("unknown token '{bad}' in '{desc}' (expected one of g mb ic ih iw oc oh ow kh kw sh sw ph pw dh dw n\"...\")"),
            Fault::NoNumber { key, got } => format!("'{key}' in '{desc}' must be followed by a non-negative number, got {got}"),
            Fault::TooLarge { key, digits } => format!("'{key}{digits}' in '{desc}' is too large"),
            Fault::Twice(key) => format!("'{key}' given twice in '{desc}'"),
        }
    }
}

impl ConvProblem {
    /// Parses and validates one descriptor.
    pub fn parse(desc: &str) -> Result<ConvProblem> {
        let fields = scan::<ConvSyntax>(desc)?;
        build(&fields).with_context(|| format!("in problem '{desc}'"))
    }

    /// The canonical benchdnn string: defaults and w values equal to h
    /// values are left out, so it can be pasted back as a reproducer.
    pub fn canonical(&self) -> String {
        let p = &self.shape;
        let mut s = String::new();
        if p.g != 1 {
            s += &format!("g{}", p.g);
        }
        s += &format!("mb{}ic{}ih{}", p.mb, p.ic, p.ih);
        if p.iw != p.ih {
            s += &format!("iw{}", p.iw);
        }
        s += &format!("oc{}oh{}", p.oc, p.oh);
        if p.ow != p.oh {
            s += &format!("ow{}", p.ow);
        }
        s += &format!("kh{}", p.kh);
        if p.kw != p.kh {
            s += &format!("kw{}", p.kw);
        }
        if p.sh != 1 || p.sw != 1 {
            s += &format!("sh{}", p.sh);
            if p.sw != p.sh {
                s += &format!("sw{}", p.sw);
            }
        }
        if p.ph != 0 || p.pw != 0 {
            s += &format!("ph{}", p.ph);
            if p.pw != p.ph {
                s += &format!("pw{}", p.pw);
            }
        }
        if p.dh != 0 || p.dw != 0 {
            s += &format!("dh{}", p.dh);
            if p.dw != p.dh {
                s += &format!("dw{}", p.dw);
            }
        }
        if let Some(n) = &self.name {
            s += &format!("n\"{n}\"");
        }
        s
    }
}

impl fmt::Display for ConvProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())
    }
}

fn build(f: &Fields) -> Result<ConvProblem> {
    let need = |key: &str| f.get(key).with_context(|| format!("'{key}' is missing"));
    let positive = |key: &str, v: usize| -> Result<usize> {
        if v == 0 {
            bail!("'{key}' must be at least 1, got 0");
        }
        Ok(v)
    };
    // h values copy into w; a w alone leaves h at the default.
    let pair = |h: &str, w: &str, default: usize| -> (usize, usize) {
        match (f.get(h), f.get(w)) {
            (Some(hv), Some(wv)) => (hv, wv),
            (Some(hv), None) => (hv, hv),
            (None, Some(wv)) => (default, wv),
            (None, None) => (default, default),
        }
    };

    let g = positive("g", f.get("g").unwrap_or(1))?;
    let mb = positive("mb", f.get("mb").unwrap_or(2))?;
    let ic = positive("ic", need("ic")?)?;
    let oc = positive("oc", need("oc")?)?;
    if f.get("ih").is_none() && f.get("iw").is_none() {
        bail!("'ih' is missing");
    }
    if f.get("kh").is_none() && f.get("kw").is_none() {
        bail!("'kh' is missing");
    }
    let (ih, iw) = pair("ih", "iw", 1);
    let (kh, kw) = pair("kh", "kw", 1);
    let (sh, sw) = pair("sh", "sw", 1);
    let (ph, pw) = pair("ph", "pw", 0);
    let (dh, dw) = pair("dh", "dw", 0);
    for (key, v) in [
        ("ih", ih),
        ("iw", iw),
        ("kh", kh),
        ("kw", kw),
        ("sh", sh),
        ("sw", sw),
    ] {
        positive(key, v)?;
    }
    if ic % g != 0 {
        bail!("ic{ic} is not divisible by g{g}");
    }
    if oc % g != 0 {
        bail!("oc{oc} is not divisible by g{g}");
    }
    let oh = out_size("h", ih, kh, sh, ph, dh)?;
    let ow = out_size("w", iw, kw, sw, pw, dw)?;
    for (key, given, computed) in [("oh", f.get("oh"), oh), ("ow", f.get("ow"), ow)] {
        if let Some(v) = given {
            if v != computed {
                bail!("{key}{v} does not match the computed output size {computed}");
            }
        }
    }
    // A given oh with no ow copies into ow, so check that too.
    if let (Some(v), None) = (f.get("oh"), f.get("ow")) {
        if v != ow {
            bail!("ow (copied from oh{v}) does not match the computed output width {ow}");
        }
    }
    let shape = ConvShape {
        mb,
        g,
        ic,
        ih,
        iw,
        oc,
        oh,
        ow,
        kh,
        kw,
        sh,
        sw,
        ph,
        pw,
        dh,
        dw,
    };
    Ok(ConvProblem {
        shape,
        name: f.name.clone(),
    })
}

/// (i + 2p - ((k-1)(d+1)+1)) / s + 1, or an error when the kernel does not
/// fit into the padded input.
fn out_size(axis: &str, i: usize, k: usize, s: usize, p: usize, d: usize) -> Result<usize> {
    let extent = d
        .checked_add(1)
        .and_then(|d1| (k - 1).checked_mul(d1))
        .and_then(|e| e.checked_add(1))
        .context("kernel extent overflows")?;
    let padded = p
        .checked_mul(2)
        .and_then(|p2| i.checked_add(p2))
        .context("padded input size overflows")?;
    if padded < extent {
        bail!(
            "output {axis} would be empty: kernel extent {extent} is larger than the padded input {padded}"
        );
    }
    Ok((padded - extent) / s + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> ConvShape {
        ConvProblem::parse(s)
            .unwrap_or_else(|e| panic!("{s}: {e:#}"))
            .shape
    }

    fn err(s: &str) -> String {
        format!("{:#}", ConvProblem::parse(s).expect_err(s))
    }

    #[test]
    fn resnet_layer_with_h_copied_into_w() {
        let p = parse("mb16ic64ih56oc64oh56kh3ph1");
        assert_eq!(
            (p.mb, p.ic, p.ih, p.iw, p.oc, p.oh, p.ow),
            (16, 64, 56, 56, 64, 56, 56)
        );
        assert_eq!(
            (p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw, p.g),
            (3, 3, 1, 1, 1, 1, 0, 0, 1)
        );
    }

    #[test]
    fn groups_and_default_minibatch() {
        let p = parse("g2mb2ic96ih27oc256kh5ph2");
        assert_eq!((p.g, p.mb, p.ic, p.oc, p.oh, p.ow), (2, 2, 96, 256, 27, 27));
        assert_eq!(parse("ic3ih8oc4kh3").mb, 2);
    }

    #[test]
    fn underscores_names_and_separate_w_values() {
        let pr = ConvProblem::parse(
            r#"mb4_ic1ih161iw700_oc32_kh5kw20_sh2sw2_ph0pw0_n"deepspeech:conv1""#,
        )
        .unwrap();
        let p = pr.shape;
        assert_eq!(pr.name.as_deref(), Some("deepspeech:conv1"));
        assert_eq!(
            (p.ih, p.iw, p.kh, p.kw, p.sh, p.sw),
            (161, 700, 5, 20, 2, 2)
        );
        assert_eq!((p.oh, p.ow), ((161 - 5) / 2 + 1, (700 - 20) / 2 + 1));
    }

    #[test]
    fn dilation_uses_onednn_convention() {
        let dense = parse("ic4ih10oc4kh3dh0");
        assert_eq!(dense.oh, 8);
        let skip1 = parse("ic4ih10oc4kh3dh1"); // extent 5
        assert_eq!((skip1.dh, skip1.dw, skip1.oh), (1, 1, 6));
    }

    #[test]
    fn w_alone_leaves_h_at_default() {
        let p = parse("ic4iw10oc4kw3");
        assert_eq!((p.ih, p.iw, p.kh, p.kw, p.oh, p.ow), (1, 10, 1, 3, 1, 8));
    }

    #[test]
    fn stride_output_sizes() {
        let p = parse("mb16ic128ih56oc128oh28kh3sh2ph1");
        assert_eq!((p.oh, p.ow, p.sw, p.pw), (28, 28, 2, 1));
        let p = parse("mb16ic3ih224oc64oh112kh7sh2ph3");
        assert_eq!(p.oh, 112);
    }

    #[test]
    fn canonical_round_trips() {
        for s in [
            "mb16ic64ih56oc64oh56kh3ph1",
            "g2mb2ic96ih27oc256oh27kh5ph2",
            r#"mb4ic1ih161iw700oc32oh79ow341kh5kw20sh2ph0n"deepspeech:conv1""#,
            "mb1ic8ih13oc16oh9kh3ph0dh1",
            "mb2ic8ih13iw11oc16oh13ow11kh3kw1sh1sw1ph1pw0",
        ] {
            let p = ConvProblem::parse(s).unwrap();
            let again = ConvProblem::parse(&p.canonical()).unwrap();
            assert_eq!(p, again, "{s} -> {}", p.canonical());
        }
        assert_eq!(
            ConvProblem::parse("mb16ic64ih56oc64kh3ph1")
                .unwrap()
                .canonical(),
            "mb16ic64ih56oc64oh56kh3ph1"
        );
    }

    #[test]
    fn bad_input_is_named() {
        assert!(err("mb16ic64ih56oc64kh3ph1xx2").contains("unknown token 'xx'"));
        assert!(err("ic1ih1oc1kh1ph9223372036854775808").contains("overflows"));
        assert!(err("ic1ih1oc1kh2dh18446744073709551615").contains("overflows"));
        assert!(err("ic4_5").contains("number '5' in 'ic4_5' has no key"));
        assert!(err("mb16ic0ih56oc64kh3").contains("'ic' must be at least 1"));
        assert!(err("mb16ic64ih56oc64kh3ph-1").contains("non-negative number"));
        assert!(err("g3ic64ih56oc63kh3").contains("ic64 is not divisible by g3"));
        assert!(err("g2ic64ih56oc63kh3").contains("oc63 is not divisible by g2"));
        assert!(err("ic4ih3oc4kh5").contains("output h would be empty"));
        assert!(
            err("ic4ih56oc4oh55kh3ph1").contains("oh55 does not match the computed output size 56")
        );
        assert!(err("ic4ih56oc4kh3ic5").contains("'ic' given twice"));
        assert!(err("ic4id5ih56oc4kh3").contains("only 2-D"));
        assert!(err("ih56oc4kh3").contains("'ic' is missing"));
        assert!(err("ic4ih56oc4kh3n\"open").contains("unterminated"));
        assert!(err("ic4ih99999999999999999999999oc4kh3").contains("too large"));
        assert!(err("").contains("empty"));
        assert!(err("ic4ih56oc4kh3sh0").contains("'sh' must be at least 1"));
    }
}
