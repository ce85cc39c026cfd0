//! Readers against the real traces of `../shared/traces` (skipped with a message when the folder
//! is absent), against synthetic files for the formats without a real sample, and every error
//! case of every reader.
//!
//! Expected counts were computed independently of this code, once, with Python over the raw
//! files (numpy for the binary ones, the csv module for the text ones), using the splitting rule
//! lines = (offset + length - 1) / 4096 - offset / 4096 + 1 per record (times op_count for the
//! Meta block trace):
//!
//! ```text
//! B=4096; lines=lambda o,n: 0 if n==0 else (o+n-1)//B - o//B + 1
//! vscsi:      sum(lines(lbn*512, len))                       = 1,141,869 (269,210 distinct)
//! msr:        sum(lines(int(r[4]), int(r[5])))               = 2,473
//! tencent:    sum(lines(int(r[1])*512, int(r[2])*512))       = 378,253
//! meta-block: sum(lines(int(r[4]), int(r[3])) * int(r[8]))  = 848,232; sum(op_count) = 1,023
//! meta-kv:    awk -F, 'NR>1 {s+=$5} END {print s}'           = 691
//! oracleGeneral distinct ids: len(np.unique(ids))            = 48,974
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};

use heterarchy_trace::read::{detect_format, open_block_records, CsvSpec, TraceInput};
use heterarchy_trace::request::{NEXT_ACCESS_NEVER, NEXT_ACCESS_UNKNOWN};
use heterarchy_trace::write::{annotate_next_access, create_writer};
use heterarchy_trace::{open, Location, Op, ReaderOptions, Request, TraceError, TraceFormat};

fn traces_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/traces"
    ));
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "skipping: real traces not found at {} (tests that need them are skipped)",
            dir.display()
        );
        None
    }
}

fn options(split_blocks: bool) -> ReaderOptions {
    ReaderOptions {
        split_blocks,
        ..ReaderOptions::default()
    }
}

fn read_all(
    input: impl Into<TraceInput>,
    options: &ReaderOptions,
) -> Result<Vec<Request>, TraceError> {
    let mut reader = open(input, options)?;
    let mut all = Vec::new();
    let mut batch = Vec::new();
    loop {
        reader.read_batch(&mut batch, 4096)?;
        if batch.is_empty() {
            return Ok(all);
        }
        all.extend_from_slice(&batch);
    }
}

fn read_one_by_one(path: &Path, options: &ReaderOptions) -> Result<Vec<Request>, TraceError> {
    let mut reader = open(path, options)?;
    let mut all = Vec::new();
    while let Some(request) = reader.next_request()? {
        all.push(request);
    }
    Ok(all)
}

fn distinct_keys(requests: &[Request]) -> usize {
    let mut keys: Vec<u64> = requests.iter().map(|r| r.key).collect();
    keys.sort_unstable();
    keys.dedup();
    keys.len()
}

/// Every real trace: detected format, requests split (default; a misaligned write reads its
/// partial edge lines first) and unsplit.
#[test]
fn every_real_trace_is_detected_and_counted() {
    let Some(dir) = traces_dir() else { return };
    let cases: [(&str, TraceFormat, usize, usize); 12] = [
        ("cloudPhysicsIO.csv", TraceFormat::Csv, 113_872, 113_872),
        (
            "cloudPhysicsIO.oracleGeneral.bin",
            TraceFormat::OracleGeneral,
            113_872,
            113_872,
        ),
        ("cloudPhysicsIO.txt", TraceFormat::Txt, 113_872, 113_872),
        (
            "cloudPhysicsIO.vscsi",
            TraceFormat::Vscsi,
            1_268_435,
            113_872,
        ),
        (
            "msr-cambridge-hm0-sample.csv",
            TraceFormat::Msr,
            2_580,
            1_000,
        ),
        (
            "tencent-cbs-sample.csv.bz2",
            TraceFormat::Tencent,
            386_061,
            50_000,
        ),
        ("twitter-sample.csv", TraceFormat::Twitter, 100, 100),
        ("meta-kvcache-sample.csv", TraceFormat::MetaKv, 691, 691),
        (
            "meta-block-sample.csv",
            TraceFormat::MetaBlock,
            848_363,
            1_023,
        ),
        ("arc-OLTP.lis.zst", TraceFormat::Arc, 914_145, 914_145),
        ("lirs-multi2.trace.gz", TraceFormat::Lirs, 26_311, 26_311),
        ("lirs-sprite.trace.gz", TraceFormat::Lirs, 133_996, 133_996),
    ];
    for (file, format, split_count, unsplit_count) in cases {
        let path = dir.join(file);
        assert_eq!(detect_format(&path).unwrap(), format, "{file}");
        let split = read_all(&path, &options(true)).unwrap();
        assert_eq!(split.len(), split_count, "{file} split");
        let unsplit = read_all(&path, &options(false)).unwrap();
        assert_eq!(unsplit.len(), unsplit_count, "{file} unsplit");
        assert!(split.iter().all(|r| r.size > 0), "{file}: sizes");
        if format.is_block() {
            assert!(
                split.iter().all(|r| r.size == 4096),
                "{file}: split sizes are lines"
            );
        }
    }
}

/// Distinct-object counts the MANIFEST and our Python pass give.
#[test]
fn distinct_objects_match_the_manifest() {
    let Some(dir) = traces_dir() else { return };
    for (file, split, distinct) in [
        ("arc-OLTP.lis.zst", true, 186_880),
        ("lirs-multi2.trace.gz", true, 5_684),
        ("lirs-sprite.trace.gz", true, 7_075),
        ("cloudPhysicsIO.oracleGeneral.bin", true, 48_974),
        ("cloudPhysicsIO.vscsi", true, 269_210),
        ("tencent-cbs-sample.csv.bz2", false, 0),
    ] {
        let requests = read_all(dir.join(file), &options(split)).unwrap();
        if distinct > 0 {
            assert_eq!(distinct_keys(&requests), distinct, "{file}");
        } else {
            // Tencent: the volume id is each request's tenant and sits in the key's high bits.
            let mut volumes: Vec<u32> = requests.iter().map(|r| r.tenant).collect();
            volumes.sort_unstable();
            volumes.dedup();
            assert_eq!(volumes.len(), 2_038, "{file} volumes");
            assert!(requests.iter().all(|r| r.key >> 44 == u64::from(r.tenant)));
        }
    }
}

/// The four encodings of the CloudPhysics trace are one trace: libCacheSim's ids are the lbn,
/// which is what csv and txt hold, what vscsi keys are unsplit, and what oracleGeneral stores.
#[test]
fn cloudphysics_encodings_agree() {
    let Some(dir) = traces_dir() else { return };
    let oracle = read_all(dir.join("cloudPhysicsIO.oracleGeneral.bin"), &options(true)).unwrap();
    let csv = read_all(dir.join("cloudPhysicsIO.csv"), &options(true)).unwrap();
    let txt = read_all(dir.join("cloudPhysicsIO.txt"), &options(true)).unwrap();
    let vscsi = read_all(dir.join("cloudPhysicsIO.vscsi"), &options(false)).unwrap();
    let ids = |requests: &[Request]| requests.iter().map(|r| r.key).collect::<Vec<_>>();
    assert_eq!(ids(&csv), ids(&oracle));
    assert_eq!(ids(&txt), ids(&oracle));
    assert_eq!(ids(&vscsi), ids(&oracle));
    for (c, v) in csv.iter().zip(&vscsi) {
        // csv rows are the vscsi records with the time cut to whole seconds.
        assert_eq!(c.size, v.size);
        assert_eq!(c.op, v.op);
        assert_eq!(c.time_ns, v.time_ns / 1_000_000_000 * 1_000_000_000);
    }
    assert!(oracle.iter().zip(&csv).all(|(o, c)| o.time_ns == c.time_ns));
    assert_eq!(vscsi.iter().filter(|r| r.op == Op::Read).count(), 46_974);
    assert_eq!(vscsi.iter().filter(|r| r.op == Op::Write).count(), 66_898);
    // The next accesses libCacheSim stored are the ones we compute.
    let mut annotated = oracle.clone();
    annotate_next_access(&mut annotated);
    assert!(oracle
        .iter()
        .zip(&annotated)
        .all(|(a, b)| a.next_access == b.next_access));
    // Splitting the vscsi trace keys lines: line = lbn * 512 / 4096 for the first line.
    let split = read_all(dir.join("cloudPhysicsIO.vscsi"), &options(true)).unwrap();
    assert_eq!(split[0].key, vscsi[0].key * 512 / 4096);
}

/// `next_request` and `read_batch` give the same stream for every format.
#[test]
fn single_and_batched_reads_agree() {
    let Some(dir) = traces_dir() else { return };
    for file in [
        "cloudPhysicsIO.vscsi",
        "cloudPhysicsIO.oracleGeneral.bin",
        "meta-kvcache-sample.csv",
        "meta-block-sample.csv",
        "msr-cambridge-hm0-sample.csv",
        "twitter-sample.csv",
    ] {
        let path = dir.join(file);
        assert_eq!(
            read_one_by_one(&path, &options(true)).unwrap(),
            read_all(&path, &options(true)).unwrap(),
            "{file}"
        );
    }
}

/// Field-level checks of the first records of the text traces, against values read off the files.
#[test]
fn first_records_hold_the_right_fields() {
    let Some(dir) = traces_dir() else { return };
    // 128166385295514663,hm,0,Write,9056014336,2048,2833: bytes 9056014336..+2048 in line 2210941.
    let msr = read_all(dir.join("msr-cambridge-hm0-sample.csv"), &options(true)).unwrap();
    assert_eq!(msr[0].time_ns, 128_166_385_295_514_663 * 100);
    assert_eq!(msr[0].key, Request::block_key(0, 9_056_014_336 / 4096));
    // 2 KiB inside one line: the write reads its line first.
    assert_eq!((msr[0].op, msr[0].tenant), (Op::Read, 0));
    assert_eq!((msr[1].key, msr[1].op), (msr[0].key, Op::Write));
    // 1538323200,4247200,128,1,1058: sectors 4247200..+128 (64 KiB) = lines 530900..530915 of
    // volume 1058.
    let tencent = read_all(dir.join("tencent-cbs-sample.csv.bz2"), &options(true)).unwrap();
    let keys: Vec<u64> = tencent[..16].iter().map(|r| r.key).collect();
    let expected: Vec<u64> = (530_900..530_916)
        .map(|l| Request::block_key(1058, l))
        .collect();
    assert_eq!(keys, expected);
    assert_eq!((tencent[0].op, tencent[0].tenant), (Op::Write, 1058));
    assert_eq!(tencent[0].time_ns, 1_538_323_200_000_000_000);
    // 0,q:q:1:8WTwl7huJeQ,17,249,1,get,0
    let twitter = read_all(dir.join("twitter-sample.csv"), &options(true)).unwrap();
    assert_eq!(
        twitter[0].key,
        heterarchy_trace::read::stable_key_hash(b"q:q:1:8WTwl7huJeQ")
    );
    assert_eq!(
        (twitter[0].size, twitter[0].tenant, twitter[0].op),
        (266, 1, Op::Get)
    );
    // 604038471,a54f88ab02ece24d,24,GET,3,0,...,699950563: row 2 stands for three requests.
    let kv = read_all(dir.join("meta-kvcache-sample.csv"), &options(true)).unwrap();
    assert_eq!((kv[0].size, kv[0].tenant), (48 + 87, 366_387_042));
    assert!(kv[1..4].iter().all(|r| r.key == kv[1].key && r.size == 24));
    assert_ne!(kv[0].key, kv[1].key);
    // ARC: "1 1 0 0" is page 1.
    let arc = read_all(dir.join("arc-OLTP.lis.zst"), &options(true)).unwrap();
    assert_eq!((arc[0].key, arc[0].size), (1, 512));
    // Meta block: the first row reads 8 MiB at offset 0 of one chunk: 2048 lines.
    let block = read_all(dir.join("meta-block-sample.csv"), &options(true)).unwrap();
    let volume = block[0].tenant;
    assert!(block[..2048]
        .iter()
        .enumerate()
        .all(|(line, r)| r.key == Request::block_key(volume, line as u64) && r.op == Op::Read));
}

fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn compress(path: &Path, suffix: &str) -> PathBuf {
    let bytes = std::fs::read(path).unwrap();
    let out = PathBuf::from(format!("{}{suffix}", path.display()));
    let file = std::fs::File::create(&out).unwrap();
    match suffix {
        ".gz" => {
            let mut e = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
            e.write_all(&bytes).unwrap();
            e.finish().unwrap();
        }
        ".bz2" => {
            let mut e = bzip2::write::BzEncoder::new(file, bzip2::Compression::fast());
            e.write_all(&bytes).unwrap();
            e.finish().unwrap();
        }
        ".xz" => {
            let mut e = xz2::write::XzEncoder::new(file, 1);
            e.write_all(&bytes).unwrap();
            e.finish().unwrap();
        }
        ".zst" => {
            let mut e = zstd::stream::write::Encoder::new(file, 1).unwrap();
            e.write_all(&bytes).unwrap();
            e.finish().unwrap();
        }
        _ => unreachable!("test suffixes"),
    }
    out
}

/// gz, bz2, xz and zst copies read exactly like the plain file, format detection included; and
/// so do all of them as any reader's bytes (`TraceInput::from_reader`), named as standard input
/// is, so that content alone decides the format.
#[test]
fn compressed_copies_and_any_readers_bytes_read_identically() {
    let Some(dir) = traces_dir() else { return };
    let temp = tempfile::tempdir().unwrap();
    for file in [
        "msr-cambridge-hm0-sample.csv",
        "cloudPhysicsIO.vscsi",
        "twitter-sample.csv",
        "cloudPhysicsIO.oracleGeneral.bin",
    ] {
        let plain = dir.join(file);
        let copy = temp.path().join(file);
        std::fs::copy(&plain, &copy).unwrap();
        let format = detect_format(&plain).unwrap();
        let expected = read_all(&plain, &options(true)).unwrap();
        let mut copies = vec![copy.clone()];
        copies.extend([".gz", ".bz2", ".xz", ".zst"].map(|suffix| compress(&copy, suffix)));
        for path in copies {
            let piped =
                TraceInput::from_reader("<stdin>", std::fs::File::open(&path).unwrap()).unwrap();
            for input in [TraceInput::file(&path), piped] {
                let what = format!("{} as {}", path.display(), input.name().display());
                assert_eq!(detect_format(&input).unwrap(), format, "{what}");
                assert_eq!(
                    read_all(&input, &options(true)).unwrap(),
                    expected,
                    "{what}"
                );
            }
        }
    }
}

/// A reader's errors name its input as a file's name the file.
#[test]
fn errors_of_a_reader_name_its_input() {
    let empty = TraceInput::from_reader("<stdin>", std::io::empty()).unwrap();
    let error = read_all(&empty, &options(true)).unwrap_err().to_string();
    assert!(error.starts_with("<stdin>"), "{error}");
    let input = TraceInput::bytes("<stdin>", b"0,key,3,100,1,get,0\nnot a record\n".to_vec());
    let twitter = ReaderOptions {
        format: Some(TraceFormat::Twitter),
        ..options(true)
    };
    let error = read_all(&input, &twitter).unwrap_err().to_string();
    assert!(
        error.starts_with("<stdin>") && error.contains("line 2"),
        "{error}"
    );
}

fn write_trace(path: &Path, format: TraceFormat, requests: &[Request]) {
    let mut writer = create_writer(path, format).unwrap();
    for request in requests {
        writer.write(request).unwrap();
    }
    writer.finish().unwrap();
}

/// Our oracleGeneral writer reproduces libCacheSim's own file byte for byte.
#[test]
fn oracle_general_round_trip_is_byte_exact() {
    let Some(dir) = traces_dir() else { return };
    let original = dir.join("cloudPhysicsIO.oracleGeneral.bin");
    let requests = read_all(&original, &options(true)).unwrap();
    let temp = tempfile::tempdir().unwrap();
    for name in ["copy.oracleGeneral.bin", "copy.oracleGeneral.bin.zst"] {
        let copy = temp.path().join(name);
        write_trace(&copy, TraceFormat::OracleGeneral, &requests);
        assert_eq!(read_all(&copy, &options(true)).unwrap(), requests, "{name}");
        if !name.ends_with(".zst") {
            assert_eq!(
                std::fs::read(&copy).unwrap(),
                std::fs::read(&original).unwrap()
            );
        }
    }
}

/// The oracleGeneral writer annotates next accesses and keeps what the format holds.
#[test]
fn oracle_general_writer_annotates_and_rebases_time() {
    let temp = tempfile::tempdir().unwrap();
    let path = temp.path().join("t.oracleGeneral");
    // FILETIME-like nanoseconds do not fit 32-bit seconds: times become relative to the first.
    let base = 128_166_385_295_514_663u64 * 100;
    let requests: Vec<Request> = [(7u64, 0u64), (8, 2), (7, 5)]
        .iter()
        .map(|&(key, second)| Request {
            time_ns: base + second * 1_000_000_000,
            op: Op::Write,
            tenant: 3,
            ..Request::new(key, 100)
        })
        .collect();
    write_trace(&path, TraceFormat::OracleGeneral, &requests);
    let back = read_all(&path, &options(true)).unwrap();
    let summary: Vec<(u64, u64, i64)> = back
        .iter()
        .map(|r| (r.key, r.time_ns / 1_000_000_000, r.next_access))
        .collect();
    assert_eq!(
        summary,
        vec![
            (7, 0, 2),
            (8, 2, NEXT_ACCESS_NEVER),
            (7, 5, NEXT_ACCESS_NEVER)
        ]
    );
    assert!(back
        .iter()
        .all(|r| r.size == 100 && r.op == Op::Unknown && r.tenant == 0));
}

/// The native format keeps every field, plain or compressed, and reads as fast batches.
#[test]
fn native_round_trip_keeps_every_field() {
    let temp = tempfile::tempdir().unwrap();
    let mut requests: Vec<Request> = (0..10_000u64)
        .map(|i| Request {
            time_ns: i * 1_000_003,
            key: (i * 7919) % 1_000,
            size: (i % 5000) as u32 + 1,
            tenant: (i % 3) as u32,
            op: Op::ALL[(i % 17) as usize],
            next_access: NEXT_ACCESS_UNKNOWN,
        })
        .collect();
    annotate_next_access(&mut requests[..5_000]);
    for name in [
        "t.htrace",
        "t.htrace.gz",
        "t.htrace.zst",
        "t.htrace.xz",
        "t.htrace.bz2",
    ] {
        let path = temp.path().join(name);
        write_trace(&path, TraceFormat::Native, &requests);
        assert_eq!(detect_format(&path).unwrap(), TraceFormat::Native, "{name}");
        assert_eq!(read_all(&path, &options(true)).unwrap(), requests, "{name}");
        assert_eq!(
            read_one_by_one(&path, &options(true)).unwrap(),
            requests,
            "{name}"
        );
    }
    // Detected by its magic even under a name that says nothing.
    let plain = temp.path().join("t.htrace");
    let renamed = temp.path().join("mystery.bin");
    std::fs::copy(&plain, &renamed).unwrap();
    assert_eq!(detect_format(&renamed).unwrap(), TraceFormat::Native);
    assert_eq!(
        std::fs::metadata(&plain).unwrap().len(),
        16 + 32 * requests.len() as u64
    );
}

#[test]
fn writers_refuse_formats_they_cannot_write() {
    let temp = tempfile::tempdir().unwrap();
    let err = create_writer(&temp.path().join("x.vscsi"), TraceFormat::Vscsi)
        .err()
        .unwrap();
    assert!(err.to_string().contains("cannot write vscsi"), "{err}");
    assert!(
        err.to_string().contains("oracleGeneral, native, csv"),
        "{err}"
    );
}

fn vscsi_v2_record(cmd: u16, len: u32, lbn: u64, ts_us: u64) -> Vec<u8> {
    let mut record = Vec::with_capacity(40);
    record.extend_from_slice(&cmd.to_le_bytes());
    record.extend_from_slice(&0x0200u16.to_le_bytes()); // ver >> 8 == 2
    record.extend_from_slice(&9u32.to_le_bytes()); // sn
    record.extend_from_slice(&len.to_le_bytes());
    record.extend_from_slice(&1u32.to_le_bytes()); // nSG
    record.extend_from_slice(&lbn.to_le_bytes());
    record.extend_from_slice(&ts_us.to_le_bytes());
    record.extend_from_slice(&77u64.to_le_bytes()); // rt
    record
}

fn vscsi_v1_record(cmd: u16, len: u32, lbn: u64, ts_us: u64) -> Vec<u8> {
    let mut record = Vec::with_capacity(32);
    record.extend_from_slice(&9u32.to_le_bytes()); // sn
    record.extend_from_slice(&len.to_le_bytes());
    record.extend_from_slice(&1u32.to_le_bytes()); // nSG
    record.extend_from_slice(&cmd.to_le_bytes());
    record.extend_from_slice(&0x0100u16.to_le_bytes()); // ver >> 8 == 1
    record.extend_from_slice(&lbn.to_le_bytes());
    record.extend_from_slice(&ts_us.to_le_bytes());
    record
}

/// A synthetic vscsi version 2 trace: layout, ops, splitting and detection by content.
#[test]
fn vscsi_version_2_reads() {
    let temp = tempfile::tempdir().unwrap();
    let mut bytes = Vec::new();
    bytes.extend(vscsi_v2_record(0x28, 8192, 8, 1_000_000)); // bytes 4096..12288: lines 1, 2
    bytes.extend(vscsi_v2_record(0x8a, 512, 7, 2_500_000)); // bytes 3584..4096: line 0
    bytes.extend(vscsi_v2_record(0x35, 0, 0, 3_000_000)); // SYNCHRONIZE CACHE: no data
    bytes.extend(vscsi_v2_record(0x42, 4096, 16, 4_000_000)); // UNMAP line 2
    let path = write_file(temp.path(), "trace.bin", &bytes);
    assert_eq!(detect_format(&path).unwrap(), TraceFormat::Vscsi);
    let split = read_all(&path, &options(true)).unwrap();
    let summary: Vec<(u64, Op, u64)> = split.iter().map(|r| (r.key, r.op, r.time_ns)).collect();
    assert_eq!(
        summary,
        vec![
            (1, Op::Read, 1_000_000_000),
            (2, Op::Read, 1_000_000_000),
            // Half a line written: read first.
            (0, Op::Read, 2_500_000_000),
            (0, Op::Write, 2_500_000_000),
            (2, Op::Trim, 4_000_000_000),
        ]
    );
    let unsplit = read_all(&path, &options(false)).unwrap();
    let summary: Vec<(u64, u32)> = unsplit.iter().map(|r| (r.key, r.size)).collect();
    assert_eq!(summary, vec![(8, 8192), (7, 512), (16, 4096)]);
}

/// A synthetic SYSTOR'17 trace, with and without its header.
#[test]
fn systor_reads_with_and_without_header() {
    let temp = tempfile::tempdir().unwrap();
    let body = "1486512000.037142,0.000294,R,4,8192,4096\n1486512000.5,0.01,W,6,4095,2\n";
    for (name, text) in [
        (
            "a.csv",
            format!("Timestamp,Response,IOType,LUN,Offset,Size\n{body}"),
        ),
        ("b.csv", body.to_string()),
    ] {
        let path = write_file(temp.path(), name, text.as_bytes());
        assert_eq!(detect_format(&path).unwrap(), TraceFormat::Systor, "{name}");
        let requests = read_all(&path, &options(true)).unwrap();
        let summary: Vec<(u64, u64, Op, u32)> = requests
            .iter()
            .map(|r| (r.time_ns, r.key, r.op, r.tenant))
            .collect();
        assert_eq!(
            summary,
            vec![
                (
                    1_486_512_000_037_142_000,
                    Request::block_key(4, 2),
                    Op::Read,
                    4
                ),
                // Bytes 4095..4097 straddle lines 0 and 1, each in part: both read first.
                (
                    1_486_512_000_500_000_000,
                    Request::block_key(6, 0),
                    Op::Read,
                    6
                ),
                (
                    1_486_512_000_500_000_000,
                    Request::block_key(6, 1),
                    Op::Read,
                    6
                ),
                (
                    1_486_512_000_500_000_000,
                    Request::block_key(6, 0),
                    Op::Write,
                    6
                ),
                (
                    1_486_512_000_500_000_000,
                    Request::block_key(6, 1),
                    Op::Write,
                    6
                ),
            ]
        );
    }
}

/// A CSV trace read through an explicit libCacheSim column spec, with string ids and counts.
#[test]
fn csv_spec_drives_columns() {
    let temp = tempfile::tempdir().unwrap();
    let path = write_file(
        temp.path(),
        "kv.log",
        b"# ts|key|bytes|verb|client|n\n10.5|alpha|100|set|3|2\n11|beta|7|GET|4|1\n",
    );
    let spec: CsvSpec =
        "time-col=1,obj-id-col=2,obj-size-col=3,op-col=4,tenant-col=5,cnt-col=6,obj-id-is-num=false,delimiter=|,has-header=true"
            .parse()
            .unwrap();
    let options = ReaderOptions {
        csv: Some(spec),
        ..ReaderOptions::default()
    };
    let requests = read_all(&path, &options).unwrap();
    let hash = heterarchy_trace::read::stable_key_hash;
    let summary: Vec<(u64, u64, u32, Op, u32)> = requests
        .iter()
        .map(|r| (r.time_ns, r.key, r.size, r.op, r.tenant))
        .collect();
    assert_eq!(
        summary,
        vec![
            (10_500_000_000, hash(b"alpha"), 100, Op::Set, 3),
            (10_500_000_000, hash(b"alpha"), 100, Op::Set, 3),
            (11_000_000_000, hash(b"beta"), 7, Op::Get, 4),
        ]
    );
}

/// A file name, the format forced (or detected), its bytes, and where and what the error says.
type ErrorCase = (
    &'static str,
    Option<TraceFormat>,
    Vec<u8>,
    Location,
    &'static str,
);

/// One bad input per case and reader: the error names the file and where, on one line.
#[test]
fn bad_input_gives_located_one_line_errors() {
    let temp = tempfile::tempdir().unwrap();
    let mut v1 = Vec::new();
    v1.extend(vscsi_v1_record(0x28, 512, 1, 1));
    v1.extend(vscsi_v1_record(0x28, 512, 2, 2));
    v1.extend(&vscsi_v1_record(0x28, 512, 3, 3)[..10]);
    let mut oracle = vec![0u8; 24];
    oracle[16..24].copy_from_slice(&(-1i64).to_le_bytes());
    oracle.extend([1, 2, 3]);
    let native_header = heterarchy_trace::read::native_header();
    let mut native_truncated = native_header.to_vec();
    native_truncated.extend([0u8; 40]);
    let mut native_version = native_header.to_vec();
    native_version[8] = 9;
    let f = |format| Some(format);
    let cases: Vec<ErrorCase> = vec![
        ("og", f(TraceFormat::OracleGeneral), oracle, Location::Offset(24), "truncated record: 3 of 24"),
        ("v1", f(TraceFormat::Vscsi), v1, Location::Offset(64), "truncated record: 10 of 32"),
        ("vx", f(TraceFormat::Vscsi), vec![5; 100], Location::File, "neither 1"),
        ("vs", f(TraceFormat::Vscsi), vec![5; 20], Location::File, "too short"),
        ("nt", f(TraceFormat::Native), native_truncated, Location::Offset(48), "truncated record: 8 of 32"),
        ("nv", f(TraceFormat::Native), native_version, Location::Offset(8), "expected version 1"),
        ("nm", f(TraceFormat::Native), vec![b'x'; 40], Location::Offset(0), "magic"),
        ("nh", f(TraceFormat::Native), native_header[..5].to_vec(), Location::Offset(5), "truncated header"),
        ("c1", f(TraceFormat::Csv), b"id,size\n5,1\nx,2\n".to_vec(), Location::Line(3), "column 1 (object id): expected a numeric id"),
        ("c2", f(TraceFormat::Csv), b"id,size\n5,1\n6\n".to_vec(), Location::Line(3), "too few fields"),
        ("c3", f(TraceFormat::Csv), b"id,op\n5,read\n6,jump\n".to_vec(), Location::Line(3), "unknown op \"jump\""),
        ("c4", f(TraceFormat::Csv), b"id,size\n5,-1\n".to_vec(), Location::Line(2), "column 2 (object size): expected an unsigned integer"),
        ("c5", f(TraceFormat::Csv), b"a,b\n1,2\n".to_vec(), Location::Line(1), "without a header naming an id column"),
        ("m1", f(TraceFormat::Msr), b"1,h,0,Read,x,512,1\n".to_vec(), Location::Line(1), "column 5 (Offset): expected an unsigned integer, found \"x\""),
        ("m2", f(TraceFormat::Msr), b"1,h,0,Read,0,512,1\n1,h,0,Read\n".to_vec(), Location::Line(2), "too few fields: expected 7"),
        ("m3", f(TraceFormat::Msr), b"1,h,0,Peek,0,512,1\n".to_vec(), Location::Line(1), "unknown op \"Peek\""),
        ("t1", f(TraceFormat::Tencent), b"1,0,8,2,5\n".to_vec(), Location::Line(1), "IOType): expected 0 (read) or 1 (write)"),
        ("t2", f(TraceFormat::Tencent), b"1,0,8,1\n".to_vec(), Location::Line(1), "too few fields"),
        ("t3", f(TraceFormat::Tencent), b"1,0,8,1,5,6\n".to_vec(), Location::Line(1), "too many fields"),
        ("s1", f(TraceFormat::Systor), b"Timestamp,Response,IOType,LUN,Offset,Size\n1.0,0.1,Q,1,0,512\n".to_vec(), Location::Line(2), "unknown op \"Q\""),
        ("s2", f(TraceFormat::Systor), b"1.0,0.1,R,1,0,lots\n".to_vec(), Location::Line(1), "column 6 (Size)"),
        ("w1", f(TraceFormat::Twitter), b"0,k,1,2,3,fetch,0\n".to_vec(), Location::Line(1), "unknown op \"fetch\""),
        ("w2", f(TraceFormat::Twitter), b"0,k,1,2,get,0\n".to_vec(), Location::Line(1), "too few fields"),
        ("w3", f(TraceFormat::Twitter), b"0,k,one,2,3,get,0\n".to_vec(), Location::Line(1), "column 3 (key_size)"),
        ("k1", f(TraceFormat::MetaKv), b"op_time,key,key_size,op,op_count,size,cache_hits,ttl,usecase,sub_usecase\n1,k,2,PEEK,1,3,0,0,1,1\n".to_vec(), Location::Line(2), "unknown op \"PEEK\""),
        ("k2", f(TraceFormat::MetaKv), b"1,k,2,GET,many,3,0,0,1,1\n".to_vec(), Location::Line(1), "column 5 (op_count)"),
        ("k3", f(TraceFormat::MetaKv), b"1,k,2,GET,1\n".to_vec(), Location::Line(1), "too few fields"),
        ("b1", f(TraceFormat::MetaBlock), b"1,b,40,4096,0,u,n,scanChunk,1,h,0\n".to_vec(), Location::Line(1), "unknown op \"scanChunk\""),
        ("b2", f(TraceFormat::MetaBlock), b"1,b,40,big,0,u,n,getChunk,1,h,0\n".to_vec(), Location::Line(1), "column 4 (io_size)"),
        ("a1", f(TraceFormat::Arc), b"1 1 0 0\n7\n".to_vec(), Location::Line(2), "too few fields"),
        ("a2", f(TraceFormat::Arc), b"1 x 0 0\n".to_vec(), Location::Line(1), "column 2 (num_blocks)"),
        ("l1", f(TraceFormat::Lirs), b"1\n*\n\nseven\n".to_vec(), Location::Line(4), "column 1 (block number)"),
        ("u1", None, b"\x01\x02\x03".to_vec(), Location::File, "cannot tell the trace format"),
        ("u2", None, b"a,b,c\nd,e,f\n".to_vec(), Location::File, "--trace-format"),
    ];
    for (name, format, bytes, location, needle) in cases {
        let path = write_file(temp.path(), name, &bytes);
        let options = ReaderOptions {
            format,
            ..ReaderOptions::default()
        };
        let err = read_all(&path, &options).expect_err(name);
        let message = err.to_string();
        assert_eq!(err.location, location, "{name}: {message}");
        assert!(message.contains(needle), "{name}: {message}");
        assert!(
            message.starts_with(&path.display().to_string()),
            "{name}: {message}"
        );
        assert!(!message.contains('\n'), "{name}: {message}");
    }
}

/// Empty and missing files are errors for every format, detected or forced.
#[test]
fn empty_and_missing_files_are_errors_for_every_format() {
    let temp = tempfile::tempdir().unwrap();
    let empty = write_file(temp.path(), "empty.csv", b"");
    let missing = temp.path().join("missing.csv");
    for format in TraceFormat::ALL.map(Some).into_iter().chain([None]) {
        let options = ReaderOptions {
            format,
            ..ReaderOptions::default()
        };
        let err = read_all(&empty, &options).expect_err("empty");
        assert!(
            err.to_string().contains("file is empty"),
            "{format:?}: {err}"
        );
        let err = read_all(&missing, &options).expect_err("missing");
        assert!(err.to_string().contains("cannot open"), "{format:?}: {err}");
        assert_eq!(err.location, Location::File);
    }
}

/// A CSV with a usable header is read without a spec; the header names pick the columns.
#[test]
fn csv_header_names_pick_columns() {
    let temp = tempfile::tempdir().unwrap();
    let path = write_file(
        temp.path(),
        "objects.csv",
        b"timestamp,key,size\n1,k1,10\n2,k2,20\n",
    );
    let requests = read_all(&path, &ReaderOptions::default()).unwrap();
    let hash = heterarchy_trace::read::stable_key_hash;
    let summary: Vec<(u64, u64, u32)> = requests
        .iter()
        .map(|r| (r.time_ns, r.key, r.size))
        .collect();
    assert_eq!(
        summary,
        vec![
            (1_000_000_000, hash(b"k1"), 10),
            (2_000_000_000, hash(b"k2"), 20)
        ]
    );
}

/// Spreadsheet exports: a byte-order mark before the header and CRLF line ends.
#[test]
fn byte_order_mark_and_crlf_are_tolerated() {
    let temp = tempfile::tempdir().unwrap();
    let text =
        b"\xef\xbb\xbfop_time,key,key_size,op,op_count,size,cache_hits,ttl,usecase,sub_usecase\r\n\
                 5,k,2,SET,2,3,0,0,9,9\r\n\r\n";
    let path = write_file(temp.path(), "kv.csv", text);
    assert_eq!(detect_format(&path).unwrap(), TraceFormat::MetaKv);
    let requests = read_all(&path, &ReaderOptions::default()).unwrap();
    assert_eq!(requests.len(), 2);
    assert!(requests
        .iter()
        .all(|r| r.op == Op::Set && r.size == 5 && r.tenant == 9));
}

/// A compressed stream cut short is a located read error, not a panic or a silent end.
#[test]
fn truncated_compressed_stream_is_an_error() {
    let temp = tempfile::tempdir().unwrap();
    let lines: String = (0..300_000).map(|i| format!("{i}\n")).collect();
    let plain = write_file(temp.path(), "keys.txt", lines.as_bytes());
    for suffix in [".gz", ".bz2", ".xz", ".zst"] {
        let compressed = compress(&plain, suffix);
        let bytes = std::fs::read(&compressed).unwrap();
        std::fs::write(&compressed, &bytes[..bytes.len() / 2]).unwrap();
        let err = read_all(&compressed, &ReaderOptions::default()).expect_err(suffix);
        assert!(matches!(err.location, Location::Line(_)), "{suffix}: {err}");
        assert!(err.to_string().contains("read failed"), "{suffix}: {err}");
    }
}

/// Block traces open as their records too, before splitting; counting their pages by hand,
/// with a misaligned write's edge reads, gives what the split reader yields.
#[test]
fn block_records_are_what_splitting_splits() {
    let Some(dir) = traces_dir() else { return };
    for (file, split_count) in [
        ("cloudPhysicsIO.vscsi", 1_268_435u64),
        ("msr-cambridge-hm0-sample.csv", 2_580),
        ("tencent-cbs-sample.csv.bz2", 386_061),
    ] {
        let mut records = open_block_records(dir.join(file), &options(true)).unwrap();
        let mut pages = 0u64;
        while let Some(record) = records.next_record().unwrap() {
            if record.length_bytes == 0 {
                continue;
            }
            let (start, end) = (
                record.offset_bytes,
                record.offset_bytes + record.length_bytes,
            );
            let (first, last) = (start / 4096, (end - 1) / 4096);
            pages += (last - first + 1) * u64::from(record.repeat);
            if record.op == Op::Write {
                let (front, rear) = (start % 4096 != 0, end % 4096 != 0);
                let edges = if first == last {
                    u64::from(front || rear)
                } else {
                    u64::from(front) + u64::from(rear)
                };
                pages += edges * u64::from(record.repeat);
            }
        }
        assert_eq!(pages, split_count, "{file}");
    }
    let error = open_block_records(dir.join("twitter-sample.csv"), &options(true))
        .err()
        .expect("a key-value trace has no block records")
        .to_string();
    assert!(error.contains("expected a block trace"), "{error}");
}
