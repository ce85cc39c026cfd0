//! The analytic caching-vs-splitting model (being built for issue 3).
