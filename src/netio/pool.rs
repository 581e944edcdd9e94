//! One pool of byte buffers per thread, for what a connection holds only
//! now and then: bytes owed to a peer that is not reading fast enough, an
//! incomplete head or frame carried to the next read.
//!
//! Tens of thousands of connections sit idle most of the time; each owning
//! its own buffers would cost their capacity per connection for ever, and
//! dropping them when empty would cost an allocation per use. So a
//! connection borrows a buffer while it needs one and gives it back when
//! drained: an idle connection owns none, and a busy thread reuses the same
//! few buffers, so nothing is allocated per request in the steady state.
//! A handle is a boxed `Vec` ([`Buf`]): 8 bytes in a connection where
//! `Option<Vec<u8>>` would take 24.
//!
//! Thread-local, not shared: every event loop in soakd owns its
//! connections on one thread, so a `RefCell` borrow is all it costs — no
//! lock, no atomic.

use std::cell::RefCell;

/// A pooled buffer.
#[allow(clippy::box_collection)]
pub type Buf = Box<Vec<u8>>;

/// Largest buffer kept: one that grew for a big message is dropped rather
/// than kept by the pool.
const KEEP_BYTES: usize = 64 * 1024;
/// Buffers kept at most.
const KEEP: usize = 256;

thread_local! {
    /// Free buffers of this thread.
    #[allow(clippy::vec_box)]
    static POOL: RefCell<Vec<Buf>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer from this thread's pool, or a new one.
#[inline]
pub fn take() -> Buf {
    POOL.with(|p| p.borrow_mut().pop()).unwrap_or_default()
}

/// Gives a buffer back to this thread's pool (emptied; dropped when it is
/// large or the pool is full).
#[inline]
pub fn give(mut b: Buf) {
    if b.capacity() > KEEP_BYTES {
        return;
    }
    b.clear();
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < KEEP {
            p.push(b);
        }
    });
}

/// Gives `slot`'s buffer back, if it holds one.
#[inline]
pub fn release(slot: &mut Option<Buf>) {
    if let Some(b) = slot.take() {
        give(b);
    }
}

/// `slot`'s buffer, taken from the pool first when it holds none.
#[inline]
pub fn get(slot: &mut Option<Buf>) -> &mut Vec<u8> {
    slot.get_or_insert_with(take)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_and_big_ones_dropped() {
        let mut b = take();
        b.extend_from_slice(b"abc");
        let at = b.as_ptr();
        give(b);
        let b = take();
        assert!(b.is_empty(), "given back emptied");
        assert_eq!(b.as_ptr(), at, "the same buffer");
        let mut big = take();
        big.reserve(KEEP_BYTES * 2);
        give(big);
        give(b);
        assert!(take().capacity() <= KEEP_BYTES);
        let mut slot = None;
        get(&mut slot).push(1);
        release(&mut slot);
        assert!(slot.is_none());
    }
}
