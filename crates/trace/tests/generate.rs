//! Workload generators: determinism, distributions, YCSB mixes, scans, sizes and spec errors.

use std::collections::HashMap;

use heterarchy_trace::generate::{generator, Pattern, WorkloadSpec};
use heterarchy_trace::{Op, Request};

fn requests_of(spec: &WorkloadSpec) -> Vec<Request> {
    let mut reader = generator(spec).unwrap();
    let mut requests = Vec::new();
    while let Some(request) = reader.next_request().unwrap() {
        requests.push(request);
    }
    requests
}

fn generate(text: &str) -> Vec<Request> {
    requests_of(&WorkloadSpec::parse(text).unwrap())
}

fn count_ops(requests: &[Request]) -> HashMap<Op, u64> {
    let mut counts = HashMap::new();
    for request in requests {
        *counts.entry(request.op).or_insert(0) += 1;
    }
    counts
}

/// Σ_{k=1..n} k^-θ, the Zipf normalisation.
fn generalized_harmonic(items: u64, theta: f64) -> f64 {
    (1..=items).map(|k| (k as f64).powf(-theta)).sum()
}

#[test]
fn the_same_spec_gives_the_same_requests_and_another_seed_does_not() {
    for pattern in [
        "uniform:write=0.3,scan=0.01",
        "zipf:theta=1.2,size=pareto:1.1:100:100000",
        "hotspot:hot_data=0.1,hot_ops=0.9,kind=block",
        "ycsb-a",
        "ycsb-d",
        "ycsb-e",
        "ycsb-f",
    ] {
        let separator = if pattern.contains(':') { ',' } else { ':' };
        let text = format!("{pattern}{separator}keys=5000,requests=20000,seed=7");
        let first = generate(&text);
        assert_eq!(first.len(), 20_000, "{text}");
        assert_eq!(first, generate(&text), "{text}");
        let reseeded = generate(&text.replace("seed=7", "seed=8"));
        let same_keys = first
            .iter()
            .zip(&reseeded)
            .filter(|(a, b)| a.key == b.key)
            .count();
        assert!(same_keys < 2_000, "{text}: {same_keys} equal keys");
    }
}

#[test]
fn batches_and_single_requests_give_the_same_stream() {
    let spec = WorkloadSpec::parse("ycsb-e:keys=1000,requests=5000,seed=3").unwrap();
    let mut reader = generator(&spec).unwrap();
    let mut batched = Vec::new();
    let mut batch = Vec::new();
    loop {
        reader.read_batch(&mut batch, 777).unwrap();
        if batch.is_empty() {
            break;
        }
        batched.extend_from_slice(&batch);
    }
    assert_eq!(batched, requests_of(&spec));
}

#[test]
fn zipf_top_ranks_match_the_power_law() {
    const DRAWS: u64 = 1_000_000;
    const KEYS: u64 = 1_000_000;
    for theta in [0.9, 1.0, 1.5] {
        let requests = generate(&format!(
            "zipf:theta={theta},keys={KEYS},requests={DRAWS},seed=11"
        ));
        let mut per_key: HashMap<u64, u64> = HashMap::new();
        for request in &requests {
            assert!(request.key < KEYS);
            *per_key.entry(request.key).or_insert(0) += 1;
        }
        let mut counts: Vec<u64> = per_key.into_values().collect();
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let normalisation = generalized_harmonic(KEYS, theta);
        // Pearson's chi-square over the top 10 ranks plus one cell for all others: 10 degrees
        // of freedom, whose 0.999 quantile is 29.59.
        let mut chi_square = 0.0;
        let mut top_expected = 0.0;
        for (rank, &observed) in counts.iter().take(10).enumerate() {
            let expected = DRAWS as f64 * ((rank + 1) as f64).powf(-theta) / normalisation;
            let deviation = observed as f64 - expected;
            // Each count is binomial: five standard deviations is the per-rank bound.
            assert!(
                deviation.abs() < 5.0 * expected.sqrt(),
                "theta {theta}, rank {}: {observed} draws, expected {expected:.0}",
                rank + 1
            );
            chi_square += deviation * deviation / expected;
            top_expected += expected;
        }
        let rest_observed = (DRAWS - counts.iter().take(10).sum::<u64>()) as f64;
        let rest_expected = DRAWS as f64 - top_expected;
        chi_square += (rest_observed - rest_expected).powi(2) / rest_expected;
        assert!(chi_square < 29.59, "theta {theta}: chi-square {chi_square}");
    }
}

#[test]
fn popular_zipf_keys_are_not_the_first_keys() {
    let requests = generate("zipf:theta=1.2,keys=1000000,requests=100000,seed=2");
    let mut per_key: HashMap<u64, u64> = HashMap::new();
    for request in &requests {
        *per_key.entry(request.key).or_insert(0) += 1;
    }
    let hottest = per_key.iter().max_by_key(|(_, &count)| count).unwrap().0;
    assert!(*hottest > 1000, "the hottest key is {hottest}");
}

#[test]
fn uniform_covers_the_keys_evenly() {
    const KEYS: usize = 1000;
    const DRAWS: usize = 1_000_000;
    let requests = generate(&format!("uniform:keys={KEYS},requests={DRAWS},seed=5"));
    let mut counts = vec![0u64; KEYS];
    for request in &requests {
        counts[request.key as usize] += 1;
    }
    let expected = (DRAWS / KEYS) as f64;
    let chi_square: f64 = counts
        .iter()
        .map(|&c| (c as f64 - expected).powi(2) / expected)
        .sum();
    // 999 degrees of freedom: mean 999, standard deviation sqrt(2 · 999) ≈ 44.7; allow 5.
    assert!(chi_square < 999.0 + 5.0 * 44.7, "chi-square {chi_square}");
    assert!(counts.iter().all(|&c| c > 0));
}

#[test]
fn hot_spot_gives_the_hot_keys_their_share() {
    let requests = generate("hotspot:hot_data=0.1,hot_ops=0.9,keys=10000,requests=200000,seed=4");
    let mut per_key: HashMap<u64, u64> = HashMap::new();
    for request in &requests {
        *per_key.entry(request.key).or_insert(0) += 1;
    }
    let mut counts: Vec<u64> = per_key.into_values().collect();
    counts.sort_unstable_by(|a, b| b.cmp(a));
    // Hot keys expect 18 draws each, cold ones 2.2: the top 1000 counts are the hot set.
    let hot_share = counts.iter().take(1000).sum::<u64>() as f64 / 200_000.0;
    // The share's binomial standard deviation is 0.0007.
    assert!((hot_share - 0.9).abs() < 0.005, "hot share {hot_share}");
}

#[test]
fn write_ratio_and_kind_choose_the_ops() {
    let kv = count_ops(&generate("zipf:keys=1000,requests=100000,write=0.3,seed=1"));
    let sets = kv[&Op::Set] as f64 / 1e5;
    assert!((sets - 0.3).abs() < 0.01, "set fraction {sets}");
    assert_eq!(kv[&Op::Get] + kv[&Op::Set], 100_000);
    let block = count_ops(&generate(
        "zipf:keys=1000,requests=100000,write=0.3,kind=block,seed=1",
    ));
    assert_eq!(block[&Op::Write], kv[&Op::Set]);
    assert_eq!(block[&Op::Read], kv[&Op::Get]);
}

/// The fraction of operations of each YCSB workload, measured over about 10^5 operations,
/// is within 1% of the workload's nominal mix.
#[test]
fn ycsb_mixes_match_their_nominal_ratios() {
    let within = |name: &str, observed: f64, nominal: f64| {
        assert!(
            (observed - nominal).abs() < 0.01,
            "{name}: {observed} vs {nominal}"
        );
    };
    let a = count_ops(&generate("ycsb-a:keys=100000,requests=100000"));
    within("A reads", a[&Op::Get] as f64 / 1e5, 0.5);
    let b = count_ops(&generate("ycsb-b:keys=100000,requests=100000"));
    within("B reads", b[&Op::Get] as f64 / 1e5, 0.95);
    let c = count_ops(&generate("ycsb-c:keys=100000,requests=100000"));
    assert_eq!(c.get(&Op::Get), Some(&100_000));
    assert_eq!(c.len(), 1);
    let d = count_ops(&generate("ycsb-d:keys=100000,requests=100000"));
    within("D inserts", d[&Op::Add] as f64 / 1e5, 0.05);
    assert_eq!(d[&Op::Get] + d[&Op::Add], 100_000);
    // An E operation is a scan of 50.5 requests on average or an insert: 5·10^6 requests hold
    // about 10^5 operations.
    let e = count_ops(&generate("ycsb-e:keys=100000,requests=5000000"));
    let e_operations = (e[&Op::Scan] + e[&Op::Add]) as f64;
    assert!(e_operations > 90_000.0, "{e_operations} operations");
    within("E scans", e[&Op::Scan] as f64 / e_operations, 0.95);
    // Every F operation starts with a read; read-modify-writes add a write.
    let f = count_ops(&generate("ycsb-f:keys=100000,requests=150000"));
    within(
        "F read-modify-writes",
        f[&Op::Set] as f64 / f[&Op::Get] as f64,
        0.5,
    );
}

#[test]
fn ycsb_f_writes_the_key_it_just_read() {
    let requests = generate("ycsb-f:keys=1000,requests=10000,seed=9");
    for (i, request) in requests.iter().enumerate() {
        if request.op == Op::Set {
            assert_eq!(requests[i - 1].op, Op::Get);
            assert_eq!(requests[i - 1].key, request.key);
        }
    }
}

#[test]
fn latest_favours_recent_inserts() {
    const KEYS: u64 = 100_000;
    let theta = 0.99;
    let requests = generate(&format!("ycsb-d:keys={KEYS},requests=200000,seed=6"));
    let mut records = KEYS;
    let (mut reads, mut newest, mut recent) = (0u64, 0u64, 0u64);
    let mut read_inserted = false;
    for request in &requests {
        if request.op == Op::Add {
            assert_eq!(request.key, records, "inserts append keys");
            records += 1;
            continue;
        }
        assert!(request.key < records, "read of a key not inserted yet");
        let age = records - 1 - request.key;
        reads += 1;
        newest += u64::from(age == 0);
        recent += u64::from(age < 1000);
        read_inserted |= request.key >= KEYS;
    }
    assert!(read_inserted);
    // Ages are Zipf ranks over the current keys (10^5 to 1.1·10^5 of them; the normalisation
    // moves by under 1% over that range).
    let normalisation = generalized_harmonic(KEYS, theta);
    let newest_expected = 1.0 / normalisation;
    let recent_expected = generalized_harmonic(1000, theta) / normalisation;
    let newest_observed = newest as f64 / reads as f64;
    let recent_observed = recent as f64 / reads as f64;
    assert!(
        (newest_observed / newest_expected - 1.0).abs() < 0.03,
        "{newest_observed} vs {newest_expected}"
    );
    assert!(
        (recent_observed - recent_expected).abs() < 0.01,
        "{recent_observed} vs {recent_expected}"
    );
}

/// Splits a kv stream into scans: each `Scan` and the `Get`s that continue its key run.
fn scans_of(requests: &[Request]) -> Vec<(u64, u64)> {
    let mut scans: Vec<(u64, u64)> = Vec::new();
    for request in requests {
        match (request.op, scans.last_mut()) {
            (Op::Scan, _) => scans.push((request.key, 1)),
            (Op::Get, Some((start, length))) if request.key == *start + *length => *length += 1,
            _ => {}
        }
    }
    scans
}

#[test]
fn scans_walk_consecutive_keys() {
    let requests = generate("uniform:keys=100000,requests=200000,scan=0.02,scan_len=16,seed=3");
    let scans = scans_of(&requests);
    // Each operation is a scan with probability 0.02, and a scan is 16 requests.
    let operations = 200_000.0 / (0.98 + 0.02 * 16.0);
    let expected_scans = 0.02 * operations;
    assert!(
        (scans.len() as f64 - expected_scans).abs() < 5.0 * expected_scans.sqrt(),
        "{} scans, expected {expected_scans:.0}",
        scans.len()
    );
    // Every scan is complete except perhaps one cut off by the end of the trace; a point read
    // can extend a run by chance only with probability 10^-5 per scan.
    let short = scans.iter().filter(|&&(_, length)| length != 16).count();
    assert!(short <= 1, "{short} scans of the wrong length");
    assert!(scans
        .iter()
        .all(|&(start, length)| start + length <= 100_000));
}

#[test]
fn ycsb_e_scans_are_uniformly_1_to_100_keys_long() {
    let requests = generate("ycsb-e:keys=100000,requests=1000000,seed=8");
    let scans = scans_of(&requests);
    let lengths: Vec<u64> = scans[..scans.len() - 1].iter().map(|s| s.1).collect();
    assert!(lengths.iter().all(|&l| (1..=100).contains(&l)));
    let mean = lengths.iter().sum::<u64>() as f64 / lengths.len() as f64;
    // Uniform on 1..100: mean 50.5, standard deviation 28.9, so the mean of n lengths has
    // standard deviation 28.9 / sqrt(n) (under 0.2 here); scans cut at the last key pull it
    // down negligibly.
    let bound = 5.0 * 28.9 / (lengths.len() as f64).sqrt();
    assert!((mean - 50.5).abs() < bound, "mean scan length {mean}");
    let shortest = lengths.iter().filter(|&&l| l == 1).count() as f64 / lengths.len() as f64;
    assert!(
        (shortest - 0.01).abs() < 0.005,
        "{shortest} of scans are one key"
    );
}

#[test]
fn sizes_respect_their_bounds_and_stay_with_their_key() {
    for (size, min, max) in [
        ("4096", 4096, 4096),
        ("uniform:100:200", 100, 200),
        ("pareto:1.1:512:1mb", 512, 1 << 20),
    ] {
        let requests = generate(&format!("zipf:keys=10000,requests=100000,size={size}"));
        let mut size_of_key: HashMap<u64, u32> = HashMap::new();
        for request in &requests {
            assert!(
                (min..=max).contains(&request.size),
                "{size}: {}",
                request.size
            );
            let first = *size_of_key.entry(request.key).or_insert(request.size);
            assert_eq!(
                first, request.size,
                "{size}: key {} changed size",
                request.key
            );
        }
        assert!(
            size_of_key.values().any(|&s| s == min),
            "{size}: min never drawn"
        );
        if size.starts_with("uniform") {
            assert!(
                size_of_key.values().any(|&s| s == max),
                "{size}: max never drawn"
            );
        }
    }
}

#[test]
fn time_advances_at_the_requested_rate() {
    let requests = generate("uniform:keys=10,requests=1000,rate=4000");
    for (i, request) in requests.iter().enumerate() {
        assert_eq!(request.time_ns, i as u64 * 250_000);
    }
}

#[test]
fn spec_strings_print_and_parse_back() {
    for text in [
        "zipf:theta=0.9,keys=1000000,requests=10000000,size=4096,seed=1",
        "uniform:scan=0.1,scan_len=32,write=0.25,kind=block,rate=2500.5",
        "hotspot:hot_data=0.05,hot_ops=0.75,size=lognormal:300:0.7",
        "ycsb-e:theta=1.1,scan_len=20",
        "YCSB-B",
    ] {
        let spec = WorkloadSpec::parse(text).unwrap();
        assert_eq!(
            WorkloadSpec::parse(&spec.to_string()).unwrap(),
            spec,
            "{text}"
        );
    }
    let spec: WorkloadSpec = "zipf:theta=1,keys=10".parse().unwrap();
    assert_eq!(spec.pattern, Pattern::Zipf { theta: 1.0 });
    assert_eq!(spec.keys, 10);
}

#[test]
fn bad_spec_strings_get_one_line_naming_the_field() {
    let cases = [
        ("zipf:theta=abc", "theta"),
        ("zipf:theta=0", "theta"),
        ("zipf:theta=-1", "theta"),
        ("zipf:keys=0", "keys"),
        ("zipf:keys=ten", "keys"),
        ("zipf:requests=-5", "requests"),
        ("zipf:size=12x", "size"),
        ("zipf:size=uniform:10:1", "size"),
        ("zipf:kind=disk", "kind"),
        ("zipf:rate=0", "rate"),
        ("zipf:write=1.5", "write"),
        ("zipf:scan=0.1,scan_len=0", "scan_len"),
        ("zipf:colour=red", "colour"),
        ("zipf:seed=1,seed=2", "seed"),
        ("zipf:keys", "keys"),
        ("zipf:keys=1,,seed=2", "fields"),
        ("uniform:theta=1", "theta"),
        ("hotspot:hot_data=1", "hot_data"),
        ("hotspot:hot_ops=2", "hot_ops"),
        ("ycsb-a:write=0.5", "write"),
        ("ycsb-a:scan_len=5", "scan_len"),
        ("ycsb-g", "pattern"),
        ("pareto", "pattern"),
    ];
    for (text, field) in cases {
        let message = WorkloadSpec::parse(text).unwrap_err().to_string();
        assert!(!message.contains('\n'), "{text}: {message}");
        assert!(message.contains(&format!(": {field}")), "{text}: {message}");
        assert!(message.contains(text), "{text}: {message}");
    }
}

#[test]
fn specs_built_in_code_are_checked_too() {
    let spec = WorkloadSpec {
        keys: 0,
        ..WorkloadSpec::default()
    };
    let message = generator(&spec).err().unwrap().to_string();
    assert!(message.starts_with("keys: "), "{message}");
}

#[test]
fn write_keys_confine_writes_to_a_fraction_of_the_keys() {
    let spec = WorkloadSpec::parse(
        "uniform:keys=1000,requests=20000,write=0.5,write_keys=0.25,kind=block,seed=3",
    )
    .unwrap();
    assert_eq!(WorkloadSpec::parse(&spec.to_string()).unwrap(), spec);
    let requests = requests_of(&spec);
    let writes: Vec<u64> = requests
        .iter()
        .filter(|r| r.op == Op::Write)
        .map(|r| r.key)
        .collect();
    assert!((writes.len() as f64 / 20_000.0 - 0.5).abs() < 0.02);
    assert!(writes.iter().all(|&key| key < 250));
    assert!(writes.contains(&249));
    assert!(requests.iter().any(|r| r.op == Op::Read && r.key >= 750));
    for bad in ["write_keys=0", "write_keys=1.5"] {
        let message = WorkloadSpec::parse(&format!("uniform:{bad}"))
            .unwrap_err()
            .to_string();
        assert!(message.contains("write_keys"), "{message}");
    }
    assert!(WorkloadSpec::parse("ycsb-a:write_keys=0.5").is_err());
}

#[test]
fn key_ranges_concentrate_accesses_in_hot_ranges_and_hot_keys() {
    let text = "ranges:keys=60000,ranges=6,theta=0.9,requests=60000,seed=5";
    let spec = WorkloadSpec::parse(text).unwrap();
    assert_eq!(WorkloadSpec::parse(&spec.to_string()).unwrap(), spec);
    let requests = requests_of(&spec);
    let mut per_range = [0u64; 6];
    let mut per_key: HashMap<u64, u64> = HashMap::new();
    for request in &requests {
        assert!(request.key < 60_000);
        per_range[(request.key / 10_000) as usize] += 1;
        *per_key.entry(request.key).or_default() += 1;
    }
    per_range.sort_unstable();
    // Zipf(0.9) over 6 ranges: the hottest gets 1/H(6, 0.9) ≈ 38% of the accesses, the
    // coldest 1/6^0.9 of that (≈ 8%).
    let hottest = per_range[5] as f64 / 60_000.0;
    let coldest = per_range[0] as f64 / 60_000.0;
    assert!((hottest - 0.38).abs() < 0.02, "{hottest}");
    assert!((coldest - 0.38 / 6f64.powf(0.9)).abs() < 0.015, "{coldest}");
    // Inside a range keys are Zipf too: the hottest key is far above the mean.
    let top = per_key.values().copied().max().unwrap();
    assert!(top > 1000, "{top}");
    for bad in ["ranges:ranges=0", "ranges:keys=3,ranges=4", "zipf:ranges=3"] {
        let message = WorkloadSpec::parse(bad).unwrap_err().to_string();
        assert!(message.contains("ranges"), "{bad}: {message}");
    }
}

#[test]
fn mean_sizes_match_the_sizes_drawn() {
    for size in [
        "4096",
        "uniform:100:300",
        "pareto:1.2:512:1mb",
        "pareto:1:512:64kb",
        "lognormal:4096:1",
    ] {
        let spec = WorkloadSpec::parse(&format!(
            "uniform:keys=200000,requests=200000,size={size},seed=9"
        ))
        .unwrap();
        let requests = requests_of(&spec);
        let mean = requests.iter().map(|r| f64::from(r.size)).sum::<f64>() / requests.len() as f64;
        let expected = spec.size.mean_bytes();
        assert!(
            (mean / expected - 1.0).abs() < 0.03,
            "{size}: {mean} against {expected}"
        );
    }
}

#[test]
fn compressibility_is_a_property_of_the_data_not_of_the_requests() {
    let plain = WorkloadSpec::parse("ycsb-a:keys=1000,requests=2000,seed=4").unwrap();
    let compressible =
        WorkloadSpec::parse("ycsb-a:keys=1000,requests=2000,compress=0.5,seed=4").unwrap();
    assert_eq!(compressible.compressibility, 0.5);
    assert_eq!(
        WorkloadSpec::parse(&compressible.to_string()).unwrap(),
        compressible
    );
    assert!(!plain.to_string().contains("compress"));
    assert_eq!(requests_of(&plain), requests_of(&compressible));
    for bad in ["compress=1", "compress=-0.1", "compress=half"] {
        let message = WorkloadSpec::parse(&format!("zipf:{bad}"))
            .unwrap_err()
            .to_string();
        assert!(message.contains("compress"), "{message}");
    }
}

#[test]
fn scrambled_zipf_spreads_ranks_past_the_key_count_uniformly() {
    // YCSB's ScrambledZipfianGenerator: ranks among 10^10 items hashed onto the keys. Over
    // 100,000 keys, ranks past the key count carry H(10^10)-H(10^5) of H(10^10) of the mass at
    // θ = 0.99, about half, and they land uniformly.
    let exact = WorkloadSpec::parse("ycsb-c:keys=100000,requests=200000,seed=2").unwrap();
    let scrambled =
        WorkloadSpec::parse("ycsb-c:keys=100000,requests=200000,scrambled=true,seed=2").unwrap();
    assert_eq!(
        WorkloadSpec::parse(&scrambled.to_string()).unwrap(),
        scrambled
    );
    let distinct = |spec: &WorkloadSpec| {
        let mut keys: Vec<u64> = requests_of(spec).iter().map(|r| r.key).collect();
        assert!(keys.iter().all(|&k| k < 100_000));
        keys.sort_unstable();
        keys.dedup();
        keys.len()
    };
    let (exact_keys, scrambled_keys) = (distinct(&exact), distinct(&scrambled));
    // 200,000 requests, half of them uniform over 100,000 keys, touch most keys.
    assert!(scrambled_keys > 70_000, "{scrambled_keys}");
    assert!(
        exact_keys < scrambled_keys * 3 / 4,
        "{exact_keys} {scrambled_keys}"
    );
    let err = WorkloadSpec::parse("zipf:scrambled=true")
        .unwrap_err()
        .to_string();
    assert!(err.contains("scrambled"), "{err}");
    let err = WorkloadSpec::parse("ycsb-a:scrambled=maybe")
        .unwrap_err()
        .to_string();
    assert!(err.contains("true or false"), "{err}");
}
