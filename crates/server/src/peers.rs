//! Connections per peer (docs/reliability.md, "Limits on what a client can make a server
//! hold"): one address may hold at most so many of a listener's connections at once, so that
//! one client cannot take every slot of a server, an export or a tenant. A slot is a value
//! ([`PeerSlot`]) the connection holds and gives back when dropped. Unix-socket clients have
//! no address and are not counted: who may connect there is the socket file's permissions'
//! business.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// How many connections each peer holds now, and how many it may.
#[derive(Debug)]
pub struct PeerCounts {
    limit: usize,
    counts: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection's place in its peer's count.
#[derive(Debug)]
pub struct PeerSlot {
    counts: Arc<PeerCounts>,
    ip: IpAddr,
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

    /// A slot for a connection from `ip`: `Ok(None)` for a peer without an address, `Err`
    /// with the limit when the peer holds that many already.
    pub fn admit(self: &Arc<Self>, ip: Option<IpAddr>) -> Result<Option<PeerSlot>, usize> {
        let Some(ip) = ip else {
            return Ok(None);
        };
        let mut counts = self.lock();
        let count = counts.entry(ip).or_insert(0);
        if *count >= self.limit {
            return Err(self.limit);
        }
        *count += 1;
        Ok(Some(PeerSlot {
            counts: Arc::clone(self),
            ip,
        }))
    }

    /// Connections `ip` holds now.
    pub fn held_by(&self, ip: IpAddr) -> usize {
        self.lock().get(&ip).copied().unwrap_or(0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
        self.counts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock();
        let count = counts.get_mut(&self.ip).expect("a slot's peer is counted");
        *count -= 1;
        // Peers that hold nothing are forgotten, so the map holds only connected peers.
        if *count == 0 {
            counts.remove(&self.ip);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_holds_at_most_its_limit_and_others_are_not_affected() {
        let counts = PeerCounts::new(2);
        let (one, two): (IpAddr, IpAddr) =
            ("127.0.0.2".parse().unwrap(), "127.0.0.1".parse().unwrap());
        let first = counts.admit(Some(one)).unwrap().unwrap();
        let _second = counts.admit(Some(one)).unwrap().unwrap();
        assert_eq!(counts.admit(Some(one)).unwrap_err(), 2);
        assert!(counts.admit(Some(two)).unwrap().is_some());
        assert_eq!(counts.held_by(one), 2);
        drop(first);
        assert_eq!(counts.held_by(one), 1);
        assert!(counts.admit(Some(one)).unwrap().is_some());
    }

    #[test]
    fn peers_without_an_address_are_not_counted_and_gone_peers_forgotten() {
        let counts = PeerCounts::new(1);
        for _ in 0..3 {
            assert!(counts.admit(None).unwrap().is_none());
        }
        let ip: IpAddr = "::1".parse().unwrap();
        drop(counts.admit(Some(ip)).unwrap());
        assert!(counts.lock().is_empty());
    }
}
