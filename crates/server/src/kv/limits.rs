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
/// what they may: half of `client_buffers` for requests arriving, half for answers waiting, so
/// that clients that never read their answers cannot keep others from sending a large value,
/// nor clients that never finish a value keep others from being answered.
#[derive(Debug)]
pub struct BufferBudget {
    input: AtomicUsize,
    output: AtomicUsize,
    /// What each side may hold.
    half: usize,
}

/// One connection's share of a [`BufferBudget`]: what its input and output buffers hold
/// beyond their baseline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Share {
    pub input: usize,
    pub output: usize,
}

impl Share {
    /// The share of buffers of these capacities.
    pub fn of(input_bytes: usize, output_bytes: usize) -> Share {
        Share {
            input: input_bytes.saturating_sub(BASELINE_BYTES),
            output: output_bytes.saturating_sub(BASELINE_BYTES),
        }
    }
}

impl BufferBudget {
    pub fn new(limit: usize) -> BufferBudget {
        BufferBudget {
            input: AtomicUsize::new(0),
            output: AtomicUsize::new(0),
            half: limit / 2,
        }
    }

    /// Whether requests arriving hold all they may, or more.
    pub fn input_spent(&self) -> bool {
        self.input.load(Ordering::Relaxed) >= self.half
    }

    /// Whether answers waiting hold all they may, or more.
    pub fn output_spent(&self) -> bool {
        self.output.load(Ordering::Relaxed) >= self.half
    }

    /// What all the connections hold now.
    pub fn held(&self) -> usize {
        self.input.load(Ordering::Relaxed) + self.output.load(Ordering::Relaxed)
    }

    /// Notes that one connection's share went from `before` to `after`.
    pub fn change(&self, before: Share, after: Share) {
        for (counter, before, after) in [
            (&self.input, before.input, after.input),
            (&self.output, before.output, after.output),
        ] {
            if after > before {
                counter.fetch_add(after - before, Ordering::Relaxed);
            } else if before > after {
                counter.fetch_sub(before - after, Ordering::Relaxed);
            }
        }
    }
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
    fn the_budget_counts_what_is_beyond_the_baseline_by_side() {
        let budget = BufferBudget::new(2 << 20);
        assert_eq!(Share::of(BASELINE_BYTES, 100), Share::default());
        let big = Share::of(BASELINE_BYTES, BASELINE_BYTES + (1 << 20));
        assert_eq!(
            big,
            Share {
                input: 0,
                output: 1 << 20
            }
        );
        budget.change(Share::default(), big);
        assert!(budget.output_spent() && !budget.input_spent());
        let smaller = Share {
            input: 5,
            output: 10,
        };
        budget.change(big, smaller);
        assert!(!budget.output_spent());
        assert_eq!(budget.held(), 15);
    }
}
