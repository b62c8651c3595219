//! The scanner both descriptor syntaxes share (benchdnn's convolution and
//! RNN descriptors): number keys followed by their values, `_` ignored, and
//! a name after `n`. Each syntax names its keys, reads its own name form
//! and words its own messages through [`Syntax`]; the scanning itself is
//! here only.

use anyhow::{bail, Result};

/// What a descriptor's text says, before defaults and validation.
pub(super) struct Fields {
    keys: &'static [&'static str],
    /// One slot per key, in the syntax's `KEYS` order.
    vals: Vec<Option<usize>>,
    pub name: Option<String>,
}

impl Fields {
    fn new(keys: &'static [&'static str]) -> Fields {
        Fields {
            keys,
            vals: vec![None; keys.len()],
            name: None,
        }
    }

    /// The value given for `key`, if any.
    pub fn get(&self, key: &str) -> Option<usize> {
        self.keys
            .iter()
            .position(|k| *k == key)
            .and_then(|i| self.vals[i])
    }
}

/// A token the scanner cannot take, for the syntax to word.
pub(super) enum Fault<'a> {
    /// Text that is not a key, up to the next digit or `_`.
    UnknownToken(&'a str),
    /// A number where a key belongs.
    NumberWithoutKey(&'a str),
    /// A key with no number after it; `got` is what followed it, quoted,
    /// or `end of input`.
    NoNumber { key: &'a str, got: &'a str },
    /// A value past usize.
    TooLarge { key: &'a str, digits: &'a str },
    /// A key given twice.
    Twice(&'a str),
}

/// One kind of descriptor: its number keys, the checks and name form that
/// are its own, and its wording of the scanner's faults.
pub(super) trait Syntax {
    /// The number keys, in `Fields` slot order, tried in this order at
    /// each token (none may be a prefix of a later one). `n`, the name, is
    /// not one of them.
    const KEYS: &'static [&'static str];

    /// Refuses the whole text before it is scanned (it is not empty).
    fn check_text(_desc: &str) -> Result<()> {
        Ok(())
    }

    /// Refuses a token at the start of `rest` that the syntax knows but
    /// does not take.
    fn refuse(_rest: &str, _desc: &str) -> Result<()> {
        Ok(())
    }

    /// Reads the name from `after`, the text after `n`: the name, and how
    /// many bytes of `after` it took. `named` says whether a name was
    /// read before.
    fn name(desc: &str, after: &str, named: bool) -> Result<(String, usize)>;

    /// The message for `fault` in `desc`.
    fn fault(fault: Fault<'_>, desc: &str) -> String;
}

/// Splits a descriptor into its keys' values and its name.
pub(super) fn scan<S: Syntax>(desc: &str) -> Result<Fields> {
    if desc.trim().is_empty() {
        bail!("empty problem descriptor");
    }
    S::check_text(desc)?;
    let fault = |f: Fault<'_>| anyhow::Error::msg(S::fault(f, desc));
    let mut fields = Fields::new(S::KEYS);
    let mut i = 0;
    while i < desc.len() {
        let rest = &desc[i..];
        if rest.starts_with('_') {
            i += 1;
            continue;
        }
        S::refuse(rest, desc)?;
        if let Some(after) = rest.strip_prefix('n') {
            let (name, used) = S::name(desc, after, fields.name.is_some())?;
            fields.name = Some(name);
            i += 1 + used;
            continue;
        }
        let Some(slot) = S::KEYS.iter().position(|k| rest.starts_with(*k)) else {
            let bad: String = rest
                .chars()
                .take_while(|c| !c.is_ascii_digit() && *c != '_')
                .collect();
            if bad.is_empty() {
                // A number where a key belongs: name the number.
                let num: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
                return Err(fault(Fault::NumberWithoutKey(&num)));
            }
            return Err(fault(Fault::UnknownToken(&bad)));
        };
        let key = S::KEYS[slot];
        i += key.len();
        let digits: String = desc[i..]
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        if digits.is_empty() {
            let got = desc[i..]
                .chars()
                .next()
                .map_or("end of input".to_string(), |c| format!("'{c}'"));
            return Err(fault(Fault::NoNumber { key, got: &got }));
        }
        i += digits.len();
        let value: usize = digits.parse().map_err(|_| {
            fault(Fault::TooLarge {
                key,
                digits: &digits,
            })
        })?;
        if fields.vals[slot].replace(value).is_some() {
            return Err(fault(Fault::Twice(key)));
        }
    }
    Ok(fields)
}
