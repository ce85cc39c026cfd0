//! Calibration: each preset reproduces the measurements of seed 000 (Kan Wu, *Evolving System
//! Stack for Persistent Memory*, chapters 2–3 and the device figures of chapters 4–5) that its
//! TOML cites. Every test states the seed's figure, the tolerance and why that tolerance, and
//! prints the model's value beside the seed's
//! (`cargo test -p heterarchy-device --test calibration -- --nocapture`).

use heterarchy_device::presets::{preset, preset_names, resolve_device};
use heterarchy_device::{
    run_probe, BackgroundLoad, DeviceModel, DeviceSpec, IoKind, MemoryOp, Probe, ProbeResult,
};

const KIB: u32 = 1024;
const GB: f64 = 1e9;

fn device(name: &str) -> DeviceSpec {
    preset(name).unwrap_or_else(|| panic!("preset {name} exists"))
}

/// A closed loop of random accesses of `bytes` at `queue_depth`, `write_fraction` of them writes.
fn probe(spec: &DeviceSpec, bytes: u32, queue_depth: u32, write_fraction: f64) -> ProbeResult {
    run_probe(
        spec,
        &Probe {
            bytes,
            queue_depth,
            write_fraction,
            ..Probe::default()
        },
    )
}

fn report(what: &str, model: f64, seed: &str) {
    println!("{what}: model {model:.4} vs seed {seed}");
}

/// Seed 000 §3.1.1 (Rule 1): "the latency of a 4KB random read with QD = 64 is 8x slower than
/// QD = 8 and is 11x slower than QD = 1". The thesis gives whole multiples, so anything that
/// rounds to them (±0.5) reproduces it.
#[test]
fn optane_ssd_read_latency_at_qd64_is_11x_qd1_and_8x_qd8() {
    let ssd = device("optane-ssd");
    let latency_ns = |qd| probe(&ssd, 4 * KIB, qd, 0.0).mean_latency_ns;
    let (qd1, qd8, qd64) = (latency_ns(1), latency_ns(8), latency_ns(64));
    report("optane-ssd 4K read latency QD64/QD1", qd64 / qd1, "11x");
    report("optane-ssd 4K read latency QD64/QD8", qd64 / qd8, "8x");
    assert!(
        (qd64 / qd1 - 11.0).abs() <= 0.5,
        "QD64/QD1 = {}",
        qd64 / qd1
    );
    assert!((qd64 / qd8 - 8.0).abs() <= 0.5, "QD64/QD8 = {}", qd64 / qd8);
}

/// Seed 000 §3.1.5 (Rule 5): throughput of small requests "is limited by the maximum IOPS
/// supported by Optane SSD (575K)". The thesis quotes it to three digits: ±1%.
#[test]
fn optane_ssd_iops_cap_is_575k() {
    let ssd = device("optane-ssd");
    for bytes in [KIB, 4 * KIB] {
        let iops = probe(&ssd, bytes, 64, 0.0).iops;
        report(
            &format!("optane-ssd {bytes} B read IOPS at QD64"),
            iops,
            "575K",
        );
        assert!((iops / 575e3 - 1.0).abs() <= 0.01, "{bytes} B: {iops} IOPS");
    }
}

/// Seed 000 §3.1.5: "for 1KB requests, throughput is only 20% of the full bandwidth of the
/// device" (Table 3.1: tiny accesses cost 5× in throughput). A 575K-IOPS cap on 1 KiB requests
/// against the 2.5 GB/s that large requests reach is 23.6%; the thesis's 20% is read off a figure
/// and rounded, and 1 KiB at 575K over the 2.36 GB/s of capped 4 KiB requests would be 25%, so
/// the tolerance is ±5 percentage points (a fifth to a quarter of the bandwidth).
#[test]
fn optane_ssd_1k_requests_reach_a_fifth_of_its_bandwidth() {
    let ssd = device("optane-ssd");
    let tiny = probe(&ssd, KIB, 64, 0.0).bandwidth_bytes_per_s;
    let full = probe(&ssd, 256 * KIB, 64, 0.0).bandwidth_bytes_per_s;
    let share = tiny / full;
    report("optane-ssd 1K read bandwidth / peak", share, "20%");
    assert!(
        (share - 0.20).abs() <= 0.05,
        "{tiny} of {full} B/s = {share}"
    );
}

/// Seed 000 §3.1.6 (Rule 6), QD 1: a 4 KiB read crossing the 4 KiB boundary takes longer
/// "linearly correlated to the part it issues to the second chunk", and "the difference between
/// the high and low latencies of 4KB requests is 21%"; "requests of one sector have the same
/// latency no matter the offset". The 21% is given to the percent: ±1 point.
#[test]
fn optane_ssd_misaligned_4k_reads_cost_up_to_21_percent_more() {
    let ssd = device("optane-ssd");
    let latency_ns = |bytes, offset| {
        run_probe(
            &ssd,
            &Probe {
                bytes,
                misalignment_bytes: offset,
                ..Probe::default()
            },
        )
        .mean_latency_ns
    };
    let aligned = latency_ns(4 * KIB, 0);
    let sector_aligned = latency_ns(512, 0);
    let offsets: Vec<u32> = (1..8).map(|sector| sector * 512).collect();
    let penalties: Vec<f64> = offsets
        .iter()
        .map(|&offset| latency_ns(4 * KIB, offset) / aligned - 1.0)
        .collect();
    let worst = penalties.iter().cloned().fold(f64::MIN, f64::max);
    report(
        "optane-ssd misaligned 4K read, worst extra latency",
        worst,
        "21%",
    );
    assert!((worst - 0.21).abs() <= 0.01, "penalties {penalties:?}");
    // Linear in the bytes past the boundary (the offset itself, for a 4 KiB read).
    for (&offset, &penalty) in offsets.iter().zip(&penalties) {
        let linear = worst * f64::from(offset) / 3584.0;
        assert!(
            (penalty - linear).abs() <= 1e-3,
            "offset {offset}: {penalty} vs {linear}"
        );
    }
    for offset in offsets {
        assert_eq!(
            latency_ns(512, offset),
            sector_aligned,
            "one sector at {offset}"
        );
    }
}

/// Seed 000 §3.1.4 (Rule 4): at QD 64, "reads and writes are treated equally ... the latency is
/// related to the overall load, not to the percentage of writes". The 905P's write bandwidth is
/// 8% below its read bandwidth (2.3 vs 2.5 GB/s, Table 4.1), which may show once 4 KiB writes
/// become bandwidth-bound: within 5% counts as alike.
#[test]
fn optane_ssd_treats_reads_and_writes_alike_at_qd64() {
    let ssd = device("optane-ssd");
    let latency_us =
        |write_fraction| probe(&ssd, 4 * KIB, 64, write_fraction).mean_latency_ns / 1e3;
    let (reads, mix, writes) = (latency_us(0.0), latency_us(0.5), latency_us(1.0));
    println!("optane-ssd 4K QD64 latency: read {reads:.1} us, 50/50 mix {mix:.1} us, write {writes:.1} us (seed: equal)");
    for (name, other) in [("50/50 mix", mix), ("write-only", writes)] {
        assert!(
            (other / reads - 1.0).abs() <= 0.05,
            "{name} {other} vs read-only {reads}"
        );
    }
}

/// Seed 000 §3.1.7 (Rule 7): "Optane SSD maintains maximum throughput for sustained writes"
/// (3 hours at QD 32 in the thesis). After 5 TB written (over 5 full drives) random 4 KiB
/// writes keep their fresh throughput to 1%.
#[test]
fn optane_ssd_keeps_its_write_throughput_after_5tb_written() {
    let ssd = device("optane-ssd");
    let writes = |preconditioned_bytes| {
        run_probe(
            &ssd,
            &Probe {
                write_fraction: 1.0,
                queue_depth: 32,
                preconditioned_bytes,
                ..Probe::default()
            },
        )
        .bandwidth_bytes_per_s
    };
    let (fresh, worn) = (writes(0), writes(5_000_000_000_000));
    report(
        "optane-ssd write throughput after 5 TB / fresh",
        worn / fresh,
        "1 (no GC)",
    );
    assert!((worn / fresh - 1.0).abs() <= 0.01, "{worn} vs {fresh} B/s");
}

/// Random 4 KiB write throughput of nvme-flash at QD 32 (the thesis's setting) after
/// `written_gb` of writes.
fn nvme_random_write_bytes_per_s(nvme: &DeviceSpec, written_gb: f64) -> f64 {
    run_probe(
        nvme,
        &Probe {
            write_fraction: 1.0,
            queue_depth: 32,
            preconditioned_bytes: (written_gb * GB) as u64,
            accesses: 5_000,
            warmup_accesses: 500,
            ..Probe::default()
        },
    )
    .bandwidth_bytes_per_s
}

/// Seed 000 §3.1.7: after the Samsung 970 Pro fills, sustained random writes decline until
/// "random throughput is 170MB/s (only 7% of the maximum throughput)". The steady share is
/// given to the percent: ±1 point. The decline is monotonic: more written never writes faster.
#[test]
fn nvme_flash_random_writes_decline_to_7_percent() {
    let nvme = device("nvme-flash");
    let written_gb: Vec<f64> = (0..=12).map(|step| f64::from(step) * 500.0).collect();
    let throughput: Vec<f64> = written_gb
        .iter()
        .map(|&gb| nvme_random_write_bytes_per_s(&nvme, gb))
        .collect();
    let share = throughput.last().unwrap() / throughput[0];
    report(
        "nvme-flash random-write throughput after 6 TB / fresh",
        share,
        "7%",
    );
    println!(
        "nvme-flash random-write MB/s by TB written: {:?}",
        written_gb
            .iter()
            .zip(&throughput)
            .map(|(gb, bytes)| (gb / 1e3, (bytes / 1e6).round()))
            .collect::<Vec<_>>()
    );
    assert!((share - 0.07).abs() <= 0.01, "{throughput:?}");
    for pair in throughput.windows(2) {
        assert!(pair[1] <= pair[0], "throughput rose: {throughput:?}");
    }
    assert!(
        throughput[3] < throughput[2] && throughput[9] < throughput[8],
        "no decline while the device garbage-collects: {throughput:?}"
    );
}

/// Seed 000 §3.1.7: writing at QD 32 from a trimmed device, "after about 6000 seconds, write
/// throughput stabilizes". The time to write until the throughput is within 1% of its floor,
/// integrated over bytes written (time = ∫ dbytes / throughput), should be about 6000 s; "about"
/// gets ±10%.
#[test]
fn nvme_flash_random_writes_stabilise_after_about_6000_seconds() {
    let nvme = device("nvme-flash");
    let floor = nvme_random_write_bytes_per_s(&nvme, 20_000.0);
    let step_gb = 50.0;
    let mut elapsed_s = 0.0;
    let mut written_gb = 0.0;
    let mut throughput = nvme_random_write_bytes_per_s(&nvme, 0.0);
    while throughput > floor * 1.01 {
        let next = nvme_random_write_bytes_per_s(&nvme, written_gb + step_gb);
        // 1/throughput is convex in bytes written: the midpoint of the harmonic mean is close.
        elapsed_s += step_gb * GB * (1.0 / throughput + 1.0 / next) / 2.0;
        written_gb += step_gb;
        throughput = next;
    }
    report(
        "nvme-flash seconds of QD32 random writes until steady",
        elapsed_s,
        "about 6000 s",
    );
    assert!(
        (elapsed_s / 6000.0 - 1.0).abs() <= 0.10,
        "{elapsed_s} s, {written_gb} GB"
    );
}

/// Seed 000 §1.3 ("for a single DC PM, max read bandwidth is 6.6GB/s whereas max write bandwidth
/// is 2.3GB/s") and Table 4.1 (6.8 and 2.3 GB/s): one DIMM, 4 KiB accesses (which "obtain the
/// device's maximum bandwidth", §5.2.3) at QD 64. Reads within the two sources' 6.6–6.8; writes
/// to 1% of the one value both give.
#[test]
fn optane_pm_dimm_reads_6_8_and_writes_2_3_gb_per_s() {
    let pm = device("optane-pm");
    let read_gb_s = probe(&pm, 4 * KIB, 64, 0.0).bandwidth_bytes_per_s / GB;
    let write_gb_s = probe(&pm, 4 * KIB, 64, 1.0).bandwidth_bytes_per_s / GB;
    report("optane-pm read GB/s", read_gb_s, "6.6-6.8");
    report("optane-pm write GB/s", write_gb_s, "2.3");
    assert!((6.6..=6.8 * 1.001).contains(&read_gb_s), "{read_gb_s}");
    assert!((write_gb_s / 2.3 - 1.0).abs() <= 0.01, "{write_gb_s}");
}

/// Seed 000 §5.1.2.3: "Because PM has a 256B minimum access granularity, a 64B load ... utilizes
/// the same amount of PM resources as a 256B load", and §5.2.3, "a 64B random store has a
/// similar maximum IOPS as 256B". Same IOPS and latency, alone and saturated, reads and writes:
/// within 1%.
#[test]
fn optane_pm_64b_access_costs_like_256b() {
    let pm = device("optane-pm");
    for (write_fraction, direction) in [(0.0, "read"), (1.0, "write")] {
        for queue_depth in [1, 64] {
            let small = probe(&pm, 64, queue_depth, write_fraction);
            let unit = probe(&pm, 256, queue_depth, write_fraction);
            println!(
                "optane-pm {direction} QD{queue_depth}: 64 B {:.0} IOPS {:.0} ns, 256 B {:.0} IOPS {:.0} ns (seed: alike)",
                small.iops, small.mean_latency_ns, unit.iops, unit.mean_latency_ns
            );
            assert!(
                (small.iops / unit.iops - 1.0).abs() <= 0.01,
                "{small:?} {unit:?}"
            );
            assert!(
                (small.mean_latency_ns / unit.mean_latency_ns - 1.0).abs() <= 0.01,
                "{small:?} {unit:?}"
            );
        }
    }
}

/// Seed 000 Fig 5.6: NyxCache charges a write 1 / MaxIOPS of writes alone, and a limited
/// write-only tenant leaves its co-runner as steady as a limited reader does, so on the device
/// a write takes from readers about what writing it takes. A reader saturating six interleaved
/// DIMMs at QD 256 beside 1 GB/s of 256 B writes loses the share of the device those writes
/// use, 1 GB/s over the set's 13.8 GB/s of writing (±25%). The single-thread reader of
/// Figure 5.1, which feels each write drain whole, is the `nyx-interference` experiment's
/// (`stores_hurt_a_single_thread_reader_like_eight_times_the_reads` in
/// `crates/experiment/tests/nyx.rs`).
#[test]
fn optane_pm_writes_take_from_a_saturating_reader_what_writing_takes() {
    let pm = device("optane-pm-x6");
    let reader = |background| {
        run_probe(
            &pm,
            &Probe {
                bytes: 4 * KIB,
                queue_depth: 256,
                background,
                ..Probe::default()
            },
        )
    };
    let alone = reader(None);
    let beside_writes = reader(Some(BackgroundLoad {
        kind: IoKind::Write,
        bytes: 256,
        rate_bytes_per_s: GB,
    }));
    let lost = 1.0 - beside_writes.bandwidth_bytes_per_s / alone.bandwidth_bytes_per_s;
    let writing_share = GB / (pm.write.bandwidth_gb_s * GB);
    report(
        "optane-pm-x6 saturating reader's loss beside 1 GB/s of writes / the writes' share",
        lost / writing_share,
        "1 (Fig 5.6)",
    );
    assert!(
        (lost / writing_share - 1.0).abs() <= 0.25,
        "{lost} vs {writing_share}"
    );
}

/// Seed 000 Table 4.1 ("Diversified Storage Devices"): latency, read and write GB/s of each
/// device class. Latency is that of one granule at QD 1; bandwidth that of 256 KiB random
/// accesses at QD 64 (the Optane SSD's 4 KiB peak is IOPS-bound at 2.36 GB/s). Both to 1%.
/// Exception: the 970 Pro's writes land in its buffer, so its preset writes in 20 µs (seed 000
/// §3.1.4: flash write latency at QD 64 is "only 19% of that on Optane SSD"), not Table 4.1's
/// 80 µs.
#[test]
fn presets_match_table_4_1() {
    // (preset, read latency ns, write latency ns and its source, read GB/s, write GB/s)
    let table_4_1 = [
        ("dram", 80.0, (80.0, "Table 4.1"), 15.0, 15.0),
        ("optane-pm", 300.0, (300.0, "Table 4.1"), 6.8, 2.3),
        ("optane-ssd", 10_000.0, (10_000.0, "Table 4.1"), 2.5, 2.3),
        (
            "nvme-flash",
            80_000.0,
            (20_000.0, "§3.1.4, not Table 4.1's 80000"),
            3.0,
            2.0,
        ),
        ("sata-flash", 180_000.0, (180_000.0, "Table 4.1"), 0.5, 0.5),
    ];
    for (name, read_ns, (write_ns, write_source), read_gb_s, write_gb_s) in table_4_1 {
        let spec = device(name);
        let granule = spec.granularity_bytes;
        let bandwidth_gb_s =
            |write_fraction| probe(&spec, 256 * KIB, 64, write_fraction).bandwidth_bytes_per_s / GB;
        let measured = [
            (
                "read latency ns",
                probe(&spec, granule, 1, 0.0).mean_latency_ns,
                read_ns,
                "Table 4.1",
            ),
            (
                "write latency ns",
                probe(&spec, granule, 1, 1.0).mean_latency_ns,
                write_ns,
                write_source,
            ),
            ("read GB/s", bandwidth_gb_s(0.0), read_gb_s, "Table 4.1"),
            ("write GB/s", bandwidth_gb_s(1.0), write_gb_s, "Table 4.1"),
        ];
        for (what, model, seed, source) in measured {
            report(
                &format!("{name} {what}"),
                model,
                &format!("{seed} ({source})"),
            );
            assert!(
                (model / seed - 1.0).abs() <= 0.01,
                "{name} {what}: {model} vs {seed}"
            );
        }
    }
}

/// Seed 000 §5.1.2.4: "smaller accesses (64B) can cause more interference than larger accesses
/// (256B) ... a 64B access is amplified into 256B on the device; thus, at the same bandwidth, 64B
/// accesses generate significantly more interference". The thesis gives no factor (Figure 5.1.b
/// is not in the text); "significantly" is taken as at least twice the reader's loss. The
/// saturating reader of the test above runs beside 0.5 GB/s of 64 B or of 256 B writes.
#[test]
fn optane_pm_64b_writes_interfere_more_than_256b_writes() {
    let pm = device("optane-pm-x6");
    let reader_gb_s = |background| {
        run_probe(
            &pm,
            &Probe {
                bytes: 4 * KIB,
                queue_depth: 256,
                background,
                ..Probe::default()
            },
        )
        .bandwidth_bytes_per_s
            / GB
    };
    let alone = reader_gb_s(None);
    let loss_gb_s = |bytes| {
        alone
            - reader_gb_s(Some(BackgroundLoad {
                kind: IoKind::Write,
                bytes,
                rate_bytes_per_s: 0.5 * GB,
            }))
    };
    let (small, unit) = (loss_gb_s(64), loss_gb_s(256));
    println!(
        "optane-pm-x6 reader ({alone:.2} GB/s alone) loses {small:.2} GB/s beside 0.5 GB/s of 64 B \
         writes, {unit:.2} GB/s beside 256 B writes"
    );
    report(
        "optane-pm-x6 reader loss, 64 B / 256 B writes",
        small / unit,
        "significantly > 1",
    );
    assert!(unit > 0.0 && small >= 2.0 * unit, "{small} vs {unit} GB/s");
}

/// Seed 000 Table 4.2: Open CAS on one PM DIMM over an Optane SSD, 8 outstanding 64 KiB reads
/// at 95% hits, delivered 6.7 GB/s with the PM saturated, so its 64 KiB installs (5% of the
/// bytes) cost its readers little: a saturating 64 KiB reader beside 64 KiB writes at 5/95 of
/// its own rate keeps reads and writes at 6.7 GB/s together (±0.05, the table's rounding); small
/// writes, which take their media time from readers, leave less.
#[test]
fn optane_pm_64k_installs_leave_readers_the_table_4_2_bandwidth() {
    let pm = device("optane-pm");
    let total_gb_s = |write_bytes: u32| {
        // The reader's rate with the writes beside it is found by iterating: writes are 5/95 of
        // whatever the reader achieves.
        let mut reads_gb_s = 6.8;
        for _ in 0..20 {
            let run = run_probe(
                &pm,
                &Probe {
                    bytes: 64 * KIB,
                    queue_depth: 64,
                    background: Some(BackgroundLoad {
                        kind: IoKind::Write,
                        bytes: write_bytes,
                        rate_bytes_per_s: reads_gb_s * GB * 5.0 / 95.0,
                    }),
                    ..Probe::default()
                },
            );
            reads_gb_s = run.bandwidth_bytes_per_s / GB;
        }
        reads_gb_s * 100.0 / 95.0
    };
    let (installs, small) = (total_gb_s(64 * KIB), total_gb_s(256));
    report(
        "optane-pm reads + 64 KiB installs at 95% hits, GB/s",
        installs,
        "6.7",
    );
    report(
        "optane-pm reads + 256 B writes at the same rate, GB/s",
        small,
        "(less)",
    );
    assert!((installs - 6.7).abs() <= 0.05, "{installs}");
    assert!(small < installs - 0.3, "{small}");
}

/// Seed 000 §4.5.1.1: FlashSim devices "with maximum speeds of 50MB/s, 25MB/s, and 10MB/s" are
/// pure rate caps: at any queue depth, reads or writes, they move exactly that many MB/s (to
/// 0.01%, the rounding of completion times to whole nanoseconds).
#[test]
fn flashsim_presets_deliver_exactly_their_rate() {
    for (name, mb_s) in [
        ("flashsim-50", 50.0),
        ("flashsim-25", 25.0),
        ("flashsim-10", 10.0),
    ] {
        let spec = device(name);
        for queue_depth in [1, 16] {
            for write_fraction in [0.0, 0.5, 1.0] {
                let rate = probe(&spec, 4 * KIB, queue_depth, write_fraction).bandwidth_bytes_per_s;
                assert!(
                    (rate / (mb_s * 1e6) - 1.0).abs() <= 1e-4,
                    "{name} QD{queue_depth} writes {write_fraction}: {rate} B/s"
                );
            }
        }
        println!("{name}: {mb_s} MB/s at QD 1 and 16, reads, writes and mixes");
    }
}

/// Every preset means what its TOML says: an unloaded access of one granule takes the stated
/// `latency_ns` (to the nanosecond the model rounds up to), or, for a pure rate cap
/// (`latency_ns = 0`), one granule's time at the stated bandwidth.
#[test]
fn every_preset_takes_its_stated_latency_at_qd1() {
    for name in preset_names() {
        let spec = device(name);
        let granule = spec.granularity_bytes;
        for (write_fraction, direction) in [(0.0, &spec.read), (1.0, &spec.write)] {
            let expected_ns = if direction.latency_ns > 0.0 {
                direction.latency_ns
            } else {
                f64::from(granule) / direction.bandwidth_gb_s
            };
            let model_ns = probe(&spec, granule, 1, write_fraction).mean_latency_ns;
            assert!(
                (model_ns - expected_ns).abs() <= 1.0,
                "{name} writes {write_fraction}: {model_ns} ns vs {expected_ns} ns"
            );
        }
    }
}

/// docs/architecture.md, "Conventions": a user's device file with a bad value is rejected with the file, the
/// key and the reason, on one line.
#[test]
fn bad_user_device_file_names_file_key_and_reason() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("slow.toml");
    let text = heterarchy_device::presets::preset_toml("optane-ssd")
        .expect("optane-ssd preset")
        .replace("\"optane-ssd\"", "\"slow\"")
        .replace("bandwidth_gb_s = 2.3 ", "bandwidth_gb_s = -2.3 ");
    assert!(
        text.contains("-2.3"),
        "the preset's write bandwidth line moved"
    );
    std::fs::write(&path, text).expect("write device file");
    let error = resolve_device(path.to_str().expect("UTF-8 path"), None)
        .expect_err("negative bandwidth is rejected")
        .to_string();
    assert!(error.starts_with(&path.display().to_string()), "{error}");
    assert!(error.contains("`write.bandwidth_gb_s`"), "{error}");
    assert!(error.contains("must be a finite number > 0"), "{error}");
    assert!(!error.contains('\n'), "{error}");
}

/// The `hdd` preset against its data sheet (Western Digital Ultrastar DC HC310 OEM
/// specification, §4.5.1: 7.4 ms average read seek, 8.33 ms a revolution, 4.16 ms average
/// latency; 255 MB/s sustained, a figure the preset marks unchecked): a random 4 KiB read at
/// queue depth 1 takes seek + half a revolution + the transfer (11.58 ms, 86 IOPS, to 0.1%);
/// sequential 1 MiB reads move at the sustained rate (±1%). At queue depth 32 the check is of
/// the model's own reordering rule, not of a published figure: the drive serves the sector
/// that comes first, so the rotational wait of the best of q is 1/(q + 1) of a revolution and
/// 32 queued take 7.4 + 8.33/33 ms each (130 IOPS).
#[test]
fn hdd_seeks_and_rotates_for_random_reads_and_streams_sequential_ones() {
    let hdd = device("hdd");
    let random_qd1 = probe(&hdd, 4 * KIB, 1, 0.0);
    let revolution_ms = 60e3 / 7200.0;
    let expected_ms = 7.4 + revolution_ms / 2.0 + 4096.0 / 255e6 * 1e3;
    report(
        "hdd 4 KiB random read, QD1, ms",
        random_qd1.mean_latency_ns / 1e6,
        "11.58",
    );
    assert!((random_qd1.mean_latency_ns / 1e6 / expected_ms - 1.0).abs() < 1e-3);
    let random_qd32 = probe(&hdd, 4 * KIB, 32, 0.0);
    let expected_iops = 1e3 / (7.4 + revolution_ms / 33.0 + 4096.0 / 255e6 * 1e3);
    report("hdd 4 KiB random read IOPS, QD1", random_qd1.iops, "86");
    report("hdd 4 KiB random read IOPS, QD32", random_qd32.iops, "130");
    assert!(
        (random_qd32.iops / expected_iops - 1.0).abs() < 0.01,
        "{}",
        random_qd32.iops
    );
    assert!((80.0..=200.0).contains(&random_qd1.iops) && random_qd32.iops > random_qd1.iops);
    let sequential = run_probe(
        &hdd,
        &Probe {
            bytes: 1024 * KIB,
            sequential: true,
            accesses: 2_000,
            warmup_accesses: 10,
            ..Probe::default()
        },
    );
    report(
        "hdd 1 MiB sequential reads, MB/s",
        sequential.bandwidth_bytes_per_s / 1e6,
        "255",
    );
    assert!((sequential.bandwidth_bytes_per_s / 255e6 - 1.0).abs() < 0.01);
}

/// Seed 000 §3.1.2 (Rule 2): on flash "sequential reads can be 7x faster" than random ones,
/// "especially at a low request scale". At queue depth 1, 4 KiB reads: the ratio of mean
/// latencies is 7 (±2%); at depth 64 both are bound by bandwidth and differ by less than 10%.
#[test]
fn nvme_flash_sequential_reads_are_7x_faster_at_low_queue_depth() {
    let flash = device("nvme-flash");
    let latency_ns = |queue_depth, sequential| {
        run_probe(
            &flash,
            &Probe {
                queue_depth,
                sequential,
                ..Probe::default()
            },
        )
        .mean_latency_ns
    };
    let low = latency_ns(1, false) / latency_ns(1, true);
    let high = latency_ns(64, false) / latency_ns(64, true);
    report(
        "nvme-flash 4K read latency random/sequential, QD1",
        low,
        "7x",
    );
    report(
        "nvme-flash 4K read latency random/sequential, QD64",
        high,
        "(bandwidth-bound)",
    );
    assert!((low / 7.0 - 1.0).abs() < 0.02, "{low}");
    assert!(high < 1.1, "{high}");
}

/// Seed 000 §3.1.3 (Rule 3): "sequential 1KB accesses can increase latency by 63% for reads and
/// by 3.6x for writes, compared to random 1KB accesses" on the Optane SSD: one stream of 1 KiB
/// accesses at depth 4 (four to a 4 KiB chunk) against random 1 KiB accesses at depth 4; the
/// seed quotes two digits, so ±3%.
#[test]
fn optane_ssd_crowded_1k_accesses_cost_63_percent_more_reads_and_3_6x_writes() {
    let ssd = device("optane-ssd");
    let latency_ns = |write_fraction, sequential| {
        run_probe(
            &ssd,
            &Probe {
                bytes: KIB,
                queue_depth: 4,
                write_fraction,
                sequential,
                one_stream: true,
                ..Probe::default()
            },
        )
        .mean_latency_ns
    };
    let reads = latency_ns(0.0, true) / latency_ns(0.0, false);
    let writes = latency_ns(1.0, true) / latency_ns(1.0, false);
    report(
        "optane-ssd 1K sequential/random read latency",
        reads,
        "1.63",
    );
    report(
        "optane-ssd 1K sequential/random write latency",
        writes,
        "3.6",
    );
    assert!((reads / 1.63 - 1.0).abs() < 0.03, "{reads}");
    assert!((writes / 3.6 - 1.0).abs() < 0.03, "{writes}");
}

/// One thread's random loads or stores of `bytes`, aligned to their size over 1 GiB,
/// `in_flight` at a time: the mean time from issue to done, ns, and the throughput, GB/s.
fn single_thread(spec: &DeviceSpec, op: MemoryOp, bytes: u32, in_flight: u32) -> (f64, f64) {
    use std::cmp::Reverse;
    let slots = (1u64 << 30) / u64::from(bytes);
    let mut random = 0x2545_f491_4f6c_dd1du64;
    let mut model = DeviceModel::new(spec);
    let mut outstanding: std::collections::BinaryHeap<Reverse<u64>> =
        (0..in_flight).map(|_| Reverse(0)).collect();
    let accesses = 20_000u64;
    let mut waited_ns = 0;
    for _ in 0..accesses {
        random ^= random << 13;
        random ^= random >> 7;
        random ^= random << 17;
        let offset = random % slots * u64::from(bytes);
        let Reverse(now_ns) = outstanding.pop().expect("a slot");
        let done_ns = model.access(now_ns, op, offset, bytes).done_ns;
        waited_ns += done_ns - now_ns;
        outstanding.push(Reverse(done_ns));
    }
    let end_ns = outstanding.into_iter().map(|r| r.0).max().unwrap_or(1);
    (
        waited_ns as f64 / accesses as f64,
        (accesses * u64::from(bytes)) as f64 / end_ns as f64,
    )
}

/// Seed 000 Table 5.2, "PM Load/Store Performance: single thread random 256B and 4KB load/store
/// operations (on 2× Optane DC PM)": the model's figure beside each of the table's 24, and the
/// table's conclusions, which the cache relies on (§5.2.5): "regular loads perform best" and
/// "NT-stores that bypass the CPU cache have much better performance" for random stores.
/// Tolerance ±30% per figure: one fill-buffer depth, one CPU cost and one posting rate serve
/// all six families, and the worst, 4 KiB loads without the prefetcher, moves 29% less than the
/// table (fill buffers refill line by line; the model refills them a batch at a time). The
/// table's conclusions are asserted as orderings.
#[test]
fn optane_pm_x2_single_thread_loads_and_stores_match_table_5_2() {
    let pm = device("optane-pm-x2");
    // (op, 256 B GB/s, µs, 4 KiB GB/s, µs), Table 5.2 verbatim.
    let table = [
        (MemoryOp::Load, 1.59, 0.49, 4.08, 1.22),
        (MemoryOp::LoadNoPrefetch, 1.53, 0.52, 2.92, 1.69),
        (MemoryOp::NtLoad, 0.29, 0.84, 2.24, 1.84),
        (MemoryOp::Store, 1.12, 0.38, 1.03, 4.14),
        (MemoryOp::StoreClwb, 0.52, 0.47, 1.50, 2.71),
        (MemoryOp::NtStore, 3.73, 0.08, 3.44, 1.22),
    ];
    let mut worst: f64 = 0.0;
    let mut throughput = std::collections::HashMap::new();
    for (op, small_gb_s, small_us, large_gb_s, large_us) in table {
        for (bytes, gb_s, us) in [(256, small_gb_s, small_us), (4096, large_gb_s, large_us)] {
            // Latency one at a time; throughput as many at a time as the thread's fill
            // buffers allow.
            let (latency_ns, _) = single_thread(&pm, op, bytes, 1);
            let in_flight = pm
                .memory
                .expect("a memory path")
                .thread_in_flight(op, bytes);
            let (_, model_gb_s) = single_thread(&pm, op, bytes, in_flight);
            println!(
                "optane-pm-x2 {bytes} B {}: model {model_gb_s:.2} GB/s {:.2} µs vs Table 5.2 {gb_s} GB/s {us} µs",
                op.name(),
                latency_ns / 1000.0
            );
            throughput.insert((op, bytes), model_gb_s);
            for (model, table) in [(model_gb_s, gb_s), (latency_ns / 1000.0, us)] {
                worst = worst.max((model / table - 1.0).abs());
            }
        }
    }
    report("optane-pm-x2 Table 5.2 worst relative error", worst, "0");
    assert!(worst <= 0.30, "worst relative error {worst:.2}");
    for bytes in [256, 4096] {
        let gb_s = |op| throughput[&(op, bytes)];
        assert!(
            gb_s(MemoryOp::Load) >= gb_s(MemoryOp::LoadNoPrefetch),
            "{bytes} B"
        );
        assert!(
            gb_s(MemoryOp::LoadNoPrefetch) > gb_s(MemoryOp::NtLoad),
            "{bytes} B"
        );
        assert!(
            gb_s(MemoryOp::NtStore) > 2.0 * gb_s(MemoryOp::Store),
            "{bytes} B"
        );
    }
}

/// Seed 000 §5.1.2.3: "Running an experiment with 1KB random loads, we found that software-level
/// tracking accounted for only 60% of actual memory traffic"; aligned 4 KiB loads waste nothing
/// (the streamer stays in its page). The thesis gives two digits: ±3 points.
#[test]
fn software_sees_60_percent_of_1k_random_load_traffic() {
    let pm = device("optane-pm-x2");
    let mut model = DeviceModel::new(&pm);
    let share = |model: &mut DeviceModel, bytes: u32, align: u64| {
        let (mut asked, mut moved) = (0u64, 0u64);
        let mut random = 88_172_645_463_325_252u64;
        for i in 0..10_000u64 {
            random ^= random << 13;
            random ^= random >> 7;
            random ^= random << 17;
            let offset = random % (1 << 30) / align * align;
            asked += u64::from(bytes) / 64;
            moved += model
                .access(i * 10_000, MemoryOp::Load, offset, bytes)
                .lines_moved;
        }
        asked as f64 / moved as f64
    };
    let kib = share(&mut model, 1024, 64);
    report(
        "optane-pm-x2 1 KiB random loads, software-counted / moved",
        kib,
        "0.60",
    );
    assert!((kib - 0.60).abs() <= 0.03, "{kib}");
    let page = share(&mut model, 4096, 4096);
    report(
        "optane-pm-x2 4 KiB page loads, software-counted / moved",
        page,
        "1 (no waste)",
    );
    assert_eq!(page, 1.0);
}
