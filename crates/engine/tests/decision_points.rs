//! NHC's decision points in the cache controller (seed 000 §4.3.2), with the settings pinned by
//! the `fixed` scheme so that each rule shows alone: `load_admit` sends clean read hits to the
//! next level holding the line, never a dirty one; `data_admit` off leaves read misses
//! uninstalled; writes follow the cache mode whatever the settings.

use heterarchy_engine::{
    AdmissionScheme, CacheConfig, CacheController, CleaningPolicy, Controller, Decision, Feedback,
    FixedConfig, IoKind, Plan, TierLayout, WriteMode,
};
use heterarchy_trace::{Op, Request};

const LINE: u32 = 4096;

fn controller(
    mode: WriteMode,
    layout: TierLayout,
    tiers: usize,
    data_admit: bool,
    load_admit: f64,
) -> CacheController {
    let config = CacheConfig {
        mode,
        layout,
        cleaning: CleaningPolicy::Nop,
        admission: AdmissionScheme::Fixed,
        fixed: FixedConfig {
            data_admit,
            load_admit,
            from_ms: 0.0,
        },
        // The decision points alone, not the fill that admits whatever they say.
        nhc: heterarchy_engine::NhcConfig {
            admit_while_filling: false,
            ..Default::default()
        },
        ..CacheConfig::default()
    };
    let capacities = vec![64 * u64::from(LINE); tiers];
    CacheController::new(&config, &capacities, 7).unwrap()
}

/// Plans `op` on `key`; returns the decision and the (device, kind) of every operation.
fn plan(controller: &mut CacheController, op: Op, key: u64) -> (Decision, Vec<(u8, IoKind)>) {
    let request = Request {
        op,
        ..Request::new(key, LINE)
    };
    let mut plan = Plan::new();
    let decision = controller.plan(&request, 0, &mut plan);
    let ops = plan.ops().iter().map(|op| (op.device, op.kind)).collect();
    (decision, ops)
}

#[test]
fn load_admit_zero_serves_clean_hits_from_the_backing_store() {
    let mut cache = controller(WriteMode::Wt, TierLayout::Inclusive, 1, true, 0.0);
    let (miss, ops) = plan(&mut cache, Op::Read, 1);
    assert_eq!(miss.hit_tier, None);
    assert_eq!(ops, [(1, IoKind::Read), (0, IoKind::Write)]);
    let (hit, ops) = plan(&mut cache, Op::Read, 1);
    assert_eq!((hit.hit_tier, hit.source), (Some(0), Some(1)));
    assert_eq!(ops, [(1, IoKind::Read)]);
    assert!(cache.holds(0, 1), "read around keeps the line cached");
}

#[test]
fn dirty_hits_stay_in_the_cache_under_write_back() {
    let mut cache = controller(WriteMode::Wb, TierLayout::Inclusive, 1, true, 0.0);
    plan(&mut cache, Op::Write, 3);
    assert!(cache.is_dirty(0, 3));
    let (hit, ops) = plan(&mut cache, Op::Read, 3);
    assert_eq!((hit.hit_tier, hit.source), (Some(0), Some(0)));
    assert_eq!(ops, [(0, IoKind::Read)]);
}

#[test]
fn data_admit_off_leaves_read_misses_out_but_not_writes() {
    for mode in [WriteMode::Wt, WriteMode::Wb] {
        let mut cache = controller(mode, TierLayout::Inclusive, 1, false, 1.0);
        let (miss, ops) = plan(&mut cache, Op::Read, 5);
        assert_eq!((miss.hit_tier, miss.source), (None, Some(1)));
        assert_eq!(ops, [(1, IoKind::Read)], "{mode:?}");
        assert!(!cache.holds(0, 5));
        // Writes allocate as the mode says.
        plan(&mut cache, Op::Write, 6);
        assert!(cache.holds(0, 6), "{mode:?}");
        let (hit, _) = plan(&mut cache, Op::Read, 6);
        assert_eq!(hit.source, Some(0));
    }
}

#[test]
fn load_admit_draws_serve_the_given_share_of_hits_in_the_cache() {
    let mut cache = controller(WriteMode::Wt, TierLayout::Inclusive, 1, true, 0.3);
    for key in 0..32 {
        plan(&mut cache, Op::Read, key);
    }
    let mut in_cache = 0;
    for round in 0..10_000u64 {
        let (hit, _) = plan(&mut cache, Op::Read, round % 32);
        assert_eq!(hit.hit_tier, Some(0));
        in_cache += u32::from(hit.source == Some(0));
    }
    // Binomial(10000, 0.3): standard deviation 46.
    assert!((2_800..=3_200).contains(&in_cache), "{in_cache}");
}

#[test]
fn with_two_cache_tiers_a_hit_goes_down_level_by_level() {
    // Inclusive: tier 0's copy is also in tier 1, and with load_admit 0 at both pairs the hit
    // falls through both to the backing store (device 2).
    let mut cache = controller(WriteMode::Wt, TierLayout::Inclusive, 2, true, 0.0);
    plan(&mut cache, Op::Read, 9);
    assert!(cache.holds(0, 9) && cache.holds(1, 9));
    let (hit, ops) = plan(&mut cache, Op::Read, 9);
    assert_eq!((hit.hit_tier, hit.source), (Some(0), Some(2)));
    assert_eq!(ops, [(2, IoKind::Read)]);
    // Exclusive: nothing below tier 0 holds the line but the backing store.
    let mut cache = controller(WriteMode::Wt, TierLayout::Exclusive, 2, true, 0.0);
    plan(&mut cache, Op::Read, 9);
    assert!(cache.holds(0, 9) && !cache.holds(1, 9));
    let (hit, _) = plan(&mut cache, Op::Read, 9);
    assert_eq!(hit.source, Some(2));
}

#[test]
fn with_two_cache_tiers_data_admit_off_keeps_misses_and_tier_1_hits_where_they_are() {
    let mut cache = controller(WriteMode::Wt, TierLayout::Inclusive, 2, false, 1.0);
    let (miss, ops) = plan(&mut cache, Op::Read, 4);
    assert_eq!(miss.hit_tier, None);
    assert_eq!(ops, [(2, IoKind::Read)]);
    assert!(!cache.holds(0, 4) && !cache.holds(1, 4));
}

#[test]
fn classic_caching_consults_no_tuner() {
    let config = CacheConfig::default();
    let cache = CacheController::new(&config, &[4096 * 64], 1).unwrap();
    assert!(cache.tuning_history().is_none());
    assert_eq!(cache.feedback(), Feedback::default());
    let config = CacheConfig {
        admission: AdmissionScheme::Nhc,
        ..CacheConfig::default()
    };
    let cache = CacheController::new(&config, &[4096 * 64], 1).unwrap();
    assert!(cache.tuning_history().is_some());
    assert!(cache.feedback().replies && !cache.feedback().device_ops);
}

#[test]
fn admit_while_filling_installs_read_misses_until_the_tier_is_full() {
    let config = CacheConfig {
        admission: AdmissionScheme::Fixed,
        fixed: FixedConfig {
            data_admit: false,
            load_admit: 1.0,
            from_ms: 0.0,
        },
        nhc: heterarchy_engine::NhcConfig {
            admit_while_filling: true,
            ..Default::default()
        },
        ..CacheConfig::default()
    };
    // Room for four lines and a half: the half line left once four are in is no room for a
    // fifth (objects whose size does not divide the capacity, as Orthus-KV's values).
    let mut cache =
        CacheController::new(&config, &[4 * u64::from(LINE) + u64::from(LINE / 2)], 7).unwrap();
    for key in 0..4 {
        let (_, ops) = plan(&mut cache, Op::Read, key);
        assert_eq!(ops, [(1, IoKind::Read), (0, IoKind::Write)], "key {key}");
    }
    let (_, ops) = plan(&mut cache, Op::Read, 9);
    assert_eq!(ops, [(1, IoKind::Read)], "a full tier follows data_admit");
    assert!((0..4).all(|key| cache.holds(0, key)) && !cache.holds(0, 9));
}
