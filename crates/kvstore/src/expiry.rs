//! Expiry times as memcached reads them (memcached doc/protocol.txt, "Expiration times"):
//! 0 never expires; up to 30 days is relative to now; more is an absolute Unix time; a
//! negative time has already passed.

/// Seconds beyond which an expiration time is an absolute Unix time.
pub const RELATIVE_LIMIT_SECS: i64 = 60 * 60 * 24 * 30;

/// When an item expires, in Unix seconds: `NEVER`, or a time (possibly already past).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Expiry(u32);

impl Expiry {
    /// Never expires.
    pub const NEVER: Expiry = Expiry(0);

    /// The expiry a client's `exptime` means at `now_secs` (Unix seconds).
    pub fn from_exptime(exptime: i64, now_secs: u32) -> Expiry {
        match exptime {
            0 => Expiry::NEVER,
            // Already expired: the earliest representable time that is not NEVER.
            i64::MIN..=-1 => Expiry(1),
            1..=RELATIVE_LIMIT_SECS => Expiry::at(i64::from(now_secs) + exptime),
            _ => Expiry::at(exptime),
        }
    }

    /// Expires at Unix time `secs` (clamped to what 32 bits hold).
    pub fn at(secs: i64) -> Expiry {
        Expiry(secs.clamp(1, i64::from(u32::MAX)) as u32)
    }

    /// The stored form: 0 for never.
    pub fn to_raw(self) -> u32 {
        self.0
    }

    /// From the stored form.
    pub fn from_raw(raw: u32) -> Expiry {
        Expiry(raw)
    }

    /// True once `now_secs` has reached the expiry time.
    pub fn has_passed(self, now_secs: u32) -> bool {
        self.0 != 0 && self.0 <= now_secs
    }

    /// Seconds left at `now_secs`: `None` for never (the meta protocol's `t-1`).
    pub fn remaining_secs(self, now_secs: u32) -> Option<u32> {
        (self.0 != 0).then(|| self.0.saturating_sub(now_secs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_exptime_as_memcached_does() {
        let now = 1_700_000_000;
        // zero never expires
        assert_eq!(Expiry::from_exptime(0, now), Expiry::NEVER);
        assert!(!Expiry::NEVER.has_passed(u32::MAX));
        // small values are relative
        assert_eq!(Expiry::from_exptime(10, now).remaining_secs(now), Some(10));
        // 30 days is still relative, one second more is absolute (and long past)
        let month = RELATIVE_LIMIT_SECS;
        assert!(!Expiry::from_exptime(month, now).has_passed(now));
        assert!(Expiry::from_exptime(month + 1, now).has_passed(now));
        // an absolute time in the future
        assert_eq!(
            Expiry::from_exptime(i64::from(now) + 100, now).remaining_secs(now),
            Some(100)
        );
        // negative means already expired
        assert!(Expiry::from_exptime(-1, now).has_passed(now));
    }
}
