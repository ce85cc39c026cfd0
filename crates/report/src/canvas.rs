//! What every chart kind shares: the canvas's size and margins, the palette, the frame with its
//! title, axis labels and y grid, the legend, and short number labels, so that line and bar
//! charts read alike side by side in one report.

use std::fmt::Write;

use crate::html::escape;

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 420.0;
/// Left edge of the plot area (room for the y ticks and the y label).
pub(crate) const LEFT: f64 = 70.0;
/// Right margin: the legend lives there.
const RIGHT: f64 = 170.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 55.0;
/// Width of the plot area.
pub(crate) const PLOT_W: f64 = WIDTH - LEFT - RIGHT;
/// Height of the plot area.
const PLOT_H: f64 = HEIGHT - TOP - BOTTOM;
/// Colour-blind-safe palette (Okabe–Ito, then two of Tol's muted colours), one per series of a
/// ten-policy comparison; further series reuse it dashed.
const COLOURS: [&str; 10] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000",
    "#882255", "#999999",
];

/// How series number `index` is drawn: its colour, and the SVG attribute that dashes it once
/// the palette has gone round (empty before).
pub(crate) fn style(index: usize) -> (&'static str, &'static str) {
    let dash = if index >= COLOURS.len() {
        " stroke-dasharray=\"6 3\""
    } else {
        ""
    };
    (COLOURS[index % COLOURS.len()], dash)
}

/// What a legend entry shows beside a series' name: a stroke for a line, a square for bars.
pub(crate) enum Swatch {
    Line,
    Block,
}

/// An SVG chart being drawn: the frame, title, axis labels and y axis are drawn by
/// [`Canvas::new`]; each chart kind adds its x ticks, marks and legend entries, then
/// [`Canvas::finish`] closes the element.
pub(crate) struct Canvas {
    svg: String,
    /// The y axis' bottom and top, in axis units (log₁₀ of the values on a log axis).
    y_min: f64,
    y_max: f64,
    y_log: bool,
}

impl Canvas {
    /// A canvas whose y axis spans `y_range` (low, high; never equal; both positive on a
    /// logarithmic axis, `y_log`).
    pub(crate) fn new(
        title: &str,
        x_label: &str,
        y_label: &str,
        y_range: (f64, f64),
        y_log: bool,
    ) -> Canvas {
        // A log axis needs a positive range; anything else (a caller's mistake) gets one decade
        // rather than an endless loop of ticks.
        let y_range = if y_log && !(y_range.0 > 0.0 && y_range.1 > y_range.0) {
            (1.0, 10.0)
        } else {
            y_range
        };
        let axis = |value: f64| if y_log { value.log10() } else { value };
        let mut canvas = Canvas {
            svg: String::new(),
            y_min: axis(y_range.0),
            y_max: axis(y_range.1),
            y_log,
        };
        let svg = &mut canvas.svg;
        let _ = write!(
            svg,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">"
        );
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{}</text>",
            LEFT + PLOT_W / 2.0,
            escape(title)
        );
        let _ = write!(
            svg,
            "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{PLOT_W}\" height=\"{PLOT_H}\" fill=\"none\" stroke=\"#888\"/>"
        );
        let y_ticks = if y_log {
            // Whole decades.
            (canvas.y_min.ceil() as i32..=canvas.y_max.floor() as i32)
                .map(|decade| 10f64.powi(decade))
                .collect()
        } else {
            ticks(canvas.y_min, canvas.y_max)
        };
        for y in y_ticks {
            let py = canvas.y(y);
            let _ = write!(
                canvas.svg,
                "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{py:.1}\" y2=\"{py:.1}\" stroke=\"#eee\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                LEFT + PLOT_W,
                LEFT - 6.0,
                py + 4.0,
                tick_label(y)
            );
        }
        let _ = write!(
            canvas.svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            LEFT + PLOT_W / 2.0,
            HEIGHT - 12.0,
            escape(x_label)
        );
        let _ = write!(
            canvas.svg,
            "<text transform=\"translate(16,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
            TOP + PLOT_H / 2.0,
            escape(y_label)
        );
        canvas
    }

    /// The vertical pixel of `value` on the y axis (positive on a log axis).
    pub(crate) fn y(&self, value: f64) -> f64 {
        let at = if self.y_log { value.log10() } else { value };
        TOP + PLOT_H - (at - self.y_min) / (self.y_max - self.y_min) * PLOT_H
    }

    /// A label under the plot at horizontal pixel `px`, with a vertical grid line when `grid`.
    pub(crate) fn x_tick(&mut self, px: f64, label: &str, grid: bool) {
        if grid {
            let _ = write!(
                self.svg,
                "<line x1=\"{px:.1}\" x2=\"{px:.1}\" y1=\"{TOP}\" y2=\"{}\" stroke=\"#eee\"/>",
                TOP + PLOT_H
            );
        }
        let _ = write!(
            self.svg,
            "<text x=\"{px:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            TOP + PLOT_H + 18.0,
            escape(label)
        );
    }

    /// Appends marks (SVG elements) to the plot.
    pub(crate) fn mark(&mut self, element: &str) {
        self.svg.push_str(element);
    }

    /// The legend entry of series number `index`, right of the plot.
    pub(crate) fn legend(&mut self, index: usize, name: &str, swatch: Swatch) {
        let (colour, dash) = style(index);
        let ly = TOP + 10.0 + index as f64 * 18.0;
        let lx = LEFT + PLOT_W + 12.0;
        let _ = match swatch {
            Swatch::Line => write!(
                self.svg,
                "<line x1=\"{lx}\" x2=\"{}\" y1=\"{ly}\" y2=\"{ly}\" stroke=\"{colour}\" stroke-width=\"3\"{dash}/>",
                lx + 20.0
            ),
            Swatch::Block => write!(
                self.svg,
                "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{colour}\"/>",
                lx + 4.0,
                ly - 6.0
            ),
        };
        let _ = write!(
            self.svg,
            "<text x=\"{}\" y=\"{}\">{}</text>",
            lx + 26.0,
            ly + 4.0,
            escape(name)
        );
    }

    /// The finished `<svg>` element.
    pub(crate) fn finish(mut self) -> String {
        self.svg.push_str("</svg>");
        self.svg
    }
}

/// The range of `values`, widened when empty or flat so scales never divide by zero.
pub(crate) fn span(values: &[f64]) -> (f64, f64) {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !min.is_finite() || !max.is_finite() {
        (0.0, 1.0)
    } else if min == max {
        (min - 0.5, max + 0.5)
    } else {
        (min, max)
    }
}

/// The distance between y ticks over a range this wide: 1, 2 or 5 times a power of ten, for
/// about five ticks at round values.
fn tick_step(range: f64) -> f64 {
    let rough = range / 5.0;
    let power = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|&step| step >= rough)
        .unwrap_or(10.0 * power);
    if step.is_finite() && step > 0.0 {
        step
    } else {
        1.0
    }
}

/// Round values from `min` to `max` (both included when round) to label a linear axis with.
pub(crate) fn ticks(min: f64, max: f64) -> Vec<f64> {
    let step = tick_step(max - min);
    let first = (min / step).ceil() as i64;
    let last = (max / step).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// `range` widened to whole ticks, so that the data's extremes fall on or inside labelled
/// gridlines (a range derived from the data; a range set by the chart is kept as it is).
pub(crate) fn nice(range: (f64, f64)) -> (f64, f64) {
    let (low, high) = range;
    let step = tick_step(high - low);
    ((low / step).floor() * step, (high / step).ceil() * step)
}

/// Whole decades around positive `min` and `max` for a log axis, the lower one below `min` even
/// when it is a power of ten (so that the smallest bar still has a height).
pub(crate) fn nice_log(min: f64, max: f64) -> (f64, f64) {
    let low = min.log10().ceil() - 1.0;
    let high = max.log10().ceil().max(low + 1.0);
    (10f64.powf(low), 10f64.powf(high))
}

/// Short axis labels: 0.25, 12, 3.5k, 64M, 1.2G.
pub(crate) fn tick_label(value: f64) -> String {
    let magnitude = value.abs();
    let (scaled, suffix) = if magnitude >= 1e12 {
        (value / 1e12, "T")
    } else if magnitude >= 1e9 {
        (value / 1e9, "G")
    } else if magnitude >= 1e6 {
        (value / 1e6, "M")
    } else if magnitude >= 1e4 {
        (value / 1e3, "k")
    } else {
        (value, "")
    };
    let text = if scaled.fract().abs() < 1e-9 {
        format!("{scaled:.0}")
    } else if scaled.abs() >= 10.0 {
        format!("{scaled:.1}")
    } else {
        format!("{scaled:.2}")
    };
    format!("{text}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(tick_label(0.25), "0.25");
        assert_eq!(tick_label(64e6), "64M");
        assert_eq!(tick_label(12_000.0), "12k");
    }

    #[test]
    fn flat_and_empty_spans_are_widened() {
        assert_eq!(span(&[]), (0.0, 1.0));
        assert_eq!(span(&[2.0, 2.0]), (1.5, 2.5));
        assert_eq!(span(&[3.0, 1.0]), (1.0, 3.0));
    }

    #[test]
    fn ticks_fall_on_round_values() {
        assert_eq!(tick_step(23_463.0), 5000.0);
        assert_eq!(tick_step(1.0), 0.2);
        assert_eq!(tick_step(0.0), 1.0);
        assert_eq!(nice((0.0, 23_463.0)), (0.0, 25_000.0));
        assert_eq!(nice((-3.0, 7.0)), (-4.0, 8.0));
        let labels: Vec<String> = ticks(0.25, 1.0).into_iter().map(tick_label).collect();
        assert_eq!(labels, ["0.40", "0.60", "0.80", "1"]);
        let svg = Canvas::new("t", "x", "y", nice((0.0, 23_463.0)), false).finish();
        for label in [">0<", ">5000<", ">10k<", ">25k<"] {
            assert!(svg.contains(label), "{label}");
        }
    }

    #[test]
    fn log_axes_span_whole_decades_with_room_below() {
        assert_eq!(nice_log(10.0, 1000.0), (1.0, 1000.0));
        assert_eq!(nice_log(15.0, 2500.0), (10.0, 10_000.0));
        assert_eq!(nice_log(50.0, 50.0), (10.0, 100.0));
        let canvas = Canvas::new("t", "x", "y", (1.0, 1000.0), true);
        // Each decade a third of the way up.
        let third = canvas.y(1.0) - canvas.y(10.0);
        assert!((canvas.y(10.0) - canvas.y(100.0) - third).abs() < 1e-9);
        let svg = canvas.finish();
        for label in [">1<", ">10<", ">100<", ">1000<"] {
            assert!(svg.contains(label), "{label}");
        }
        let unusable = Canvas::new("t", "x", "y", (0.0, 1.0), true).finish();
        assert!(unusable.contains(">10<") && !unusable.contains("NaN"));
    }

    #[test]
    fn palette_dashes_once_it_goes_round() {
        assert_eq!(style(0), ("#0072B2", ""));
        assert_eq!(style(10).0, "#0072B2");
        assert!(style(10).1.contains("dasharray"));
    }
}
