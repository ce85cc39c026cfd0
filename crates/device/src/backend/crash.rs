//! Storage of a machine that stops dead (docs/architecture.md, "Testing": crash tests by
//! injection, many iterations, random points): every device of the machine spends one shared budget of
//! operations, and once it is spent each operation fails, as if the power had gone. The test
//! then crashes the persistent memory underneath ([`PmemBackend::crash`](super::PmemBackend),
//! which drops or tears what was never persisted) and opens the code under test again on it.
//! One wrapper for the volume's and the key-value store's crash tests.

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
            return Err(io::Error::other("the machine crashed (injected)"));
        }
        Ok(())
    }
}

/// A backend whose every operation spends one of its machine's budget.
pub struct CrashAfter<B> {
    inner: B,
    budget: CrashBudget,
}

impl<B: Backend> CrashAfter<B> {
    /// `inner`, failing every operation once `budget` is spent.
    pub fn new(inner: B, budget: CrashBudget) -> CrashAfter<B> {
        CrashAfter { inner, budget }
    }
}

impl<B: Backend> Backend for CrashAfter<B> {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.budget.spend()?;
        self.inner.read_at(offset, buf)
    }
    fn append_to(&self, offset: u64, len: usize, out: &mut Vec<u8>) -> io::Result<()> {
        self.budget.spend()?;
        self.inner.append_to(offset, len, out)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.budget.spend()?;
        self.inner.write_at(offset, data)
    }
    fn write_streaming(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.budget.spend()?;
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
        self.budget.spend()?;
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
        self.budget.spend()?;
        self.inner.read_at_once(offset, buf)
    }
    fn writes_at_once(&self) -> bool {
        self.inner.writes_at_once()
    }
    fn describe(&self) -> String {
        format!("{} (crash injection)", self.inner.describe())
    }
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
}
