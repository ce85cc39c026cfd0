//! Line charts as inline SVG, with linear or log₁₀ x axes.

use std::fmt::Write;

use crate::canvas::{nice, span, style, tick_label, ticks, Canvas, Swatch, LEFT, PLOT_W};
use crate::html::escape;
use crate::Chart;

/// One named line; a series of one point is drawn as a dot (a point to mark, such as an
/// optimum).
#[derive(Clone, Debug)]
pub struct Series {
    /// The name the legend shows.
    pub name: String,
    /// (x, y) points, drawn in the order given.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// A series named `name` through `points`.
    pub fn new(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.to_string(),
            points,
        }
    }
}

/// A chart of several series over shared axes.
#[derive(Clone, Debug)]
pub struct LineChart {
    /// Shown above the plot.
    pub title: String,
    /// The x axis' label, with its unit.
    pub x_label: String,
    /// The y axis' label, with its unit.
    pub y_label: String,
    /// Logarithmic x axis (cache sizes span decades).
    pub x_log: bool,
    /// Fixed y range; derived from the data when `None`.
    pub y_range: Option<(f64, f64)>,
    /// The lines, in legend order.
    pub series: Vec<Series>,
}

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

    fn x_ticks(&self, x_min: f64, x_max: f64) -> Vec<(f64, String)> {
        if self.x_log {
            // Powers of ten; over less than two decades also 2 and 5 times them, so that a
            // narrow axis still has a few labels.
            let multiples: &[f64] = if x_max - x_min < 2.0 {
                &[1.0, 2.0, 5.0]
            } else {
                &[1.0]
            };
            let mut ticks = Vec::new();
            let mut decade = x_min.floor();
            while decade <= x_max.ceil() {
                for multiple in multiples {
                    let value = multiple * 10f64.powf(decade);
                    let at = value.log10();
                    if at >= x_min && at <= x_max {
                        ticks.push((at, tick_label(value)));
                    }
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
            ticks(x_min, x_max)
                .into_iter()
                .map(|x| (x, tick_label(x)))
                .collect()
        }
    }
}

impl Chart for LineChart {
    fn to_svg(&self) -> String {
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
        let y_range = self.y_range.unwrap_or_else(|| nice(span(&ys)));
        let sx = |x: f64| LEFT + (x - x_min) / (x_max - x_min) * PLOT_W;
        let mut canvas = Canvas::new(&self.title, &self.x_label, &self.y_label, y_range, false);
        for (x, label) in self.x_ticks(x_min, x_max) {
            canvas.x_tick(sx(x), &label, true);
        }
        for (index, series) in self.series.iter().enumerate() {
            let (colour, dash) = style(index);
            let points: Vec<(f64, f64)> = series
                .points
                .iter()
                .filter(|(_, y)| y.is_finite())
                .filter_map(|&(x, y)| self.x_value(x).map(|x| (sx(x), canvas.y(y))))
                .collect();
            let mut mark = String::new();
            if let [(cx, cy)] = points[..] {
                let _ = write!(
                    mark,
                    "<circle cx=\"{cx:.1}\" cy=\"{cy:.1}\" r=\"5\" fill=\"{colour}\"><title>{}</title></circle>",
                    escape(&series.name)
                );
            } else {
                let drawn: Vec<String> = points
                    .iter()
                    .map(|(x, y)| format!("{x:.1},{y:.1}"))
                    .collect();
                let _ = write!(
                    mark,
                    "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{dash} points=\"{}\"><title>{}</title></polyline>",
                    drawn.join(" "),
                    escape(&series.name)
                );
            }
            canvas.mark(&mark);
            canvas.legend(index, &series.name, Swatch::Line);
        }
        canvas.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_each_series_with_a_legend() {
        let mut chart = LineChart::new("MRC", "cache size", "miss ratio");
        chart.x_log = true;
        chart.series.push(Series::new(
            "lru",
            vec![(10.0, 0.9), (100.0, 0.5), (1000.0, 0.1)],
        ));
        chart.series.push(Series::new(
            "fifo",
            vec![(10.0, 0.95), (100.0, 0.6), (1000.0, 0.2)],
        ));
        chart.series.push(Series::new("best", vec![(100.0, 0.5)]));
        let svg = chart.to_svg();
        assert_eq!(svg.matches("<polyline").count(), 2);
        // A series of one point is a dot.
        assert_eq!(svg.matches("<circle").count(), 1);
        assert!(svg.contains(">lru</text>") && svg.contains(">fifo</text>"));
        // Three decades on a log axis: 10, 100, 1000 as ticks, and no more.
        assert!(svg.contains(">100</text>") && !svg.contains(">200</text>"));
        assert!(svg.contains(">MRC</text>") && svg.contains(">miss ratio</text>"));
    }

    #[test]
    fn narrow_log_axes_also_mark_twos_and_fives() {
        let mut chart = LineChart::new("t", "queue depth", "IOPS");
        chart.x_log = true;
        chart
            .series
            .push(Series::new("qd", vec![(1.0, 1.0), (8.0, 2.0), (64.0, 3.0)]));
        let svg = chart.to_svg();
        for label in [">1<", ">2<", ">5<", ">10<", ">20<", ">50<"] {
            assert!(svg.contains(label), "{label}");
        }
    }

    #[test]
    fn empty_and_flat_data_do_not_divide_by_zero() {
        let mut chart = LineChart::new("t", "x", "y");
        assert!(!chart.to_svg().contains("NaN"));
        chart
            .series
            .push(Series::new("flat", vec![(1.0, 0.5), (2.0, 0.5)]));
        assert!(!chart.to_svg().contains("NaN"));
    }

    #[test]
    fn log_axes_leave_out_points_at_or_below_zero() {
        let mut chart = LineChart::new("t", "x", "y");
        chart.x_log = true;
        chart.series.push(Series::new(
            "s",
            vec![(0.0, 1.0), (10.0, 0.5), (100.0, 0.2)],
        ));
        let svg = chart.to_svg();
        let points = svg.split("points=\"").nth(1).unwrap();
        let points = points.split('"').next().unwrap();
        assert_eq!(points.split(' ').count(), 2, "{points}");
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }
}
