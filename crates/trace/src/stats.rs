//! Trace statistics.
