//! Storage paced like a device preset, access by access (docs/architecture.md, "The device
//! layer"): the data moves at memory speed, then each read, write or persist is held until the
//! shared [`Throttle`] says the device would have completed it. A block stack whose every media
//! access matters (the BTT's data, flog and map writes, each persisted before the next) sits on
//! one of these, so the stack pays what the preset charges for each.

use std::io;
use std::sync::Arc;
use std::time::Instant;

use super::{wait_until, Backend, Throttle};
use crate::model::IoKind;

/// `inner`, each access paced by `throttle`, on a clock that starts when it is made.
pub struct PacedBackend<B> {
    inner: B,
    throttle: Arc<Throttle>,
}

impl<B: Backend> PacedBackend<B> {
    pub fn new(inner: B, throttle: Arc<Throttle>) -> PacedBackend<B> {
        PacedBackend { inner, throttle }
    }

    /// Holds the caller until an access that started at `start` would have completed.
    fn pace(&self, start: Instant, kind: IoKind, offset: u64, bytes: usize) {
        let bytes = u32::try_from(bytes).unwrap_or(u32::MAX);
        wait_until(self.throttle.complete_at(start, kind, offset, bytes));
    }
}

impl<B: Backend> Backend for PacedBackend<B> {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let start = Instant::now();
        self.inner.read_at(offset, buf)?;
        self.pace(start, IoKind::Read, offset, buf.len());
        Ok(())
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let start = Instant::now();
        self.inner.write_at(offset, data)?;
        self.pace(start, IoKind::Write, offset, data.len());
        Ok(())
    }

    fn write_streaming(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let start = Instant::now();
        self.inner.write_streaming(offset, data)?;
        self.pace(start, IoKind::Write, offset, data.len());
        Ok(())
    }

    fn persist(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner.persist(offset, len)
    }

    fn flush(&self) -> io::Result<()> {
        self.inner.flush()
    }

    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner.discard(offset, len)
    }

    fn persist_is_cheap(&self) -> bool {
        self.inner.persist_is_cheap()
    }

    fn is_persistent(&self) -> bool {
        self.inner.is_persistent()
    }

    fn may_block(&self) -> bool {
        // A paced access waits on the device's model.
        true
    }

    fn describe(&self) -> String {
        format!("{} (paced)", self.inner.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::RamBackend;
    use crate::presets::preset;
    use std::time::Duration;

    #[test]
    fn every_access_takes_the_presets_time() {
        let throttle = Arc::new(Throttle::new(&preset("optane-ssd").unwrap()));
        let paced = PacedBackend::new(RamBackend::new(1 << 20).unwrap(), throttle);
        let start = Instant::now();
        for block in 0..10u64 {
            paced.write_at(block * 4096, &[7u8; 4096]).unwrap();
        }
        // An Optane SSD write takes about 10 us (seed 000 Table 3.2).
        assert!(
            start.elapsed() >= Duration::from_micros(50),
            "{:?}",
            start.elapsed()
        );
        let mut back = [0u8; 4096];
        paced.read_at(9 * 4096, &mut back).unwrap();
        assert_eq!(back, [7u8; 4096]);
        assert!(paced.describe().ends_with("(paced)"));
    }
}
