//! Results for people (aligned tables) and for programs (CSV, JSON), chosen by `--format`, and
//! HTML reports (`--report`).

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context;
use clap::ValueEnum;
use heterarchy_report::Report;
use heterarchy_sim::cache_sim::TraceFile;
use serde::Serialize;

use crate::watch::WatchedTrace;

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

/// Where a command's results go, and whether its caller still wants them: printed on standard
/// output (the command line), or kept as the JSON values `--format json` would print, with a
/// flag the caller sets to stop the command (the Python API, which runs the same commands in its
/// process so that its results are the CLI's by construction, and stops them at Ctrl-C;
/// docs/architecture.md, "Python API").
#[derive(Debug)]
pub enum Sink {
    Print,
    Keep {
        values: Vec<serde_json::Value>,
        stop: Arc<AtomicBool>,
    },
}

impl Sink {
    /// Text for people: printed as it is, and dropped when keeping (the library returns
    /// results, not prose).
    pub fn text(&mut self, text: &str) {
        if let Sink::Print = self {
            print!("{text}");
        }
    }

    /// A line of text for people (see [`Sink::text`]).
    pub fn line(&mut self, text: &str) {
        self.text(&format!("{text}\n"));
    }

    /// A result for programs: printed as pretty JSON, or kept.
    pub fn json<T: Serialize + ?Sized>(&mut self, value: &T) -> anyhow::Result<()> {
        match self {
            Sink::Print => println!("{}", serde_json::to_string_pretty(value)?),
            Sink::Keep { values, .. } => values.push(serde_json::to_value(value)?),
        }
        Ok(())
    }

    /// `file` as a trace source that, when the caller can stop the command, fails its next
    /// batch of requests once the caller has (so that every trace-driven command stops within a
    /// batch, its threads and all).
    pub fn watch(&self, file: TraceFile) -> WatchedTrace {
        let stop = match self {
            Sink::Print => None,
            Sink::Keep { stop, .. } => Some(Arc::clone(stop)),
        };
        WatchedTrace::new(file, stop)
    }

    /// The results kept (none when printing).
    pub fn into_kept(self) -> Vec<serde_json::Value> {
        match self {
            Sink::Print => Vec::new(),
            Sink::Keep { values, .. } => values,
        }
    }

    /// `json` when `format` is JSON, else the text `text` makes (a table or CSV for people).
    pub fn emit<T: Serialize + ?Sized>(
        &mut self,
        format: Format,
        json: &T,
        text: impl FnOnce() -> String,
    ) -> anyhow::Result<()> {
        match format {
            Format::Json => self.json(json),
            Format::Table | Format::Csv => {
                self.text(&text());
                Ok(())
            }
        }
    }

    /// `table` as text or CSV, or `json`, according to `format`.
    pub fn render<T: Serialize + ?Sized>(
        &mut self,
        format: Format,
        table: &Table,
        json: &T,
    ) -> anyhow::Result<()> {
        self.emit(format, json, || table_text(format, table))
    }
}

/// `table` as aligned text, or as CSV when `format` asks for CSV (JSON goes through
/// [`Sink::emit`], so a JSON `format` here gets the text).
pub fn table_text(format: Format, table: &Table) -> String {
    match format {
        Format::Csv => table.to_csv(),
        Format::Table | Format::Json => table.to_text(),
    }
}

/// Writes the report `build` makes to `path`, a command's `--report` (nothing, and `build` not
/// called, without one). Every command writes its report here, so that each fails the same way:
/// "cannot write report PATH: why".
pub fn write_report(path: Option<&Path>, build: impl FnOnce() -> Report) -> anyhow::Result<()> {
    let Some(path) = path else {
        return Ok(());
    };
    std::fs::write(path, build().to_html())
        .with_context(|| format!("cannot write report {}", path.display()))
}

/// A file's name without its folders, for a report's title (the page's text gives the whole
/// path).
pub fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |name| name.to_string_lossy().into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_are_written_or_fail_with_one_message() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.html");
        write_report(Some(&path), || Report::new("r")).unwrap();
        assert!(std::fs::read_to_string(&path)
            .unwrap()
            .contains("<title>r</title>"));
        write_report(None, || panic!("no --report: nothing is built")).unwrap();
        let missing = dir.path().join("no/such/dir/r.html");
        let error = write_report(Some(&missing), || Report::new("r")).unwrap_err();
        let message = format!("{error:#}");
        assert!(
            message.starts_with(&format!("cannot write report {}: ", missing.display())),
            "{message}"
        );
        assert!(!message.contains('\n'), "{message}");
    }

    #[test]
    fn titles_name_files_without_their_folders() {
        assert_eq!(file_name(Path::new("/tmp/t/z.bin")), "z.bin");
        assert_eq!(file_name(Path::new("..")), "..");
    }

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
