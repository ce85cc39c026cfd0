//! `loadgen kv --verify`: every value read is checked against what the run wrote. Each set
//! writes a value that names its key and version (in its first 32 bytes, as hex) followed by
//! bytes drawn from both, so a value is recognisable wherever it turns up; the [`Oracle`] keeps
//! each key's last acknowledged state and lets no two requests of one key be outstanding at
//! once, so that the state a reply must match is exact. A reply is wrong when it
//!
//! - returns a value whose bytes are not the key's latest version (stale, torn, another key's);
//! - misses a key that holds a value (the server must have room for the keyspace: a cache that
//!   evicts nothing loses nothing);
//! - finds a value, or deletes one, where the last acknowledged request deleted it, or where
//!   the run never wrote (the keys of `--miss-ratio`).

use crate::reply::Reply;

/// The bytes of a value that name its key and version.
pub(crate) const NAMED_BYTES: usize = 32;
/// No value: the key was deleted, or was never written.
const ABSENT: u64 = u64::MAX;
/// Not known: before the run wrote the key, or after a request on it failed.
const UNKNOWN: u64 = u64::MAX - 1;
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// The FNV-1a hash of `bytes` continued from `state` ([`FNV_OFFSET`] to start): replies are
/// hashed as they arrive, in pieces.
pub(crate) fn digest(state: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(state, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME)
    })
}

/// The hash of a whole value.
pub(crate) fn digest_of(bytes: &[u8]) -> u64 {
    digest(FNV_OFFSET, bytes)
}

/// The start of a digest over a reply's value.
pub(crate) const DIGEST_START: u64 = FNV_OFFSET;

/// Appends the `bytes`-long value of version `version` of key `key` (`bytes` is at least
/// [`NAMED_BYTES`]).
pub(crate) fn append_value(key: u64, version: u64, bytes: usize, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(format!("{key:016x}{version:016x}").as_bytes());
    // SplitMix64 from the key and version: printable letters, eight per draw.
    let mut state = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ version;
    while out.len() < start + bytes {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        for shift in 0..8 {
            if out.len() == start + bytes {
                break;
            }
            out.push(b'a' + ((z >> (shift * 8)) as u8) % 26);
        }
    }
    out.truncate(start + bytes);
}

/// The key and version a value's first bytes name, if they name any.
fn named(prefix: &[u8]) -> Option<(u64, u64)> {
    let text = std::str::from_utf8(prefix.get(..NAMED_BYTES)?).ok()?;
    let key = u64::from_str_radix(&text[..16], 16).ok()?;
    let version = u64::from_str_radix(&text[16..], 16).ok()?;
    Some((key, version))
}

/// What the server must hold for each key, and which keys have a request outstanding.
#[derive(Debug)]
pub(crate) struct Oracle {
    /// Per key: the version last acknowledged, [`ABSENT`] or [`UNKNOWN`].
    state: Vec<u64>,
    busy: Vec<bool>,
    next_version: u64,
    value_bytes: usize,
    scratch: Vec<u8>,
    /// Values read and found right.
    pub(crate) verified: u64,
}

impl Oracle {
    /// Nothing known yet about `keys` keys whose values are `value_bytes` long.
    pub(crate) fn new(keys: u64, value_bytes: usize) -> Oracle {
        let keys = usize::try_from(keys).expect("a verified keyspace fits in memory");
        Oracle {
            state: vec![UNKNOWN; keys],
            busy: vec![false; keys],
            next_version: 1,
            value_bytes,
            scratch: Vec::with_capacity(value_bytes),
            verified: 0,
        }
    }

    /// The first key `draw` gives that has no request outstanding, now marked outstanding;
    /// after many busy draws, the next free key after the last one (the run has more keys than
    /// requests outstanding, so there is one).
    pub(crate) fn claim(&mut self, mut draw: impl FnMut() -> u64) -> u64 {
        let mut key = 0;
        for _ in 0..64 {
            key = draw();
            if !self.busy[key as usize] {
                self.busy[key as usize] = true;
                return key;
            }
        }
        let keys = self.busy.len();
        let free = (1..keys)
            .map(|step| (key as usize + step) % keys)
            .find(|&index| !self.busy[index])
            .expect("more keys than requests outstanding");
        self.busy[free] = true;
        free as u64
    }

    /// Marks `key`, claimed and then not used, free again.
    pub(crate) fn release(&mut self, key: u64) {
        self.busy[key as usize] = false;
    }

    /// A new version number for a set.
    pub(crate) fn next_version(&mut self) -> u64 {
        let version = self.next_version;
        self.next_version += 1;
        version
    }

    /// Accounts for the reply to a set of `version` of `key`.
    pub(crate) fn set_done(&mut self, key: u64, version: u64, reply: &Reply) -> Result<(), String> {
        let index = key as usize;
        self.busy[index] = false;
        if *reply == Reply::Stored {
            self.state[index] = version;
            Ok(())
        } else {
            self.state[index] = UNKNOWN;
            Err(format!("set of key #{key} got {}", describe(reply)))
        }
    }

    /// Accounts for the reply to a delete of `key`.
    pub(crate) fn delete_done(&mut self, key: u64, reply: &Reply) -> Result<(), String> {
        let index = key as usize;
        self.busy[index] = false;
        let held = std::mem::replace(&mut self.state[index], ABSENT);
        match (reply, held) {
            (Reply::Line(line), UNKNOWN) if line == "DELETED" || line == "NOT_FOUND" => Ok(()),
            (Reply::Line(line), ABSENT) if line == "NOT_FOUND" => Ok(()),
            (Reply::Line(line), ABSENT) if line == "DELETED" => Err(format!(
                "delete of key #{key} found a value, though it was deleted and not set since"
            )),
            (Reply::Line(line), _) if line == "DELETED" => Ok(()),
            (Reply::Line(line), version) if line == "NOT_FOUND" => Err(format!(
                "delete of key #{key} found nothing, though version {version} was stored"
            )),
            _ => {
                self.state[index] = UNKNOWN;
                Err(format!("delete of key #{key} got {}", describe(reply)))
            }
        }
    }

    /// Accounts for the reply to a get of `key` that the run writes (`written`) or never
    /// writes (the keys of `--miss-ratio`).
    pub(crate) fn get_done(
        &mut self,
        key: u64,
        written: bool,
        reply: &Reply,
    ) -> Result<(), String> {
        let Reply::Values {
            count,
            first_bytes,
            first,
        } = reply
        else {
            if written {
                self.busy[key as usize] = false;
            }
            return Err(format!("get of key #{key} got {}", describe(reply)));
        };
        if !written {
            return match count {
                0 => Ok(()),
                _ => Err(format!(
                    "get of key #{key}, which the run never sets, found a value"
                )),
            };
        }
        let index = key as usize;
        self.busy[index] = false;
        let held = self.state[index];
        if *count == 0 {
            return match held {
                ABSENT | UNKNOWN => Ok(()),
                version => Err(format!(
                    "get of key #{key} missed, though version {version} was stored"
                )),
            };
        }
        let Some(first) = first else {
            return Err(format!("get of key #{key}: the value was not captured"));
        };
        if *count != 1 || *first_bytes != self.value_bytes as u64 {
            return Err(format!(
                "get of key #{key} returned {count} value(s), the first of {first_bytes} bytes, \
                 where sets write one of {}",
                self.value_bytes
            ));
        }
        let found = named(&first.prefix);
        let expected = match held {
            ABSENT => {
                return Err(format!(
                    "get of key #{key} found {}, though the key was deleted and not set since",
                    describe_found(found, key, None)
                ))
            }
            // Before the run wrote the key: any whole value of it, which from now on it holds.
            UNKNOWN => match found {
                Some((owner, version)) if owner == key => version,
                _ => {
                    return Err(format!(
                        "get of key #{key} found {}",
                        describe_found(found, key, None)
                    ))
                }
            },
            version => version,
        };
        self.scratch.clear();
        append_value(key, expected, self.value_bytes, &mut self.scratch);
        if digest_of(&self.scratch) != first.digest {
            return Err(format!(
                "get of key #{key} found {} where version {expected} was stored",
                describe_found(found, key, Some(expected))
            ));
        }
        self.state[index] = expected;
        self.verified += 1;
        Ok(())
    }
}

/// What a value read for `key` is, for a message: which key and version it names, measured
/// against the version `expected` when one was.
fn describe_found(found: Option<(u64, u64)>, key: u64, expected: Option<u64>) -> String {
    match found {
        Some((owner, version)) if owner == key && Some(version) == expected => {
            format!("version {version} with wrong bytes (torn or corrupted)")
        }
        Some((owner, version)) if owner == key => format!("version {version}"),
        Some((owner, version)) => format!("version {version} of key #{owner}"),
        None => "bytes the run never wrote".to_string(),
    }
}

/// A reply as a message names it.
fn describe(reply: &Reply) -> String {
    match reply {
        Reply::Stored => "STORED".to_string(),
        Reply::Values { count, .. } => format!("{count} VALUE block(s) and END"),
        Reply::Line(line) => line.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::Captured;

    const VALUE_BYTES: usize = 100;

    /// The reply of a get that found version `version` of `key`.
    fn hit(key: u64, version: u64) -> Reply {
        let mut value = Vec::new();
        append_value(key, version, VALUE_BYTES, &mut value);
        Reply::Values {
            count: 1,
            first_bytes: VALUE_BYTES as u64,
            first: Some(Captured {
                prefix: value[..NAMED_BYTES].try_into().unwrap(),
                digest: digest_of(&value),
            }),
        }
    }

    fn miss() -> Reply {
        Reply::Values {
            count: 0,
            first_bytes: 0,
            first: None,
        }
    }

    /// An oracle whose key 1 holds version `version`, acknowledged.
    fn holding(version: u64) -> Oracle {
        let mut oracle = Oracle::new(10, VALUE_BYTES);
        assert_eq!(oracle.claim(|| 1), 1);
        oracle.set_done(1, version, &Reply::Stored).unwrap();
        oracle
    }

    #[test]
    fn values_name_their_key_and_version_and_differ_between_versions() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        append_value(7, 3, 64, &mut a);
        append_value(7, 4, 64, &mut b);
        assert_eq!(a.len(), 64);
        assert_eq!(named(&a), Some((7, 3)));
        assert_eq!(named(&b), Some((7, 4)));
        assert_ne!(a[NAMED_BYTES..], b[NAMED_BYTES..]);
        assert!(a.iter().all(|byte| byte.is_ascii_alphanumeric()));
    }

    #[test]
    fn the_latest_version_passes_and_stale_foreign_torn_or_lost_values_fail() {
        let mut oracle = holding(5);
        oracle.claim(|| 1);
        assert_eq!(oracle.get_done(1, true, &hit(1, 5)), Ok(()));
        assert_eq!(oracle.verified, 1);
        let failures = [
            (hit(1, 4), "found version 4 where version 5"),
            (hit(2, 5), "version 5 of key #2"),
            (miss(), "missed, though version 5 was stored"),
        ];
        for (reply, expected) in failures {
            oracle.claim(|| 1);
            let error = oracle.get_done(1, true, &reply).unwrap_err();
            assert!(error.contains(expected), "{error}");
        }
        let Reply::Values {
            first: Some(mut torn),
            ..
        } = hit(1, 5)
        else {
            unreachable!()
        };
        torn.digest ^= 1;
        let torn = Reply::Values {
            count: 1,
            first_bytes: VALUE_BYTES as u64,
            first: Some(torn),
        };
        oracle.claim(|| 1);
        let error = oracle.get_done(1, true, &torn).unwrap_err();
        assert!(error.contains("wrong bytes"), "{error}");
    }

    #[test]
    fn deleted_and_never_written_keys_must_miss() {
        let mut oracle = holding(5);
        oracle.claim(|| 1);
        assert_eq!(
            oracle.delete_done(1, &Reply::Line("DELETED".into())),
            Ok(())
        );
        oracle.claim(|| 1);
        assert_eq!(oracle.get_done(1, true, &miss()), Ok(()));
        oracle.claim(|| 1);
        let error = oracle.get_done(1, true, &hit(1, 5)).unwrap_err();
        assert!(error.contains("deleted and not set since"), "{error}");
        oracle.claim(|| 1);
        assert!(oracle
            .delete_done(1, &Reply::Line("DELETED".into()))
            .is_err());
        // A key the run never writes.
        assert_eq!(oracle.get_done(3, false, &miss()), Ok(()));
        assert!(oracle.get_done(3, false, &hit(3, 1)).is_err());
        // A delete that found nothing where a value was stored lost it.
        let mut oracle = holding(2);
        oracle.claim(|| 1);
        let error = oracle
            .delete_done(1, &Reply::Line("NOT_FOUND".into()))
            .unwrap_err();
        assert!(error.contains("version 2 was stored"), "{error}");
    }

    #[test]
    fn a_key_is_claimed_by_one_request_at_a_time() {
        let mut oracle = Oracle::new(4, VALUE_BYTES);
        assert_eq!(oracle.claim(|| 2), 2);
        // Key 2 is busy: the draws that keep naming it fall back to the next free key.
        assert_eq!(oracle.claim(|| 2), 3);
        assert_eq!(oracle.claim(|| 2), 0);
        oracle.release(2);
        assert_eq!(oracle.claim(|| 2), 2);
        // An unknown key takes whichever whole version of its own it holds, then keeps to it.
        let mut fresh = Oracle::new(4, VALUE_BYTES);
        fresh.claim(|| 0);
        assert_eq!(fresh.get_done(0, true, &hit(0, 9)), Ok(()));
        fresh.claim(|| 0);
        assert!(fresh.get_done(0, true, &hit(0, 8)).is_err());
    }
}
