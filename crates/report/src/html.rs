//! An HTML page of headings, paragraphs, tables and charts.

use crate::Chart;

/// A report under construction; [`Report::to_html`] renders the page.
#[derive(Clone, Debug, Default)]
pub struct Report {
    title: String,
    body: String,
}

impl Report {
    /// An empty report with a page title.
    pub fn new(title: &str) -> Report {
        Report {
            title: title.to_string(),
            body: String::new(),
        }
    }

    /// Adds a section heading.
    pub fn heading(&mut self, text: &str) -> &mut Report {
        self.body.push_str(&format!("<h2>{}</h2>\n", escape(text)));
        self
    }

    /// Adds a paragraph of plain text.
    pub fn paragraph(&mut self, text: &str) -> &mut Report {
        self.body.push_str(&format!("<p>{}</p>\n", escape(text)));
        self
    }

    /// Adds a table; cells that parse as numbers are right-aligned. A table wider than the
    /// page scrolls sideways in its own box rather than widening the page.
    pub fn table(&mut self, headers: &[&str], rows: &[Vec<String>]) -> &mut Report {
        self.body.push_str("<div class=\"wide\"><table>\n<tr>");
        for header in headers {
            self.body.push_str(&format!("<th>{}</th>", escape(header)));
        }
        self.body.push_str("</tr>\n");
        for row in rows {
            self.body.push_str("<tr>");
            for cell in row {
                let class = if cell.parse::<f64>().is_ok() {
                    " class=\"num\""
                } else {
                    ""
                };
                self.body
                    .push_str(&format!("<td{class}>{}</td>", escape(cell)));
            }
            self.body.push_str("</tr>\n");
        }
        self.body.push_str("</table></div>\n");
        self
    }

    /// Adds a chart (a [`crate::LineChart`] or a [`crate::BarChart`]).
    pub fn chart(&mut self, chart: &impl Chart) -> &mut Report {
        self.body.push_str("<figure>");
        self.body.push_str(&chart.to_svg());
        self.body.push_str("</figure>\n");
        self
    }

    /// The whole page.
    pub fn to_html(&self) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{title}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n{body}</body>\n</html>\n",
            title = escape(&self.title),
            body = self.body
        )
    }
}

const STYLE: &str =
    "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:60em;color:#222}\n\
table{border-collapse:collapse;margin:1em 0}\n\
th,td{border:1px solid #ccc;padding:.25em .6em}\n\
th{background:#f3f3f3}\n\
td.num{text-align:right;font-variant-numeric:tabular-nums}\n\
figure{margin:1em 0}\n\
.wide{overflow-x:auto}\n";

/// Escapes text for HTML and SVG.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_escapes_text_and_marks_numbers() {
        let mut report = Report::new("a < b");
        report
            .heading("R&D")
            .table(&["name", "value"], &[vec!["x".into(), "0.5".into()]]);
        let html = report.to_html();
        assert!(html.contains("<title>a &lt; b</title>"));
        assert!(html.contains("<h2>R&amp;D</h2>"));
        assert!(html.contains("<td class=\"num\">0.5</td>"));
        assert!(!html.contains("<script"));
    }
}
