//! Sequential cutoff (Open CAS "seq-cutoff"): tells requests that continue a long sequential
//! stream, so the volume can send them around the cache.

use crate::config::{CutoffPolicy, SeqCutoffConfig};

/// Streams followed at once, as OCF keeps a few per queue.
const STREAMS: usize = 8;

#[derive(Clone, Copy, Debug, Default)]
struct Stream {
    /// Byte just past the stream's last request.
    end: u64,
    /// Bytes the stream has covered.
    bytes: u64,
    /// When it was last continued (a request count), to replace the stalest.
    last_used: u64,
}

/// The streams seen lately.
pub struct SequentialCutoff {
    config: SeqCutoffConfig,
    streams: [Stream; STREAMS],
    requests: u64,
}

impl SequentialCutoff {
    pub fn new(config: &SeqCutoffConfig) -> SequentialCutoff {
        SequentialCutoff {
            config: config.clone(),
            streams: [Stream::default(); STREAMS],
            requests: 0,
        }
    }

    /// Notes a request of `len` bytes at `offset`; true when it should bypass the cache.
    /// `cache_full` is whether the cache has no free slot left.
    pub fn bypass(&mut self, offset: u64, len: u64, cache_full: bool) -> bool {
        self.requests += 1;
        let applies = match self.config.policy {
            CutoffPolicy::Never => return false,
            CutoffPolicy::Always => true,
            CutoffPolicy::Full => cache_full,
        };
        let end = offset.saturating_add(len);
        let stream = match self
            .streams
            .iter()
            .position(|s| s.end == offset && s.bytes > 0)
        {
            Some(index) => {
                self.streams[index].bytes += len;
                index
            }
            None => {
                let stalest = (0..STREAMS)
                    .min_by_key(|&index| self.streams[index].last_used)
                    .expect("streams");
                self.streams[stalest].bytes = len;
                stalest
            }
        };
        self.streams[stream].end = end;
        self.streams[stream].last_used = self.requests;
        applies && self.streams[stream].bytes > self.config.threshold
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cutoff(policy: CutoffPolicy) -> SequentialCutoff {
        SequentialCutoff::new(&SeqCutoffConfig {
            policy,
            threshold: 16 * 1024,
        })
    }

    #[test]
    fn long_streams_bypass_random_requests_do_not() {
        let mut always = cutoff(CutoffPolicy::Always);
        let bypassed: Vec<bool> = (0..6)
            .map(|i| always.bypass(i * 4096, 4096, false))
            .collect();
        assert_eq!(bypassed, [false, false, false, false, true, true]);
        assert!(
            !always.bypass(1 << 30, 4096, false),
            "a new stream starts small"
        );
        assert!(
            always.bypass(6 * 4096, 4096, false),
            "the first stream goes on"
        );
        let mut full = cutoff(CutoffPolicy::Full);
        assert!(!(0..8).any(|i| full.bypass(i * 4096, 4096, false)));
        assert!(full.bypass(8 * 4096, 4096, true));
        let mut never = cutoff(CutoffPolicy::Never);
        assert!(!(0..100).any(|i| never.bypass(i * 4096, 4096, true)));
    }
}
