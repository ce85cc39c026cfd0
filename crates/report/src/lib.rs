//! Self-contained HTML reports: tables, line charts and bar charts drawn as inline SVG, so a
//! report opens in any browser with no network and no scripts (docs/architecture.md,
//! "Conventions").

pub mod bar;
mod canvas;
pub mod chart;
pub mod html;

pub use bar::{BarChart, Bars};
pub use chart::{LineChart, Series};
pub use html::Report;

/// A chart a [`Report`] can hold: anything drawn as one inline `<svg>` element.
pub trait Chart {
    /// Renders the chart as an `<svg>` element with its title, axes, labels and legend.
    fn to_svg(&self) -> String;
}
