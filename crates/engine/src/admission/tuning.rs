//! The part of a controller that measures intervals, runs its tuner at each interval's end and
//! draws the random numbers of the `load_admit` decision point.

use heterarchy_trace::generate::Random;

use super::config::{AdmissionConfig, AdmissionScheme};
use super::fixed::Fixed;
use super::lbica::Lbica;
use super::nhc::Nhc;
use super::sib::Sib;
use super::{AdmitSettings, Interval, Tuner, TuningHistory, MAX_PAIRS};
use crate::controller::Reply;

/// Salt that keeps the decision point's random stream apart from other uses of the seed.
const DECISION_SALT: u64 = 0x6c6f_6164_5f61_646d;

/// A tuner, what it is measuring, and the settings it chose; see the module docs.
pub struct Tuning {
    tuner: Box<dyn Tuner>,
    interval_ns: u64,
    /// The interval being measured; it starts at the first event.
    interval: Interval,
    started: bool,
    collect_latencies: bool,
    settings: [AdmitSettings; MAX_PAIRS],
    pairs: usize,
    random: Random,
    history: TuningHistory,
}

impl Tuning {
    /// The tuning `config` asks for over `pairs` pairs of levels; `None` for classic caching,
    /// which needs none. `seed` seeds the `load_admit` draws.
    pub fn new(config: &AdmissionConfig, pairs: usize, seed: u64) -> Option<Tuning> {
        assert!(
            (1..=MAX_PAIRS).contains(&pairs),
            "1 to {MAX_PAIRS} pairs of levels"
        );
        let tuner: Box<dyn Tuner> = match config.scheme {
            AdmissionScheme::Classic => return None,
            AdmissionScheme::Nhc => Box::new(Nhc::new(config, pairs)),
            AdmissionScheme::SibPlus => Box::new(Sib::new(config, false)),
            AdmissionScheme::SibPlusPlus => Box::new(Sib::new(config, true)),
            AdmissionScheme::Lbica => Box::new(Lbica::new(config)),
            AdmissionScheme::Fixed => Box::new(Fixed::new(config)),
        };
        Some(Tuning {
            interval_ns: tuner.interval_ns(),
            collect_latencies: tuner.wants_latencies(),
            settings: [tuner.initial_settings(); MAX_PAIRS],
            tuner,
            interval: Interval::default(),
            started: false,
            pairs,
            random: Random::new(seed ^ DECISION_SALT),
            history: TuningHistory::default(),
        })
    }

    /// The settings of pair `pair` (tier `pair` over the level below it).
    #[inline]
    pub fn settings(&self, pair: usize) -> AdmitSettings {
        self.settings[pair]
    }

    /// The `load_admit` decision for a clean read hit in tier `pair`: true to serve it there,
    /// false to send it to the next level holding the line. A draw R in [0, 1) is taken only
    /// when `load_admit` is below 1, and the hit stays when R < `load_admit`.
    #[inline]
    pub fn serve_in_tier(&mut self, pair: usize) -> bool {
        let load_admit = self.settings[pair].load_admit;
        load_admit >= 1.0 || self.random.unit() < load_admit
    }

    /// Ends the interval if `now_ns` is past it (first starting one at the first event).
    #[inline]
    fn tick(&mut self, now_ns: u64) {
        if !self.started {
            self.started = true;
            self.interval.reset(now_ns);
        } else if now_ns >= self.interval.start_ns + self.interval_ns {
            self.end_interval(now_ns);
        }
    }

    #[cold]
    fn end_interval(&mut self, now_ns: u64) {
        self.interval.end_ns = now_ns;
        let settings = &mut self.settings[..self.pairs];
        self.tuner.end_interval(&self.interval, settings);
        self.history
            .record(&self.interval, settings, self.tuner.state());
        self.interval.reset(now_ns);
    }

    /// A request planned at `now_ns`: `hit_tier` is the highest tier that held its line.
    #[inline]
    pub fn on_request(&mut self, now_ns: u64, hit_tier: Option<usize>, write: bool) {
        self.tick(now_ns);
        let interval = &mut self.interval;
        interval.requests += 1;
        interval.writes += u64::from(write);
        if let Some(tier) = hit_tier {
            for hits in &mut interval.hits[tier..] {
                *hits += 1;
            }
        }
    }

    /// A client's request answered.
    #[inline]
    pub fn on_reply(&mut self, reply: &Reply) {
        self.tick(reply.now_ns);
        let interval = &mut self.interval;
        interval.replies += 1;
        interval.reply_bytes += u64::from(reply.bytes);
        interval.latency_sum_ns += reply.latency_ns;
        if self.collect_latencies {
            interval.latencies_ns.push(reply.latency_ns);
        }
    }

    /// True when the tuner measures device operations.
    pub fn wants_device_ops(&self) -> bool {
        self.tuner.wants_device_ops()
    }

    /// A device operation of `bytes` completed `latency_ns` after its submission.
    #[inline]
    pub fn on_device_op(&mut self, device: u8, bytes: u32, latency_ns: u64) {
        let device = usize::from(device);
        self.interval.device_ops[device] += 1;
        self.interval.device_bytes[device] += u64::from(bytes);
        self.interval.device_latency_sum_ns[device] += latency_ns;
    }

    /// What the tuner did so far.
    pub fn history(&self) -> &TuningHistory {
        &self.history
    }
}
