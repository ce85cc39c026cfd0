//! Policy and admission-filter parameters as libCacheSim's users write them: a name, then
//! `key=value` pairs after a colon, separated by commas (`s3fifo:small-size-ratio=0.1`,
//! `lru-k:k=2`, `wtinylfu:window-size=0.01,main-cache=slru`). Each policy declares its
//! parameters once ([`ParamSpec`]); [`Params::parse`] checks what a user gave against them and
//! fills in the defaults, so a build function only reads typed values.

use crate::error::PolicyError;

/// What values a parameter takes (bounds inclusive).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ParamKind {
    Float {
        min: f64,
        max: f64,
    },
    Int {
        min: u64,
        max: u64,
    },
    /// `true`/`false`, also `1`/`0` (libCacheSim writes `update-weight=1`).
    Bool,
    /// One of a few words, case-insensitive.
    Choice(&'static [&'static str]),
    /// Free text the policy checks when it is built (SLRU's `seg-size=1:4`, W-TinyLFU's
    /// `main-cache=slru`).
    Text(&'static str),
}

/// One parameter a policy or filter takes: its name as libCacheSim spells it, its values, its
/// default (written as a user would write it) and what it does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParamSpec {
    pub name: &'static str,
    pub kind: ParamKind,
    pub default: &'static str,
    pub doc: &'static str,
}

impl ParamSpec {
    /// The range or choices, for help text and errors.
    pub fn range(&self) -> String {
        match self.kind {
            ParamKind::Float { min, max } => format!("a number from {min} to {max}"),
            ParamKind::Int { min, max } => format!("an integer from {min} to {max}"),
            ParamKind::Bool => "true or false".to_string(),
            ParamKind::Choice(words) => format!("one of {}", words.join(", ")),
            ParamKind::Text(what) => what.to_string(),
        }
    }

    fn parse(&self, owner: &str, text: &str) -> Result<ParamValue, PolicyError> {
        let refused = || PolicyError::OutOfRange {
            policy: owner.to_string(),
            param: self.name.to_string(),
            value: text.to_string(),
            expected: self.range(),
        };
        let value = match self.kind {
            ParamKind::Float { min, max } => {
                let value: f64 = text.parse().map_err(|_| refused())?;
                if !(min..=max).contains(&value) {
                    return Err(refused());
                }
                ParamValue::Float(value)
            }
            ParamKind::Int { min, max } => {
                let value: u64 = text.parse().map_err(|_| refused())?;
                if !(min..=max).contains(&value) {
                    return Err(refused());
                }
                ParamValue::Int(value)
            }
            ParamKind::Bool => match text.to_ascii_lowercase().as_str() {
                "true" | "1" => ParamValue::Bool(true),
                "false" | "0" => ParamValue::Bool(false),
                _ => return Err(refused()),
            },
            ParamKind::Choice(words) => ParamValue::Choice(
                words
                    .iter()
                    .copied()
                    .find(|word| word.eq_ignore_ascii_case(text))
                    .ok_or_else(refused)?,
            ),
            ParamKind::Text(_) => ParamValue::Text(text.to_string()),
        };
        Ok(value)
    }
}

/// The `seed` of every randomized policy and filter: the same seed gives the same run, and 0
/// draws what a fresh libCacheSim process draws (`crate::util::rng`).
pub const SEED: ParamSpec = ParamSpec {
    name: "seed",
    kind: ParamKind::Int {
        min: 0,
        max: u64::MAX,
    },
    default: "0",
    doc: "seed of the random draws; 0 draws as a fresh libCacheSim process does",
};

#[derive(Clone, Debug, PartialEq)]
enum ParamValue {
    Float(f64),
    Int(u64),
    Bool(bool),
    Choice(&'static str),
    Text(String),
}

/// Checked values of every parameter of one policy or filter, defaults filled in.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    specs: &'static [ParamSpec],
    values: Vec<ParamValue>,
    /// Whether each parameter was given rather than defaulted.
    given: Vec<bool>,
}

impl Params {
    /// Checks `given` (name, value) pairs against `specs`; `owner` names the policy or filter
    /// in errors. Unknown names, repeated names and values out of range are refused.
    pub fn parse(
        owner: &str,
        specs: &'static [ParamSpec],
        given: &[(String, String)],
    ) -> Result<Params, PolicyError> {
        let mut values: Vec<Option<ParamValue>> = vec![None; specs.len()];
        for (name, text) in given {
            let index = specs
                .iter()
                .position(|spec| spec.name.eq_ignore_ascii_case(name))
                .ok_or_else(|| {
                    let known: Vec<&str> = specs.iter().map(|spec| spec.name).collect();
                    PolicyError::UnknownParam {
                        policy: owner.to_string(),
                        param: name.to_string(),
                        expected: if known.is_empty() {
                            format!("{owner} takes none")
                        } else {
                            format!("expected one of: {}", known.join(", "))
                        },
                    }
                })?;
            if values[index].is_some() {
                return Err(PolicyError::Repeated {
                    policy: owner.to_string(),
                    param: specs[index].name.to_string(),
                });
            }
            values[index] = Some(specs[index].parse(owner, text.trim())?);
        }
        let given = values.iter().map(Option::is_some).collect();
        let values = specs
            .iter()
            .zip(values)
            .map(|(spec, value)| match value {
                Some(value) => Ok(value),
                None => spec.parse(owner, spec.default),
            })
            .collect::<Result<_, _>>()?;
        Ok(Params {
            specs,
            values,
            given,
        })
    }

    fn index(&self, name: &str) -> usize {
        self.specs
            .iter()
            .position(|spec| spec.name == name)
            .unwrap_or_else(|| panic!("no parameter \"{name}\" is declared"))
    }

    fn value(&self, name: &str) -> &ParamValue {
        &self.values[self.index(name)]
    }

    /// Whether the user gave `name` rather than leaving it to its default.
    pub fn given(&self, name: &str) -> bool {
        self.given[self.index(name)]
    }

    /// A [`ParamKind::Float`] parameter's value.
    pub fn float(&self, name: &str) -> f64 {
        match self.value(name) {
            ParamValue::Float(value) => *value,
            other => panic!("parameter \"{name}\" is {other:?}, not a number"),
        }
    }

    /// A [`ParamKind::Int`] parameter's value.
    pub fn int(&self, name: &str) -> u64 {
        match self.value(name) {
            ParamValue::Int(value) => *value,
            other => panic!("parameter \"{name}\" is {other:?}, not an integer"),
        }
    }

    /// A [`ParamKind::Bool`] parameter's value.
    pub fn bool(&self, name: &str) -> bool {
        match self.value(name) {
            ParamValue::Bool(value) => *value,
            other => panic!("parameter \"{name}\" is {other:?}, not true or false"),
        }
    }

    /// A [`ParamKind::Choice`] parameter's value, spelled as declared.
    pub fn choice(&self, name: &str) -> &'static str {
        match self.value(name) {
            ParamValue::Choice(value) => value,
            other => panic!("parameter \"{name}\" is {other:?}, not a choice"),
        }
    }

    /// A [`ParamKind::Text`] parameter's value, as given.
    pub fn text(&self, name: &str) -> &str {
        match self.value(name) {
            ParamValue::Text(value) => value,
            other => panic!("parameter \"{name}\" is {other:?}, not text"),
        }
    }
}

/// A name with the `key=value` pairs written after it, before any checking:
/// `"s3fifo:small-size-ratio=0.2,ghost-size-ratio=0"` → `("s3fifo", [(small-size-ratio, 0.2),
/// (ghost-size-ratio, 0)])`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedSpec {
    pub name: String,
    pub given: Vec<(String, String)>,
}

impl NamedSpec {
    /// Splits one spec; `what` ("policy", "admission filter") names it in errors.
    pub fn parse(text: &str, what: &str) -> Result<NamedSpec, PolicyError> {
        let (name, rest) = match text.split_once(':') {
            Some((name, rest)) => (name, Some(rest)),
            None => (text, None),
        };
        let name = name.trim().to_ascii_lowercase();
        if name.is_empty() {
            return Err(PolicyError::NoName {
                what: what.to_string(),
                text: text.to_string(),
            });
        }
        let mut given: Vec<(String, String)> = Vec::new();
        for piece in rest.into_iter().flat_map(|rest| rest.split(',')) {
            // Pairs may also be separated by colons, but a colon-separated piece with no `=`
            // continues the value before it (SLRU's `seg-size=1:4`).
            for (position, pair) in piece.split(':').enumerate() {
                let pair = pair.trim();
                match (pair.split_once('='), given.last_mut()) {
                    (Some((key, value)), _) => {
                        given.push((key.trim().to_ascii_lowercase(), value.trim().to_string()))
                    }
                    (None, Some((_, value))) if position > 0 => {
                        value.push(':');
                        value.push_str(pair);
                    }
                    (None, _) if pair.is_empty() => {}
                    (None, _) => {
                        return Err(PolicyError::NotAParameter {
                            policy: name,
                            piece: pair.to_string(),
                        })
                    }
                }
            }
        }
        Ok(NamedSpec { name, given })
    }

    /// Splits a comma-separated list of specs, where a `key=value` piece (one with `=` before
    /// any colon) belongs to the spec before it:
    /// `"s3fifo:small-size-ratio=0.2,ghost-size-ratio=0,lru"` is two, and so is
    /// `"slru:n-seg=2,seg-size=1:4,lru"`.
    pub fn parse_list(list: &str, what: &str) -> Result<Vec<NamedSpec>, PolicyError> {
        let mut texts: Vec<String> = Vec::new();
        for piece in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let before_colon = piece.split(':').next().unwrap_or(piece);
            let is_parameter = before_colon.contains('=');
            match texts.last_mut() {
                Some(last) if is_parameter => {
                    last.push(',');
                    last.push_str(piece);
                }
                None if is_parameter => {
                    return Err(PolicyError::ParameterFirst {
                        what: what.to_string(),
                        piece: piece.to_string(),
                    })
                }
                _ => texts.push(piece.to_string()),
            }
        }
        texts
            .iter()
            .map(|text| NamedSpec::parse(text, what))
            .collect()
    }

    /// The spec as written back: the name, then the given pairs (defaults left out).
    pub fn label(&self) -> String {
        let mut label = self.name.clone();
        for (index, (key, value)) in self.given.iter().enumerate() {
            label.push(if index == 0 { ':' } else { ',' });
            label.push_str(&format!("{key}={value}"));
        }
        label
    }
}

/// A registry entry found by name: a policy or an admission filter.
pub trait Named {
    /// The name the entry is listed under.
    fn name(&self) -> &'static str;
    /// Other accepted names (libCacheSim's spellings).
    fn aliases(&self) -> &'static [&'static str];
}

/// The entry of `entries` called `name` or one of its aliases, case-insensitive; else an error
/// naming `what` was asked for and every choice.
pub fn find_entry<E: Named>(
    entries: &'static [E],
    name: &str,
    what: &str,
) -> Result<&'static E, PolicyError> {
    let answers_to = |entry: &&E| {
        entry.name().eq_ignore_ascii_case(name)
            || entry
                .aliases()
                .iter()
                .any(|alias| alias.eq_ignore_ascii_case(name))
    };
    entries.iter().find(answers_to).ok_or_else(|| {
        let names: Vec<&str> = entries.iter().map(Named::name).collect();
        PolicyError::UnknownName {
            what: what.to_string(),
            name: name.to_string(),
            known: names.join(", "),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[ParamSpec] = &[
        ParamSpec {
            name: "ratio",
            kind: ParamKind::Float { min: 0.0, max: 1.0 },
            default: "0.25",
            doc: "",
        },
        ParamSpec {
            name: "k",
            kind: ParamKind::Int { min: 1, max: 8 },
            default: "2",
            doc: "",
        },
        ParamSpec {
            name: "on",
            kind: ParamKind::Bool,
            default: "true",
            doc: "",
        },
        ParamSpec {
            name: "main",
            kind: ParamKind::Choice(&["LRU", "SLRU"]),
            default: "SLRU",
            doc: "",
        },
    ];

    fn pairs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_fill_what_is_not_given() {
        let params = Params::parse("p", SPECS, &pairs(&[("k", "5"), ("main", "lru")])).unwrap();
        assert_eq!(params.float("ratio"), 0.25);
        assert_eq!(params.int("k"), 5);
        assert!(params.bool("on"));
        assert_eq!(params.choice("main"), "LRU");
        let params = Params::parse("p", SPECS, &pairs(&[("on", "0")])).unwrap();
        assert!(!params.bool("on"));
    }

    #[test]
    fn text_is_kept_as_given_and_given_tells_defaults_apart() {
        const TEXT: &[ParamSpec] = &[
            ParamSpec {
                name: "seg-size",
                kind: ParamKind::Text("weights"),
                default: "",
                doc: "",
            },
            ParamSpec {
                name: "n",
                kind: ParamKind::Int { min: 1, max: 9 },
                default: "4",
                doc: "",
            },
        ];
        let params = Params::parse("p", TEXT, &pairs(&[("seg-size", "1:4")])).unwrap();
        assert_eq!(params.text("seg-size"), "1:4");
        assert!(params.given("seg-size") && !params.given("n"));
        assert_eq!(params.int("n"), 4);
        assert_eq!(TEXT[0].range(), "weights");
    }

    #[test]
    fn refusals_name_the_owner_and_the_parameter() {
        let error = |given: &[(&str, &str)]| {
            Params::parse("p", SPECS, &pairs(given))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            error(&[("k", "9")]),
            "p: k=9 is out of range: expected an integer from 1 to 8"
        );
        assert_eq!(
            error(&[("ratio", "x")]),
            "p: ratio=x is out of range: expected a number from 0 to 1"
        );
        assert!(error(&[("ratio", "NaN")]).contains("ratio=NaN"));
        assert_eq!(
            error(&[("size", "1")]),
            "p: unknown parameter \"size\"; expected one of: ratio, k, on, main"
        );
        assert_eq!(
            error(&[("k", "1"), ("K", "2")]),
            "p: parameter \"k\" given twice"
        );
        assert!(error(&[("main", "arc")]).contains("one of LRU, SLRU"));
    }

    #[test]
    fn lists_attach_bare_pairs_to_the_spec_before_them() {
        let specs = NamedSpec::parse_list(
            "S3FIFO:small-size-ratio=0.2,ghost-size-ratio=0, lru,lru-k:k=3",
            "policy",
        )
        .unwrap();
        assert_eq!(specs.len(), 3);
        assert_eq!(
            specs[0].label(),
            "s3fifo:small-size-ratio=0.2,ghost-size-ratio=0"
        );
        assert_eq!(specs[1].label(), "lru");
        assert_eq!(specs[2].given, pairs(&[("k", "3")]));
        assert!(NamedSpec::parse_list("k=2,lru", "policy").is_err());
        let specs = NamedSpec::parse_list(
            "slru:seg-size=1:4, n-seg=2,wtinylfu:main-cache=slru",
            "policy",
        )
        .unwrap();
        assert_eq!(
            specs[0].given,
            pairs(&[("seg-size", "1:4"), ("n-seg", "2")])
        );
        assert_eq!(specs[1].label(), "wtinylfu:main-cache=slru");
        let spec = NamedSpec::parse("slru:n-seg=3:seg-size=1:2:3", "policy").unwrap();
        assert_eq!(spec.given, pairs(&[("n-seg", "3"), ("seg-size", "1:2:3")]));
        assert!(NamedSpec::parse("lru:k", "policy")
            .unwrap_err()
            .to_string()
            .contains("name=value"));
        assert!(NamedSpec::parse(":k=1", "policy").is_err());
    }
}
