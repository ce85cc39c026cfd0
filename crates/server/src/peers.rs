//! Connections per peer (docs/reliability.md, "Limits on what a client can make a server
//! hold"): one client may hold at most so many of a listener's connections at once, so that it
//! cannot take every slot of a server, an export or a tenant. A client is its IP address (an
//! IPv4 address mapped into IPv6 counts as the IPv4 one) or, on a Unix socket, the user it runs
//! as. A slot is a value ([`PeerSlot`]) the connection holds and gives back when dropped.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Who a connection comes from.
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

/// How many connections each peer holds now, and how many it may.
#[derive(Debug)]
pub struct PeerCounts {
    limit: usize,
    counts: Mutex<HashMap<Peer, usize>>,
}

/// One connection's place in its peer's count.
#[derive(Debug)]
pub struct PeerSlot {
    counts: Arc<PeerCounts>,
    peer: Peer,
}

impl PeerCounts {
    /// At most `limit` connections per peer.
    pub fn new(limit: usize) -> Arc<PeerCounts> {
        assert!(limit > 0, "a peer may hold at least one connection");
        Arc::new(PeerCounts {
            limit,
            counts: Mutex::new(HashMap::new()),
        })
    }

    /// A slot for a connection from `peer`; `None` when it holds the limit already.
    pub fn admit(self: &Arc<Self>, peer: Peer) -> Option<PeerSlot> {
        let mut counts = self.lock();
        let count = counts.entry(peer).or_insert(0);
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(PeerSlot {
            counts: Arc::clone(self),
            peer,
        })
    }

    /// Connections `peer` holds now.
    pub fn held_by(&self, peer: Peer) -> usize {
        self.lock().get(&peer).copied().unwrap_or(0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Peer, usize>> {
        self.counts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock();
        let count = counts
            .get_mut(&self.peer)
            .expect("a slot's peer is counted");
        *count -= 1;
        // Peers that hold nothing are forgotten, so the map holds only connected peers.
        if *count == 0 {
            counts.remove(&self.peer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_holds_at_most_its_limit_and_others_are_not_affected() {
        let counts = PeerCounts::new(2);
        let one = Peer::ip("127.0.0.2".parse().unwrap());
        let two = Peer::ip("127.0.0.1".parse().unwrap());
        let first = counts.admit(one).unwrap();
        let _second = counts.admit(one).unwrap();
        assert!(counts.admit(one).is_none());
        assert!(counts.admit(two).is_some());
        assert!(counts.admit(Peer::Uid(0)).is_some());
        assert_eq!(counts.held_by(one), 2);
        drop(first);
        assert_eq!(counts.held_by(one), 1);
        assert!(counts.admit(one).is_some());
    }

    #[test]
    fn an_ipv4_address_mapped_into_ipv6_is_the_ipv4_peer_and_gone_peers_are_forgotten() {
        let counts = PeerCounts::new(1);
        let v4 = Peer::ip("10.1.2.3".parse().unwrap());
        let mapped = Peer::ip("::ffff:10.1.2.3".parse().unwrap());
        assert_eq!(v4, mapped);
        let slot = counts.admit(v4).unwrap();
        assert!(counts.admit(mapped).is_none());
        drop(slot);
        assert!(counts.lock().is_empty());
    }

    #[test]
    fn a_unix_socket_client_is_its_user() {
        let (one, _two) = std::os::unix::net::UnixStream::pair().unwrap();
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        assert_eq!(Peer::of_unix(&one), Peer::Uid(uid));
    }
}
