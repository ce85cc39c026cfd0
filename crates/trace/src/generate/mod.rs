//! Seeded, deterministic workload generators.
