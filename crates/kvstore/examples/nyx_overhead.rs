//! What NyxCache's gate costs a store's get path (seed 000 §5.3.1, Fig 5.5a: "up to 12%
//! overhead for extremely small value sizes ... less than 6% for access sizes above 256B"),
//! measured as the thesis measured it: in process, no network, gets of one thread on a store
//! whose tier is paced like `optane-pm-x2`, with and without a gate (admit, charge) on every
//! access. Runs alternate, five each; medians printed with the ratio, twice: over the gets' CPU
//! time alone, and with each get waiting for its device deadline before the next, as the
//! thesis' gets waited for their PM loads (ours compute when the model completes them and spin
//! until then).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use heterarchy_device::backend::{RamBackend, Throttle};
use heterarchy_device::model::DeviceModel;
use heterarchy_device::presets::preset;
use heterarchy_engine::nyx::{MaxIopsProfile, ProfileLoad, Regulator};
use heterarchy_kvstore::{Lookup, Store, StoreConfig, Write};

const NOW: u32 = 1_700_000_000;
const KEYS: usize = 4096;
const GETS: usize = 400_000;
const RUNS: usize = 5;

fn store(value_bytes: usize, gated: bool, profile: &Arc<MaxIopsProfile>) -> Store {
    let segment = 1 << 20;
    let bytes = (KEYS * (value_bytes + 128)).next_multiple_of(segment) + 4 * segment;
    let backend = Box::new(RamBackend::new(bytes as u64 + 4096).expect("memory"));
    let config = StoreConfig {
        segment_bytes: segment as u32,
        item_max_bytes: 8192,
        index_max_bytes: None,
    };
    let (mut store, _) = Store::open(backend, config, NOW).expect("a store");
    let device = preset("optane-pm-x2").expect("the preset");
    store.set_throttle(Arc::new(Throttle::new(&device)));
    if gated {
        store.set_gate(Arc::new(Regulator::new()), Arc::clone(profile));
    }
    let value = vec![7u8; value_bytes];
    for key in 0..KEYS {
        let key = format!("key{key:06}");
        store
            .store(NOW, &Write::set(key.as_bytes(), &value))
            .expect("stored");
    }
    store
}

/// Gets a second over `GETS` gets of keys in a scrambled order, on a freshly idle device: on
/// the CPU alone (device deadlines computed, not waited for), or `paced`, each get waiting for
/// its device deadline before the next is issued, as a thread whose load blocks would.
fn gets_per_second(store: &mut Store, paced: bool) -> f64 {
    let device = preset("optane-pm-x2").expect("the preset");
    store.set_throttle(Arc::new(Throttle::new(&device)));
    let keys: Vec<String> = (0..KEYS).map(|k| format!("key{k:06}")).collect();
    let mut value = Vec::new();
    let gets = if paced { GETS / 4 } else { GETS };
    let started = Instant::now();
    for i in 0..gets {
        let key = &keys[(i * 2_654_435_761) % KEYS];
        let found = store
            .get(NOW, key.as_bytes(), &Lookup::default())
            .expect("no error")
            .expect("a hit");
        value.clear();
        store.read_value(&found, &mut value).expect("read");
        black_box(&value);
        let deadline = store.take_device_deadline();
        if let (true, Some(deadline)) = (paced, deadline) {
            while Instant::now() < deadline {
                std::hint::spin_loop();
            }
        }
    }
    gets as f64 / started.elapsed().as_secs_f64()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let device = preset("optane-pm-x2").expect("the preset");
    let profile = Arc::new(MaxIopsProfile::measure(
        &mut DeviceModel::new(&device),
        "optane-pm-x2",
        &ProfileLoad::default(),
    ));
    println!(
        "value_bytes  CPU gets/s without Nyx  with Nyx  overhead  | paced gets/s without  with  overhead  | thesis"
    );
    for value_bytes in [64, 256, 1024, 4096] {
        let mut plain = store(value_bytes, false, &profile);
        let mut gated = store(value_bytes, true, &profile);
        let mut runs = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        for _ in 0..RUNS {
            runs[0].push(gets_per_second(&mut plain, false));
            runs[1].push(gets_per_second(&mut gated, false));
            runs[2].push(gets_per_second(&mut plain, true));
            runs[3].push(gets_per_second(&mut gated, true));
        }
        let [cpu_without, cpu_with, paced_without, paced_with] = runs.map(median);
        let thesis = if value_bytes < 256 { "<= 12%" } else { "< 6%" };
        println!(
            "{value_bytes:>11}  {cpu_without:>22.0}  {cpu_with:>8.0}  {:>7.1}%  | {paced_without:>20.0}  {paced_with:>4.0}  {:>7.1}%  | {thesis}",
            (cpu_without / cpu_with - 1.0) * 100.0,
            (paced_without / paced_with - 1.0) * 100.0
        );
    }
}
