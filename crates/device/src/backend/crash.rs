//! Storage of a machine that stops dead (docs/architecture.md, "Testing": crash tests by
//! injection, many iterations, random points): every device of the machine spends one shared
//! budget, and once it is spent each operation fails, as if the power had gone. The budget counts
//! every operation ([`CrashAfter::new`]: a random point) or only persists and flushes
//! ([`CrashAfter::at_persists`]: the machine stops as the k-th persist is issued, so a test can
//! crash at each persist of a write in turn, the writes before it still unpersisted). The test
//! then crashes the persistent memory underneath ([`PmemBackend::crash`](super::PmemBackend),
//! which drops or tears what was never persisted) and opens the code under test again on it.
//! One wrapper for every crash test: the volume's, the key-value store's, and the PM block
//! device's to come.

use std::io;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use super::Backend;

/// A budget of operations shared by every device of one emulated machine.
#[derive(Clone, Debug, Default)]
pub struct CrashBudget(Arc<AtomicI64>);

impl CrashBudget {
    /// A machine that runs `operations` more device operations, then stops.
    pub fn new(operations: i64) -> CrashBudget {
        CrashBudget(Arc::new(AtomicI64::new(operations)))
    }

    /// Gives the machine `operations` more from now (a restarted machine).
    pub fn set(&self, operations: i64) {
        self.0.store(operations, Ordering::SeqCst);
    }

    /// True once the machine has stopped.
    pub fn is_spent(&self) -> bool {
        self.0.load(Ordering::SeqCst) <= 0
    }

    /// Takes one operation from the budget; an error once there is none left.
    fn spend(&self) -> io::Result<()> {
        if self.0.fetch_sub(1, Ordering::SeqCst) <= 0 {
            return Err(stopped());
        }
        Ok(())
    }

    /// An error once the machine has stopped (an operation was refused: a spent budget goes
    /// below zero), taking nothing from the budget.
    fn check(&self) -> io::Result<()> {
        if self.0.load(Ordering::SeqCst) < 0 {
            return Err(stopped());
        }
        Ok(())
    }
}

fn stopped() -> io::Error {
    io::Error::other("the machine crashed (injected)")
}

/// A backend that spends its machine's budget and fails once it is spent.
pub struct CrashAfter<B> {
    inner: B,
    budget: CrashBudget,
    /// Only persists and flushes spend the budget.
    persists_only: bool,
}

impl<B: Backend> CrashAfter<B> {
    /// `inner`, every operation spending one of `budget`.
    pub fn new(inner: B, budget: CrashBudget) -> CrashAfter<B> {
        CrashAfter {
            inner,
            budget,
            persists_only: false,
        }
    }

    /// `inner`, each persist and flush spending one of `budget`: with a budget of k the k+1-th
    /// persist fails, and everything after it.
    pub fn at_persists(inner: B, budget: CrashBudget) -> CrashAfter<B> {
        CrashAfter {
            inner,
            budget,
            persists_only: true,
        }
    }

    /// What an operation other than a persist takes from the budget.
    fn spend_access(&self) -> io::Result<()> {
        if self.persists_only {
            self.budget.check()
        } else {
            self.budget.spend()
        }
    }
}

impl<B: Backend> Backend for CrashAfter<B> {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.spend_access()?;
        self.inner.read_at(offset, buf)
    }
    fn append_to(&self, offset: u64, len: usize, out: &mut Vec<u8>) -> io::Result<()> {
        self.spend_access()?;
        self.inner.append_to(offset, len, out)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.spend_access()?;
        self.inner.write_at(offset, data)
    }
    fn write_streaming(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.spend_access()?;
        self.inner.write_streaming(offset, data)
    }
    fn persist(&self, offset: u64, len: u64) -> io::Result<()> {
        self.budget.spend()?;
        self.inner.persist(offset, len)
    }
    fn flush(&self) -> io::Result<()> {
        self.budget.spend()?;
        self.inner.flush()
    }
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.spend_access()?;
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
    fn read_at_once(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.spend_access()?;
        self.inner.read_at_once(offset, buf)
    }
    fn writes_at_once(&self) -> bool {
        self.inner.writes_at_once()
    }
    fn describe(&self) -> String {
        format!("{} (crash injection)", self.inner.describe())
    }
}

/// A block that says which block and version it is and whether it is whole: block number,
/// version, a checksum, a pattern from the version. The oracle of every block-device crash test
/// (docs/reliability.md, "Crash campaigns").
pub fn self_describing_block(block: u64, version: u64, bytes: usize) -> Vec<u8> {
    let mut data = vec![0u8; bytes.max(24)];
    data[0..8].copy_from_slice(&block.to_le_bytes());
    data[8..16].copy_from_slice(&version.to_le_bytes());
    for (index, byte) in data[24..].iter_mut().enumerate() {
        *byte = (version as usize * 31 + index) as u8;
    }
    let sum = crate::backend::btt::layout::fletcher64(&data);
    data[16..24].copy_from_slice(&sum.to_le_bytes());
    data
}

/// The version a [`self_describing_block`] says it is, if it is whole and of `block`; all
/// zeroes is version 0 (never written). The error says "torn" or whose block it holds.
pub fn self_described_version(data: &[u8], block: u64) -> Result<u64, String> {
    if data.iter().all(|&byte| byte == 0) {
        return Ok(0);
    }
    if data.len() < 24 {
        return Err(format!("block {block} is torn: {} bytes", data.len()));
    }
    let mut zeroed = data.to_vec();
    zeroed[16..24].fill(0);
    let stored = u64::from_le_bytes(data[16..24].try_into().expect("8 bytes"));
    if crate::backend::btt::layout::fletcher64(&zeroed) != stored {
        return Err(format!("block {block} is torn"));
    }
    let owner = u64::from_le_bytes(data[0..8].try_into().expect("8 bytes"));
    if owner != block {
        return Err(format!("block {block} holds block {owner}'s data"));
    }
    Ok(u64::from_le_bytes(data[8..16].try_into().expect("8 bytes")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::RamBackend;

    #[test]
    fn every_device_of_the_machine_stops_together() {
        let budget = CrashBudget::new(3);
        let a = CrashAfter::new(RamBackend::new(4096).unwrap(), budget.clone());
        let b = CrashAfter::new(RamBackend::new(4096).unwrap(), budget.clone());
        a.write_at(0, b"x").unwrap();
        b.write_at(0, b"y").unwrap();
        let mut byte = [0];
        a.read_at(0, &mut byte).unwrap();
        assert_eq!(&byte, b"x");
        assert!(budget.is_spent());
        assert!(b.read_at(0, &mut byte).is_err());
        assert!(a.flush().is_err());
        budget.set(1);
        b.read_at(0, &mut byte).unwrap();
        assert_eq!(&byte, b"y");
    }

    #[test]
    fn counting_persists_stops_the_machine_at_the_next_one() {
        let budget = CrashBudget::new(1);
        let device = CrashAfter::at_persists(RamBackend::new(4096).unwrap(), budget.clone());
        for _ in 0..10 {
            device.write_at(0, b"x").unwrap();
        }
        device.persist(0, 1).unwrap();
        device.write_at(0, b"y").unwrap();
        // the second persist is where the machine stops, and with it every access
        assert!(device.persist(0, 1).is_err());
        assert!(device.write_at(0, b"z").is_err());
        assert!(device.read_at(0, &mut [0]).is_err());
        assert!(budget.is_spent());
    }
}
