//! What a device is, as its TOML file says: latencies, bandwidths, granularity, queueing and the
//! effects of seed 000 chapters 2–3 (its "unwritten contract" of Optane SSD, Table 3.1, and the
//! PM characteristics of §1.3 and §5.1.2).

use std::fmt;
use std::path::Path;

use serde::Deserialize;

/// Memory (load/store, byte-addressable) or block (sector I/O) device; informational, and used by
/// front ends to pick a sensible default line size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    Memory,
    #[default]
    Block,
}

/// How one direction (reads or writes) performs.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirectionSpec {
    /// Unloaded (queue depth 1) latency of one access of one granule, in nanoseconds: the
    /// datasheet or paper latency. Zero makes a pure rate cap (FlashSim-style, seed 000 §4.5).
    pub latency_ns: f64,
    /// Peak bandwidth in GB/s (10⁹ bytes per second).
    pub bandwidth_gb_s: f64,
    /// Peak operations per second, whatever their size (seed 000 §3.1.5: the Optane SSD caps at
    /// 575K IOPS, so 1 KiB requests reach only 20% of its bandwidth). Absent: bandwidth alone
    /// limits.
    #[serde(default)]
    pub max_iops: Option<f64>,
}

/// Garbage-collection decline of flash under sustained writes (seed 000 §3.1.7, Rule 7): once
/// the device has absorbed `start_after_gb` of writes, write throughput falls linearly over the
/// next `decline_over_gb` to a floor, lower for random than for sequential writes.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GcSpec {
    /// Writes absorbed at full speed (a trimmed device fills once), in GB.
    pub start_after_gb: f64,
    /// Writes over which throughput falls to the floor, in GB.
    pub decline_over_gb: f64,
    /// Steady random-write throughput as a fraction of the peak.
    pub random_floor: f64,
    /// Steady sequential-write throughput as a fraction of the peak.
    pub sequential_floor: f64,
}

/// A spinning disk's mechanics (Ruemmler and Wilkes, "An introduction to disk drive modeling",
/// IEEE Computer 1994: an access costs a seek, the rotational wait for its sector, then the
/// transfer). An access that starts where the last one ended needs neither: the head is there.
/// With several accesses queued, the drive takes first the one whose sector comes under the
/// head soonest (command queueing): of q independent rotational waits, each uniform over one
/// revolution, the first ends after 1/(q + 1) of a revolution on average. The seek is not
/// shortened: the model keeps FIFO order and charges each access the expected wait of the best
/// of the queue, which is conservative for throughput at depth.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MechanicalSpec {
    /// Spindle speed, revolutions per minute.
    pub rpm: f64,
    /// Average seek of a random read, ns (the data sheet's weighted average of all seeks).
    pub average_seek_read_ns: f64,
    /// Average seek of a random write, ns.
    pub average_seek_write_ns: f64,
}

impl MechanicalSpec {
    /// One revolution, ns.
    pub fn revolution_ns(&self) -> f64 {
        60e9 / self.rpm
    }
}

/// One device's performance model, as loaded from TOML (see `presets/*.toml` for commented
/// examples, each number with its source).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    /// Name used on the command line and in hierarchy configs.
    pub name: String,
    /// One line for `heterarchy device list`.
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub kind: DeviceKind,
    /// Usable capacity in GB; hierarchy configs may not give a tier more.
    #[serde(default)]
    pub capacity_gb: Option<f64>,
    /// Price in dollars per GB, for cost-aware sizing.
    #[serde(default)]
    pub cost_per_gb: Option<f64>,
    /// Access granularity in bytes: a smaller access costs a whole granule (64 B DRAM, 256 B
    /// PM, 4 KiB SSD; seed 000 §5.1.2.3, §3.1.5).
    pub granularity_bytes: u32,
    /// Reads and writes share one queue and one service capacity (Optane SSD: "treating
    /// read/write equally", seed 000 Table 3.2). Otherwise each direction has its own.
    #[serde(default)]
    pub shared_queue: bool,
    /// Independent internal units (channels); an access goes to the channel of its first
    /// byte's interleave unit, `offset / interleave_bytes mod channels`, and each channel has
    /// 1/channels of the capacity.
    #[serde(default = "one")]
    pub channels: u32,
    /// Bytes of one channel before the next takes over (absent: one granule).
    #[serde(default)]
    pub interleave_bytes: Option<u32>,
    /// Extra service time of an access that crosses a granule boundary it did not need to, per
    /// granule of overhang (seed 000 §3.1.6: latency grows linearly with the part past the
    /// boundary).
    #[serde(default)]
    pub misalign_penalty: f64,
    /// Read capacity each written byte takes from readers, in bytes of reading. Only with
    /// separate queues; a shared queue interferes by itself. On PM a write drains through the
    /// same media as reads: it takes what writing it takes, read bandwidth over write bandwidth.
    #[serde(default)]
    pub write_interference: f64,
    /// Writes wait in a buffer and drain to the media this many granules at a time, holding
    /// readers up for the whole drain (absent: each as it comes). The drained capacity is the
    /// same; a reader making one access at a time feels it far more than its bandwidth says
    /// (seed 000 §1.3, §5.1.2.4: beside a single-thread reader, 1 GB/s of writes slows it as
    /// much as 8 GB/s of reads), while a reader filling the device loses only its share
    /// (NyxCache's cost model holds a write-heavy tenant to its share, Fig 5.6).
    #[serde(default)]
    pub write_drain_granules: Option<u32>,
    /// Read capacity each written byte takes from readers when the write is at least
    /// `bulk_write_bytes` long, in bytes of reading; absent, `write_interference` applies to
    /// writes of every size. Table 4.2's Open CAS run on PM, whose 64 KiB installs left its
    /// readers nearly the full read bandwidth, bounds the cost of long writes.
    #[serde(default)]
    pub bulk_write_interference: Option<f64>,
    /// Writes at least this long count as bulk writes (with `bulk_write_interference`).
    #[serde(default)]
    pub bulk_write_bytes: Option<u32>,
    pub read: DirectionSpec,
    pub write: DirectionSpec,
    #[serde(default)]
    pub gc: Option<GcSpec>,
    /// A read that continues a recent read stream completes this many times sooner than a
    /// random one at low queue depth (the controller prefetched it): seed 000 §3.1.2 (Rule 2),
    /// flash "sequential reads can be 7x faster". Only the latency shrinks, not the bandwidth.
    #[serde(default)]
    pub sequential_read_speedup: Option<f64>,
    /// An access that continues a recent access of the same direction inside the same granule
    /// takes this many times its unloaded latency, reads then writes: seed 000 §3.1.3 (Rule 3)
    /// on the Optane SSD, where "sequential 1KB accesses must introduce contention" and cost
    /// "+63% latency for reads and 3.6x for writes" against random ones.
    #[serde(default)]
    pub crowded_factors: Option<[f64; 2]>,
    /// Seek and rotation of a spinning disk: random accesses pay them, sequential runs do not.
    /// With it, `latency_ns` is what a random access of one granule takes at queue depth 1.
    #[serde(default)]
    pub mechanical: Option<MechanicalSpec>,
    /// The CPU's load and store path to a byte-addressable device ([`crate::memory`]).
    #[serde(default)]
    pub memory: Option<MemoryPathSpec>,
}

/// How the CPU reaches a byte-addressable device with loads and stores (seed 000 §5.1.2.1,
/// Table 5.2; see [`crate::memory`] for what each instruction family moves).
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryPathSpec {
    /// The CPU cache line, bytes.
    #[serde(default = "cache_line")]
    pub line_bytes: u32,
    /// The prefetcher completes each 128 B pair of lines.
    #[serde(default)]
    pub adjacent_line_prefetch: bool,
    /// Lines of one access after which the streamer prefetches ahead.
    pub streamer_trigger_lines: u32,
    /// Lines the streamer fetches past an access's end, never past its page.
    pub streamer_ahead_lines: u32,
    /// The page the streamer stays in, bytes.
    #[serde(default = "page")]
    pub page_bytes: u32,
    /// Lines one thread has outstanding at once (its line fill buffers): a load without the
    /// prefetcher fetches this many at a time.
    pub fill_buffer_lines: u32,
    /// Time to post one line to the write queue (non-temporal stores, flushes), ns.
    pub post_ns_per_line: f64,
    /// A non-temporal load's setup before it fetches, ns.
    #[serde(default)]
    pub nt_load_setup_ns: f64,
    /// The CPU's own time per load or store beyond the device's (cache misses on their way to
    /// the memory controller and back), ns.
    #[serde(default)]
    pub cpu_ns: f64,
}

fn cache_line() -> u32 {
    64
}

fn page() -> u32 {
    4096
}

fn one() -> u32 {
    1
}

/// A device file, preset or hierarchy file that cannot be used: where, which key, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceError {
    /// The file, or `preset NAME`.
    pub source: String,
    /// The offending key (`read.bandwidth_gb_s`), or empty when the whole file is at fault.
    pub key: String,
    pub message: String,
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line, whatever the message: toml's own run over several.
        let message = self.message.replace(['\r', '\n'], " ");
        if self.key.is_empty() {
            write!(f, "{}: {message}", self.source)
        } else {
            write!(f, "{}: key `{}`: {message}", self.source, self.key)
        }
    }
}

impl std::error::Error for DeviceError {}

impl DeviceSpec {
    /// Parses and validates a device from TOML text; `source` names it in errors.
    pub fn from_toml(text: &str, source: &str) -> Result<DeviceSpec, DeviceError> {
        let spec: DeviceSpec = toml::from_str(text).map_err(|error| DeviceError {
            source: source.to_string(),
            key: String::new(),
            message: one_line_toml_error(&error, text),
        })?;
        spec.validate(source)?;
        Ok(spec)
    }

    /// Reads, parses and validates a device file.
    pub fn from_file(path: &Path) -> Result<DeviceSpec, DeviceError> {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| DeviceError {
            source: source.clone(),
            key: String::new(),
            message: format!("cannot read: {error}"),
        })?;
        DeviceSpec::from_toml(&text, &source)
    }

    /// Checks every number for sense; the error names the key.
    pub fn validate(&self, source: &str) -> Result<(), DeviceError> {
        let fail = |key: &str, message: String| DeviceError {
            source: source.to_string(),
            key: key.to_string(),
            message,
        };
        if self.name.trim().is_empty() {
            return Err(fail("name", "must not be empty".into()));
        }
        if self.granularity_bytes == 0 {
            return Err(fail("granularity_bytes", "must be at least 1".into()));
        }
        if self.channels == 0 {
            return Err(fail("channels", "must be at least 1".into()));
        }
        if self.interleave_bytes == Some(0) {
            return Err(fail("interleave_bytes", "must be at least 1".into()));
        }
        non_negative(self.misalign_penalty).map_err(|m| fail("misalign_penalty", m))?;
        non_negative(self.write_interference).map_err(|m| fail("write_interference", m))?;
        if self.write_drain_granules == Some(0) {
            return Err(fail("write_drain_granules", "must be at least 1".into()));
        }
        match (self.bulk_write_interference, self.bulk_write_bytes) {
            (Some(interference), Some(bytes)) => {
                non_negative(interference).map_err(|m| fail("bulk_write_interference", m))?;
                if bytes == 0 {
                    return Err(fail("bulk_write_bytes", "must be at least 1".into()));
                }
            }
            (None, None) => {}
            (Some(_), None) => {
                return Err(fail(
                    "bulk_write_bytes",
                    "bulk_write_interference needs bulk_write_bytes".into(),
                ))
            }
            (None, Some(_)) => {
                return Err(fail(
                    "bulk_write_interference",
                    "bulk_write_bytes needs bulk_write_interference".into(),
                ))
            }
        }
        if let Some(capacity) = self.capacity_gb {
            positive(capacity).map_err(|m| fail("capacity_gb", m))?;
        }
        if let Some(cost) = self.cost_per_gb {
            non_negative(cost).map_err(|m| fail("cost_per_gb", m))?;
        }
        for (direction, spec) in [("read", &self.read), ("write", &self.write)] {
            let key = |field: &str| format!("{direction}.{field}");
            non_negative(spec.latency_ns).map_err(|m| fail(&key("latency_ns"), m))?;
            positive(spec.bandwidth_gb_s).map_err(|m| fail(&key("bandwidth_gb_s"), m))?;
            if let Some(iops) = spec.max_iops {
                positive(iops).map_err(|m| fail(&key("max_iops"), m))?;
            }
            let service_ns = self.channel_service_ns(spec, 1);
            if spec.latency_ns > 0.0 && spec.latency_ns < service_ns {
                return Err(fail(
                    &key("latency_ns"),
                    format!(
                        "{} ns is shorter than one granule's service time on one channel \
                         ({service_ns:.1} ns from bandwidth, IOPS and channels)",
                        spec.latency_ns
                    ),
                ));
            }
        }
        if let Some(speedup) = self.sequential_read_speedup {
            if !(speedup.is_finite() && speedup >= 1.0) {
                return Err(fail(
                    "sequential_read_speedup",
                    format!("{speedup} must be at least 1"),
                ));
            }
        }
        if let Some(factors) = self.crowded_factors {
            if factors.iter().any(|f| !(f.is_finite() && *f >= 1.0)) {
                return Err(fail(
                    "crowded_factors",
                    format!("{factors:?}: each must be at least 1"),
                ));
            }
        }
        if let Some(memory) = &self.memory {
            for (key, value) in [
                ("memory.line_bytes", memory.line_bytes),
                ("memory.page_bytes", memory.page_bytes),
                ("memory.fill_buffer_lines", memory.fill_buffer_lines),
            ] {
                if value == 0 {
                    return Err(fail(key, "must be at least 1".into()));
                }
            }
            if memory.page_bytes % memory.line_bytes != 0 {
                return Err(fail(
                    "memory.page_bytes",
                    format!("{} is not a multiple of line_bytes", memory.page_bytes),
                ));
            }
            for (key, value) in [
                ("memory.post_ns_per_line", memory.post_ns_per_line),
                ("memory.nt_load_setup_ns", memory.nt_load_setup_ns),
                ("memory.cpu_ns", memory.cpu_ns),
            ] {
                non_negative(value).map_err(|m| fail(key, m))?;
            }
        }
        if let Some(mechanical) = &self.mechanical {
            positive(mechanical.rpm).map_err(|m| fail("mechanical.rpm", m))?;
            non_negative(mechanical.average_seek_read_ns)
                .map_err(|m| fail("mechanical.average_seek_read_ns", m))?;
            non_negative(mechanical.average_seek_write_ns)
                .map_err(|m| fail("mechanical.average_seek_write_ns", m))?;
        }
        if let Some(gc) = &self.gc {
            non_negative(gc.start_after_gb).map_err(|m| fail("gc.start_after_gb", m))?;
            positive(gc.decline_over_gb).map_err(|m| fail("gc.decline_over_gb", m))?;
            for (key, floor) in [
                ("gc.random_floor", gc.random_floor),
                ("gc.sequential_floor", gc.sequential_floor),
            ] {
                if !(floor > 0.0 && floor <= 1.0) {
                    return Err(fail(key, format!("{floor} is not a fraction in (0, 1]")));
                }
            }
        }
        Ok(())
    }

    /// Time one channel is busy with an aligned access of `granules` granules, in ns: the
    /// slower of the IOPS and bandwidth limits, each shared by the channels.
    pub(crate) fn channel_service_ns(&self, direction: &DirectionSpec, granules: u64) -> f64 {
        let (per_granule_ns, per_access_ns) = self.channel_costs_ns(direction);
        (granules as f64 * per_granule_ns).max(per_access_ns)
    }

    /// One channel's time per granule moved (bandwidth) and per access (IOPS), in ns.
    pub(crate) fn channel_costs_ns(&self, direction: &DirectionSpec) -> (f64, f64) {
        let channels = f64::from(self.channels);
        let per_granule_ns = f64::from(self.granularity_bytes) / direction.bandwidth_gb_s;
        let per_access_ns = direction.max_iops.map_or(0.0, |iops| 1e9 / iops);
        (per_granule_ns * channels, per_access_ns * channels)
    }

    /// Capacity in bytes, when the spec gives one.
    pub fn capacity_bytes(&self) -> Option<u64> {
        self.capacity_gb.map(|gb| (gb * 1e9) as u64)
    }
}

fn non_negative(value: f64) -> Result<(), String> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(format!("{value} must be a finite number ≥ 0"))
    }
}

fn positive(value: f64) -> Result<(), String> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(format!("{value} must be a finite number > 0"))
    }
}

/// The toml crate's message spans several lines with a source excerpt; keep the position and
/// the reason on one line.
fn one_line_toml_error(error: &toml::de::Error, text: &str) -> String {
    let position = error.span().map(|span| {
        let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
        format!("line {line}: ")
    });
    format!("{}{}", position.unwrap_or_default(), error.message().trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
name = "toy"
granularity_bytes = 4096
[read]
latency_ns = 10000
bandwidth_gb_s = 2.5
[write]
latency_ns = 10000
bandwidth_gb_s = 2.3
"#;

    #[test]
    fn minimal_file_gets_defaults() {
        let spec = DeviceSpec::from_toml(MINIMAL, "toy.toml").unwrap();
        assert_eq!(spec.channels, 1);
        assert!(!spec.shared_queue);
        assert_eq!(spec.kind, DeviceKind::Block);
        assert_eq!(spec.gc, None);
    }

    #[test]
    fn negative_bandwidth_names_file_and_key() {
        let text = MINIMAL.replace("bandwidth_gb_s = 2.3", "bandwidth_gb_s = -1");
        let error = DeviceSpec::from_toml(&text, "toy.toml").unwrap_err();
        assert_eq!(error.key, "write.bandwidth_gb_s");
        let line = error.to_string();
        assert!(
            line.starts_with("toy.toml: key `write.bandwidth_gb_s`: -1"),
            "{line}"
        );
        assert!(!line.contains('\n'));
    }

    #[test]
    fn missing_field_and_unknown_key_are_reported_with_line() {
        let text = MINIMAL.replace("granularity_bytes = 4096\n", "");
        let error = DeviceSpec::from_toml(&text, "toy.toml").unwrap_err();
        assert!(error.to_string().contains("granularity_bytes"), "{error}");
        let text = MINIMAL.replace("[write]\n", "[write]\nspeed = 3\n");
        let error = DeviceSpec::from_toml(&text, "toy.toml").unwrap_err();
        let line = error.to_string();
        assert!(line.contains("line 8") && line.contains("speed"), "{line}");
        assert!(!line.contains('\n'));
    }

    #[test]
    fn latency_shorter_than_service_is_rejected() {
        let text = MINIMAL.replace(
            "latency_ns = 10000\nbandwidth_gb_s = 2.5",
            "latency_ns = 100\nbandwidth_gb_s = 2.5",
        );
        let error = DeviceSpec::from_toml(&text, "toy.toml").unwrap_err();
        assert_eq!(error.key, "read.latency_ns");
    }

    #[test]
    fn gc_floor_must_be_a_fraction() {
        let text = format!(
            "{MINIMAL}[gc]\nstart_after_gb = 1000\ndecline_over_gb = 6000\nrandom_floor = 1.5\nsequential_floor = 0.1\n"
        );
        let error = DeviceSpec::from_toml(&text, "toy.toml").unwrap_err();
        assert_eq!(error.key, "gc.random_floor");
    }
}
