//! Doubly-linked lists of slot numbers, threaded through one array of links per family of
//! lists: a slot is on at most one list of a family (a staging cache's dirty order, Caiti's
//! write-back queues, LRU's recency order), and moving it costs no allocation.

/// The "no slot" link.
pub const NONE: u32 = u32::MAX;

/// A slot's neighbours on its list.
#[derive(Clone, Copy, Debug)]
pub struct Link {
    prev: u32,
    next: u32,
    linked: bool,
}

impl Default for Link {
    fn default() -> Link {
        Link {
            prev: NONE,
            next: NONE,
            linked: false,
        }
    }
}

/// One list: oldest at the head, newest at the tail.
#[derive(Clone, Copy, Debug)]
pub struct Chain {
    head: u32,
    tail: u32,
    len: u32,
}

impl Default for Chain {
    fn default() -> Chain {
        Chain {
            head: NONE,
            tail: NONE,
            len: 0,
        }
    }
}

impl Chain {
    /// The oldest slot.
    pub fn head(&self) -> Option<u32> {
        (self.head != NONE).then_some(self.head)
    }

    /// True when `slot` is on a list of this family.
    pub fn is_linked(links: &[Link], slot: u32) -> bool {
        links[slot as usize].linked
    }

    /// Appends `slot` (on no list of the family) as the newest.
    pub fn push_back(&mut self, links: &mut [Link], slot: u32) {
        debug_assert!(!links[slot as usize].linked);
        links[slot as usize] = Link {
            prev: self.tail,
            next: NONE,
            linked: true,
        };
        match self.tail {
            NONE => self.head = slot,
            tail => links[tail as usize].next = slot,
        }
        self.tail = slot;
        self.len += 1;
    }

    /// Takes `slot` (on this list) off it.
    pub fn unlink(&mut self, links: &mut [Link], slot: u32) {
        let Link { prev, next, linked } = links[slot as usize];
        debug_assert!(linked);
        match prev {
            NONE => self.head = next,
            prev => links[prev as usize].next = next,
        }
        match next {
            NONE => self.tail = prev,
            next => links[next as usize].prev = prev,
        }
        links[slot as usize] = Link::default();
        self.len -= 1;
    }

    /// The slots from the head, oldest first.
    pub fn iter<'a>(&self, links: &'a [Link]) -> impl Iterator<Item = u32> + 'a {
        let mut at = self.head;
        std::iter::from_fn(move || {
            let slot = at;
            (slot != NONE).then(|| {
                at = links[slot as usize].next;
                slot
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_through_unlinks_and_moves() {
        let mut links = vec![Link::default(); 6];
        let mut chain = Chain::default();
        for slot in [3, 1, 4, 0, 5] {
            chain.push_back(&mut links, slot);
        }
        chain.unlink(&mut links, 4);
        chain.unlink(&mut links, 3);
        chain.push_back(&mut links, 3);
        chain.unlink(&mut links, 5);
        assert_eq!(chain.iter(&links).collect::<Vec<_>>(), [1, 0, 3]);
        assert_eq!((chain.len, chain.head()), (3, Some(1)));
        assert!(!Chain::is_linked(&links, 4) && Chain::is_linked(&links, 0));
        for slot in [1, 0, 3] {
            chain.unlink(&mut links, slot);
        }
        assert!(chain.len == 0 && chain.head().is_none());
    }
}
