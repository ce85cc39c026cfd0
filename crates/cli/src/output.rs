//! Results for people (aligned tables) and for programs (CSV, JSON), chosen by `--format`.

use clap::ValueEnum;
use serde::Serialize;

/// The output format of a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Json,
}

/// Rows of text cells under a header, rendered as an aligned table or as CSV.
#[derive(Clone, Debug, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row (as many cells as headers).
    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.headers.len());
        self.rows.push(cells);
    }

    /// The column headers.
    pub fn headers(&self) -> Vec<&str> {
        self.headers.iter().map(String::as_str).collect()
    }

    /// The rows added so far.
    pub fn rows(&self) -> &[Vec<String>] {
        &self.rows
    }

    /// Columns padded to their widest cell; numbers right-aligned.
    pub fn to_text(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.len()).collect();
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let line = |cells: &[String], out: &mut String| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .map(|(cell, &width)| {
                    if cell.parse::<f64>().is_ok() {
                        format!("{cell:>width$}")
                    } else {
                        format!("{cell:<width$}")
                    }
                })
                .collect();
            out.push_str(padded.join("  ").trim_end());
            out.push('\n');
        };
        line(&self.headers, &mut out);
        let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
        line(&rule, &mut out);
        for row in &self.rows {
            line(row, &mut out);
        }
        out
    }

    /// RFC 4180 CSV with a header line.
    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            let cells: Vec<String> = row.iter().map(|cell| csv_cell(cell)).collect();
            out.push_str(&cells.join(","));
            out.push('\n');
        }
        out
    }
}

fn csv_cell(cell: &str) -> String {
    if cell.contains([',', '"', '\n']) {
        format!("\"{}\"", cell.replace('"', "\"\""))
    } else {
        cell.to_string()
    }
}

/// Renders `table` or `json` according to `format`.
pub fn render<T: Serialize + ?Sized>(format: Format, table: &Table, json: &T) -> String {
    match format {
        Format::Table => table.to_text(),
        Format::Csv => table.to_csv(),
        Format::Json => {
            let mut text = serde_json::to_string_pretty(json).expect("results serialise");
            text.push('\n');
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_and_csv_quotes() {
        let mut table = Table::new(&["policy", "miss_ratio"]);
        table.row(vec!["lru".into(), "0.5".into()]);
        table.row(vec!["a,b".into(), "0.25".into()]);
        let text = table.to_text();
        assert_eq!(text.lines().nth(2).unwrap(), "lru            0.5");
        assert_eq!(table.to_csv(), "policy,miss_ratio\nlru,0.5\n\"a,b\",0.25\n");
    }
}
