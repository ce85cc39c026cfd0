//! LHD, least hit density (Beckmann, Chen & Cidon, "LHD: Improving Cache Hit Rate by
//! Maximizing Hit Density", NSDI'18, §4–5): evict the sampled object expected to earn the
//! fewest hits per byte per unit of time it will still occupy the cache. An object's hit
//! density at age `a` (accesses since its last access, coarsened) is estimated per class from
//! the ages at which objects of that class were hit or evicted:
//! `density(a) = Σ_{x≥a} hits(x) / Σ_{x≥a} Σ_{y≥x} events(y)` (expected hits over expected
//! remaining lifetime, as the authors' code sums them), divided by the object's size.
//!
//! The decisions are those of libCacheSim's `LHD/` (`lhd.cpp`, `lhd.hpp`, `LHD_Interface.cpp`;
//! the version the `libcachesim` 0.3.5 Python package bundles), which is the authors' own
//! simulator behind libCacheSim's cache interface. Where it departs from or adds to the paper,
//! we follow it:
//! - Objects are classed by the sum of their last two hit ages (an age not yet seen counts as
//!   0 for the last and as the maximum age for the one before), in 16 log₂-spaced classes; the paper's per-application classes collapse to
//!   one, since every request has the same application id.
//! - Time counts the accesses LHD sees, hits and admissions only (a miss the cache declines
//!   does not age anything); ages are that time shifted right by a coarsening shift, first 10
//!   and re-fitted only at the 6th and 26th reconfiguration, to the smallest shift whose age
//!   step is at least 1/200 of the mean number of residents (so the 20 000 steps span about
//!   100 times as many accesses as there are residents), the histograms stretched or
//!   compressed to match. An object whose age reaches the last step has the lowest possible
//!   density.
//! - The model is refitted every 2²⁰ accesses ("reconfiguration"): hit and eviction counts
//!   decay by 0.9, then densities are recomputed. Before the first one, densities are a fixed
//!   GDSF-like prior, `(class + 1) / ((age + 1) · size)` with the class numbered as libCacheSim
//!   numbers it (application 1's classes are 16 to 31). Traces shorter than 2²⁰ requests run
//!   on this prior alone.
//! - Eviction samples 8 residents at random (with replacement) until more than 50
//!   reconfigurations have passed, then 32, and also weighs the last 8 admitted objects whose
//!   density at admission was below the running average (decay 0.9) of victims' densities —
//!   the simulator's stand-in for not admitting them. The lowest density wins; ties go to the
//!   first seen.
//! - Explorers: on each access, with probability 1/32, while fewer than 50 reconfigurations
//!   have passed and explorers hold less than 1% of the capacity, the object becomes an
//!   explorer until its next access: its density is raised by 1, so it is practically never
//!   evicted, and it shows the model what a long life in the cache earns.
//! - Densities are single-precision floats and divide by size (hits per byte; libCacheSim's
//!   `BYTE_MISS_RATIO` variant, without the division, is not built).
//!
//! Where this differs from libCacheSim:
//! - Random draws come from a seeded generator (`seed`) rather than libCacheSim's global
//!   linear congruential generator, whose results change from run to run.
//! - Only application 1's 16 classes are stored (libCacheSim allocates 256 classes of
//!   20 000 ages and never touches the other 240), so results are the same.
//! - A hit whose request carries a different size keeps the admitted size (libCacheSim
//!   changes the object's size and the cache's occupancy without evicting).
//! - [`EvictionPolicy::remove`] drops the object without counting an eviction or returning
//!   explorer budget, as libCacheSim's `LHD_remove` does.

use heterarchy_trace::Request;

use super::{Evicted, EvictionPolicy, Space};
use crate::util::dense_residents::{DenseResidents, Resident};
use crate::util::rng::Lehmer64;
use crate::util::NIL;

/// Age steps per class; the last one collects every older object.
const MAX_AGE: usize = 20_000;
/// Classes by hit age.
const HIT_AGE_CLASSES: usize = 16;
/// libCacheSim's class index of hit-age class 0 (`DEFAULT_APP_ID % APP_CLASSES` times
/// `HIT_AGE_CLASSES`), which the prior densities depend on.
const FIRST_CLASS_NUMBER: usize = HIT_AGE_CLASSES;
/// Accesses between two refits of the model.
const ACCESSES_PER_RECONFIGURATION: u64 = 1 << 20;
/// Decay of the histograms, of the victim-density average and of the object-count average.
const EWMA_DECAY: f32 = 0.9;
/// Candidates sampled per eviction once the model has settled, and before.
const ASSOCIATIVITY: u32 = 32;
const EARLY_ASSOCIATIVITY: u32 = 8;
/// Reconfigurations after which sampling widens and explorers stop.
const SETTLING_RECONFIGURATIONS: u32 = 50;
/// Recent low-density admissions weighed at each eviction.
const ADMISSIONS: usize = 8;
/// One access in this many may make its object an explorer.
const EXPLORE_ONE_IN: u64 = 32;
/// Share of the capacity explorers may hold.
const EXPLORER_BUDGET_FRACTION: f32 = 0.01;
/// The age steps are sized to span 1/this times as many accesses as there are residents.
const AGE_COARSENING_ERROR_TOLERANCE: f32 = 0.01;
const INITIAL_AGE_COARSENING_SHIFT: u32 = 10;
/// Reconfiguration counts (before the increment) at which the coarsening is re-fitted.
const COARSENING_REFITS: [u32; 2] = [5, 25];

/// What LHD knows of a resident.
#[derive(Clone, Copy, Debug)]
struct Tag {
    /// LHD time of the last access.
    last_access: u64,
    /// Coarsened age at the last hit (0 for none yet).
    last_hit_age: u16,
    /// Coarsened age at the hit before (`MAX_AGE` for none).
    previous_hit_age: u16,
    /// The hit-age class of the two ages, kept since it changes only on hits.
    class: u8,
    explorer: bool,
}

impl Tag {
    /// A newly admitted object's, at LHD time `now`.
    fn admitted(now: u64) -> Tag {
        Tag {
            last_access: now,
            last_hit_age: 0,
            previous_hit_age: MAX_AGE as u16,
            class: hit_age_class(MAX_AGE as u64) as u8,
            explorer: false,
        }
    }
}

/// A recent admission weighed at evictions: libCacheSim keeps its key and looks it up each
/// time; here its position is kept up to date as residents move, so no lookup is needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RecentAdmission {
    key: u64,
    /// Position among the residents, or [`NIL`] while the key is not resident (it counts
    /// again if readmitted, as libCacheSim's lookup by key would find it).
    position: u32,
}

/// Hit and eviction age histograms of one class and the densities fitted to them.
#[derive(Clone, Debug)]
struct Class {
    hits: Vec<f32>,
    evictions: Vec<f32>,
    densities: Vec<f32>,
}

/// LHD over a byte capacity.
pub struct Lhd {
    capacity: u64,
    residents: DenseResidents<Tag>,
    classes: Vec<Class>,
    /// Accesses seen (hits and admissions).
    time: u64,
    accesses_to_reconfiguration: u64,
    reconfigurations: u32,
    age_coarsening_shift: u32,
    /// Decayed sum of resident-object counts at reconfigurations, and of their weights.
    object_count_sum: f32,
    object_count_weight: f32,
    /// Recent admissions that looked like victims; a ring.
    recently_admitted: [Option<RecentAdmission>; ADMISSIONS],
    recently_admitted_next: usize,
    /// Running average of the densities of the objects chosen as victims.
    victim_density_average: f32,
    /// Bytes explorers may still take (signed: libCacheSim lets it go below zero).
    explorer_budget: i64,
    rng: Lehmer64,
}

impl Lhd {
    /// An empty cache of `capacity` bytes drawing from `seed`.
    pub fn new(capacity: u64, seed: u64) -> Lhd {
        let classes = (0..HIT_AGE_CLASSES)
            .map(|class| {
                let number = (FIRST_CLASS_NUMBER + class + 1) as f64;
                Class {
                    hits: vec![0.0; MAX_AGE],
                    evictions: vec![0.0; MAX_AGE],
                    densities: (0..MAX_AGE)
                        .map(|age| (number / (age + 1) as f64) as f32)
                        .collect(),
                }
            })
            .collect();
        Lhd {
            capacity,
            residents: DenseResidents::default(),
            classes,
            time: 0,
            accesses_to_reconfiguration: ACCESSES_PER_RECONFIGURATION,
            reconfigurations: 0,
            age_coarsening_shift: INITIAL_AGE_COARSENING_SHIFT,
            object_count_sum: 0.0,
            object_count_weight: 0.0,
            recently_admitted: [None; ADMISSIONS],
            recently_admitted_next: 0,
            victim_density_average: 0.0,
            // libCacheSim computes the budget in single precision.
            explorer_budget: (capacity as f32 * EXPLORER_BUDGET_FRACTION) as i64,
            rng: Lehmer64::new(seed),
        }
    }

    /// Coarsened age of an object, capped at the last age step.
    #[inline]
    fn age(&self, tag: &Tag) -> usize {
        let age = (self.time - tag.last_access) >> self.age_coarsening_shift;
        age.min(MAX_AGE as u64 - 1) as usize
    }

    /// The density of a resident now; the lowest float for objects at the last age step.
    #[inline]
    fn density(&self, resident: &Resident<Tag>) -> f32 {
        let age = self.age(&resident.data);
        if age == MAX_AGE - 1 {
            return f32::MIN;
        }
        let class = &self.classes[usize::from(resident.data.class)];
        let mut density = class.densities[age] / resident.size as f32;
        if resident.data.explorer {
            density += 1.0;
        }
        density
    }

    /// Records an access to the resident at `position` (a hit, or its admission when
    /// `admitted`), as libCacheSim's `LHD::update`.
    fn record_access(&mut self, position: u32, admitted: bool) {
        let resident = *self.residents.get(position);
        let mut tag = resident.data;
        if !admitted {
            let age = self.age(&tag);
            self.classes[usize::from(tag.class)].hits[age] += 1.0;
            if tag.explorer {
                self.return_explorer_budget(resident.size);
            }
            tag.previous_hit_age = tag.last_hit_age;
            tag.last_hit_age = age as u16;
            tag.class =
                hit_age_class(u64::from(tag.last_hit_age) + u64::from(tag.previous_hit_age)) as u8;
        }
        tag.last_access = self.time;
        let explore = self.rng.below(EXPLORE_ONE_IN) == 0;
        tag.explorer = explore
            && self.explorer_budget > 0
            && self.reconfigurations < SETTLING_RECONFIGURATIONS;
        if tag.explorer {
            self.explorer_budget = (self.explorer_budget as f32 - resident.size as f32) as i64;
        }
        self.residents.get_mut(position).data = tag;
        if admitted
            && !explore
            && self.density(self.residents.get(position)) < self.victim_density_average
        {
            self.recently_admitted[self.recently_admitted_next % ADMISSIONS] =
                Some(RecentAdmission {
                    key: resident.key,
                    position,
                });
            self.recently_admitted_next = self.recently_admitted_next.wrapping_add(1);
        }
        self.time += 1;
        self.accesses_to_reconfiguration -= 1;
        if self.accesses_to_reconfiguration == 0 {
            self.reconfigure();
            self.accesses_to_reconfiguration = ACCESSES_PER_RECONFIGURATION;
            self.reconfigurations += 1;
        }
    }

    /// Gives an explorer's bytes back to the budget, in single precision as libCacheSim does.
    #[inline]
    fn return_explorer_budget(&mut self, size: u32) {
        self.explorer_budget = (self.explorer_budget as f32 + size as f32) as i64;
    }

    /// The position of the lowest-density candidate (libCacheSim's `LHD::rank`).
    fn choose_victim(&mut self) -> u32 {
        let samples = if self.reconfigurations > SETTLING_RECONFIGURATIONS {
            ASSOCIATIVITY
        } else {
            EARLY_ASSOCIATIVITY
        };
        let mut victim = self.residents.random_position(&mut self.rng);
        let mut victim_density = self.density(self.residents.get(victim));
        for _ in 1..samples {
            let candidate = self.residents.random_position(&mut self.rng);
            let density = self.density(self.residents.get(candidate));
            if density < victim_density {
                (victim, victim_density) = (candidate, density);
            }
        }
        for admission in self.recently_admitted.into_iter().flatten() {
            if admission.position != NIL {
                let density = self.density(self.residents.get(admission.position));
                if density < victim_density {
                    (victim, victim_density) = (admission.position, density);
                }
            }
        }
        self.victim_density_average =
            EWMA_DECAY * self.victim_density_average + (1.0 - EWMA_DECAY) * victim_density;
        victim
    }

    /// Evicts the resident at `position`, counting its eviction age (`LHD::replaced`).
    fn evict(&mut self, position: u32) -> Evicted {
        let resident = *self.residents.get(position);
        let age = self.age(&resident.data);
        self.classes[usize::from(resident.data.class)].evictions[age] += 1.0;
        if resident.data.explorer {
            self.return_explorer_budget(resident.size);
        }
        self.remove_at(position).evicted()
    }

    /// Drops the resident at `position` (the last resident moves into its place) and keeps
    /// the recent admissions' positions true.
    fn remove_at(&mut self, position: u32) -> Resident<Tag> {
        let gone = self.residents.remove_at(position);
        let moved_from = self.residents.len() as u32;
        for admission in self.recently_admitted.iter_mut().flatten() {
            if admission.key == gone.key {
                admission.position = NIL;
            } else if admission.position == moved_from {
                admission.position = position;
            }
        }
        gone
    }

    /// Decays the histograms, re-fits the age coarsening when due and recomputes densities.
    fn reconfigure(&mut self) {
        for class in &mut self.classes {
            for count in class.hits.iter_mut().chain(class.evictions.iter_mut()) {
                *count *= EWMA_DECAY;
            }
        }
        self.adapt_age_coarsening();
        for class in &mut self.classes {
            fit_densities(class);
        }
    }

    /// libCacheSim's `adaptAgeCoarsening`: tracks the mean number of residents and, at the
    /// refit points, picks the shift that spreads them over about 100 age steps, then
    /// rescales the histograms to the new step.
    fn adapt_age_coarsening(&mut self) {
        self.object_count_sum *= EWMA_DECAY;
        self.object_count_weight *= EWMA_DECAY;
        self.object_count_sum += self.residents.len() as f32;
        self.object_count_weight += 1.0;
        if !COARSENING_REFITS.contains(&self.reconfigurations) {
            return;
        }
        let mean_objects = self.object_count_sum / self.object_count_weight;
        let wanted_step = (f64::from(mean_objects)
            / f64::from(AGE_COARSENING_ERROR_TOLERANCE * MAX_AGE as f32))
            as f32;
        let mut shift = 1u32;
        while ((1u64 << shift) as f32) < wanted_step {
            shift += 1;
        }
        let delta = shift as i32 - self.age_coarsening_shift as i32;
        self.age_coarsening_shift = shift;
        // Weigh the new estimate more, to delay the next shift.
        self.object_count_sum *= 8.0;
        self.object_count_weight *= 8.0;
        for class in &mut self.classes {
            for histogram in [&mut class.hits, &mut class.evictions] {
                if delta < 0 {
                    stretch(histogram, delta.unsigned_abs());
                } else if delta > 0 {
                    compress(histogram, delta as u32);
                }
            }
        }
    }
}

/// Hit-age class of a summed hit age: about log₂(MAX_AGE / age), 15 for age 0.
#[inline]
fn hit_age_class(mut age: u64) -> usize {
    if age == 0 {
        return HIT_AGE_CLASSES - 1;
    }
    let mut class = 0;
    while age < MAX_AGE as u64 && class < HIT_AGE_CLASSES - 1 {
        age <<= 1;
        class += 1;
    }
    class
}

/// Densities from the decayed histograms, from the oldest age down (`modelHitDensity`); the
/// last age step keeps its value, which no object reads.
fn fit_densities(class: &mut Class) {
    let last = MAX_AGE - 1;
    let mut events = class.hits[last] + class.evictions[last];
    let mut hits = class.hits[last];
    // Σ over older ages of the events at or beyond them: expected remaining lifetime.
    let mut lifetime = events;
    for age in (0..last).rev() {
        hits += class.hits[age];
        events += class.hits[age] + class.evictions[age];
        lifetime += events;
        class.densities[age] = if f64::from(events) > 1e-5 {
            hits / lifetime
        } else {
            0.0
        };
    }
}

/// Rescales a histogram to an age step `2^shift` times finer: counts beyond the new range
/// join the last step, the rest spread evenly.
fn stretch(histogram: &mut [f32], shift: u32) {
    let last = MAX_AGE - 1;
    for age in (MAX_AGE >> shift)..last {
        histogram[last] += histogram[age];
    }
    let spread = (1u32 << shift) as f32;
    for age in (0..last).rev() {
        histogram[age] = histogram[age >> shift] / spread;
    }
}

/// Rescales a histogram to an age step `2^shift` times coarser: each new step sums the old
/// steps it covers.
fn compress(histogram: &mut [f32], shift: u32) {
    let kept = MAX_AGE >> shift;
    for age in 0..kept {
        let first = age << shift;
        histogram[age] = histogram[first];
        for step in 1..(1usize << shift) {
            histogram[age] += histogram[first + step];
        }
    }
    for count in &mut histogram[kept..MAX_AGE - 1] {
        *count = 0.0;
    }
}

impl EvictionPolicy for Lhd {
    fn space(&self) -> Space {
        self.residents.space(self.capacity)
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.space().check()?;
        self.residents.check_invariants()
    }

    #[inline]
    fn lookup(&mut self, request: &Request) -> bool {
        match self.residents.find(request.key) {
            Some(position) => {
                self.record_access(position, false);
                true
            }
            None => false,
        }
    }

    fn admit(&mut self, request: &Request, evicted: &mut Vec<Evicted>) {
        if u64::from(request.size) > self.capacity || self.residents.find(request.key).is_some() {
            return;
        }
        while self.residents.bytes() + u64::from(request.size) > self.capacity {
            let victim = self.choose_victim();
            evicted.push(self.evict(victim));
        }
        let position = self
            .residents
            .insert(request.key, request.size, Tag::admitted(self.time));
        for admission in self.recently_admitted.iter_mut().flatten() {
            if admission.key == request.key {
                admission.position = position;
            }
        }
        self.record_access(position, true);
    }

    fn remove(&mut self, key: u64) -> bool {
        match self.residents.find(key) {
            Some(position) => {
                self.remove_at(position);
                true
            }
            None => false,
        }
    }

    #[inline]
    fn contains(&self, key: u64) -> Option<bool> {
        Some(self.residents.find(key).is_some())
    }

    #[inline]
    fn prefetch_slot(&self, key: u64) {
        self.residents.prefetch_slot(key);
    }

    #[inline]
    fn prefetch_node(&self, key: u64) {
        self.residents.prefetch_resident(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::model_check::{check_against_model, steps};
    use proptest::prelude::*;

    #[test]
    fn hit_age_classes_are_log_spaced_from_the_maximum_age() {
        assert_eq!(hit_age_class(0), 15);
        assert_eq!(hit_age_class(MAX_AGE as u64), 0, "a new object's sum");
        assert_eq!(hit_age_class(MAX_AGE as u64 - 1), 1);
        assert_eq!(hit_age_class(MAX_AGE as u64 / 2), 1);
        assert_eq!(hit_age_class(MAX_AGE as u64 / 2 - 1), 2);
        assert_eq!(hit_age_class(1), 15);
    }

    #[test]
    fn the_prior_ranks_like_gdsf_by_class_age_and_size() {
        let cache = Lhd::new(1000, 0);
        let resident = |size, tag| Resident {
            key: 1,
            size,
            data: tag,
        };
        let new = Tag::admitted(0);
        // Class 16 (libCacheSim's numbering) at age 0: 17 / size.
        assert_eq!(cache.density(&resident(2, new)), 17.0 / 2.0);
        let hit_twice_recently = Tag {
            last_hit_age: 0,
            previous_hit_age: 0,
            class: hit_age_class(0) as u8,
            ..new
        };
        assert_eq!(cache.density(&resident(2, hit_twice_recently)), 32.0 / 2.0);
        let explorer = Tag {
            explorer: true,
            ..new
        };
        assert_eq!(cache.density(&resident(2, explorer)), 17.0 / 2.0 + 1.0);
    }

    #[test]
    fn evicts_the_larger_of_two_equally_old_objects() {
        // Before any reconfiguration ranks are (class + 1) / ((age + 1) · size); with the age
        // coarsened by 2^10 every object here is at age 0, so size alone decides.
        let mut cache = Lhd::new(10, 3);
        let mut evicted = Vec::new();
        cache.get(&Request::new(1, 6), &mut evicted);
        cache.get(&Request::new(2, 3), &mut evicted);
        cache.get(&Request::new(3, 2), &mut evicted);
        // With two residents, eight samples miss one of them with probability 2⁻⁷; the seed
        // is fixed, and an explorer (1 in 32) would be protected instead.
        assert_eq!(evicted, vec![Evicted { key: 1, size: 6 }]);
    }

    #[test]
    fn recent_low_density_admissions_are_always_candidates() {
        let mut cache = Lhd::new(2000, 0);
        let mut evicted = Vec::new();
        // A running average above every density makes each admission a tracked candidate.
        cache.victim_density_average = f32::MAX;
        cache.get(&Request::new(7, 1000), &mut evicted);
        for key in 100..1100 {
            cache.get(&Request::new(key, 1), &mut evicted);
        }
        assert!(evicted.is_empty());
        let tracked = cache.recently_admitted;
        assert!(tracked
            .iter()
            .all(|admission| admission.is_some_and(|a| a.key >= 1000)));
        // Key 7 has the lowest density per byte but is one of 1001 residents: eight samples
        // would find it less than 1% of the time. Tracked, it is always weighed.
        let position = cache.residents.find(7).unwrap();
        cache.residents.get_mut(position).data.explorer = false;
        cache.recently_admitted = [Some(RecentAdmission { key: 7, position }); ADMISSIONS];
        cache.get(&Request::new(8, 1), &mut evicted);
        assert_eq!(evicted, vec![Evicted { key: 7, size: 1000 }]);
    }

    #[test]
    fn tracked_positions_follow_residents_as_they_move_leave_and_return() {
        let mut cache = Lhd::new(40, 5);
        let mut evicted = Vec::new();
        cache.victim_density_average = f32::MAX;
        for step in 0..3000u64 {
            let key = (step * 7919) % 97;
            if step % 5 == 0 {
                cache.remove(key);
            } else {
                cache.get(&Request::new(key, 1 + (key % 3) as u32), &mut evicted);
            }
            for admission in cache.recently_admitted.into_iter().flatten() {
                let expected = cache.residents.find(admission.key).unwrap_or(NIL);
                assert_eq!(admission.position, expected, "step {step}");
            }
        }
        assert!(cache.recently_admitted.iter().all(Option::is_some));
    }

    #[test]
    fn densities_follow_the_histograms() {
        let mut class = Class {
            hits: vec![0.0; MAX_AGE],
            evictions: vec![0.0; MAX_AGE],
            densities: vec![0.0; MAX_AGE],
        };
        // Half the objects hit at age 1, the other half are evicted at age 3.
        class.hits[1] = 1.0;
        class.evictions[3] = 1.0;
        fit_densities(&mut class);
        // From age 3: no hits left. Age 2: still none. Age 1: one hit over lifetimes
        // 1 (events ≥ 3) + 1 (≥ 2) + 2 (≥ 1) = 4. Age 0: one hit over 4 + 2 = 6.
        assert_eq!(class.densities[3], 0.0);
        assert_eq!(class.densities[2], 0.0);
        assert_eq!(class.densities[1], 0.25);
        assert_eq!(class.densities[0], 1.0 / 6.0);
        assert_eq!(class.densities[10], 0.0, "no events at all");
    }

    #[test]
    fn rescaling_keeps_the_mass_of_a_histogram() {
        let mut histogram = vec![0.0f32; MAX_AGE];
        histogram[0] = 4.0;
        histogram[5] = 8.0;
        histogram[MAX_AGE - 2] = 2.0;
        let mut coarser = histogram.clone();
        compress(&mut coarser, 2);
        assert_eq!(&coarser[..3], &[4.0, 8.0, 0.0]);
        assert_eq!(coarser[MAX_AGE / 4 - 1], 2.0);
        assert_eq!(coarser[MAX_AGE - 2], 0.0);
        let mut finer = histogram;
        stretch(&mut finer, 1);
        assert_eq!(&finer[..4], &[2.0, 2.0, 0.0, 0.0]);
        assert_eq!(&finer[10..12], &[4.0, 4.0]);
        assert_eq!(
            finer[MAX_AGE - 1],
            2.0,
            "beyond the new range: the last step"
        );
    }

    #[test]
    fn reconfiguration_learns_that_hit_objects_are_worth_keeping() {
        // Two million accesses: a hot set of 50 keys hit over and over, and a scan of keys
        // seen once. After the model is fitted, a newly admitted scan key (class 0, no hits)
        // has lower density than a hot key just hit (a high class).
        let mut cache = Lhd::new(200, 1);
        let mut evicted = Vec::new();
        for step in 0..(2 * ACCESSES_PER_RECONFIGURATION + 10) {
            let key = if step % 2 == 0 {
                (step / 2) % 50
            } else {
                1_000 + step
            };
            cache.get(&Request::new(key, 1), &mut evicted);
            evicted.clear();
        }
        assert_eq!(cache.reconfigurations, 2);
        let hot = cache.residents.get(cache.residents.find(0).unwrap());
        let scan_key = 1_000 + 2 * ACCESSES_PER_RECONFIGURATION + 9;
        let scan = cache.residents.get(cache.residents.find(scan_key).unwrap());
        let (hot_density, scan_density) = (cache.density(hot), cache.density(scan));
        assert!(
            hot_density - f32::from(hot.data.explorer)
                > scan_density - f32::from(scan.data.explorer),
            "{hot_density} vs {scan_density}"
        );
        let hot_resident = (0..50)
            .filter(|&key| cache.contains(key) == Some(true))
            .count();
        assert!(
            hot_resident >= 45,
            "the hot set stays: {hot_resident} of 50"
        );
    }

    proptest! {
        #[test]
        fn capacity_holds_and_counts_match_a_model(capacity in 1u64..64, seed in 0u64..4, steps in steps(20)) {
            check_against_model(&mut Lhd::new(capacity, seed), &steps)?;
        }
    }
}
