//! The store against a model (a map of what memcached would hold), under eviction, and across
//! restarts and injected machine crashes of persistent memory.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use heterarchy_device::backend::{CrashAfter, CrashBudget, PmemBackend, RamBackend};
use heterarchy_kvstore::{
    index_entry_bytes, Arithmetic, Counted, Delete, Deleted, Expiry, Lookup, Mode, Recovery, Store,
    StoreConfig, Stored, Write,
};
use proptest::prelude::*;

const NOW: u32 = 1_700_000_000;

fn small_config() -> StoreConfig {
    StoreConfig {
        segment_bytes: 4096,
        item_max_bytes: 4096,
        index_max_bytes: None,
    }
}

fn ram_store(bytes: u64) -> Store {
    let backend = Box::new(RamBackend::new(bytes).unwrap());
    Store::open(backend, small_config(), NOW).unwrap().0
}

fn set(store: &mut Store, now: u32, key: &[u8], value: &[u8], expiry: Expiry) -> Stored {
    let write = Write {
        client_flags: 7,
        expiry,
        ..Write::set(key, value)
    };
    store.store(now, &write).unwrap()
}

fn get(store: &mut Store, now: u32, key: &[u8]) -> Option<Vec<u8>> {
    let found = store.get(now, key, &Lookup::default()).unwrap()?;
    let mut value = Vec::new();
    store.read_value(&found, &mut value).unwrap();
    assert_eq!(value.len(), found.value_len as usize);
    Some(value)
}

#[derive(Clone, Debug)]
enum Op {
    Set(u8, Vec<u8>, u8),
    Add(u8, Vec<u8>),
    Replace(u8, Vec<u8>),
    Append(u8, Vec<u8>),
    Prepend(u8, Vec<u8>),
    Delete(u8),
    Incr(u8, u64),
    Decr(u8, u64),
    Touch(u8, u8),
    Get(u8),
    Advance(u8),
    FlushAll,
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0u8..12;
    let value = prop::collection::vec(prop::sample::select(b"0123456789ab ".to_vec()), 0..40);
    prop_oneof![
        4 => (key.clone(), value.clone(), 0u8..4).prop_map(|(k, v, t)| Op::Set(k, v, t)),
        1 => (key.clone(), value.clone()).prop_map(|(k, v)| Op::Add(k, v)),
        1 => (key.clone(), value.clone()).prop_map(|(k, v)| Op::Replace(k, v)),
        1 => (key.clone(), value.clone()).prop_map(|(k, v)| Op::Append(k, v)),
        1 => (key.clone(), value.clone()).prop_map(|(k, v)| Op::Prepend(k, v)),
        1 => key.clone().prop_map(Op::Delete),
        1 => (key.clone(), 0u64..1000).prop_map(|(k, d)| Op::Incr(k, d)),
        1 => (key.clone(), 0u64..1000).prop_map(|(k, d)| Op::Decr(k, d)),
        1 => (key.clone(), 0u8..4).prop_map(|(k, t)| Op::Touch(k, t)),
        4 => key.prop_map(Op::Get),
        1 => (0u8..3).prop_map(Op::Advance),
        1 => Just(Op::FlushAll),
    ]
}

/// Key number `k`, of a length around the longest the index holds inline (38 bytes) or of
/// memcached's longest (250), as `k` picks.
fn model_key(k: u8) -> Vec<u8> {
    let mut key = format!("key{k}").into_bytes();
    let len = [key.len(), 38, 39, 250][usize::from(k % 4)];
    key.resize(len, b'-');
    key
}

/// TTL choice `t`: 0 never, else t seconds.
fn expiry_of(t: u8, now: u32) -> Expiry {
    Expiry::from_exptime(i64::from(t), now)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// With room for everything, the store answers exactly as a map with expiry would.
    #[test]
    fn matches_a_model_when_nothing_is_evicted(ops in prop::collection::vec(op(), 1..120)) {
        let mut store = ram_store(4 << 20);
        let mut model: HashMap<Vec<u8>, (Vec<u8>, Expiry)> = HashMap::new();
        let mut now = NOW;
        for op in ops {
            model.retain(|_, (_, expiry)| !expiry.has_passed(now));
            let key_of = model_key;
            match op.clone() {
                Op::Set(k, v, t) => {
                    let stored = set(&mut store, now, &key_of(k), &v, expiry_of(t, now));
                    prop_assert!(matches!(stored, Stored::Stored(_)));
                    model.insert(key_of(k), (v, expiry_of(t, now)));
                }
                Op::Add(k, v) | Op::Replace(k, v) | Op::Append(k, v) | Op::Prepend(k, v) => {
                    let mode = match op {
                        Op::Add(..) => Mode::Add,
                        Op::Replace(..) => Mode::Replace,
                        Op::Append(..) => Mode::Append,
                        _ => Mode::Prepend,
                    };
                    let write = Write { key: &key_of(k), value: &v, client_flags: 0, expiry: Expiry::NEVER, mode, compare_cas: None, invalidate: false, new_cas: None };
                    let stored = store.store(now, &write).unwrap();
                    let present = model.contains_key(&key_of(k));
                    prop_assert_eq!(matches!(stored, Stored::Stored(_)), present != (mode == Mode::Add));
                    if let Stored::Stored(_) = stored {
                        let entry = model.entry(key_of(k)).or_insert((Vec::new(), Expiry::NEVER));
                        match mode {
                            Mode::Append => entry.0.extend_from_slice(&v),
                            Mode::Prepend => entry.0 = [v.clone(), entry.0.clone()].concat(),
                            _ => *entry = (v, Expiry::NEVER),
                        }
                    }
                }
                Op::Delete(k) => {
                    let deleted = store.delete(now, &key_of(k), &Delete::default()).unwrap();
                    let expected = if model.remove(&key_of(k)).is_some() { Deleted::Deleted } else { Deleted::NotFound };
                    prop_assert_eq!(deleted, expected);
                }
                Op::Incr(k, delta) | Op::Decr(k, delta) => {
                    let incr = matches!(op, Op::Incr(..));
                    let request = Arithmetic { incr, delta, compare_cas: None, vivify: None, touch: None, new_cas: None };
                    let counted = store.arithmetic(now, &key_of(k), &request).unwrap();
                    match model.get_mut(&key_of(k)) {
                        None => prop_assert_eq!(counted, Counted::NotFound),
                        Some((value, _)) => {
                            let text = String::from_utf8(value.clone()).unwrap();
                            match text.trim().parse::<u64>() {
                                Ok(old) if !text.trim().is_empty() && text.trim().bytes().all(|b| b.is_ascii_digit()) => {
                                    let new = if incr { old.wrapping_add(delta) } else { old.saturating_sub(delta) };
                                    let Counted::Value { value: got, .. } = counted else {
                                        return Err(TestCaseError::fail(format!("{counted:?} for {text:?}")));
                                    };
                                    prop_assert_eq!(got, new);
                                    let mut digits = new.to_string().into_bytes();
                                    if digits.len() < value.len() { digits.resize(value.len(), b' '); }
                                    *value = digits;
                                }
                                _ => prop_assert_eq!(counted, Counted::NonNumeric),
                            }
                        }
                    }
                }
                Op::Touch(k, t) => {
                    let touched = store.touch(now, &key_of(k), expiry_of(t, now)).unwrap();
                    prop_assert_eq!(touched, model.contains_key(&key_of(k)));
                    if let Some(entry) = model.get_mut(&key_of(k)) { entry.1 = expiry_of(t, now); }
                }
                Op::Get(k) => {
                    prop_assert_eq!(get(&mut store, now, &key_of(k)), model.get(&key_of(k)).map(|(v, _)| v.clone()));
                }
                Op::Advance(seconds) => now += u32::from(seconds),
                Op::FlushAll => {
                    store.flush_all(now, 0).unwrap();
                    model.clear();
                }
            }
            if let Err(broken) = store.check_invariants() {
                return Err(TestCaseError::fail(format!("after {op:?}: {broken}")));
            }
        }
        model.retain(|_, (_, expiry)| !expiry.has_passed(now));
        for k in 0..12u8 {
            let key = model_key(k);
            prop_assert_eq!(get(&mut store, now, &key), model.get(&key).map(|(v, _)| v.clone()));
        }
    }

    /// Under eviction a get returns the latest value written or nothing, never an older one,
    /// and the store never holds more than its quota.
    #[test]
    fn eviction_never_serves_an_old_value(writes in prop::collection::vec((0u16..300, 1usize..900), 1..400)) {
        let mut store = ram_store(4096 + 8 * 4096);
        let mut latest: HashMap<u16, Vec<u8>> = HashMap::new();
        for (round, (key, length)) in writes.into_iter().enumerate() {
            let value = vec![(round % 251) as u8; length];
            let name = key.to_be_bytes();
            prop_assert!(matches!(set(&mut store, NOW, &name, &value, Expiry::NEVER), Stored::Stored(_)));
            latest.insert(key, value);
            prop_assert!(store.stats().bytes <= store.stats().limit_maxbytes);
            if let Err(broken) = store.check_invariants() {
                return Err(TestCaseError::fail(format!("after write {round}: {broken}")));
            }
        }
        for (key, value) in &latest {
            if let Some(got) = get(&mut store, NOW, &key.to_be_bytes()) {
                prop_assert_eq!(&got, value);
            }
        }
    }
}

#[test]
fn cas_add_and_the_meta_flags() {
    let mut store = ram_store(1 << 20);
    let Stored::Stored(cas) = set(&mut store, NOW, b"k", b"v1", Expiry::NEVER) else {
        panic!("set failed");
    };
    let mut write = Write {
        key: b"k",
        value: b"v2",
        client_flags: 1,
        expiry: Expiry::NEVER,
        mode: Mode::Set,
        compare_cas: Some(cas + 100),
        invalidate: false,
        new_cas: None,
    };
    // a wrong CAS unique is refused
    assert_eq!(store.store(NOW, &write).unwrap(), Stored::Exists);
    write.compare_cas = Some(cas);
    // the right one stores, with a new CAS unique
    let Stored::Stored(second) = store.store(NOW, &write).unwrap() else {
        panic!("cas failed")
    };
    assert!(second > cas);
    // a CAS write on a missing key is NOT_FOUND
    write.key = b"missing";
    assert_eq!(store.store(NOW, &write).unwrap(), Stored::NotFound);
    // add refuses a present key
    write.key = b"k";
    write.compare_cas = None;
    write.mode = Mode::Add;
    assert_eq!(store.store(NOW, &write).unwrap(), Stored::NotStored);

    // mg N: the first miss vivifies and wins, the next sees it won already
    let vivify = Lookup {
        vivify: Some(Expiry::at(i64::from(NOW) + 30)),
        ..Lookup::default()
    };
    let first = store.get(NOW, b"new", &vivify).unwrap().unwrap();
    assert!(first.win && first.value_len == 0);
    let second = store.get(NOW, b"new", &vivify).unwrap().unwrap();
    assert!(!second.win && second.already_won);

    // md I: the item stays, stale, and the next reader wins the recache
    assert_eq!(
        store
            .delete(
                NOW,
                b"k",
                &Delete {
                    invalidate: Some(None),
                    ..Delete::default()
                }
            )
            .unwrap(),
        Deleted::Deleted
    );
    let stale = store.get(NOW, b"k", &Lookup::default()).unwrap().unwrap();
    assert!(stale.stale && stale.win);
    // h and l: fetched before, idle time
    let later = store
        .get(NOW + 5, b"k", &Lookup::default())
        .unwrap()
        .unwrap();
    assert!(later.hit_before && later.idle_secs == 5 && later.already_won);
}

#[test]
fn expiry_and_delayed_flush() {
    let mut store = ram_store(1 << 20);
    set(
        &mut store,
        NOW,
        b"short",
        b"x",
        Expiry::from_exptime(2, NOW),
    );
    set(&mut store, NOW, b"long", b"y", Expiry::NEVER);
    // alive before its time, gone after
    assert!(get(&mut store, NOW + 1, b"short").is_some());
    assert!(get(&mut store, NOW + 2, b"short").is_none());
    // a negative exptime is expired at once
    set(&mut store, NOW, b"neg", b"z", Expiry::from_exptime(-1, NOW));
    assert!(get(&mut store, NOW, b"neg").is_none());
    // flush_all 10: items stay until then, go after
    store.flush_all(NOW, 10).unwrap();
    assert!(get(&mut store, NOW + 9, b"long").is_some());
    assert!(get(&mut store, NOW + 10, b"long").is_none());
}

#[test]
fn oversized_items_are_refused() {
    let mut store = ram_store(1 << 20);
    let big = vec![0u8; 4096];
    // an item (header, key and value) over item_max_bytes is too large
    assert_eq!(
        set(&mut store, NOW, b"k", &big, Expiry::NEVER),
        Stored::TooLarge
    );
    let fits = vec![0u8; 4096 - 64 - 40 - 1];
    assert!(matches!(
        set(&mut store, NOW, b"k", &fits, Expiry::NEVER),
        Stored::Stored(_)
    ));
}

#[test]
fn overwrites_in_a_store_with_room_never_evict_a_live_item() {
    // 8 segments of 4 KiB; 40 items of 64-byte values live in about 4.5 KiB, but 4000
    // overwrites write 500 KiB: the oldest segments are mostly dead and get compacted.
    let mut store = ram_store(4096 + 8 * 4096);
    let mut latest = HashMap::new();
    let mut seed = 7u64;
    for round in 0..4000u32 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let key = format!("key{:02}", (seed >> 33) % 40);
        let value = [round.to_le_bytes(); 16].concat();
        set(&mut store, NOW, key.as_bytes(), &value, Expiry::NEVER);
        latest.insert(key, value);
        // Compaction moves records between segments: their accounting must follow.
        if let Err(broken) = store.check_invariants() {
            panic!("after round {round}: {broken}");
        }
    }
    for (key, value) in &latest {
        assert_eq!(
            get(&mut store, NOW, key.as_bytes()).as_ref(),
            Some(value),
            "{key}"
        );
    }
    let stats = store.stats();
    assert_eq!((stats.evictions, stats.curr_items), (0, 40));
    assert!(stats.segments_compacted > 0);
    // Items not written again are moved, not rewritten: their CAS uniques stay.
    let cas_of = |store: &mut Store, key: &str| {
        store
            .get(NOW, key.as_bytes(), &Lookup::default())
            .unwrap()
            .map(|found| found.cas)
    };
    let before: Vec<_> = (0..40)
        .map(|k| cas_of(&mut store, &format!("key{k:02}")))
        .collect();
    for round in 0..2000u32 {
        set(
            &mut store,
            NOW,
            b"churn",
            &[round.to_le_bytes(); 16].concat(),
            Expiry::NEVER,
        );
    }
    let after: Vec<_> = (0..40)
        .map(|k| cas_of(&mut store, &format!("key{k:02}")))
        .collect();
    assert_eq!(before, after);
    assert!(store.stats().segments_compacted > stats.segments_compacted + 8);
}

/// Sets keys "k00000".. of 6 bytes with 8-byte values until `count`; all fit the value tier.
fn set_numbered(store: &mut Store, range: std::ops::Range<u32>) {
    for i in range {
        let key = format!("k{i:05}");
        set(store, NOW, key.as_bytes(), &i.to_le_bytes(), Expiry::NEVER);
    }
}

#[test]
fn the_index_limit_evicts_the_oldest_segments() {
    // 200 entries' worth of index, and a value tier that holds thousands of these items.
    let entry = index_entry_bytes(6);
    let config = StoreConfig {
        index_max_bytes: Some(200 * entry),
        ..small_config()
    };
    let backend = Box::new(RamBackend::new(4096 + 64 * 4096).unwrap());
    let mut store = Store::open(backend, config, NOW).unwrap().0;
    set_numbered(&mut store, 0..1000);
    let stats = store.stats();
    // The index never passes its limit, and its count is exact for these keys.
    assert!(stats.index_bytes <= 200 * entry);
    assert_eq!(stats.index_bytes, stats.curr_items * entry);
    assert_eq!(stats.index_max_bytes, 200 * entry);
    // Whole segments went, oldest first: a segment holds 4064 / 48 = 84 of these records, so
    // at least 200 - 84 items stay, and they are the newest.
    assert!(stats.curr_items > 200 - 84 && stats.evictions >= 800);
    assert_eq!(
        get(&mut store, NOW, b"k00999"),
        Some(999u32.to_le_bytes().to_vec())
    );
    assert_eq!(get(&mut store, NOW, b"k00000"), None);
    // Deletes and flush_all give the index its room back.
    store.delete(NOW, b"k00999", &Delete::default()).unwrap();
    assert_eq!(store.stats().index_bytes, (stats.curr_items - 1) * entry);
    store.flush_all(NOW, 0).unwrap();
    assert_eq!(store.stats().index_bytes, 0);
}

#[test]
fn a_restart_with_a_smaller_index_limit_keeps_the_newest_items() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("values.pm");
    let open = |index_max_bytes| {
        let backend = Box::new(PmemBackend::open(&path, 1 << 20).unwrap());
        let config = StoreConfig {
            index_max_bytes,
            ..small_config()
        };
        Store::open(backend, config, NOW).unwrap().0
    };
    let mut store = open(None);
    set_numbered(&mut store, 0..1000);
    store.shut_down().unwrap();
    drop(store);
    let mut store = open(Some(300 * index_entry_bytes(6)));
    assert!(store.stats().curr_items <= 300);
    assert_eq!(
        get(&mut store, NOW, b"k00999"),
        Some(999u32.to_le_bytes().to_vec())
    );
    assert_eq!(get(&mut store, NOW, b"k00000"), None);
}

#[test]
fn a_shut_down_store_refuses_every_request_and_keeps_what_came_before() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("values.pm");
    let open = || {
        let backend = Box::new(PmemBackend::open(&path, 1 << 20).unwrap());
        Store::open(backend, small_config(), NOW).unwrap().0
    };
    let mut store = open();
    set_numbered(&mut store, 0..10);
    store.shut_down().unwrap();
    let write = Write {
        key: b"late",
        value: b"after the last flush",
        client_flags: 0,
        expiry: Expiry::NEVER,
        mode: Mode::Set,
        compare_cas: None,
        invalidate: false,
        new_cas: None,
    };
    let refused = [
        store.store(NOW, &write).map(|_| ()),
        store.get(NOW, b"k00001", &Lookup::default()).map(|_| ()),
        store.delete(NOW, b"k00001", &Delete::default()).map(|_| ()),
        store.touch(NOW, b"k00001", Expiry::NEVER).map(|_| ()),
        store.flush_all(NOW, 0),
    ];
    for result in refused {
        assert_eq!(result.unwrap_err().to_string(), "the store is shut down");
    }
    drop(store);
    let mut store = open();
    assert_eq!(
        get(&mut store, NOW, b"k00001"),
        Some(1u32.to_le_bytes().to_vec())
    );
    assert_eq!(get(&mut store, NOW, b"late"), None);
}

#[test]
fn warm_restart_after_shutdown_and_after_a_process_crash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("values.pm");
    // What recovery rebuilds must be as whole as what requests build.
    let open = || {
        let backend = Box::new(PmemBackend::open(&path, 1 << 20).unwrap());
        let (store, recovery) = Store::open(backend, small_config(), NOW).unwrap();
        store.check_invariants().unwrap();
        (store, recovery)
    };
    let (mut store, recovery) = open();
    assert_eq!(recovery, Recovery::Fresh);
    for i in 0..100u32 {
        set(
            &mut store,
            NOW,
            &i.to_be_bytes(),
            &i.to_le_bytes(),
            Expiry::NEVER,
        );
    }
    set(&mut store, NOW, b"gone", b"x", Expiry::NEVER);
    store.delete(NOW, b"gone", &Delete::default()).unwrap();
    set(&mut store, NOW, b"twice", b"old", Expiry::NEVER);
    set(&mut store, NOW, b"twice", b"new", Expiry::NEVER);
    // A key too long to be held in its index entry.
    let long_key = [b'L'; 250];
    set(&mut store, NOW, &long_key, b"old", Expiry::NEVER);
    set(&mut store, NOW, &long_key, b"new", Expiry::NEVER);
    let given_cas = Write {
        key: b"given",
        value: b"g",
        client_flags: 0,
        expiry: Expiry::NEVER,
        mode: Mode::Set,
        compare_cas: None,
        invalidate: false,
        new_cas: Some(4242),
    };
    assert_eq!(store.store(NOW, &given_cas).unwrap(), Stored::Stored(4242));
    store.shut_down().unwrap();
    drop(store);

    let (mut store, recovery) = open();
    // a clean shutdown keeps every item; deleted and overwritten ones stay so
    assert_eq!(
        recovery,
        Recovery::Recovered {
            items: 103,
            clean: true
        }
    );
    assert_eq!(
        get(&mut store, NOW, &7u32.to_be_bytes()),
        Some(7u32.to_le_bytes().to_vec())
    );
    assert_eq!(get(&mut store, NOW, b"gone"), None);
    assert_eq!(get(&mut store, NOW, b"twice"), Some(b"new".to_vec()));
    assert_eq!(get(&mut store, NOW, &long_key), Some(b"new".to_vec()));
    // a CAS unique a client gave (meta E) is kept on storage too
    let found = store.get(NOW, b"given", &Lookup::default()).unwrap();
    assert_eq!(found.map(|found| found.cas), Some(4242));
    set(&mut store, NOW, b"after", b"restart", Expiry::NEVER);
    store.flush_all(NOW, 0).unwrap();
    set(&mut store, NOW, b"survivor", b"1", Expiry::NEVER);
    // dropped without shutdown: a process crash
    drop(store);

    let (mut store, recovery) = open();
    // flush_all voided everything before it, across the crash
    assert_eq!(
        recovery,
        Recovery::Recovered {
            items: 1,
            clean: false
        }
    );
    assert_eq!(get(&mut store, NOW, b"survivor"), Some(b"1".to_vec()));
    assert_eq!(get(&mut store, NOW, b"after"), None);
}

/// The store on a machine that stops after `budget` allows: persistent memory with crash
/// injection, reached through the device crate's crash wrapper.
fn crashing_store(pmem: &Arc<PmemBackend>, budget: &CrashBudget) -> Store {
    let device = Box::new(CrashAfter::new(Arc::clone(pmem), budget.clone()));
    let store = Store::open(device, small_config(), NOW).unwrap().0;
    // Recovery after a crash must rebuild whole accounting, whatever the crash left.
    store.check_invariants().unwrap();
    store
}

#[test]
fn injected_machine_crashes_lose_no_answered_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut stopped_mid_operation = 0;
    for seed in 0..200u64 {
        let path = dir.path().join(format!("crash{seed}.pm"));
        let mut pmem = PmemBackend::open(&path, 64 << 10).unwrap();
        pmem.enable_crash_injection();
        let pmem = Arc::new(pmem);
        let budget = CrashBudget::new(i64::MAX);
        let mut store = crashing_store(&pmem, &budget);
        // Half the machines stop mid-operation, after a seeded number of device operations;
        // the rest after the last answer.
        let operations = 200 + seed as u32 * 7;
        if seed % 2 == 0 {
            // 20 to 2,067 operations, spread by a multiplicative hash of the seed
            budget.set(20 + (seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 53) as i64);
        }
        let mut expected: HashMap<u32, Option<Vec<u8>>> = HashMap::new();
        // The operation the crash interrupted: its key may hold the old or the new value.
        let mut interrupted: Option<(u32, Option<Vec<u8>>)> = None;
        for step in 0..operations {
            let key = (step * 31 + seed as u32) % 40;
            let (outcome, value) = if step % 5 == 4 {
                let deleted = store.delete(NOW, &key.to_be_bytes(), &Delete::default());
                (deleted.map(|_| ()), None)
            } else {
                let value = vec![step as u8; 50 + (step as usize % 300)];
                (try_set(&mut store, &key.to_be_bytes(), &value), Some(value))
            };
            match outcome {
                Ok(()) => {
                    expected.insert(key, value);
                }
                Err(_) => {
                    interrupted = Some((key, value));
                    stopped_mid_operation += 1;
                    break;
                }
            }
        }
        // Forty keys of at most 350 bytes fill a quarter of the store: nothing is evicted, so
        // an answered write can only be found again (compactions move items, never drop them).
        let evictions = store.stats().evictions;
        assert_eq!(evictions, 0, "seed {seed}");
        let outcome = pmem.crash(seed).unwrap();
        drop(store);
        pmem.restart();
        budget.set(i64::MAX);
        let mut store = crashing_store(&pmem, &budget);
        let context = format!(
            "seed {seed}, crash {outcome:?}, interrupted {:?}",
            interrupted.as_ref().map(|i| i.0)
        );
        for (key, value) in &expected {
            let got = get(&mut store, NOW, &key.to_be_bytes());
            if let Some((interrupted_key, new)) = &interrupted {
                if interrupted_key == key {
                    // old or new, never anything else
                    let brief = |v: &Option<Vec<u8>>| v.as_ref().map(|v| (v.len(), v[0]));
                    assert!(
                        got == *value || got == *new,
                        "key {key}: {context}: got {:?}, old {:?}, new {:?}",
                        brief(&got),
                        brief(value),
                        brief(new)
                    );
                    continue;
                }
            }
            // an answered write survives, and a deleted item never comes back
            assert_eq!(got, *value, "key {key}: {context}");
        }
        // the machine works after its restart
        set(&mut store, NOW, b"after", b"restart", Expiry::NEVER);
        assert_eq!(
            get(&mut store, NOW, b"after"),
            Some(b"restart".to_vec()),
            "{context}"
        );
    }
    assert!(
        stopped_mid_operation >= 50,
        "{stopped_mid_operation} machines stopped mid-operation"
    );
}

#[test]
fn a_crash_at_each_persist_of_an_overwrite_or_delete_leaves_old_or_new() {
    let dir = tempfile::tempdir().unwrap();
    for delete in [false, true] {
        let mut finished = false;
        for persists in 0.. {
            let path = dir.path().join(format!("persist{delete}{persists}.pm"));
            let mut pmem = PmemBackend::open(&path, 64 << 10).unwrap();
            pmem.enable_crash_injection();
            let pmem = Arc::new(pmem);
            let budget = CrashBudget::new(i64::MAX);
            let open = |budget: &CrashBudget| {
                let device = Box::new(CrashAfter::at_persists(Arc::clone(&pmem), budget.clone()));
                Store::open(device, small_config(), NOW).unwrap().0
            };
            let mut store = open(&budget);
            for key in 0..10u32 {
                set(
                    &mut store,
                    NOW,
                    &key.to_be_bytes(),
                    &[1; 200],
                    Expiry::NEVER,
                );
            }
            // The machine stops as the overwrite's (or delete's) persist number `persists`
            // is issued.
            budget.set(persists);
            let done = if delete {
                store
                    .delete(NOW, &3u32.to_be_bytes(), &Delete::default())
                    .is_ok()
            } else {
                try_set(&mut store, &3u32.to_be_bytes(), &[2; 300]).is_ok()
            };
            let outcome = pmem.crash(persists as u64).unwrap();
            drop(store);
            pmem.restart();
            budget.set(i64::MAX);
            let mut store = open(&budget);
            let got = get(&mut store, NOW, &3u32.to_be_bytes());
            let new = (!delete).then(|| vec![2; 300]);
            let context = format!("delete {delete}, crash at persist {persists}: {outcome:?}");
            if done {
                assert_eq!(got, new, "{context}");
            } else {
                assert!(got == Some(vec![1; 200]) || got == new, "{context}");
            }
            for key in (0..10u32).filter(|&key| key != 3) {
                assert_eq!(get(&mut store, NOW, &key.to_be_bytes()), Some(vec![1; 200]));
            }
            if done {
                // the record and the void of the one it replaces; a delete's void alone
                let least = if delete { 1 } else { 2 };
                assert!(
                    persists >= least,
                    "{context}: fewer crash points than persists"
                );
                finished = true;
                break;
            }
            assert!(persists < 100, "{context}: the operation never completes");
        }
        assert!(finished);
    }
}

/// A set whose device errors (a stopped machine) come back instead of failing the test.
fn try_set(store: &mut Store, key: &[u8], value: &[u8]) -> io::Result<()> {
    let write = Write {
        client_flags: 7,
        ..Write::set(key, value)
    };
    store.store(NOW, &write).map(|_| ())
}
