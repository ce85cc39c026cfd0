//! The plans of the cache controller for each Open CAS mode, layout, cleaning and promotion
//! policy: which device, which kind, which stage, and when the client is answered.

use heterarchy_engine::{
    CacheConfig, CacheController, CleaningPolicy, Controller, IoKind, Plan, PromotionPolicy,
    TierLayout, WriteMode,
};
use heterarchy_trace::{Op, Request};

const LINE: u32 = 4096;
const LINE_BYTES: u64 = LINE as u64;
const S: u64 = 1_000_000_000;

/// One stage as sorted `(device, 'r' | 'w', key)` triples.
type Stage = Vec<(u8, char, u64)>;

fn controller(mode: WriteMode, layout: TierLayout, tier_lines: &[u64]) -> CacheController {
    let config = CacheConfig {
        mode,
        layout,
        cleaning: CleaningPolicy::Nop,
        ..CacheConfig::default()
    };
    let capacities: Vec<u64> = tier_lines.iter().map(|lines| lines * LINE_BYTES).collect();
    CacheController::new(&config, &capacities, 1).unwrap()
}

struct Outcome {
    stages: Vec<Stage>,
    reply_after: usize,
    hit_tier: Option<u8>,
    read: bool,
}

fn run(controller: &mut CacheController, op: Op, key: u64, now_ns: u64) -> Outcome {
    let request = Request {
        op,
        time_ns: now_ns,
        ..Request::new(key, LINE)
    };
    let mut plan = Plan::new();
    let decision = controller.plan(&request, now_ns, &mut plan);
    Outcome {
        stages: stages_of(&plan),
        reply_after: plan.reply_after(),
        hit_tier: decision.hit_tier,
        read: op == Op::Read,
    }
}

fn stages_of(plan: &Plan) -> Vec<Stage> {
    (0..plan.stage_count())
        .map(|index| {
            let mut stage: Stage = plan
                .stage(index)
                .iter()
                .map(|op| {
                    assert_eq!(op.bytes, LINE);
                    let kind = if op.kind == IoKind::Read { 'r' } else { 'w' };
                    (op.device, kind, op.key)
                })
                .collect();
            stage.sort_unstable();
            stage
        })
        .collect()
}

fn read(c: &mut CacheController, key: u64) -> Outcome {
    run(c, Op::Read, key, 0)
}

fn write(c: &mut CacheController, key: u64) -> Outcome {
    run(c, Op::Write, key, 0)
}

/// Asserts the plan and when the client is answered: a read once its data is read (the first
/// stage; Open CAS fills the cache after answering), a write once all of the plan is done.
fn assert_plan(outcome: &Outcome, expected: &[&[(u8, char, u64)]]) {
    let expected: Vec<Stage> = expected.iter().map(|stage| stage.to_vec()).collect();
    assert_eq!(outcome.stages, expected);
    let answered_after = if outcome.read && !expected.is_empty() {
        1
    } else {
        expected.len()
    };
    assert_eq!(outcome.reply_after, answered_after);
}

#[test]
fn write_through() {
    let mut c = controller(WriteMode::Wt, TierLayout::Inclusive, &[4]);
    let miss = read(&mut c, 1);
    assert_plan(&miss, &[&[(1, 'r', 1)], &[(0, 'w', 1)]]);
    assert_eq!(miss.hit_tier, None);
    let hit = read(&mut c, 1);
    assert_plan(&hit, &[&[(0, 'r', 1)]]);
    assert_eq!(hit.hit_tier, Some(0));
    let write_hit = write(&mut c, 1);
    assert_plan(&write_hit, &[&[(0, 'w', 1), (1, 'w', 1)]]);
    assert_eq!(write_hit.hit_tier, Some(0));
    assert_plan(&write(&mut c, 2), &[&[(0, 'w', 2), (1, 'w', 2)]]);
    assert!(c.holds(0, 2), "write-through installs write misses");
    assert_eq!(c.stats().dirty_lines, 0);
}

#[test]
fn write_back() {
    let mut c = controller(WriteMode::Wb, TierLayout::Inclusive, &[2]);
    assert_plan(&read(&mut c, 1), &[&[(1, 'r', 1)], &[(0, 'w', 1)]]);
    assert_plan(&read(&mut c, 1), &[&[(0, 'r', 1)]]);
    assert_plan(&write(&mut c, 1), &[&[(0, 'w', 1)]]);
    assert!(c.is_dirty(0, 1));
    assert_plan(&write(&mut c, 2), &[&[(0, 'w', 2)]]);
    assert!(c.is_dirty(0, 2));
    assert_eq!(c.stats().dirty_lines, 2);
    // A miss evicts key 1 (least recently used): read out, written back, then the install.
    assert_plan(
        &read(&mut c, 3),
        &[&[(0, 'r', 1), (1, 'r', 3)], &[(1, 'w', 1)], &[(0, 'w', 3)]],
    );
    assert!(!c.holds(0, 1));
    assert_eq!(c.stats().writebacks, 1);
    assert_eq!(c.stats().dirty_lines, 1);
    // A dirty line is always read from the cache.
    assert_plan(&read(&mut c, 2), &[&[(0, 'r', 2)]]);
}

#[test]
fn write_around() {
    let mut c = controller(WriteMode::Wa, TierLayout::Inclusive, &[4]);
    assert_plan(&write(&mut c, 1), &[&[(1, 'w', 1)]]);
    assert!(!c.holds(0, 1), "write misses bypass the cache");
    assert_plan(&read(&mut c, 1), &[&[(1, 'r', 1)], &[(0, 'w', 1)]]);
    assert_plan(&read(&mut c, 1), &[&[(0, 'r', 1)]]);
    let write_hit = write(&mut c, 1);
    assert_plan(&write_hit, &[&[(0, 'w', 1), (1, 'w', 1)]]);
    assert_eq!(write_hit.hit_tier, Some(0));
    assert!(c.holds(0, 1) && !c.is_dirty(0, 1));
}

#[test]
fn write_invalidate() {
    let mut c = controller(WriteMode::Wi, TierLayout::Inclusive, &[4]);
    assert_plan(&read(&mut c, 1), &[&[(1, 'r', 1)], &[(0, 'w', 1)]]);
    assert_plan(&read(&mut c, 1), &[&[(0, 'r', 1)]]);
    let write_hit = write(&mut c, 1);
    assert_plan(&write_hit, &[&[(1, 'w', 1)]]);
    assert_eq!(write_hit.hit_tier, Some(0));
    assert!(!c.holds(0, 1), "a write invalidates the cached line");
    assert_plan(&write(&mut c, 2), &[&[(1, 'w', 2)]]);
    assert!(!c.holds(0, 2));
    assert_eq!(c.tier_lines(0), 0);
}

#[test]
fn write_only() {
    let mut c = controller(WriteMode::Wo, TierLayout::Inclusive, &[4]);
    assert_plan(&read(&mut c, 1), &[&[(1, 'r', 1)]]);
    assert!(!c.holds(0, 1), "reads never install");
    assert_plan(&write(&mut c, 1), &[&[(0, 'w', 1)]]);
    assert!(c.is_dirty(0, 1));
    let dirty_hit = read(&mut c, 1);
    assert_plan(&dirty_hit, &[&[(0, 'r', 1)]]);
    assert_eq!(dirty_hit.hit_tier, Some(0));
    assert_plan(&write(&mut c, 1), &[&[(0, 'w', 1)]]);
    let mut plan = Plan::new();
    assert_eq!(c.flush(&mut plan), 1);
    assert_eq!(stages_of(&plan), vec![vec![(0, 'r', 1)], vec![(1, 'w', 1)]]);
    let clean_hit = read(&mut c, 1);
    assert_plan(&clean_hit, &[&[(1, 'r', 1)]]);
    assert_eq!(
        clean_hit.hit_tier,
        Some(0),
        "the cache holds it, the backing store serves it"
    );
}

#[test]
fn pass_through() {
    let mut c = controller(WriteMode::Pt, TierLayout::Inclusive, &[4]);
    assert_plan(&read(&mut c, 1), &[&[(1, 'r', 1)]]);
    assert_plan(&read(&mut c, 1), &[&[(1, 'r', 1)]]);
    assert_plan(&write(&mut c, 1), &[&[(1, 'w', 1)]]);
    assert_eq!(c.tier_lines(0), 0);
    assert_eq!(c.stats().hits, 0);
}

#[test]
fn inclusive_tiers() {
    let mut c = controller(WriteMode::Wt, TierLayout::Inclusive, &[1, 2]);
    assert_plan(
        &read(&mut c, 1),
        &[&[(2, 'r', 1)], &[(0, 'w', 1), (1, 'w', 1)]],
    );
    assert_plan(
        &read(&mut c, 2),
        &[&[(2, 'r', 2)], &[(0, 'w', 2), (1, 'w', 2)]],
    );
    assert!(
        !c.holds(0, 1) && c.holds(1, 1),
        "a clean tier-0 victim just leaves tier 0"
    );
    let tier1_hit = read(&mut c, 1);
    assert_plan(&tier1_hit, &[&[(1, 'r', 1)], &[(0, 'w', 1)]]);
    assert_eq!(tier1_hit.hit_tier, Some(1));
    assert!(c.holds(0, 1) && c.holds(1, 1) && !c.holds(0, 2) && c.holds(1, 2));
    // Tier 1 evicts key 2 (its least recent); tier 0 evicts key 1, which stays in tier 1.
    assert_plan(
        &read(&mut c, 3),
        &[&[(2, 'r', 3)], &[(0, 'w', 3), (1, 'w', 3)]],
    );
    assert!(!c.holds(1, 2) && c.holds(1, 1) && !c.holds(0, 1));
    let stats = c.stats();
    assert_eq!(stats.hits_per_tier, vec![0, 1]);
    assert_eq!(stats.installs_per_tier, vec![4, 3]);
    assert_eq!(stats.evictions_per_tier, vec![3, 1]);
}

#[test]
fn inclusive_eviction_from_tier_1_writes_back_tier_0_dirty_data() {
    let mut c = controller(WriteMode::Wb, TierLayout::Inclusive, &[1, 1]);
    // A write miss reserves tier 1 and writes tier 0 only: tier 0 is newer than tier 1.
    assert_plan(&write(&mut c, 1), &[&[(0, 'w', 1)]]);
    assert!(c.holds(1, 1) && c.is_dirty(0, 1) && !c.is_dirty(1, 1));
    // Key 2 takes tier 1's only line: key 1 leaves both tiers, tier 0's data written back.
    assert_plan(
        &read(&mut c, 2),
        &[
            &[(0, 'r', 1), (2, 'r', 2)],
            &[(2, 'w', 1)],
            &[(0, 'w', 2), (1, 'w', 2)],
        ],
    );
    assert!(!c.holds(0, 1) && !c.holds(1, 1));
    assert_eq!(c.stats().writebacks, 1);
    assert_eq!(c.stats().dirty_lines, 0);
}

#[test]
fn inclusive_dirty_tier_0_victims_go_down_to_tier_1() {
    let mut c = controller(WriteMode::Wb, TierLayout::Inclusive, &[1, 2]);
    write(&mut c, 1);
    assert_plan(
        &read(&mut c, 2),
        &[
            &[(0, 'r', 1), (2, 'r', 2)],
            &[(1, 'w', 1)],
            &[(0, 'w', 2), (1, 'w', 2)],
        ],
    );
    assert!(c.is_dirty(1, 1) && !c.holds(0, 1));
    // A read of the dirty line comes from the tier that holds it, and copies it up clean.
    assert_plan(&read(&mut c, 1), &[&[(1, 'r', 1)], &[(0, 'w', 1)]]);
    assert!(c.holds(0, 1) && !c.is_dirty(0, 1) && c.is_dirty(1, 1));
}

#[test]
fn inclusive_back_invalidation_writes_back_the_newest_of_two_dirty_copies() {
    // FIFO in tier 1, so key 1 leaves tier 1 first however often it is used.
    let config = CacheConfig {
        mode: WriteMode::Wb,
        policy: "fifo".to_string(),
        cleaning: CleaningPolicy::Nop,
        ..CacheConfig::default()
    };
    let mut c = CacheController::new(&config, &[LINE_BYTES, 2 * LINE_BYTES], 1).unwrap();
    write(&mut c, 1);
    read(&mut c, 2);
    assert!(c.is_dirty(1, 1) && !c.holds(0, 1));
    assert_plan(&read(&mut c, 1), &[&[(1, 'r', 1)], &[(0, 'w', 1)]]);
    write(&mut c, 1);
    assert!(c.is_dirty(0, 1) && c.is_dirty(1, 1));
    // Tier 1 drops key 1 from both tiers; tier 0's copy is the newer one.
    assert_plan(
        &read(&mut c, 3),
        &[
            &[(0, 'r', 1), (2, 'r', 3)],
            &[(2, 'w', 1)],
            &[(0, 'w', 3), (1, 'w', 3)],
        ],
    );
    assert_eq!(c.stats().dirty_lines, 0);
}

#[test]
fn exclusive_tiers() {
    let mut c = controller(WriteMode::Wt, TierLayout::Exclusive, &[1, 2]);
    assert_plan(&read(&mut c, 1), &[&[(2, 'r', 1)], &[(0, 'w', 1)]]);
    assert!(!c.holds(1, 1), "a miss installs in tier 0 only");
    // Key 1 is demoted: read from tier 0, written to tier 1, before key 2 takes its place.
    assert_plan(
        &read(&mut c, 2),
        &[&[(0, 'r', 1), (2, 'r', 2)], &[(1, 'w', 1)], &[(0, 'w', 2)]],
    );
    assert!(c.holds(1, 1) && !c.holds(0, 1) && c.holds(0, 2));
    // A tier-1 hit moves key 1 up and key 2 down.
    let tier1_hit = read(&mut c, 1);
    assert_plan(
        &tier1_hit,
        &[&[(0, 'r', 2), (1, 'r', 1)], &[(1, 'w', 2)], &[(0, 'w', 1)]],
    );
    assert_eq!(tier1_hit.hit_tier, Some(1));
    assert!(c.holds(0, 1) && !c.holds(1, 1) && c.holds(1, 2) && !c.holds(0, 2));
    assert_eq!(c.stats().installs_per_tier, vec![3, 2]);
}

#[test]
fn exclusive_demotion_that_overflows_tier_1_writes_back_first() {
    let mut c = controller(WriteMode::Wb, TierLayout::Exclusive, &[1, 1]);
    write(&mut c, 1);
    // Key 1 (dirty) is demoted into tier 1.
    assert_plan(
        &read(&mut c, 2),
        &[&[(0, 'r', 1), (2, 'r', 2)], &[(1, 'w', 1)], &[(0, 'w', 2)]],
    );
    assert!(c.is_dirty(1, 1));
    write(&mut c, 2);
    // Key 3 pushes key 2 (dirty) down, which pushes key 1 (dirty) out to the backing store.
    assert_plan(
        &read(&mut c, 3),
        &[
            &[(0, 'r', 2), (1, 'r', 1), (2, 'r', 3)],
            &[(2, 'w', 1)],
            &[(1, 'w', 2)],
            &[(0, 'w', 3)],
        ],
    );
    assert!(c.is_dirty(1, 2) && !c.holds(1, 1) && !c.holds(0, 1));
    assert_eq!(c.stats().writebacks, 1);
}

#[test]
fn exclusive_write_hit_in_tier_1_moves_up_dirty() {
    let mut c = controller(WriteMode::Wb, TierLayout::Exclusive, &[1, 2]);
    read(&mut c, 1);
    read(&mut c, 2);
    assert!(c.holds(1, 1));
    let outcome = write(&mut c, 1);
    assert_eq!(outcome.hit_tier, Some(1));
    // No read of key 1: the write replaces the whole line.
    assert_plan(&outcome, &[&[(0, 'r', 2)], &[(1, 'w', 2)], &[(0, 'w', 1)]]);
    assert!(c.is_dirty(0, 1) && !c.holds(1, 1));
}

#[test]
fn discards_drop_cached_copies_unwritten() {
    for op in [Op::Trim, Op::Delete] {
        let mut c = controller(WriteMode::Wb, TierLayout::Inclusive, &[2, 4]);
        write(&mut c, 1);
        let outcome = run(&mut c, op, 1, 0);
        assert!(outcome.stages.is_empty());
        assert_eq!(outcome.hit_tier, Some(0));
        assert!(!c.holds(0, 1) && !c.holds(1, 1));
        assert_eq!(c.stats().dirty_lines, 0);
        assert_eq!(c.stats().writebacks, 0);
        assert_eq!(c.tier_used_bytes(0) + c.tier_used_bytes(1), 0);
    }
}

#[test]
fn nhit_installs_on_the_third_access() {
    let mut config = CacheConfig {
        mode: WriteMode::Wt,
        promotion: PromotionPolicy::Nhit,
        ..CacheConfig::default()
    };
    config.nhit.trigger_percent = 0;
    let mut c = CacheController::new(&config, &[4 * LINE_BYTES], 1).unwrap();
    assert_plan(&read(&mut c, 1), &[&[(1, 'r', 1)]]);
    assert_plan(&read(&mut c, 1), &[&[(1, 'r', 1)]]);
    assert_plan(&read(&mut c, 1), &[&[(1, 'r', 1)], &[(0, 'w', 1)]]);
    assert_plan(&read(&mut c, 1), &[&[(0, 'r', 1)]]);
}

#[test]
fn nhit_lets_everything_in_below_the_trigger() {
    let config = CacheConfig {
        mode: WriteMode::Wt,
        promotion: PromotionPolicy::Nhit,
        ..CacheConfig::default()
    };
    // 80 % of 5 lines: the first 4 misses are installed at once, the 5th is counted.
    let mut c = CacheController::new(&config, &[5 * LINE_BYTES], 1).unwrap();
    for key in 0..4 {
        assert_plan(&read(&mut c, key), &[&[(1, 'r', key)], &[(0, 'w', key)]]);
    }
    assert_plan(&read(&mut c, 4), &[&[(1, 'r', 4)]]);
    assert_eq!(c.tier_lines(0), 4);
}

fn write_back_with(cleaning: CleaningPolicy) -> CacheController {
    let config = CacheConfig {
        mode: WriteMode::Wb,
        cleaning,
        ..CacheConfig::default()
    };
    CacheController::new(&config, &[16 * LINE_BYTES], 1).unwrap()
}

fn background(c: &mut CacheController, now_ns: u64) -> (Vec<Stage>, Option<u64>) {
    let mut plan = Plan::new();
    let next = c.background(now_ns, &mut plan);
    (stages_of(&plan), next)
}

#[test]
fn alru_cleans_stale_lines_after_the_cache_goes_idle() {
    let mut c = write_back_with(CleaningPolicy::Alru);
    run(&mut c, Op::Write, 1, 0);
    run(&mut c, Op::Write, 2, 30 * S);
    // Idle since 30 s, but at 100 s key 1 is only 100 s old.
    assert_eq!(background(&mut c, 100 * S), (vec![], Some(120 * S)));
    // Within one wake-up (20 s) of a wake-up that found nothing: no look at all.
    assert_eq!(background(&mut c, 119 * S), (vec![], Some(139 * S)));
    // At 125 s key 1 is 125 s old: cleaned, and the cleaner asks to run again at once.
    assert_eq!(
        background(&mut c, 125 * S),
        (vec![vec![(0, 'r', 1)], vec![(1, 'w', 1)]], Some(125 * S))
    );
    assert!(!c.is_dirty(0, 1) && c.holds(0, 1));
    assert_eq!(background(&mut c, 125 * S), (vec![], Some(145 * S)));
    // A request at 150 s makes the cache active for 10 s: key 2 (stale since 150 s) waits.
    run(&mut c, Op::Read, 1, 150 * S);
    assert_eq!(background(&mut c, 155 * S), (vec![], Some(175 * S)));
    assert_eq!(
        background(&mut c, 175 * S),
        (vec![vec![(0, 'r', 2)], vec![(1, 'w', 2)]], Some(175 * S))
    );
    assert_eq!(c.stats().dirty_lines, 0);
    assert_eq!(c.stats().writebacks, 2);
}

#[test]
fn alru_cleans_at_most_flush_max_buffers_per_wake_up() {
    let mut config = CacheConfig {
        mode: WriteMode::Wb,
        ..CacheConfig::default()
    };
    config.alru.flush_max_buffers = 3;
    let mut c = CacheController::new(&config, &[16 * LINE_BYTES], 1).unwrap();
    for key in 0..5 {
        run(&mut c, Op::Write, key, key * S);
    }
    let (stages, next) = background(&mut c, 200 * S);
    assert_eq!(stages[0], vec![(0, 'r', 0), (0, 'r', 1), (0, 'r', 2)]);
    assert_eq!(next, Some(200 * S));
    let (stages, _) = background(&mut c, 200 * S);
    assert_eq!(stages[0], vec![(0, 'r', 3), (0, 'r', 4)]);
}

#[test]
fn acp_cleans_every_wake_up_without_waiting() {
    let mut c = write_back_with(CleaningPolicy::Acp);
    run(&mut c, Op::Write, 1, 0);
    run(&mut c, Op::Write, 2, 0);
    let ms = 1_000_000;
    assert_eq!(
        background(&mut c, 5 * ms),
        (
            vec![
                vec![(0, 'r', 1), (0, 'r', 2)],
                vec![(1, 'w', 1), (1, 'w', 2)]
            ],
            Some(15 * ms)
        )
    );
    // Nothing dirty: ACP backs off for a second.
    assert_eq!(background(&mut c, 15 * ms), (vec![], Some(1015 * ms)));
}

#[test]
fn nop_and_non_lazy_modes_never_clean() {
    let mut c = write_back_with(CleaningPolicy::Nop);
    run(&mut c, Op::Write, 1, 0);
    assert_eq!(background(&mut c, 1000 * S), (vec![], None));
    assert!(c.is_dirty(0, 1));
    let mut wt = controller(WriteMode::Wt, TierLayout::Inclusive, &[4]);
    assert_eq!(background(&mut wt, 0), (vec![], None));
}

#[test]
fn cleaning_an_inclusive_tier_0_line_writes_every_level_below() {
    let config = CacheConfig {
        mode: WriteMode::Wb,
        cleaning: CleaningPolicy::Acp,
        ..CacheConfig::default()
    };
    let mut c = CacheController::new(&config, &[2 * LINE_BYTES, 4 * LINE_BYTES], 1).unwrap();
    run(&mut c, Op::Write, 1, 0);
    assert_eq!(
        background(&mut c, 0).0,
        vec![vec![(0, 'r', 1)], vec![(1, 'w', 1), (2, 'w', 1)]]
    );
    assert!(!c.is_dirty(0, 1) && !c.is_dirty(1, 1));
}

#[test]
fn bad_configurations_are_rejected_with_their_key() {
    let config = CacheConfig::default();
    let error = |tiers: &[u64], config: &CacheConfig| {
        CacheController::new(config, tiers, 1)
            .err()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        error(&[], &config),
        "cache.tier: 0 cache tiers given; expected 1 to 4"
    );
    assert_eq!(
        error(&[1, 2, 3, 4, 5], &config),
        "cache.tier: 5 cache tiers given; expected 1 to 4"
    );
    assert_eq!(
        error(&[8, 0], &config),
        "cache.tier[1]: a cache tier of 0 bytes holds nothing"
    );
    let unknown = CacheConfig {
        policy: "mru".to_string(),
        ..CacheConfig::default()
    };
    assert!(error(&[8], &unknown).starts_with("cache.policy: unknown policy \"mru\""));
    let out_of_range = CacheConfig {
        policy: "s3fifo:small-size-ratio=1.5".to_string(),
        ..CacheConfig::default()
    };
    assert_eq!(
        error(&[8], &out_of_range),
        "cache.policy: s3fifo: small-size-ratio=1.5 is out of range: expected a number from 0 to 1"
    );
    let with_params = CacheConfig {
        policy: "s3fifo:small-size-ratio=0.5,ghost-size-ratio=0".to_string(),
        ..CacheConfig::default()
    };
    assert!(CacheController::new(&with_params, &[8 * LINE_BYTES], 1).is_ok());
    for oracle in ["belady", "beladysize:n-sample=8"] {
        let config = CacheConfig {
            policy: oracle.to_string(),
            ..CacheConfig::default()
        };
        assert_eq!(
            error(&[8], &config),
            format!(
                "cache.policy: {oracle} needs each request's next access, which a cache serving \
                 requests never knows; simulate it with `heterarchy sim`"
            )
        );
    }
}

fn departures(controller: &mut CacheController, op: Op, key: u64) -> Vec<(u8, u64)> {
    let request = Request {
        op,
        ..Request::new(key, LINE)
    };
    let mut plan = Plan::new();
    controller.plan(&request, 0, &mut plan);
    plan.departures().to_vec()
}

#[test]
fn plans_name_every_line_leaving_a_tier() {
    let mut wi = controller(WriteMode::Wi, TierLayout::Inclusive, &[2]);
    assert!(departures(&mut wi, Op::Read, 1).is_empty());
    assert!(departures(&mut wi, Op::Read, 2).is_empty());
    assert_eq!(departures(&mut wi, Op::Read, 3), [(0, 1)]);
    assert_eq!(departures(&mut wi, Op::Write, 2), [(0, 2)]);
    assert_eq!(departures(&mut wi, Op::Trim, 3), [(0, 3)]);
    assert!(departures(&mut wi, Op::Trim, 3).is_empty());
    let mut inclusive = controller(WriteMode::Wb, TierLayout::Inclusive, &[1, 2]);
    departures(&mut inclusive, Op::Write, 1);
    departures(&mut inclusive, Op::Write, 2);
    let third = departures(&mut inclusive, Op::Write, 3);
    assert!(
        third.contains(&(1, 1)) && third.contains(&(0, 2)),
        "{third:?}"
    );
}

#[test]
fn restored_lines_are_held_as_they_were() {
    let mut wb = controller(WriteMode::Wb, TierLayout::Inclusive, &[2]);
    let mut plan = Plan::new();
    assert!(wb.restore_line(0, 7, LINE, true, 0, &mut plan));
    assert!(wb.restore_line(0, 8, LINE, false, 0, &mut plan));
    assert!(
        !wb.restore_line(0, 8, LINE, false, 0, &mut plan),
        "already held"
    );
    assert!(plan.is_empty() && plan.departures().is_empty());
    assert!(wb.is_dirty(0, 7) && !wb.is_dirty(0, 8));
    assert_eq!(wb.stats().dirty_lines, 1);
    // A tier that cannot keep everything restored evicts, and says so in the plan.
    let mut small = controller(WriteMode::Wb, TierLayout::Inclusive, &[1]);
    assert!(small.restore_line(0, 1, LINE, true, 0, &mut plan));
    assert!(small.restore_line(0, 2, LINE, false, 0, &mut plan));
    assert_eq!(plan.departures(), &[(0, 1)]);
    assert_eq!(stages_of(&plan), vec![vec![(0, 'r', 1)], vec![(1, 'w', 1)]]);
    plan.clear();
    assert_eq!(wb.flush(&mut plan), 1);
    assert_eq!(plan.stage(1)[0].key, 7);
    let read = run(&mut wb, Op::Read, 8, 0);
    assert_eq!(read.hit_tier, Some(0));
    // One write-through tier is never dirty: a dirty line is refused (the caller writes it
    // back), a clean one kept.
    let mut wt = controller(WriteMode::Wt, TierLayout::Inclusive, &[2]);
    assert!(!wt.restore_line(0, 7, LINE, true, 0, &mut plan));
    assert!(wt.restore_line(0, 8, LINE, false, 0, &mut plan));
    assert!(!wt.holds(0, 7) && wt.holds(0, 8) && !wt.is_dirty(0, 8));
    assert_eq!(run(&mut wt, Op::Read, 8, 0).hit_tier, Some(0));
}

#[test]
fn three_inclusive_tiers_install_bottom_up_and_dirty_victims_step_down() {
    let mut c = controller(WriteMode::Wb, TierLayout::Inclusive, &[1, 2, 3]);
    // A miss lands in every tier; the read is answered once all three hold it.
    assert_plan(
        &read(&mut c, 1),
        &[&[(3, 'r', 1)], &[(0, 'w', 1), (1, 'w', 1), (2, 'w', 1)]],
    );
    // A dirty tier-0 victim goes one level down, to tier 1, not to the backing store.
    write(&mut c, 1);
    assert!(c.is_dirty(0, 1));
    assert_plan(
        &read(&mut c, 2),
        &[
            &[(0, 'r', 1), (3, 'r', 2)],
            &[(1, 'w', 1)],
            &[(0, 'w', 2), (1, 'w', 2), (2, 'w', 2)],
        ],
    );
    assert!(c.is_dirty(1, 1) && !c.holds(0, 1));
    // A hit in tier 2 is copied up into tiers 1 and 0.
    read(&mut c, 3);
    read(&mut c, 4);
    assert!(c.holds(0, 4) && c.holds(1, 4) && c.holds(2, 4));
    // Tier 2 now holds 2, 3, 4 (1 was evicted from it): 2 is only in tier 2.
    assert!(c.holds(2, 2) && !c.holds(1, 2) && !c.holds(0, 2));
    let hit = read(&mut c, 2);
    assert_eq!(hit.hit_tier, Some(2));
    assert_eq!(hit.stages[0], vec![(2, 'r', 2)]);
    assert!(c.holds(0, 2) && c.holds(1, 2) && c.holds(2, 2));
}

#[test]
fn three_inclusive_tiers_evicting_the_last_tier_invalidates_above_and_writes_back() {
    let mut c = controller(WriteMode::Wb, TierLayout::Inclusive, &[1, 1, 1]);
    write(&mut c, 1);
    // Tier 2 evicts 1: it leaves tiers 0 and 1 too, and its dirty tier-0 data goes to the
    // backing store before anything is installed.
    let miss = read(&mut c, 2);
    assert_eq!(miss.stages[0], vec![(0, 'r', 1), (3, 'r', 2)]);
    assert_eq!(miss.stages[1], vec![(3, 'w', 1)]);
    assert!((0..3).all(|tier| !c.holds(tier, 1)));
    assert_eq!(c.stats().dirty_lines, 0);
    assert_eq!(c.stats().evictions_per_tier, vec![1, 1, 1]);
}

#[test]
fn three_exclusive_tiers_demote_victims_down_the_cascade() {
    let mut c = controller(WriteMode::Wb, TierLayout::Exclusive, &[1, 1, 1]);
    write(&mut c, 1);
    read(&mut c, 2);
    // 1 went dirty into tier 1; now 3 pushes 2 into tier 1 and 1 into tier 2, both read first.
    let miss = read(&mut c, 3);
    assert_eq!(miss.stages[0], vec![(0, 'r', 2), (1, 'r', 1), (3, 'r', 3)]);
    assert_eq!(miss.stages[1], vec![(1, 'w', 2), (2, 'w', 1)]);
    assert_eq!(miss.stages[2], vec![(0, 'w', 3)]);
    assert!(c.holds(2, 1) && c.is_dirty(2, 1));
    assert!(c.holds(1, 2) && !c.is_dirty(1, 2));
    // A fourth line pushes the dirty 1 out of the last tier: written back.
    let miss = read(&mut c, 4);
    assert!(miss.stages.iter().any(|stage| stage.contains(&(3, 'w', 1))));
    assert!((0..3).all(|tier| !c.holds(tier, 1)));
    // A hit in tier 2 moves up to tier 0 (exclusive), shifting the others down.
    let hit = read(&mut c, 2);
    assert_eq!(hit.hit_tier, Some(2));
    assert!(c.holds(0, 2) && !c.holds(2, 2));
}
