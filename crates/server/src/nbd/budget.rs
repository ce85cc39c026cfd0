//! Byte budgets for the NBD server (docs/reliability.md, "Limits on what a client can make a
//! server hold"): what a client can make the server hold is counted in bytes, per connection
//! and for the whole server, from the moment a request's header is read until its answer has
//! left through the socket. A READ is charged its length, a WRITE its payload; TRIM, WRITE
//! ZEROES and FLUSH hold no buffer of their size and are charged nothing.
//!
//! A request is read past its header only once its charge fits both budgets, so a WRITE's
//! payload waits in the client's socket rather than in the server. One small request is always
//! let through on a connection that holds nothing: a client whose neighbour has filled the
//! server's budget still has its 4 KiB reads answered. The server therefore holds at most its
//! budget plus [`SMALL_REQUEST_BYTES`] per connection, and a connection at most its own budget.
//!
//! A charge is a value ([`Charge`]) that travels with the request to the I/O workers and back
//! as its answer, and releases its bytes when dropped: a connection that closes while its
//! requests are with the workers keeps them counted until they finish, so reconnecting frees
//! nothing early.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A request this small (a 4 KiB read, say) goes ahead on a connection that holds nothing,
/// whatever the server's budget says.
pub const SMALL_REQUEST_BYTES: usize = 128 * 1024;

/// The bytes of one budget: how many are held now, and how many may be.
#[derive(Debug)]
struct Pool {
    limit: usize,
    held: AtomicUsize,
}

impl Pool {
    fn new(limit: usize) -> Pool {
        Pool {
            limit,
            held: AtomicUsize::new(0),
        }
    }

    /// Takes `bytes` if they fit (or `always`); false, taking nothing, otherwise.
    fn take(&self, bytes: usize, always: bool) -> bool {
        let before = self.held.fetch_add(bytes, Ordering::AcqRel);
        if always || before + bytes <= self.limit {
            return true;
        }
        self.held.fetch_sub(bytes, Ordering::AcqRel);
        false
    }

    fn give_back(&self, bytes: usize) {
        let before = self.held.fetch_sub(bytes, Ordering::AcqRel);
        assert!(before >= bytes, "a budget gave back more than it held");
    }

    fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }
}

/// The server's budget, shared by every connection of every event loop.
#[derive(Clone, Debug)]
pub struct ServerBudget {
    pool: Arc<Pool>,
    connection_limit: usize,
}

impl ServerBudget {
    /// A server that holds at most `server_bytes` for requests and answers, and each
    /// connection at most `connection_bytes`.
    pub fn new(server_bytes: usize, connection_bytes: usize) -> ServerBudget {
        ServerBudget {
            pool: Arc::new(Pool::new(server_bytes)),
            connection_limit: connection_bytes,
        }
    }

    /// Bytes held now by all connections.
    pub fn held_bytes(&self) -> usize {
        self.pool.held()
    }

    /// The budget of a new connection.
    pub fn connection(&self) -> ConnectionBudget {
        ConnectionBudget {
            server: Arc::clone(&self.pool),
            own: Arc::new(Pool::new(self.connection_limit)),
        }
    }
}

/// Why a request must wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// The connection holds its budget: it goes on when its own answers leave.
    Connection,
    /// The server holds its budget: it goes on when anyone's answers leave.
    Server,
}

/// One connection's budget.
#[derive(Debug)]
pub struct ConnectionBudget {
    server: Arc<Pool>,
    own: Arc<Pool>,
}

impl ConnectionBudget {
    /// Charges `bytes` to this connection and the server, or says which budget is full. A
    /// request that holds nothing else of the connection always fits the connection's budget
    /// (a budget below proto.md's 32 MiB payload limit then still serves every request), and
    /// a small one the server's too.
    pub fn charge(&self, bytes: usize) -> Result<Charge, Wait> {
        if bytes == 0 {
            // A TRIM or FLUSH holds no buffer: it never waits for one.
            return Ok(self.empty());
        }
        let idle = self.own.held() == 0;
        if !self.own.take(bytes, idle) {
            return Err(Wait::Connection);
        }
        if !self
            .server
            .take(bytes, idle && bytes <= SMALL_REQUEST_BYTES)
        {
            self.own.give_back(bytes);
            return Err(Wait::Server);
        }
        Ok(Charge {
            bytes,
            server: Arc::clone(&self.server),
            own: Arc::clone(&self.own),
        })
    }

    /// A charge of nothing, to merge others into.
    pub fn empty(&self) -> Charge {
        Charge {
            bytes: 0,
            server: Arc::clone(&self.server),
            own: Arc::clone(&self.own),
        }
    }

    /// Bytes this connection holds now.
    pub fn held_bytes(&self) -> usize {
        self.own.held()
    }
}

/// Bytes charged to one connection and the server, given back when dropped.
#[derive(Debug)]
pub struct Charge {
    bytes: usize,
    server: Arc<Pool>,
    own: Arc<Pool>,
}

impl Charge {
    /// Takes over `other`'s bytes (of the same connection), to give both back at once.
    pub fn absorb(&mut self, mut other: Charge) {
        assert!(
            Arc::ptr_eq(&self.own, &other.own),
            "a charge absorbed another connection's"
        );
        self.bytes += std::mem::take(&mut other.bytes);
    }

    /// Gives back every byte now, keeping the charge for more.
    pub fn release(&mut self) {
        let bytes = std::mem::take(&mut self.bytes);
        if bytes > 0 {
            self.own.give_back(bytes);
            self.server.give_back(bytes);
        }
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn a_connection_waits_on_its_own_budget_then_goes_on() {
        let server = ServerBudget::new(100 * MIB, 8 * MIB);
        let connection = server.connection();
        let first = connection.charge(6 * MIB).expect("fits");
        assert_eq!(connection.charge(4 * MIB).unwrap_err(), Wait::Connection);
        // Nothing was taken by the refusal.
        assert_eq!(connection.held_bytes(), 6 * MIB);
        assert_eq!(server.held_bytes(), 6 * MIB);
        drop(first);
        assert_eq!(server.held_bytes(), 0);
        let _second = connection
            .charge(4 * MIB)
            .expect("fits once the first is gone");
    }

    #[test]
    fn requests_that_hold_no_buffer_never_wait() {
        let server = ServerBudget::new(MIB, MIB);
        let flooder = server.connection();
        let _held = flooder.charge(MIB).expect("fits");
        let _over = server.connection().charge(4096).expect("the small lane");
        assert_eq!(flooder.charge(0).expect("nothing to hold").bytes(), 0);
        assert_eq!(
            server
                .connection()
                .charge(0)
                .expect("nothing to hold")
                .bytes(),
            0
        );
    }

    #[test]
    fn one_request_over_the_connections_budget_goes_when_it_holds_nothing() {
        let server = ServerBudget::new(100 * MIB, MIB);
        let connection = server.connection();
        let large = connection.charge(32 * MIB).expect("alone, it goes");
        assert_eq!(connection.charge(4096).unwrap_err(), Wait::Connection);
        drop(large);
        assert_eq!(connection.held_bytes(), 0);
    }

    #[test]
    fn a_full_server_still_lets_an_idle_connection_s_small_request_through() {
        let server = ServerBudget::new(16 * MIB, 16 * MIB);
        let flooder = server.connection();
        let _held: Vec<Charge> = (0..16)
            .map(|_| flooder.charge(MIB).expect("fits"))
            .collect();
        let other = server.connection();
        assert_eq!(other.charge(MIB).unwrap_err(), Wait::Server);
        assert_eq!(other.held_bytes(), 0, "the refusal took nothing");
        let small = other
            .charge(4096)
            .expect("a small request of an idle connection");
        // The lane is one request deep.
        assert_eq!(other.charge(4096).unwrap_err(), Wait::Server);
        drop(small);
        assert_eq!(server.held_bytes(), 16 * MIB);
    }

    #[test]
    fn charges_absorbed_are_given_back_together_and_outlive_their_connection() {
        let server = ServerBudget::new(100 * MIB, 100 * MIB);
        let connection = server.connection();
        let mut output = connection.empty();
        output.absorb(connection.charge(3 * MIB).unwrap());
        output.absorb(connection.charge(MIB).unwrap());
        let in_flight = connection.charge(2 * MIB).unwrap();
        assert_eq!(output.bytes(), 4 * MIB);
        output.release();
        assert_eq!(server.held_bytes(), 2 * MIB);
        drop(output);
        drop(connection);
        // A request still with a worker keeps its bytes counted after its connection went.
        assert_eq!(server.held_bytes(), 2 * MIB);
        drop(in_flight);
        assert_eq!(server.held_bytes(), 0);
    }

    #[test]
    #[should_panic(expected = "another connection's")]
    fn a_charge_of_another_connection_cannot_be_absorbed() {
        let server = ServerBudget::new(MIB, MIB);
        let (one, two) = (server.connection(), server.connection());
        one.empty().absorb(two.charge(1).unwrap());
    }
}
