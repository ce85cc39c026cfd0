//! What an experiment returns: rows for tables, CSV and JSON, charts for the HTML report, and
//! the thesis' figures beside ours.

use heterarchy_report::LineChart;
use serde::Serialize;
use serde_json::Value;

/// One number of the thesis and ours for the same thing.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// What is compared, e.g. "Load-2.0, 95% hits, Optane SSD + flash: throughput gain".
    pub what: String,
    /// The thesis' figure as it states it ("+54%").
    pub thesis: String,
    /// Ours, in the same form.
    pub ours: String,
}

/// An experiment's results.
#[derive(Clone, Debug)]
pub struct Output {
    pub title: String,
    /// One JSON object per row, every row with the same keys in the same order.
    pub rows: Vec<Value>,
    pub charts: Vec<LineChart>,
    pub comparisons: Vec<Comparison>,
    /// What the reader should know: choices made where the thesis is silent.
    pub notes: Vec<String>,
}

impl Output {
    /// An output titled `title` with `rows` (any serializable structs).
    pub fn new<T: Serialize>(title: &str, rows: &[T]) -> Output {
        Output {
            title: title.to_string(),
            rows: rows
                .iter()
                .map(|row| serde_json::to_value(row).expect("rows serialize"))
                .collect(),
            charts: Vec::new(),
            comparisons: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// The column names, from the first row.
    pub fn columns(&self) -> Vec<String> {
        match self.rows.first() {
            Some(Value::Object(fields)) => fields.keys().cloned().collect(),
            _ => Vec::new(),
        }
    }

    /// Every row as text cells in [`columns`](Self::columns)' order, strings as they are;
    /// numbers in full, or with four significant digits when `rounded` (for people).
    pub fn cells(&self, rounded: bool) -> Vec<Vec<String>> {
        let columns = self.columns();
        self.rows
            .iter()
            .map(|row| {
                columns
                    .iter()
                    .map(|column| cell(row.get(column).unwrap_or(&Value::Null), rounded))
                    .collect()
            })
            .collect()
    }
}

fn cell(value: &Value, rounded: bool) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Number(number) => match number.as_f64() {
            Some(real) if number.is_f64() && rounded => significant(real),
            _ => number.to_string(),
        },
        other => other.to_string(),
    }
}

/// `value` with four significant digits, without exponent notation for everyday magnitudes.
pub fn significant(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = (3 - magnitude).clamp(0, 12) as usize;
    format!("{value:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Row {
        hierarchy: &'static str,
        load: f64,
        outstanding: u32,
        throughput: f64,
    }

    #[test]
    fn rows_keep_their_field_order_and_format_numbers() {
        let output = Output::new(
            "t",
            &[Row {
                hierarchy: "dram+optane-pm",
                load: 0.5,
                outstanding: 2,
                throughput: 12345.678,
            }],
        );
        assert_eq!(
            output.columns(),
            ["hierarchy", "load", "outstanding", "throughput"]
        );
        assert_eq!(
            output.cells(true),
            [["dram+optane-pm", "0.5000", "2", "12346"]]
        );
        assert_eq!(output.cells(false)[0][3], "12345.678");
        assert_eq!(significant(0.012345), "0.01235");
        assert_eq!(significant(1.5), "1.500");
    }
}
