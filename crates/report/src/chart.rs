//! Line charts as inline SVG, with linear or log₁₀ x axes.

use std::fmt::Write;

use crate::html::escape;

/// One named line; a series of one point is drawn as a dot (a point to mark, such as an
/// optimum).
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    /// (x, y) points, drawn in the order given.
    pub points: Vec<(f64, f64)>,
}

/// A chart of several series over shared axes.
#[derive(Clone, Debug)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// Logarithmic x axis (cache sizes span decades).
    pub x_log: bool,
    /// Fixed y range; derived from the data when `None`.
    pub y_range: Option<(f64, f64)>,
    pub series: Vec<Series>,
}

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 420.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 55.0;
/// Colour-blind-safe palette (Okabe–Ito, then two of Tol's muted colours), one per series of a
/// ten-policy comparison; further series reuse it dashed.
const COLOURS: [&str; 10] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000",
    "#882255", "#999999",
];

impl LineChart {
    /// A chart with a title and axis labels and no series yet.
    pub fn new(title: &str, x_label: &str, y_label: &str) -> LineChart {
        LineChart {
            title: title.to_string(),
            x_label: x_label.to_string(),
            y_label: y_label.to_string(),
            x_log: false,
            y_range: None,
            series: Vec::new(),
        }
    }

    fn x_value(&self, x: f64) -> Option<f64> {
        if self.x_log {
            (x > 0.0).then(|| x.log10())
        } else {
            Some(x)
        }
    }

    /// Renders the chart as an `<svg>` element.
    pub fn to_svg(&self) -> String {
        let xs: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().filter_map(|&(x, _)| self.x_value(x)))
            .collect();
        let ys: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|&(_, y)| y))
            .filter(|y| y.is_finite())
            .collect();
        let (x_min, x_max) = span(&xs);
        let (y_min, y_max) = self.y_range.unwrap_or_else(|| span(&ys));
        let plot_w = WIDTH - LEFT - RIGHT;
        let plot_h = HEIGHT - TOP - BOTTOM;
        let sx = |x: f64| LEFT + (x - x_min) / (x_max - x_min) * plot_w;
        let sy = |y: f64| TOP + plot_h - (y - y_min) / (y_max - y_min) * plot_h;

        let mut svg = String::new();
        let _ = write!(
            svg,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">"
        );
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{}</text>",
            LEFT + plot_w / 2.0,
            escape(&self.title)
        );
        let _ = write!(
            svg,
            "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{plot_w}\" height=\"{plot_h}\" fill=\"none\" stroke=\"#888\"/>"
        );
        for i in 0..=5 {
            let y = y_min + (y_max - y_min) * f64::from(i) / 5.0;
            let py = sy(y);
            let _ = write!(
                svg,
                "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{py:.1}\" y2=\"{py:.1}\" stroke=\"#eee\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                LEFT + plot_w,
                LEFT - 6.0,
                py + 4.0,
                tick_label(y)
            );
        }
        for (x, label) in self.x_ticks(x_min, x_max) {
            let px = sx(x);
            let _ = write!(
                svg,
                "<line x1=\"{px:.1}\" x2=\"{px:.1}\" y1=\"{TOP}\" y2=\"{}\" stroke=\"#eee\"/><text x=\"{px:.1}\" y=\"{}\" text-anchor=\"middle\">{label}</text>",
                TOP + plot_h,
                TOP + plot_h + 18.0
            );
        }
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            LEFT + plot_w / 2.0,
            HEIGHT - 12.0,
            escape(&self.x_label)
        );
        let _ = write!(
            svg,
            "<text transform=\"translate(16,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
            TOP + plot_h / 2.0,
            escape(&self.y_label)
        );
        for (index, series) in self.series.iter().enumerate() {
            let colour = COLOURS[index % COLOURS.len()];
            let dash = if index >= COLOURS.len() {
                " stroke-dasharray=\"6 3\""
            } else {
                ""
            };
            let points: Vec<String> = series
                .points
                .iter()
                .filter(|(_, y)| y.is_finite())
                .filter_map(|&(x, y)| {
                    self.x_value(x)
                        .map(|x| format!("{:.1},{:.1}", sx(x), sy(y)))
                })
                .collect();
            if let [point] = &points[..] {
                let (cx, cy) = point.split_once(',').expect("x,y");
                let _ = write!(
                    svg,
                    "<circle cx=\"{cx}\" cy=\"{cy}\" r=\"5\" fill=\"{colour}\"><title>{}</title></circle>",
                    escape(&series.name)
                );
            } else {
                let _ = write!(
                    svg,
                    "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{dash} points=\"{}\"><title>{}</title></polyline>",
                    points.join(" "),
                    escape(&series.name)
                );
            }
            let ly = TOP + 10.0 + index as f64 * 18.0;
            let lx = LEFT + plot_w + 12.0;
            let _ = write!(
                svg,
                "<line x1=\"{lx}\" x2=\"{}\" y1=\"{ly}\" y2=\"{ly}\" stroke=\"{colour}\" stroke-width=\"3\"{dash}/><text x=\"{}\" y=\"{}\">{}</text>",
                lx + 20.0,
                lx + 26.0,
                ly + 4.0,
                escape(&series.name)
            );
        }
        svg.push_str("</svg>");
        svg
    }

    fn x_ticks(&self, x_min: f64, x_max: f64) -> Vec<(f64, String)> {
        if self.x_log {
            let mut ticks = Vec::new();
            let mut decade = x_min.floor();
            while decade <= x_max.ceil() {
                if decade >= x_min && decade <= x_max {
                    ticks.push((decade, tick_label(10f64.powf(decade))));
                }
                decade += 1.0;
            }
            if ticks.len() < 2 {
                ticks = vec![
                    (x_min, tick_label(10f64.powf(x_min))),
                    (x_max, tick_label(10f64.powf(x_max))),
                ];
            }
            ticks
        } else {
            (0..=5)
                .map(|i| {
                    let x = x_min + (x_max - x_min) * f64::from(i) / 5.0;
                    (x, tick_label(x))
                })
                .collect()
        }
    }
}

/// The range of `values`, widened when empty or flat so scales never divide by zero.
fn span(values: &[f64]) -> (f64, f64) {
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

/// Short axis labels: 0.25, 12, 3.5k, 64M, 1.2G.
fn tick_label(value: f64) -> String {
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
    fn draws_each_series_with_a_legend() {
        let mut chart = LineChart::new("MRC", "cache size", "miss ratio");
        chart.x_log = true;
        chart.series.push(Series {
            name: "lru".into(),
            points: vec![(10.0, 0.9), (100.0, 0.5), (1000.0, 0.1)],
        });
        chart.series.push(Series {
            name: "fifo".into(),
            points: vec![(10.0, 0.95), (100.0, 0.6), (1000.0, 0.2)],
        });
        chart.series.push(Series {
            name: "best".into(),
            points: vec![(100.0, 0.5)],
        });
        let svg = chart.to_svg();
        assert_eq!(svg.matches("<polyline").count(), 2);
        // A series of one point is a dot.
        assert_eq!(svg.matches("<circle").count(), 1);
        assert!(svg.contains(">lru</text>") && svg.contains(">fifo</text>"));
        // Three decades on a log axis: 10, 100, 1000 as ticks.
        assert!(svg.contains(">100</text>"));
    }

    #[test]
    fn empty_and_flat_data_do_not_divide_by_zero() {
        let mut chart = LineChart::new("t", "x", "y");
        assert!(!chart.to_svg().contains("NaN"));
        chart.series.push(Series {
            name: "flat".into(),
            points: vec![(1.0, 0.5), (2.0, 0.5)],
        });
        assert!(!chart.to_svg().contains("NaN"));
    }

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(tick_label(0.25), "0.25");
        assert_eq!(tick_label(64e6), "64M");
        assert_eq!(tick_label(12_000.0), "12k");
    }
}
