//! Self-contained HTML reports: tables and line charts drawn as inline SVG, so a report opens
//! in any browser with no network and no scripts (docs/architecture.md, "Conventions").

pub mod chart;
pub mod html;

pub use chart::{LineChart, Series};
pub use html::Report;
