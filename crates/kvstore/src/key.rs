//! A key as the DRAM index holds it: the bytes inside the index entry when they are short, so
//! a lookup compares the key without a cache miss on a separate allocation (the index keeps
//! keys in DRAM, seed 000 §5.2.5; memcached keys are at most 250 bytes, most far shorter).

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// Longest key held inside the entry; this makes [`Key`] 40 bytes.
pub(crate) const INLINE_KEY_BYTES: usize = 38;

/// A key's bytes, inline up to [`INLINE_KEY_BYTES`], on the heap beyond.
#[derive(Clone)]
pub(crate) enum Key {
    Inline {
        len: u8,
        bytes: [u8; INLINE_KEY_BYTES],
    },
    Heap(Box<[u8]>),
}

impl Key {
    /// Bytes the key takes outside its index entry.
    pub(crate) fn heap_bytes(key_len: usize) -> usize {
        if key_len > INLINE_KEY_BYTES {
            key_len
        } else {
            0
        }
    }
}

impl From<&[u8]> for Key {
    fn from(key: &[u8]) -> Key {
        if key.len() > INLINE_KEY_BYTES {
            return Key::Heap(key.into());
        }
        let mut bytes = [0; INLINE_KEY_BYTES];
        bytes[..key.len()].copy_from_slice(key);
        Key::Inline {
            len: key.len() as u8,
            bytes,
        }
    }
}

impl Deref for Key {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Key::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Key::Heap(bytes) => bytes,
        }
    }
}

impl Borrow<[u8]> for Key {
    fn borrow(&self) -> &[u8] {
        self
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        **self == **other
    }
}

impl Eq for Key {}

/// Hashes as the bytes do, so a map keyed by `Key` is searched with a `&[u8]`.
impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(formatter, "{:?}", String::from_utf8_lossy(self))
    }
}

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use super::*;

    #[test]
    fn keys_up_to_the_inline_length_stay_inline_and_longer_ones_go_to_the_heap() {
        assert_eq!(std::mem::size_of::<Key>(), 40);
        for len in [0, 1, INLINE_KEY_BYTES, INLINE_KEY_BYTES + 1, 250] {
            let bytes: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            let key = Key::from(&bytes[..]);
            assert_eq!(&*key, &bytes[..]);
            assert_eq!(
                matches!(key, Key::Heap(_)),
                len > INLINE_KEY_BYTES,
                "length {len}"
            );
            assert_eq!(Key::heap_bytes(len) > 0, len > INLINE_KEY_BYTES);
        }
    }

    #[test]
    fn equal_bytes_are_equal_keys_and_hash_alike() {
        let hasher = foldhash::quality::RandomState::default();
        let short = Key::from(&b"abc"[..]);
        assert_eq!(short, Key::from(&b"abc"[..]));
        assert_ne!(short, Key::from(&b"abd"[..]));
        assert_ne!(short, Key::from(&b"ab"[..]));
        assert_eq!(hasher.hash_one(&short), hasher.hash_one(&b"abc"[..]));
    }
}
