//! Fault injection: storage that fails on purpose (docs/reliability.md, "Injecting faults";
//! docs/architecture.md, "The device layer"), as nbdkit's error and delay filters do for its
//! plugins: errors on chosen or random reads, writes and flushes, short writes, latency spikes,
//! and a device that disappears.
//!
//! A [`FaultSpec`] is written like nbdkit's filter parameters, comma-separated:
//!
//! ```text
//! read-error=1%,write-error=0.001,flush-error=5%   each operation fails with that probability
//! short-write=1%        a write stores only its first half, then fails
//! delay=1%@20ms         an operation waits 20 ms first, with that probability
//! read-error-at=4m+64k  every read touching these bytes fails (write-error-at= likewise)
//! gone-after=100000     after that many operations the device is gone for good
//! gone-file=/run/x      the device is gone for good once this file exists
//! file=/run/inject      faults are injected only while this file exists (nbdkit's error-file)
//! seed=7                the random draws' seed (each spec draws its own sequence)
//! ```
//!
//! A test can also switch faults at run time through [`FaultyBackend::control`].

use std::fmt;
use std::io;
use std::ops::Range;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use heterarchy_trace::generate::mix64;
use heterarchy_trace::units::parse_bytes;
use serde::{Deserialize, Serialize};

use super::Backend;
use crate::error::SpecError;

/// Which faults, how often, and when (module docs for the syntax).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct FaultSpec {
    /// Probability that a read fails.
    pub read_error: f64,
    /// Probability that a write fails, storing nothing.
    pub write_error: f64,
    /// Probability that a flush or a persist fails.
    pub flush_error: f64,
    /// Probability that a write stores only its first half, then fails.
    pub short_write: f64,
    /// Probability that an operation first waits, and how long.
    pub delay: Option<(f64, Duration)>,
    /// Byte ranges whose reads always fail.
    pub read_error_at: Vec<Range<u64>>,
    /// Byte ranges whose writes always fail.
    pub write_error_at: Vec<Range<u64>>,
    /// Operations after which the device is gone.
    pub gone_after_ops: Option<u64>,
    /// The device is gone once this file exists.
    pub gone_file: Option<PathBuf>,
    /// Faults are injected only while this file exists.
    pub file: Option<PathBuf>,
    /// Seed of the random draws.
    pub seed: u64,
}

impl FaultSpec {
    /// Parses a spec; `none` or an empty string is no fault at all (`None`).
    pub fn parse_optional(text: &str) -> Result<Option<FaultSpec>, SpecError> {
        let text = text.trim();
        if text.is_empty() || text == "none" {
            return Ok(None);
        }
        text.parse().map(Some)
    }
}

impl FromStr for FaultSpec {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<FaultSpec, SpecError> {
        let mut spec = FaultSpec::default();
        for part in text.split(',').map(str::trim) {
            let Some((key, value)) = part.split_once('=') else {
                return Err(SpecError::FaultSyntax {
                    part: part.to_string(),
                    text: text.to_string(),
                });
            };
            let bad = |reason: String| SpecError::Fault {
                key: key.to_string(),
                value: value.to_string(),
                reason,
            };
            match key {
                "read-error" => spec.read_error = rate(value).map_err(bad)?,
                "write-error" => spec.write_error = rate(value).map_err(bad)?,
                "flush-error" => spec.flush_error = rate(value).map_err(bad)?,
                "short-write" => spec.short_write = rate(value).map_err(bad)?,
                "delay" => {
                    let (probability, duration) = value.split_once('@').ok_or_else(|| {
                        bad("expected RATE@DURATION, such as 1%@20ms".to_string())
                    })?;
                    spec.delay = Some((
                        rate(probability).map_err(bad)?,
                        duration_of(duration).map_err(bad)?,
                    ));
                }
                "read-error-at" => spec.read_error_at.push(range(value).map_err(bad)?),
                "write-error-at" => spec.write_error_at.push(range(value).map_err(bad)?),
                "gone-after" => {
                    spec.gone_after_ops =
                        Some(value.parse().map_err(|_| {
                            bad("expected a whole number of operations".to_string())
                        })?)
                }
                "gone-file" => spec.gone_file = Some(PathBuf::from(value)),
                "file" => spec.file = Some(PathBuf::from(value)),
                "seed" => {
                    spec.seed = value
                        .parse()
                        .map_err(|_| bad("expected a whole number".to_string()))?
                }
                _ => {
                    return Err(SpecError::UnknownFault {
                        key: key.to_string(),
                        text: text.to_string(),
                    })
                }
            }
        }
        Ok(spec)
    }
}

/// Deserializes a spec written as a string, `none` for none: for config fields.
pub fn deserialize_optional<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<FaultSpec>, D::Error> {
    let text = String::deserialize(deserializer)?;
    FaultSpec::parse_optional(&text).map_err(serde::de::Error::custom)
}

/// A probability: `0.01` or `1%`.
fn rate(text: &str) -> Result<f64, String> {
    let value = match text.strip_suffix('%') {
        Some(percent) => percent.parse::<f64>().map(|value| value / 100.0),
        None => text.parse::<f64>(),
    };
    match value {
        Ok(value) if (0.0..=1.0).contains(&value) => Ok(value),
        _ => Err("expected a probability from 0 to 1, or a percentage".to_string()),
    }
}

/// A duration: `20ms`, `500us`, `1s`.
fn duration_of(text: &str) -> Result<Duration, String> {
    let (number, scale_ns) = if let Some(value) = text.strip_suffix("ms") {
        (value, 1_000_000.0)
    } else if let Some(value) = text.strip_suffix("us") {
        (value, 1_000.0)
    } else if let Some(value) = text.strip_suffix('s') {
        (value, 1e9)
    } else {
        return Err("expected a duration such as 20ms, 500us or 1s".to_string());
    };
    match number.parse::<f64>() {
        Ok(value) if value >= 0.0 && value <= 60.0 * 1e9 / scale_ns => {
            Ok(Duration::from_nanos((value * scale_ns) as u64))
        }
        _ => Err("expected a duration from 0 to 60s".to_string()),
    }
}

/// A byte range: `OFFSET+LEN`, sizes as elsewhere (`4m+64k`).
fn range(text: &str) -> Result<Range<u64>, String> {
    let (offset, len) = text
        .split_once('+')
        .ok_or_else(|| "expected OFFSET+LEN, such as 4m+64k".to_string())?;
    let offset = parse_bytes(offset).map_err(|e| e.to_string())?;
    let end = offset
        .checked_add(parse_bytes(len).map_err(|e| e.to_string())?)
        .ok_or_else(|| "the range ends past 2^64 bytes".to_string())?;
    Ok(offset..end)
}

impl TryFrom<String> for FaultSpec {
    type Error = SpecError;
    fn try_from(text: String) -> Result<FaultSpec, SpecError> {
        text.parse()
    }
}

impl From<FaultSpec> for String {
    fn from(spec: FaultSpec) -> String {
        spec.to_string()
    }
}

impl fmt::Display for FaultSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        for (key, value) in [
            ("read-error", self.read_error),
            ("write-error", self.write_error),
            ("flush-error", self.flush_error),
            ("short-write", self.short_write),
        ] {
            if value > 0.0 {
                parts.push(format!("{key}={value}"));
            }
        }
        if let Some((probability, duration)) = self.delay {
            parts.push(format!("delay={probability}@{}us", duration.as_micros()));
        }
        for (key, ranges) in [
            ("read-error-at", &self.read_error_at),
            ("write-error-at", &self.write_error_at),
        ] {
            for range in ranges {
                parts.push(format!("{key}={}+{}", range.start, range.end - range.start));
            }
        }
        if let Some(ops) = self.gone_after_ops {
            parts.push(format!("gone-after={ops}"));
        }
        if let Some(path) = &self.gone_file {
            parts.push(format!("gone-file={}", path.display()));
        }
        if let Some(path) = &self.file {
            parts.push(format!("file={}", path.display()));
        }
        parts.push(format!("seed={}", self.seed));
        write!(f, "{}", parts.join(","))
    }
}

/// `backend`, failing as `spec` says if there is one.
pub fn with_faults(backend: Box<dyn Backend>, spec: Option<FaultSpec>) -> Box<dyn Backend> {
    match spec {
        Some(spec) => Box::new(FaultyBackend::new(backend, Some(spec))),
        None => backend,
    }
}

/// The switches of a faulty device, shared with whoever injects at run time (a test).
#[derive(Debug)]
pub struct FaultControl {
    spec: RwLock<Option<FaultSpec>>,
    gone: AtomicBool,
    operations: AtomicU64,
    injected: AtomicU64,
}

impl FaultControl {
    /// Injects `spec` from now on (`None`: no more faults; a device already gone stays gone).
    pub fn set(&self, spec: Option<FaultSpec>) {
        *self.spec.write().unwrap_or_else(|e| e.into_inner()) = spec;
    }

    /// The device is gone from now on: every operation fails.
    pub fn disappear(&self) {
        self.gone.store(true, Ordering::SeqCst);
    }

    /// Faults injected so far (errors, short writes and delays).
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::Relaxed)
    }
}

/// What an operation is, for choosing its fault.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Operation {
    Read,
    Write,
    Flush,
}

/// What the draw decided for one operation.
enum Fault {
    None,
    Error,
    ShortWrite,
}

/// Any backend, failing as its [`FaultSpec`] says.
pub struct FaultyBackend<B> {
    inner: B,
    control: Arc<FaultControl>,
}

impl<B: Backend> FaultyBackend<B> {
    /// `inner`, with `spec`'s faults (none for `None`, until set through the control).
    pub fn new(inner: B, spec: Option<FaultSpec>) -> FaultyBackend<B> {
        FaultyBackend {
            inner,
            control: Arc::new(FaultControl {
                spec: RwLock::new(spec),
                gone: AtomicBool::new(false),
                operations: AtomicU64::new(0),
                injected: AtomicU64::new(0),
            }),
        }
    }

    /// The switches, for injecting at run time.
    pub fn control(&self) -> Arc<FaultControl> {
        Arc::clone(&self.control)
    }

    /// Decides the fault of one operation on `range`, sleeping first if a delay is drawn.
    fn check(&self, operation: Operation, range: Range<u64>) -> io::Result<Fault> {
        let control = &self.control;
        let count = control.operations.fetch_add(1, Ordering::Relaxed);
        let spec = control.spec.read().unwrap_or_else(|e| e.into_inner());
        let gone = control.gone.load(Ordering::Relaxed)
            || spec.as_ref().is_some_and(|spec| {
                spec.gone_after_ops.is_some_and(|ops| count >= ops)
                    || spec.gone_file.as_ref().is_some_and(|path| path.exists())
            });
        if gone {
            control.gone.store(true, Ordering::Relaxed);
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} is gone (injected fault)", self.inner.describe()),
            ));
        }
        let Some(spec) = spec.as_ref() else {
            return Ok(Fault::None);
        };
        if spec.file.as_ref().is_some_and(|path| !path.exists()) {
            return Ok(Fault::None);
        }
        // Each operation draws from its own point of one seeded sequence, so no lock is held.
        let draw = |salt: u64| {
            let bits = mix64(spec.seed ^ mix64(count.wrapping_mul(4).wrapping_add(salt)));
            (bits >> 11) as f64 / (1u64 << 53) as f64
        };
        if let Some((probability, duration)) = spec.delay {
            if draw(0) < probability {
                control.injected.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(duration);
            }
        }
        let overlaps = |ranges: &[Range<u64>]| {
            ranges
                .iter()
                .any(|chosen| chosen.start < range.end && range.start < chosen.end)
        };
        let fault = match operation {
            Operation::Read if overlaps(&spec.read_error_at) || draw(1) < spec.read_error => {
                Fault::Error
            }
            Operation::Write if overlaps(&spec.write_error_at) || draw(1) < spec.write_error => {
                Fault::Error
            }
            Operation::Write if draw(2) < spec.short_write => Fault::ShortWrite,
            Operation::Flush if draw(1) < spec.flush_error => Fault::Error,
            _ => Fault::None,
        };
        if !matches!(fault, Fault::None) {
            control.injected.fetch_add(1, Ordering::Relaxed);
        }
        Ok(fault)
    }

    fn injected_error(&self, what: &str, range: Range<u64>) -> io::Error {
        io::Error::other(format!(
            "{} failed to {what} {} bytes at byte {} (injected fault)",
            self.inner.describe(),
            range.end - range.start,
            range.start
        ))
    }

    fn write_with(
        &self,
        offset: u64,
        data: &[u8],
        write: impl Fn(&B, u64, &[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        let range = offset..offset.saturating_add(data.len() as u64);
        match self.check(Operation::Write, range.clone())? {
            Fault::None => write(&self.inner, offset, data),
            Fault::Error => Err(self.injected_error("write", range)),
            Fault::ShortWrite => {
                write(&self.inner, offset, &data[..data.len() / 2])?;
                Err(self.injected_error("write all of", range))
            }
        }
    }

    fn flush_with(
        &self,
        range: Range<u64>,
        flush: impl Fn(&B) -> io::Result<()>,
    ) -> io::Result<()> {
        match self.check(Operation::Flush, range.clone())? {
            Fault::None => flush(&self.inner),
            _ => Err(self.injected_error("make durable", range)),
        }
    }
}

impl<B: Backend> Backend for FaultyBackend<B> {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let range = offset..offset.saturating_add(buf.len() as u64);
        match self.check(Operation::Read, range.clone())? {
            Fault::None => self.inner.read_at(offset, buf),
            _ => Err(self.injected_error("read", range)),
        }
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.write_with(offset, data, |inner, offset, data| {
            inner.write_at(offset, data)
        })
    }

    fn write_streaming(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.write_with(offset, data, |inner, offset, data| {
            inner.write_streaming(offset, data)
        })
    }

    fn persist(&self, offset: u64, len: u64) -> io::Result<()> {
        self.flush_with(offset..offset.saturating_add(len), |inner| {
            inner.persist(offset, len)
        })
    }

    fn flush(&self) -> io::Result<()> {
        self.flush_with(0..self.size_bytes(), Backend::flush)
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.check(Operation::Write, offset..offset.saturating_add(len))?;
        self.inner.discard(offset, len)
    }

    fn persist_is_cheap(&self) -> bool {
        self.inner.persist_is_cheap()
    }

    fn is_persistent(&self) -> bool {
        self.inner.is_persistent()
    }

    fn may_block(&self) -> bool {
        self.inner.may_block()
    }

    fn writes_at_once(&self) -> bool {
        self.inner.writes_at_once()
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}

#[cfg(test)]
mod tests {
    use super::super::RamBackend;
    use super::*;

    fn faulty(spec: &str) -> FaultyBackend<RamBackend> {
        FaultyBackend::new(
            RamBackend::new(1 << 20).unwrap(),
            Some(spec.parse().unwrap()),
        )
    }

    #[test]
    fn specs_parse_print_and_parse_back() {
        let text = "read-error=1%,write-error=0.5,flush-error=0.25,short-write=0.125,\
                    delay=0.5@2ms,read-error-at=4k+512,write-error-at=1m+4k,gone-after=9,\
                    gone-file=/tmp/g,file=/tmp/f,seed=3";
        let spec: FaultSpec = text.parse().unwrap();
        assert_eq!(spec.read_error, 0.01);
        assert_eq!(spec.delay, Some((0.5, Duration::from_millis(2))));
        assert_eq!(spec.read_error_at, vec![4096..4608]);
        assert_eq!(spec.write_error_at, vec![1 << 20..(1 << 20) + 4096]);
        assert_eq!(spec.gone_after_ops, Some(9));
        assert_eq!(spec.to_string().parse::<FaultSpec>().unwrap(), spec);
        assert_eq!(FaultSpec::parse_optional(" none ").unwrap(), None);
    }

    #[test]
    fn bad_specs_say_what_was_expected() {
        for (text, expected) in [
            (
                "read-error=2",
                "fault read-error=2: expected a probability from 0 to 1",
            ),
            (
                "read-error",
                "fault \"read-error\" in \"read-error\": expected none or",
            ),
            ("explode=1", "unknown fault \"explode\""),
            ("delay=1%", "fault delay=1%: expected RATE@DURATION"),
            ("delay=1%@2h", "fault delay=1%@2h: expected a duration"),
            (
                "read-error-at=4k",
                "fault read-error-at=4k: expected OFFSET+LEN",
            ),
            (
                "gone-after=-1",
                "fault gone-after=-1: expected a whole number",
            ),
        ] {
            let error = text.parse::<FaultSpec>().unwrap_err().to_string();
            assert!(error.starts_with(expected), "{text}: {error}");
            assert!(!error.contains('\n'), "{error}");
        }
    }

    #[test]
    fn chosen_ranges_fail_and_others_do_not() {
        let device = faulty("read-error-at=8k+4k,write-error-at=0+512");
        let mut buf = vec![0; 4096];
        device.read_at(0, &mut buf).unwrap();
        device.read_at(12 * 1024, &mut buf).unwrap();
        let error = device.read_at(10 * 1024, &mut buf).unwrap_err();
        assert!(
            error.to_string().contains("read 4096 bytes at byte 10240"),
            "{error}"
        );
        assert!(device.write_at(511, b"x").is_err());
        device.write_at(512, b"x").unwrap();
        assert_eq!(device.control().injected(), 2);
    }

    #[test]
    fn random_errors_come_at_their_rate_and_repeat_with_the_seed() {
        let failures = |seed: u64| {
            let device = faulty(&format!("read-error=10%,seed={seed}"));
            let mut buf = [0; 512];
            (0..10_000)
                .map(|i| device.read_at(i % 1000 * 512, &mut buf).is_err())
                .collect::<Vec<bool>>()
        };
        let first = failures(1);
        let count = first.iter().filter(|&&failed| failed).count();
        assert!(
            (850..1150).contains(&count),
            "{count} of 10,000 reads failed at 10%"
        );
        assert_eq!(failures(1), first);
        assert_ne!(failures(2), first);
    }

    #[test]
    fn a_short_write_stores_its_first_half() {
        let device = faulty("short-write=1");
        let error = device.write_at(0, &[7; 1024]).unwrap_err();
        assert!(
            error.to_string().contains("write all of 1024 bytes"),
            "{error}"
        );
        let control = device.control();
        control.set(None);
        let mut back = [0; 1024];
        device.read_at(0, &mut back).unwrap();
        assert_eq!(back[..512], [7; 512]);
        assert_eq!(back[512..], [0; 512]);
    }

    #[test]
    fn flushes_fail_and_persists_with_them() {
        let device = faulty("flush-error=1");
        assert!(device.flush().is_err());
        assert!(device.persist(0, 64).is_err());
        assert!(device.write_persisted(0, b"abc").is_err());
        device.write_at(0, b"abc").unwrap();
    }

    #[test]
    fn a_device_gone_stays_gone() {
        let device = faulty("gone-after=3");
        let mut buf = [0; 8];
        for _ in 0..3 {
            device.read_at(0, &mut buf).unwrap();
        }
        let error = device.read_at(0, &mut buf).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
        assert!(error.to_string().contains("is gone"), "{error}");
        device.control().set(None);
        assert!(
            device.write_at(0, &buf).is_err(),
            "a device gone stays gone"
        );
        assert!(device.flush().is_err());

        let device = faulty("seed=1");
        device.control().disappear();
        assert!(device.read_at(0, &mut buf).is_err());
    }

    #[test]
    fn faults_wait_for_their_file() {
        let dir = tempfile::tempdir().unwrap();
        let trigger = dir.path().join("inject");
        let gone = dir.path().join("gone");
        let device = faulty(&format!(
            "read-error=1,file={},gone-file={}",
            trigger.display(),
            gone.display()
        ));
        let mut buf = [0; 8];
        device.read_at(0, &mut buf).unwrap();
        std::fs::write(&trigger, b"").unwrap();
        assert!(device.read_at(0, &mut buf).is_err());
        std::fs::remove_file(&trigger).unwrap();
        device.read_at(0, &mut buf).unwrap();
        std::fs::write(&gone, b"").unwrap();
        assert_eq!(
            device.read_at(0, &mut buf).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        std::fs::remove_file(&gone).unwrap();
        assert!(device.read_at(0, &mut buf).is_err(), "gone for good");
    }

    #[test]
    fn delays_are_slept() {
        let device = faulty("delay=1@5ms");
        let start = std::time::Instant::now();
        device.read_at(0, &mut [0; 8]).unwrap();
        assert!(start.elapsed() >= Duration::from_millis(5));
        assert_eq!(device.control().injected(), 1);
    }

    #[test]
    fn out_of_range_stays_invalid_input() {
        let device = faulty("seed=0");
        let error = device.read_at(u64::MAX, &mut [0; 8]).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
    }
}
