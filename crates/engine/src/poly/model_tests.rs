//! The tier against a model of what each page's latest data is and where it is, over seeded
//! random histories of reads, writes, write-backs, knob changes and a page cache above: no dirty data
//! is ever dropped, every hit serves the latest data, and every role fits its capacity.

use proptest::prelude::*;
use rustc_hash::FxHashMap;

use super::*;

#[derive(Clone, Debug)]
enum Step {
    Read(u64, u16),
    Write(u64, u16),
    WriteBack(usize),
    Knobs(u8, u8),
    /// The page cache above faults a page in, or evicts one it holds.
    Fault(u64, u16),
    EvictAbove(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..40u64, 1..=8u16).prop_map(|(page, sectors)| Step::Read(page, sectors)),
        4 => (0..40u64, 1..=8u16).prop_map(|(page, sectors)| Step::Write(page, sectors)),
        1 => (0..5usize).prop_map(Step::WriteBack),
        1 => (0..=10u8, 0..=10u8).prop_map(|(read, compressed)| Step::Knobs(read, compressed)),
        3 => (0..40u64, 1..=8u16).prop_map(|(page, sectors)| Step::Fault(page, sectors)),
        2 => (0..64usize).prop_map(Step::EvictAbove),
    ]
}

/// What the executor knows: each page's latest version, the SSD's and the tier's copies.
#[derive(Default)]
struct World {
    latest: FxHashMap<u64, u64>,
    ssd: FxHashMap<u64, u64>,
    tier: FxHashMap<u64, u64>,
    /// The page cache above the tier, when the tier is used through `fault`.
    above: FxHashMap<u64, u64>,
}

impl World {
    fn carry_out(&mut self, actions: &[PolyAction]) {
        for action in actions {
            match *action {
                PolyAction::ReadSsd { page } => {
                    let version = self.ssd.get(&page).copied().unwrap_or(0);
                    self.tier.insert(page, version);
                }
                PolyAction::WriteBack { page } => {
                    let version = self.tier[&page];
                    self.ssd.insert(page, version);
                }
                PolyAction::Compress { .. } | PolyAction::Decompress { .. } => {}
                PolyAction::Evict { page } => {
                    self.tier.remove(&page);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn no_dirty_page_is_lost_and_every_hit_is_fresh(
        capacity in 1..16u64,
        steps in prop::collection::vec(step(), 1..200),
    ) {
        let mut tier = PolyTier::new(capacity);
        let mut world = World::default();
        let mut actions = Vec::new();
        let mut version = 0;
        for step in steps {
            actions.clear();
            match step {
                Step::Read(page, sectors) => {
                    let held = world.tier.get(&page).copied();
                    let on_ssd = world.ssd.get(&page).copied().unwrap_or(0);
                    let found = tier.read(page, sectors, &mut actions);
                    world.carry_out(&actions);
                    let served = if found == Found::Miss { Some(on_ssd) } else { held };
                    let latest = world.latest.get(&page).copied().unwrap_or(0);
                    prop_assert_eq!(served, Some(latest), "stale read");
                    if tier.locate(page) != Found::Miss {
                        prop_assert!(world.tier.contains_key(&page), "page {} held but evicted", page);
                    }
                }
                Step::Write(page, sectors) => {
                    version += 1;
                    world.latest.insert(page, version);
                    // The write's data is in the tier's hands before it decides.
                    world.tier.insert(page, version);
                    if let Some(above) = world.above.get_mut(&page) {
                        *above = version;
                    }
                    tier.write(page, sectors, &mut actions);
                    world.carry_out(&actions);
                }
                Step::WriteBack(limit) => {
                    tier.write_back(limit, &mut actions);
                    world.carry_out(&actions);
                }
                Step::Knobs(read, compressed) => {
                    let knobs = Knobs {
                        read_share: f64::from(read) / 10.0,
                        compressed_share: f64::from(compressed) / 10.0,
                    };
                    let fits = knobs.validate().is_ok();
                    prop_assert_eq!(tier.set_knobs(knobs, &mut actions).is_ok(), fits);
                    world.carry_out(&actions);
                }
                Step::Fault(page, sectors) => {
                    if world.above.contains_key(&page) {
                        continue; // the cache above hits; the tier never sees it
                    }
                    let held = world.tier.get(&page).copied();
                    let on_ssd = world.ssd.get(&page).copied().unwrap_or(0);
                    let found = tier.fault(page, sectors, &mut actions);
                    world.carry_out(&actions);
                    let latest = world.latest.get(&page).copied().unwrap_or(0);
                    // A page that moves up leaves the tier; it served what the tier held.
                    let served = if found == Found::Miss { Some(on_ssd) } else { held };
                    prop_assert_eq!(served, Some(latest), "stale fault");
                    if tier.locate(page) != Found::Miss {
                        prop_assert!(world.tier.contains_key(&page), "page {} held but evicted", page);
                    }
                    world.above.insert(page, latest);
                    if found == Found::Miss {
                        let read_ssd = PolyAction::ReadSsd { page };
                        prop_assert!(actions.contains(&read_ssd), "a miss reads the SSD");
                    }
                }
                Step::EvictAbove(index) => {
                    let mut pages: Vec<u64> = world.above.keys().copied().collect();
                    pages.sort_unstable();
                    if let Some(&page) = pages.get(index % pages.len().max(1)) {
                        let version = world.above.remove(&page).expect("listed");
                        world.tier.insert(page, version);
                        tier.evicted_above(page, 4, &mut actions);
                        world.carry_out(&actions);
                    }
                }
            }
            // Every page whose latest data the SSD lacks is dirty in the tier.
            let dirty = tier.dirty_pages();
            for (page, latest) in &world.latest {
                if world.ssd.get(page) != Some(latest) {
                    prop_assert!(dirty.contains(page), "page {} lost its latest write", page);
                }
            }
            if let Err(broken) = tier.check_invariants() {
                prop_assert!(false, "{}", broken);
            }
            let (written, cached, _) = tier.occupancy();
            prop_assert!(written as u64 <= tier.write_capacity());
            prop_assert!(cached as u64 <= tier.read_capacity());
        }
    }
}
