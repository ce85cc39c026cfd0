//! `heterarchy policies`: every eviction policy and admission filter the registries build, with
//! their parameters (name, range, default) and where each comes from.

use anyhow::Result;
use clap::Args;
use heterarchy_policy::admission::FILTERS;
use heterarchy_policy::params::ParamSpec;
use heterarchy_policy::registry::POLICIES;
use serde::Serialize;

use crate::output::{Format, Sink, Table};

/// Arguments of `heterarchy policies`.
#[derive(Args, Debug)]
pub struct PoliciesArgs {
    /// How to print the list: a table for people, CSV or JSON for programs.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

/// One row of `policies --format json`.
#[derive(Serialize)]
struct Listed {
    kind: &'static str,
    name: &'static str,
    aliases: &'static [&'static str],
    params: Vec<ListedParam>,
    takes_admission: Option<bool>,
    source: &'static str,
}

#[derive(Serialize)]
struct ListedParam {
    name: &'static str,
    default: &'static str,
    range: String,
    doc: &'static str,
}

fn listed_params(params: &[ParamSpec]) -> Vec<ListedParam> {
    params
        .iter()
        .map(|param| ListedParam {
            name: param.name,
            default: param.default,
            range: param.range(),
            doc: param.doc,
        })
        .collect()
}

/// Prints the list.
pub fn run(args: &PoliciesArgs, sink: &mut Sink) -> Result<()> {
    let mut listed: Vec<Listed> = POLICIES
        .iter()
        .map(|entry| Listed {
            kind: "policy",
            name: entry.name,
            aliases: entry.aliases,
            params: listed_params(entry.params),
            takes_admission: Some(entry.takes_admission),
            source: entry.source,
        })
        .collect();
    listed.extend(FILTERS.iter().map(|entry| Listed {
        kind: "admission",
        name: entry.name,
        aliases: entry.aliases,
        params: listed_params(entry.params),
        takes_admission: None,
        source: entry.source,
    }));
    let mut table = Table::new(&["kind", "name", "parameters (default)", "source"]);
    for item in &listed {
        let params: Vec<String> = item
            .params
            .iter()
            .map(|param| format!("{}={}", param.name, param.default))
            .collect();
        table.row(vec![
            item.kind.to_string(),
            item.name.to_string(),
            if params.is_empty() {
                "-".to_string()
            } else {
                params.join(",")
            },
            item.source.to_string(),
        ]);
    }
    sink.render(args.format, &table, &listed)?;
    Ok(())
}
