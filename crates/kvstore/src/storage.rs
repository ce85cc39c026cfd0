//! What a server needs of a tenant's store: memcached's commands in `request`'s terms, and the
//! counters. The server's protocol code sees only this, as Pelikan keeps protocol, storage and
//! server apart; [`Store`] implements it, and a store regulated on a shared device wraps one.

use std::io;
use std::time::Instant;

use crate::expiry::Expiry;
use crate::request::{Arithmetic, Counted, Delete, Deleted, Found, Lookup, Stored, Write};
use crate::stats::StoreStats;
use crate::store::Store;

/// A tenant's store as the protocol uses it; every method is [`Store`]'s of the same name.
pub trait Storage {
    /// Looks `key` up (get, gets, gat, mg).
    fn get(&mut self, now_secs: u32, key: &[u8], lookup: &Lookup) -> io::Result<Option<Found>>;
    /// Appends the value of `found` (from [`get`](Storage::get), no write since) to `out`.
    fn read_value(&mut self, found: &Found, out: &mut Vec<u8>) -> io::Result<()>;
    /// Stores an item (set, add, replace, append, prepend, cas, ms).
    fn store(&mut self, now_secs: u32, write: &Write) -> io::Result<Stored>;
    /// Deletes `key` (delete, md), or marks it stale or empties it.
    fn delete(&mut self, now_secs: u32, key: &[u8], how: &Delete) -> io::Result<Deleted>;
    /// Drops `key` if it is there, counting no delete.
    fn discard(&mut self, now_secs: u32, key: &[u8]) -> io::Result<()>;
    /// Increments or decrements a decimal value (incr, decr, ma).
    fn arithmetic(
        &mut self,
        now_secs: u32,
        key: &[u8],
        request: &Arithmetic,
    ) -> io::Result<Counted>;
    /// Sets a new expiry on `key` (touch); false when it is not there.
    fn touch(&mut self, now_secs: u32, key: &[u8], expiry: Expiry) -> io::Result<bool>;
    /// Drops every item now, or once `delay_secs` have passed (flush_all).
    fn flush_all(&mut self, now_secs: u32, delay_secs: u32) -> io::Result<()>;
    /// The counters, with the current item count and bytes.
    fn stats(&self) -> StoreStats;
    /// When the device would have completed the accesses made since the last call.
    fn take_device_deadline(&mut self) -> Option<Instant>;
}

impl Storage for Store {
    fn get(&mut self, now_secs: u32, key: &[u8], lookup: &Lookup) -> io::Result<Option<Found>> {
        Store::get(self, now_secs, key, lookup)
    }

    fn read_value(&mut self, found: &Found, out: &mut Vec<u8>) -> io::Result<()> {
        Store::read_value(self, found, out)
    }

    fn store(&mut self, now_secs: u32, write: &Write) -> io::Result<Stored> {
        Store::store(self, now_secs, write)
    }

    fn delete(&mut self, now_secs: u32, key: &[u8], how: &Delete) -> io::Result<Deleted> {
        Store::delete(self, now_secs, key, how)
    }

    fn discard(&mut self, now_secs: u32, key: &[u8]) -> io::Result<()> {
        Store::discard(self, now_secs, key)
    }

    fn arithmetic(
        &mut self,
        now_secs: u32,
        key: &[u8],
        request: &Arithmetic,
    ) -> io::Result<Counted> {
        Store::arithmetic(self, now_secs, key, request)
    }

    fn touch(&mut self, now_secs: u32, key: &[u8], expiry: Expiry) -> io::Result<bool> {
        Store::touch(self, now_secs, key, expiry)
    }

    fn flush_all(&mut self, now_secs: u32, delay_secs: u32) -> io::Result<()> {
        Store::flush_all(self, now_secs, delay_secs)
    }

    fn stats(&self) -> StoreStats {
        Store::stats(self)
    }

    fn take_device_deadline(&mut self) -> Option<Instant> {
        Store::take_device_deadline(self)
    }
}
