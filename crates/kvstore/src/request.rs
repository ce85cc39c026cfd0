//! What a tenant's store is asked and what it answers: memcached's commands, text and meta
//! protocol alike, as plain values. The server translates to and from its wire formats; the
//! store carries them out (`store.rs`).

use crate::expiry::Expiry;

/// What a read asks for besides the value (memcached's gat and the meta get flags).
#[derive(Clone, Copy, Debug, Default)]
pub struct Lookup {
    /// Set a new expiry (gat, mg `T`).
    pub touch: Option<Expiry>,
    /// Leave access time and "fetched" alone (mg `u`).
    pub no_bump: bool,
    /// On a miss, create an empty item with this expiry and hand this client the right to
    /// fill it (mg `N`).
    pub vivify: Option<Expiry>,
    /// Hand out the right to recache when fewer seconds than this are left (mg `R`).
    pub recache_below_secs: Option<u32>,
    /// The CAS unique an item created by `vivify` gets instead of a fresh one (mg `E`).
    pub new_cas: Option<u64>,
}

/// An item found by `Store::get`; its value is read with `Store::read_value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    pub client_flags: u32,
    pub cas: u64,
    pub value_len: u32,
    /// When it expires.
    pub expiry: Expiry,
    /// Seconds since it was last accessed, before this access.
    pub idle_secs: u32,
    /// It had been fetched before this access.
    pub hit_before: bool,
    /// It is marked stale (mg `X`).
    pub stale: bool,
    /// This client won the right to recache it (mg `W`).
    pub win: bool,
    /// Another client already won that right (mg `Z`).
    pub already_won: bool,
    /// Where its record lies: segment, offset, key length.
    pub(crate) location: (u32, u32, u16),
}

/// How a write treats what is already there (memcached's storage commands).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Set,
    /// Only if absent.
    Add,
    /// Only if present.
    Replace,
    /// Only if present; keeps its flags and expiry.
    Append,
    /// Only if present; keeps its flags and expiry.
    Prepend,
}

/// A write.
#[derive(Clone, Copy, Debug)]
pub struct Write<'a> {
    pub key: &'a [u8],
    pub value: &'a [u8],
    pub client_flags: u32,
    pub expiry: Expiry,
    pub mode: Mode,
    /// Store only if the item's CAS unique is this (memcached's cas, ms `C`).
    pub compare_cas: Option<u64>,
    /// With `compare_cas`: a CAS older than the item's stores the value marked stale instead
    /// of failing (ms `I`).
    pub invalidate: bool,
    /// The CAS unique to give the item instead of a fresh one (ms `E`).
    pub new_cas: Option<u64>,
}

impl<'a> Write<'a> {
    /// A plain set of `key` to `value`: no client flags, no expiry, no CAS condition.
    pub fn set(key: &'a [u8], value: &'a [u8]) -> Write<'a> {
        Write {
            key,
            value,
            client_flags: 0,
            expiry: Expiry::NEVER,
            mode: Mode::Set,
            compare_cas: None,
            invalidate: false,
            new_cas: None,
        }
    }
}

/// The result of a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored {
    /// Stored with this CAS unique.
    Stored(u64),
    /// The mode's condition failed (NOT_STORED).
    NotStored,
    /// The CAS unique differs (EXISTS).
    Exists,
    /// A CAS write found no item (NOT_FOUND).
    NotFound,
    /// Over the item size limit.
    TooLarge,
}

/// How a delete goes (delete, md); the default deletes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Delete {
    /// Only if the item's CAS unique is this (md `C`).
    pub compare_cas: Option<u64>,
    /// Mark the item stale with a new CAS unique, and this expiry if given, instead (md `I`,
    /// `T`).
    pub invalidate: Option<Option<Expiry>>,
    /// Keep the item with an empty value instead (md `x`).
    pub drop_value: bool,
    /// The CAS unique a kept item gets instead of a fresh one (md `E`).
    pub new_cas: Option<u64>,
}

/// The result of a delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deleted {
    Deleted,
    NotFound,
    Exists,
}

/// An increment or decrement (memcached's incr/decr, the meta `ma`).
#[derive(Clone, Copy, Debug)]
pub struct Arithmetic {
    pub incr: bool,
    pub delta: u64,
    pub compare_cas: Option<u64>,
    /// On a miss, create the item with this expiry and initial value (ma `N`, `J`).
    pub vivify: Option<(Expiry, u64)>,
    /// Set a new expiry (ma `T`).
    pub touch: Option<Expiry>,
    /// The CAS unique the item gets instead of a fresh one (ma `E`).
    pub new_cas: Option<u64>,
}

/// The result of an increment or decrement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    /// The new value, CAS unique and expiry.
    Value {
        value: u64,
        cas: u64,
        expiry: Expiry,
    },
    NotFound,
    NonNumeric,
    Exists,
}
