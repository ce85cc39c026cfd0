//! Intrusive doubly-linked lists over a slab of nodes, addressed by `u32` index. One slab can
//! hold the nodes of several lists (ARC's four, S3-FIFO's three), so moving an object between
//! lists never reallocates. Front is the most recently inserted end.

/// The "no node" index.
pub const NIL: u32 = u32::MAX;

/// One cached (or ghost) object and its links, with per-policy data `T`.
#[derive(Clone, Debug)]
pub struct Node<T> {
    pub key: u64,
    pub size: u32,
    prev: u32,
    next: u32,
    pub data: T,
}

impl<T> Node<T> {
    /// This node's object, as an eviction reports it.
    #[inline]
    pub fn evicted(&self) -> crate::eviction::Evicted {
        crate::eviction::Evicted {
            key: self.key,
            size: self.size,
        }
    }

    /// A node in no list.
    fn unlinked(key: u64, size: u32, data: T) -> Node<T> {
        Node {
            key,
            size,
            prev: NIL,
            next: NIL,
            data,
        }
    }
}

/// Storage for nodes; freed slots are reused.
#[derive(Clone, Debug, Default)]
pub struct Slab<T> {
    nodes: Vec<Node<T>>,
    free: Vec<u32>,
}

impl<T> Slab<T> {
    /// An empty slab with room for `capacity` nodes.
    pub fn with_capacity(capacity: usize) -> Slab<T> {
        Slab {
            nodes: Vec::with_capacity(capacity),
            free: Vec::new(),
        }
    }

    /// Stores a new unlinked node and returns its index.
    #[inline]
    pub fn alloc(&mut self, key: u64, size: u32, data: T) -> u32 {
        let node = Node::unlinked(key, size, data);
        if let Some(index) = self.free.pop() {
            self.nodes[index as usize] = node;
            index
        } else {
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        }
    }

    /// Stores an unlinked node at `index`, chosen by the caller (another slab's slot, so that
    /// one index finds an object in both), growing the slab with unlinked copies if needed.
    /// Such a slab never hands out slots itself: do not mix with [`Self::alloc`].
    #[inline]
    pub fn put(&mut self, index: u32, key: u64, size: u32, data: T)
    where
        T: Clone,
    {
        let node = Node::unlinked(key, size, data);
        let index = index as usize;
        if index >= self.nodes.len() {
            self.nodes.resize(index + 1, node.clone());
        }
        self.nodes[index] = node;
    }

    /// Returns a node's slot for reuse; the node must already be unlinked.
    #[inline]
    pub fn release(&mut self, index: u32) {
        self.free.push(index);
    }

    /// The node at `index`.
    #[inline]
    pub fn get(&self, index: u32) -> &Node<T> {
        &self.nodes[index as usize]
    }

    /// The node at `index`, if the slab reaches that far.
    #[inline]
    pub fn try_get(&self, index: u32) -> Option<&Node<T>> {
        self.nodes.get(index as usize)
    }

    /// The node at `index`, mutably.
    #[inline]
    pub fn get_mut(&mut self, index: u32) -> &mut Node<T> {
        &mut self.nodes[index as usize]
    }

    /// The node before `index` in its list (towards the front), or [`NIL`].
    #[inline]
    pub fn prev(&self, index: u32) -> u32 {
        self.nodes[index as usize].prev
    }

    /// Starts loading the nodes before and after `index` in its list (what relinking it
    /// touches; a hint).
    #[inline]
    pub fn prefetch_neighbours(&self, index: u32) {
        for neighbour in [self.prev(index), self.next(index)] {
            if neighbour != NIL {
                super::prefetch::prefetch_read(self.get(neighbour));
            }
        }
    }

    /// The node after `index` in its list (towards the back), or [`NIL`].
    #[inline]
    pub fn next(&self, index: u32) -> u32 {
        self.nodes[index as usize].next
    }
}

/// A list threaded through a [`Slab`], tracking its length and total bytes.
#[derive(Clone, Copy, Debug)]
pub struct List {
    pub head: u32,
    pub tail: u32,
    pub len: usize,
    pub bytes: u64,
}

impl Default for List {
    fn default() -> Self {
        List {
            head: NIL,
            tail: NIL,
            len: 0,
            bytes: 0,
        }
    }
}

impl List {
    /// Checks that the list is whole in `slab`: linked both ways from head to tail, with the
    /// length and bytes it counts. Stops after `len + 1` nodes, so that a cycle is reported
    /// rather than followed forever.
    pub fn check<T>(&self, slab: &Slab<T>) -> Result<(), String> {
        let (mut len, mut bytes) = (0usize, 0u64);
        let (mut prev, mut index) = (NIL, self.head);
        while index != NIL {
            if len > self.len {
                return Err(format!("a list counting {} nodes links more", self.len));
            }
            let Some(node) = slab.try_get(index) else {
                return Err(format!("a list links node {index}, past the slab's end"));
            };
            if node.prev != prev {
                return Err(format!(
                    "node {index} of key {} links back wrongly",
                    node.key
                ));
            }
            len += 1;
            bytes += u64::from(node.size);
            prev = index;
            index = node.next;
        }
        if prev != self.tail {
            return Err(format!(
                "a list ends at node {prev}, its tail says {}",
                self.tail
            ));
        }
        if (len, bytes) != (self.len, self.bytes) {
            return Err(format!(
                "a list links {len} nodes of {bytes} bytes but counts {} of {}",
                self.len, self.bytes
            ));
        }
        Ok(())
    }

    /// Links the unlinked node `index` at the front.
    #[inline]
    pub fn push_front<T>(&mut self, slab: &mut Slab<T>, index: u32) {
        let old_head = self.head;
        {
            let node = slab.get_mut(index);
            node.prev = NIL;
            node.next = old_head;
            self.bytes += u64::from(node.size);
        }
        if old_head == NIL {
            self.tail = index;
        } else {
            slab.get_mut(old_head).prev = index;
        }
        self.head = index;
        self.len += 1;
    }

    /// Unlinks `index`, which must be in this list.
    #[inline]
    pub fn unlink<T>(&mut self, slab: &mut Slab<T>, index: u32) {
        let (prev, next, size) = {
            let node = slab.get(index);
            (node.prev, node.next, node.size)
        };
        if prev == NIL {
            self.head = next;
        } else {
            slab.get_mut(prev).next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            slab.get_mut(next).prev = prev;
        }
        let node = slab.get_mut(index);
        node.prev = NIL;
        node.next = NIL;
        // Counted when linked: an underflow is a bug, and must not wrap into a list that
        // looks full for ever in release builds.
        debug_assert!(self.len > 0 && self.bytes >= u64::from(size));
        self.len = self.len.saturating_sub(1);
        self.bytes = self.bytes.saturating_sub(u64::from(size));
    }

    /// Moves `index`, which must be in this list, to the front.
    #[inline]
    pub fn move_to_front<T>(&mut self, slab: &mut Slab<T>, index: u32) {
        if self.head != index {
            self.unlink(slab, index);
            self.push_front(slab, index);
        }
    }

    /// Unlinks and returns the back node, or `None` when empty.
    #[inline]
    pub fn pop_back<T>(&mut self, slab: &mut Slab<T>) -> Option<u32> {
        let tail = self.tail;
        if tail == NIL {
            None
        } else {
            self.unlink(slab, tail);
            Some(tail)
        }
    }

    /// True when the list holds no node.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checker_finds_a_miscounted_or_broken_list() {
        let mut slab = Slab::default();
        let mut list = List::default();
        for key in 0..3 {
            let index = slab.alloc(key, 10, ());
            list.push_front(&mut slab, index);
        }
        list.check(&slab).unwrap();
        let mut miscounted = list;
        miscounted.bytes -= 1;
        let error = miscounted.check(&slab).unwrap_err();
        assert!(
            error.contains("links 3 nodes of 30 bytes but counts 3 of 29"),
            "{error}"
        );
        let mut short = list;
        short.len = 1;
        assert!(short.check(&slab).unwrap_err().contains("links more"));
        slab.get_mut(list.tail).prev = NIL;
        assert!(list
            .check(&slab)
            .unwrap_err()
            .contains("links back wrongly"));
    }

    fn keys(list: &List, slab: &Slab<()>) -> Vec<u64> {
        let mut out = Vec::new();
        let mut index = list.head;
        while index != NIL {
            out.push(slab.get(index).key);
            index = slab.next(index);
        }
        out
    }

    #[test]
    fn push_move_pop_keep_order_and_bytes() {
        let mut slab = Slab::with_capacity(4);
        let mut list = List::default();
        let a = slab.alloc(1, 10, ());
        let b = slab.alloc(2, 20, ());
        let c = slab.alloc(3, 30, ());
        for index in [a, b, c] {
            list.push_front(&mut slab, index);
        }
        assert_eq!(keys(&list, &slab), vec![3, 2, 1]);
        list.move_to_front(&mut slab, a);
        assert_eq!(keys(&list, &slab), vec![1, 3, 2]);
        assert_eq!(list.pop_back(&mut slab), Some(b));
        assert_eq!((list.len, list.bytes), (2, 40));
        slab.release(b);
        assert_eq!(slab.alloc(4, 1, ()), b, "freed slot is reused");
    }
}
