//! The engine decides; an executor does (docs/architecture.md, "One policy code, two executors").
//!
//! A [`Controller`] turns each request into a [`Plan`] of device operations. The timed simulator
//! completes the plan on device models and a virtual clock; the live servers complete it on real
//! storage.

pub mod admission;
pub mod cache;
pub mod controller;
mod error;
pub mod nyx;
pub mod plan;
pub mod poly;
pub mod split;
pub mod staging;
pub mod timing;

pub use admission::{
    AdmissionConfig, AdmissionScheme, AdmitSettings, FixedConfig, LbicaConfig, NhcConfig,
    SibConfig, TargetMetric, TuningHistory, TuningPoint,
};
pub use cache::config::{
    AcpConfig, AlruConfig, CacheConfig, CleaningPolicy, ConfigError, NhitConfig, PromotionPolicy,
    TierLayout, WriteMode,
};
pub use cache::{CacheController, MAX_CACHE_TIERS};
pub use controller::{Controller, ControllerStats, Decision, Feedback, Reply};
pub use error::{NameError, ParamError, ProfileError};
pub use plan::{DeviceOp, IoKind, Plan};
pub use split::SplitController;
pub use timing::{time_plan, time_stage, PlanTimes, SoftwareCost};
