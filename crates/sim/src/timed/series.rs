//! Measurements over virtual time, in a bounded number of buckets: when a run outlasts them,
//! neighbouring buckets merge and the bucket width doubles, so a run of any length charts in at
//! most [`MAX_BUCKETS`] points without knowing its length in advance.

use serde::Serialize;

/// Most buckets a series keeps.
pub const MAX_BUCKETS: usize = 256;

/// Initial bucket width: fine enough for runs of a few milliseconds of virtual time.
const FIRST_WIDTH_NS: u64 = 10_000;

/// Sums per time bucket for one run.
#[derive(Clone, Debug)]
pub struct Series {
    width_ns: u64,
    start_ns: u64,
    /// The bucket last used and where it ends: calls come in time order, so most land in it.
    current: usize,
    current_end_ns: u64,
    devices: usize,
    /// Requests answered, per bucket.
    answers: Vec<Answers>,
    /// Bytes submitted to each device, read then written, per bucket:
    /// `[bucket * devices + device]`.
    bytes: Vec<[u64; 2]>,
}

/// One bucket's answers (kept together: each answer updates all three).
#[derive(Clone, Copy, Debug, Default)]
struct Answers {
    replies: u64,
    hits: u64,
    latency_sum_ns: u64,
}

impl Series {
    /// An empty series starting at `start_ns` for `devices` devices.
    pub fn new(start_ns: u64, devices: usize) -> Series {
        Series {
            width_ns: FIRST_WIDTH_NS,
            start_ns,
            current: 0,
            current_end_ns: 0,
            devices,
            answers: Vec::new(),
            bytes: Vec::new(),
        }
    }

    /// Counts a request answered at `now_ns` after `latency_ns`.
    #[inline]
    pub fn reply(&mut self, now_ns: u64, latency_ns: u64, hit: bool) {
        let bucket = self.bucket(now_ns);
        let answers = &mut self.answers[bucket];
        answers.replies += 1;
        answers.hits += u64::from(hit);
        answers.latency_sum_ns += latency_ns;
    }

    /// Counts `bytes` read (`write` false) or written on `device` at `now_ns`.
    #[inline]
    pub fn transfer(&mut self, now_ns: u64, device: usize, write: bool, bytes: u64) {
        let bucket = self.bucket(now_ns);
        self.bytes[bucket * self.devices + device][usize::from(write)] += bytes;
    }

    /// Bytes read and written on `device` over the whole series.
    pub fn device_bytes(&self, device: usize) -> [u64; 2] {
        self.bytes
            .iter()
            .skip(device)
            .step_by(self.devices.max(1))
            .fold([0, 0], |[read, written], cell| {
                [read + cell[0], written + cell[1]]
            })
    }

    #[inline]
    fn bucket(&mut self, now_ns: u64) -> usize {
        if now_ns < self.current_end_ns && now_ns >= self.current_end_ns - self.width_ns {
            return self.current;
        }
        self.locate(now_ns)
    }

    #[cold]
    fn locate(&mut self, now_ns: u64) -> usize {
        let mut bucket = (now_ns.saturating_sub(self.start_ns) / self.width_ns) as usize;
        while bucket >= MAX_BUCKETS {
            self.merge_pairs();
            bucket = (now_ns.saturating_sub(self.start_ns) / self.width_ns) as usize;
        }
        if bucket >= self.answers.len() {
            self.answers.resize(bucket + 1, Answers::default());
            self.bytes.resize((bucket + 1) * self.devices, [0; 2]);
        }
        self.current = bucket;
        self.current_end_ns = self.start_ns + (bucket as u64 + 1) * self.width_ns;
        bucket
    }

    fn merge_pairs(&mut self) {
        self.width_ns *= 2;
        merge(&mut self.answers, 1, |a, b| Answers {
            replies: a.replies + b.replies,
            hits: a.hits + b.hits,
            latency_sum_ns: a.latency_sum_ns + b.latency_sum_ns,
        });
        merge(&mut self.bytes, self.devices, |a, b| {
            [a[0] + b[0], a[1] + b[1]]
        });
    }

    /// Rates per bucket, ending at `end_ns` (the last bucket is usually partial and is scaled
    /// by its covered width).
    pub fn finish(&self, end_ns: u64, device_names: &[String]) -> TimeSeries {
        let buckets = self.answers.len();
        let mut series = TimeSeries {
            interval_s: self.width_ns as f64 / 1e9,
            time_s: Vec::with_capacity(buckets),
            throughput_ops: Vec::with_capacity(buckets),
            mean_latency_us: Vec::with_capacity(buckets),
            hit_ratio: Vec::with_capacity(buckets),
            devices: device_names
                .iter()
                .map(|name| DeviceSeries {
                    name: name.clone(),
                    read_bytes_per_s: Vec::with_capacity(buckets),
                    write_bytes_per_s: Vec::with_capacity(buckets),
                })
                .collect(),
        };
        for bucket in 0..buckets {
            let begin = self.start_ns + bucket as u64 * self.width_ns;
            let covered_ns = (begin + self.width_ns).min(end_ns.max(begin + 1)) - begin;
            let seconds = covered_ns as f64 / 1e9;
            let Answers {
                replies,
                hits,
                latency_sum_ns,
            } = self.answers[bucket];
            series.time_s.push((begin - self.start_ns) as f64 / 1e9);
            series.throughput_ops.push(replies as f64 / seconds);
            series.mean_latency_us.push(if replies == 0 {
                0.0
            } else {
                latency_sum_ns as f64 / replies as f64 / 1e3
            });
            series.hit_ratio.push(if replies == 0 {
                0.0
            } else {
                hits as f64 / replies as f64
            });
            for (device, out) in series.devices.iter_mut().enumerate() {
                let [read, written] = self.bytes[bucket * self.devices + device];
                out.read_bytes_per_s.push(read as f64 / seconds);
                out.write_bytes_per_s.push(written as f64 / seconds);
            }
        }
        series
    }
}

/// Adds bucket pairs (groups of `stride` cells) together with `add`, halving the length.
fn merge<T: Copy + Default>(cells: &mut Vec<T>, stride: usize, add: impl Fn(T, T) -> T) {
    let buckets = cells.len() / stride;
    for bucket in 0..buckets.div_ceil(2) {
        for cell in 0..stride {
            let left = 2 * bucket * stride + cell;
            let right = left + stride;
            let sum = add(cells[left], cells.get(right).copied().unwrap_or_default());
            cells[bucket * stride + cell] = sum;
        }
    }
    cells.truncate(buckets.div_ceil(2) * stride);
}

/// A run's measurements over time, one value per interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimeSeries {
    /// Width of each interval, seconds of virtual time.
    pub interval_s: f64,
    /// Start of each interval since measuring began, seconds.
    pub time_s: Vec<f64>,
    pub throughput_ops: Vec<f64>,
    pub mean_latency_us: Vec<f64>,
    pub hit_ratio: Vec<f64>,
    pub devices: Vec<DeviceSeries>,
}

/// One device's bandwidth over time.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceSeries {
    pub name: String,
    pub read_bytes_per_s: Vec<f64>,
    pub write_bytes_per_s: Vec<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_runs_merge_buckets_and_keep_totals() {
        let mut series = Series::new(1_000, 2);
        let mut expected_bytes = 0;
        for i in 0..10_000u64 {
            let now = 1_000 + i * 7_919;
            series.reply(now, 50, i % 3 == 0);
            series.transfer(now, 1, true, 4096);
            expected_bytes += 4096;
        }
        assert!(series.answers.len() <= MAX_BUCKETS);
        assert_eq!(
            series.answers.iter().map(|a| a.replies).sum::<u64>(),
            10_000
        );
        assert_eq!(series.answers.iter().map(|a| a.hits).sum::<u64>(), 3_334);
        assert_eq!(series.device_bytes(1), [0, expected_bytes]);
        // Device 0 got nothing.
        assert_eq!(series.device_bytes(0), [0, 0]);
        let end = 1_000 + 9_999 * 7_919 + 1;
        let out = series.finish(end, &["a".into(), "b".into()]);
        let total: f64 = out
            .throughput_ops
            .iter()
            .zip(&out.time_s)
            .map(|(rate, start)| rate * (out.interval_s.min(end as f64 / 1e9 - start)))
            .sum();
        assert!((total - 10_000.0).abs() < 1.0, "{total}");
        assert!(out.mean_latency_us.iter().all(|&l| l == 0.05));
    }
}
