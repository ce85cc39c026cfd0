//! What one tenant's clients may take of the server (docs/reliability.md, "Limits on what a
//! client can make a server hold"): places by peer, so that one client cannot take all of a
//! tenant's `max_connections`, and one budget for the bytes its connections' buffers hold
//! beyond their first [`BASELINE_BYTES`] each.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// What each connection's input and output buffers may hold without drawing on the budget:
/// the 64 KiB each starts with.
pub const BASELINE_BYTES: usize = 64 << 10;

/// Who a connection comes from, for `max_connections_per_peer`: an IP address (an IPv4
/// address mapped into IPv6 counts as the IPv4 one), or the user a Unix-socket client runs as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Peer {
    Ip(IpAddr),
    Uid(u32),
    /// A Unix-socket client whose credentials could not be read: counted as one peer.
    Unknown,
}

impl Peer {
    pub fn ip(address: IpAddr) -> Peer {
        Peer::Ip(address.to_canonical())
    }

    /// The user at the other end of a Unix socket (`SO_PEERCRED`).
    pub fn of_unix(stream: &std::os::unix::net::UnixStream) -> Peer {
        use std::os::fd::AsRawFd;
        let mut credentials = libc::ucred {
            pid: 0,
            uid: 0,
            gid: 0,
        };
        let mut length = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `length` bytes into `credentials`, on a socket the
        // stream owns.
        let done = unsafe {
            libc::getsockopt(
                stream.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                (&mut credentials as *mut libc::ucred).cast(),
                &mut length,
            )
        };
        match done {
            0 => Peer::Uid(credentials.uid),
            _ => Peer::Unknown,
        }
    }
}

/// The connections a tenant serves now, by peer.
#[derive(Debug, Default)]
pub struct PeerCounts {
    counts: Mutex<HashMap<Peer, usize>>,
}

impl PeerCounts {
    /// Takes a place for `peer` if it has fewer than `cap`; whether it did.
    pub fn admit(&self, peer: Peer, cap: usize) -> bool {
        let mut counts = self.lock();
        let count = counts.entry(peer).or_insert(0);
        if *count >= cap {
            return false;
        }
        *count += 1;
        true
    }

    /// Gives back a place [`admit`](PeerCounts::admit) took.
    pub fn release(&self, peer: Peer) {
        let mut counts = self.lock();
        if let Some(count) = counts.get_mut(&peer) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&peer);
            }
        }
    }

    /// The connections `peer` has now.
    pub fn of(&self, peer: Peer) -> usize {
        self.lock().get(&peer).copied().unwrap_or(0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Peer, usize>> {
        self.counts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The bytes a tenant's connections hold in their buffers beyond [`BASELINE_BYTES`] each, and
/// what they may.
#[derive(Debug)]
pub struct BufferBudget {
    held: AtomicUsize,
    limit: usize,
}

impl BufferBudget {
    pub fn new(limit: usize) -> BufferBudget {
        BufferBudget {
            held: AtomicUsize::new(0),
            limit,
        }
    }

    /// Whether the connections hold all they may, or more.
    pub fn exhausted(&self) -> bool {
        self.held.load(Ordering::Relaxed) >= self.limit
    }

    /// What they hold now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// Notes that one connection's count went from `before` to `after`.
    pub fn change(&self, before: usize, after: usize) {
        if after > before {
            self.held.fetch_add(after - before, Ordering::Relaxed);
        } else if before > after {
            self.held.fetch_sub(before - after, Ordering::Relaxed);
        }
    }
}

/// What a connection with these buffers counts against the budget.
pub fn beyond_baseline(input_bytes: usize, output_bytes: usize) -> usize {
    input_bytes.saturating_sub(BASELINE_BYTES) + output_bytes.saturating_sub(BASELINE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;

    #[test]
    fn places_are_counted_by_peer_and_given_back() {
        let counts = PeerCounts::default();
        let one = Peer::ip("127.0.0.2".parse().unwrap());
        let mapped = Peer::ip(IpAddr::V6("::ffff:127.0.0.2".parse::<Ipv6Addr>().unwrap()));
        assert_eq!(one, mapped);
        assert!(counts.admit(one, 2));
        assert!(counts.admit(mapped, 2));
        assert!(!counts.admit(one, 2));
        assert!(counts.admit(Peer::Uid(0), 2));
        counts.release(one);
        assert_eq!(counts.of(one), 1);
        assert!(counts.admit(one, 2));
        counts.release(one);
        counts.release(one);
        assert_eq!(counts.of(one), 0);
        assert!(counts.lock().get(&one).is_none());
    }

    #[test]
    fn the_budget_counts_what_is_beyond_the_baseline() {
        let budget = BufferBudget::new(1 << 20);
        assert_eq!(beyond_baseline(BASELINE_BYTES, 100), 0);
        let big = beyond_baseline(BASELINE_BYTES, BASELINE_BYTES + (1 << 20));
        assert_eq!(big, 1 << 20);
        budget.change(0, big);
        assert!(budget.exhausted());
        budget.change(big, 10);
        assert!(!budget.exhausted());
        assert_eq!(budget.held(), 10);
    }
}
