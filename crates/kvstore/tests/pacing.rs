//! Every storage access of a store on a paced tier is timed, one after another, and, through a
//! NyxCache gate, delayed, stalled and charged (seed 000 §5.2.3's PM access regulation and
//! resource usage estimation).

use std::sync::Arc;
use std::time::{Duration, Instant};

use heterarchy_device::backend::{RamBackend, Throttle};
use heterarchy_device::model::IoKind;
use heterarchy_device::presets::preset;
use heterarchy_engine::nyx::{MaxIopsProfile, Regulator};
use heterarchy_kvstore::{Lookup, Store, StoreConfig, Stored, Write};

const NOW: u32 = 1_700_000_000;

fn paced_store(device: &str) -> (Store, Arc<Throttle>) {
    let backend = Box::new(RamBackend::new(4096 + 16 * 4096).unwrap());
    let config = StoreConfig {
        segment_bytes: 4096,
        item_max_bytes: 4096,
        index_max_bytes: None,
    };
    let (mut store, _) = Store::open(backend, config, NOW).unwrap();
    let throttle = Arc::new(Throttle::new(&preset(device).unwrap()));
    store.set_throttle(Arc::clone(&throttle));
    (store, throttle)
}

fn set(store: &mut Store, key: &[u8], value: &[u8]) {
    assert!(matches!(
        store.store(NOW, &Write::set(key, value)).unwrap(),
        Stored::Stored(_)
    ));
}

fn get(store: &mut Store, key: &[u8]) -> Vec<u8> {
    let found = store.get(NOW, key, &Lookup::default()).unwrap().unwrap();
    let mut value = Vec::new();
    store.read_value(&found, &mut value).unwrap();
    value
}

#[test]
fn a_paced_store_says_when_its_accesses_are_done_without_waiting_for_them() {
    // A disk: about 12 ms a random read.
    let (mut store, _) = paced_store("hdd");
    assert_eq!(store.take_device_deadline(), None, "no access yet");
    set(&mut store, b"k", b"value");
    store.take_device_deadline().expect("the write was timed");
    let asked = Instant::now();
    assert_eq!(get(&mut store, b"k"), b"value");
    assert!(
        asked.elapsed() < Duration::from_millis(5),
        "the caller was held"
    );
    let due = store.take_device_deadline().expect("the read was timed");
    assert!(due >= asked + Duration::from_millis(5), "{:?}", due - asked);
    // Taken: the next access starts afresh.
    assert_eq!(store.take_device_deadline(), None);
}

#[test]
fn a_gate_delays_stalls_and_charges_every_access() {
    let (mut store, throttle) = paced_store("optane-pm");
    let profile = Arc::new(MaxIopsProfile::flat(2e6, 1e6));
    let gate = Arc::new(Regulator::new());
    store.set_gate(Arc::clone(&gate), Arc::clone(&profile));
    set(&mut store, b"k", &[7u8; 1000]);
    let written = gate.usage();
    assert_eq!(written.accesses, 1, "one record written");
    assert_eq!(
        written.cost_ps,
        profile.cost_ps(IoKind::Write, written.bytes as u32)
    );
    store.take_device_deadline();
    // A thousand accesses a second: the second read waits 1 ms after the first.
    gate.set_rate_cap(Some(1000.0));
    let asked = Instant::now();
    get(&mut store, b"k");
    store.take_device_deadline();
    assert_eq!(get(&mut store, b"k"), vec![7u8; 1000]);
    let due = store.take_device_deadline().unwrap();
    assert!(due >= asked + Duration::from_millis(1), "{:?}", due - asked);
    let read = gate.usage().since(written);
    assert_eq!((read.accesses, read.bytes), (2, 2000));
    // A stall holds the access to its end.
    gate.set_rate_cap(None);
    let until = Instant::now() + Duration::from_millis(20);
    gate.stall_until(throttle.ns_at(until));
    get(&mut store, b"k");
    assert!(store.take_device_deadline().unwrap() >= until);
}
