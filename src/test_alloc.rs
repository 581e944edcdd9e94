//! The unit tests' allocator: the system's, counting each thread's large
//! allocations and all the bytes it allocates, so a test can show that a
//! task soakd repeats for a whole soak (a threshold evaluation, a metrics
//! update, an interval of the HDR log, a trend analysis) stops allocating
//! once it runs at its size. Large transient allocations made and freed
//! every second moved the top of soakd's heap and read as soakd growing
//! (issue 29).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Allocations from this size up are counted: a full histogram is ~180
/// KB, the trend analysis' vectors a few KB each.
pub const LARGE: usize = 16 << 10;

thread_local! {
    static LARGE_ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static BYTES: Cell<u64> = const { Cell::new(0) };
}

struct Counting;

fn note(size: usize) {
    let _ = BYTES.try_with(|c| c.set(c.get() + size as u64));
    if size >= LARGE {
        // A thread being torn down has no counters left; nothing to count.
        let _ = LARGE_ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
    }
}

// SAFETY: every call is passed to the system allocator unchanged; counting
// touches only a const-initialized thread-local cell, which allocates
// nothing.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Allocations of at least [`LARGE`] bytes this thread has made so far.
pub fn large_allocations() -> u64 {
    LARGE_ALLOCATIONS.with(Cell::get)
}

/// Bytes this thread has asked the allocator for so far (a realloc counts
/// its new size).
pub fn allocated_bytes() -> u64 {
    BYTES.with(Cell::get)
}
