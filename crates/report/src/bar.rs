//! Bar charts as inline SVG: values by category, several series side by side in each
//! category (per-policy miss ratios at each cache size, a histogram's buckets, each export's
//! hit ratio).

use std::fmt::Write;

use crate::canvas::{nice, nice_log, span, style, Canvas, Swatch, LEFT, PLOT_W};
use crate::html::escape;
use crate::Chart;

/// One named set of bars, one value per category of its chart (`NaN` leaves a gap).
#[derive(Clone, Debug)]
pub struct Bars {
    /// The name the legend shows.
    pub name: String,
    /// A value per category, in the chart's category order.
    pub values: Vec<f64>,
}

impl Bars {
    /// Bars named `name` with these values.
    pub fn new(name: &str, values: Vec<f64>) -> Bars {
        Bars {
            name: name.to_string(),
            values,
        }
    }
}

/// A chart of bars grouped by category over a y axis that includes zero.
#[derive(Clone, Debug)]
pub struct BarChart {
    /// Shown above the plot.
    pub title: String,
    /// The x axis' label: what the categories are.
    pub x_label: String,
    /// The y axis' label, with its unit.
    pub y_label: String,
    /// The categories, left to right.
    pub categories: Vec<String>,
    /// Fixed y range; derived from the data (and zero) when `None`.
    pub y_range: Option<(f64, f64)>,
    /// Logarithmic y axis (latencies whose tail is orders of magnitude above the median); bars
    /// then grow from the bottom of the axis, and values at or below zero are left out.
    pub y_log: bool,
    /// The series, in legend order, each drawn at the same place in every category.
    pub series: Vec<Bars>,
}

/// Share of a category's width its bars take at most; the rest separates categories.
const GROUP_FILL: f64 = 0.8;
/// Widest bar, so that a chart of two categories does not read as two blocks.
const MAX_BAR_PX: f64 = 60.0;
/// Estimated width of one character of a 12 px label, to space category labels.
const CHAR_PX: f64 = 7.0;
/// Longer category labels are shortened with an ellipsis (the bars' tooltips keep them whole).
const LABEL_CHARS: usize = 14;

impl BarChart {
    /// A chart with a title, axis labels and categories, and no series yet.
    pub fn new(title: &str, x_label: &str, y_label: &str, categories: Vec<String>) -> BarChart {
        BarChart {
            title: title.to_string(),
            x_label: x_label.to_string(),
            y_label: y_label.to_string(),
            categories,
            y_range: None,
            y_log: false,
            series: Vec::new(),
        }
    }

    /// The y range: the one set, else the data's with zero in it, as bars grow from zero (on a
    /// log axis, the whole decades around the positive values).
    fn y_range(&self) -> (f64, f64) {
        if let Some(range) = self.y_range {
            return range;
        }
        let mut values: Vec<f64> = self
            .series
            .iter()
            .flat_map(|bars| bars.values.iter().copied())
            .filter(|value| value.is_finite() && (!self.y_log || *value > 0.0))
            .collect();
        if self.y_log {
            let (min, max) = span(&values);
            return if values.is_empty() {
                (1.0, 10.0)
            } else {
                nice_log(min.max(f64::MIN_POSITIVE), max)
            };
        }
        if values.iter().all(|&value| value == 0.0) {
            // Nothing but zeros (or nothing): a unit axis above the zero line.
            return (0.0, 1.0);
        }
        values.push(0.0);
        nice(span(&values))
    }
}

impl Chart for BarChart {
    fn to_svg(&self) -> String {
        let (y_min, y_max) = self.y_range();
        let mut canvas = Canvas::new(
            &self.title,
            &self.x_label,
            &self.y_label,
            (y_min, y_max),
            self.y_log,
        );
        let groups = self.categories.len().max(1) as f64;
        let group_w = PLOT_W / groups;
        let bars = self.series.len().max(1) as f64;
        let bar_w = (group_w * GROUP_FILL / bars).min(MAX_BAR_PX);
        // The bars of a category, centred in its width.
        let inset = (group_w - bar_w * bars) / 2.0;
        let labels: Vec<String> = self.categories.iter().map(|c| shorten(c)).collect();
        // Every `step`-th label, so that neighbours never overlap.
        let widest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
        let step = ((widest as f64 * CHAR_PX + 6.0) / group_w).ceil().max(1.0) as usize;
        for (index, label) in labels.iter().enumerate().step_by(step) {
            canvas.x_tick(LEFT + (index as f64 + 0.5) * group_w, label, false);
        }
        let base = if self.y_log {
            canvas.y(y_min)
        } else {
            canvas.y(0.0_f64.clamp(y_min, y_max))
        };
        for (index, bars) in self.series.iter().enumerate() {
            let (colour, _) = style(index);
            let mut marks = String::new();
            for (group, (category, &value)) in self.categories.iter().zip(&bars.values).enumerate()
            {
                if !value.is_finite() || (self.y_log && value <= 0.0) {
                    continue;
                }
                let group = group as f64;
                let x = LEFT + group * group_w + inset + index as f64 * bar_w;
                let top = canvas.y(value.clamp(y_min, y_max));
                let _ = write!(
                    marks,
                    "<rect class=\"bar\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{bar_w:.1}\" height=\"{:.1}\" fill=\"{colour}\"><title>{}: {} = {}</title></rect>",
                    top.min(base),
                    (top - base).abs(),
                    escape(&bars.name),
                    escape(category),
                    value_label(value)
                );
            }
            canvas.mark(&marks);
            canvas.legend(index, &bars.name, Swatch::Block);
        }
        canvas.finish()
    }
}

/// `label`, or its first characters and an ellipsis when it is too long to place under a bar.
fn shorten(label: &str) -> String {
    if label.chars().count() <= LABEL_CHARS {
        label.to_string()
    } else {
        let kept: String = label.chars().take(LABEL_CHARS - 1).collect();
        format!("{kept}…")
    }
}

/// A bar's value in its tooltip: whole numbers as they are, others to four significant digits.
fn value_label(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        format!("{value:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn categories(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn draws_a_bar_per_value_and_a_legend_entry_per_series() {
        let mut chart = BarChart::new(
            "Miss ratio",
            "cache size",
            "miss ratio",
            categories(&["1%", "10%"]),
        );
        chart.series.push(Bars::new("lru", vec![0.8, 0.4]));
        chart.series.push(Bars::new("fifo", vec![0.9, f64::NAN]));
        let svg = chart.to_svg();
        // The NaN leaves a gap.
        assert_eq!(svg.matches("class=\"bar\"").count(), 3);
        assert!(svg.contains(">lru</text>") && svg.contains(">fifo</text>"));
        assert!(svg.contains(">1%</text>") && svg.contains(">10%</text>"));
        assert!(svg.contains("<title>lru: 10% = 0.4000</title>"));
        assert!(svg.contains(">Miss ratio</text>") && svg.contains(">cache size</text>"));
        // Legend swatches are squares, not lines.
        assert!(!svg.contains("stroke-width=\"3\""));
    }

    #[test]
    fn bars_grow_from_zero_both_ways() {
        let mut chart = BarChart::new("t", "x", "y", categories(&["a", "b"]));
        chart.series.push(Bars::new("s", vec![2.0, -2.0]));
        assert_eq!(chart.y_range(), (-2.0, 2.0));
        let svg = chart.to_svg();
        // Both bars are as tall as each other, one above the zero line and one below.
        let heights: Vec<&str> = svg
            .split("class=\"bar\"")
            .skip(1)
            .map(|bar| {
                bar.split("height=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
            })
            .collect();
        assert_eq!(heights.len(), 2);
        assert_eq!(heights[0], heights[1]);
    }

    #[test]
    fn log_bars_grow_from_the_bottom_decade_and_leave_out_zeros() {
        let mut chart = BarChart::new("t", "x", "latency (µs)", categories(&["a", "b", "c"]));
        chart.y_log = true;
        chart.series.push(Bars::new("s", vec![10.0, 1000.0, 0.0]));
        assert_eq!(chart.y_range(), (1.0, 1000.0));
        let svg = chart.to_svg();
        assert_eq!(svg.matches("class=\"bar\"").count(), 2);
        let heights: Vec<f64> = svg
            .split("class=\"bar\"")
            .skip(1)
            .map(|bar| {
                let height = bar.split("height=\"").nth(1).unwrap();
                height.split('"').next().unwrap().parse().unwrap()
            })
            .collect();
        // 10 is one decade up, 1000 three.
        assert!((heights[1] - 3.0 * heights[0]).abs() < 0.2, "{heights:?}");
        chart.series[0].values = vec![0.0; 3];
        assert!(!chart.to_svg().contains("NaN"));
    }

    #[test]
    fn empty_and_zero_data_do_not_divide_by_zero() {
        let mut chart = BarChart::new("t", "x", "y", Vec::new());
        assert!(!chart.to_svg().contains("NaN"));
        chart.categories = categories(&["a"]);
        chart.series.push(Bars::new("zero", vec![0.0]));
        assert_eq!(chart.y_range(), (0.0, 1.0));
        assert!(!chart.to_svg().contains("NaN"));
    }

    #[test]
    fn crowded_labels_are_thinned_and_long_ones_shortened() {
        let names: Vec<String> = (0..40).map(|i| format!("{}", 1u64 << i)).collect();
        let mut chart = BarChart::new("t", "x", "y", names);
        chart.series.push(Bars::new("s", vec![1.0; 40]));
        let svg = chart.to_svg();
        assert!(svg.contains(">1</text>"));
        assert!(
            !svg.contains(">2</text>"),
            "every label drawn: they would overlap"
        );
        assert_eq!(shorten("read_misalignment_mean_bytes"), "read_misalign…");
        assert_eq!(shorten("hits"), "hits");
    }
}
