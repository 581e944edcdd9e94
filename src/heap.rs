//! Gives the allocator's free pages back to the kernel, so that soakd's
//! RSS is what it holds: the control thread every [`GIVE_BACK_EVERY`],
//! and the checkpoint and HDR log writers right after each write.
//!
//! Why: soakd's own RSS is a figure operators alert on
//! (`soakd_rss_slope`), so it must not grow when soakd's heap does not.
//! Measured at 1,000 connections over 13 minutes (heaptrack), the live
//! heap was flat within 0.4% once the ramp was over, yet at 10,000
//! connections RSS grew 3.9% in the half hour of `bench/rss.sh`: the
//! observers' transient buffers (the checkpoint's encoding, the trend
//! fits, a scrape's text) are freed in a different order than they are
//! made, and glibc's allocator keeps the pages of the holes left between
//! live allocations, and grows its heap's top past them. Calling
//! `malloc_trim(0)` on a soakd whose RSS had grown 1.2 MB that way gave
//! 1.0 MB back at once. glibc (since 2.8) then releases every whole free
//! page in every arena, not only the top of the main heap.
//!
//! Giving back is the second line. The first is that what the control
//! thread repeats all soak long makes no large allocation once it runs at
//! its size (the threshold sums, the metrics window, the HDR log's
//! histograms: `test_alloc` counts them in their unit tests); before,
//! ~0.9 MB of histograms made and dropped every second kept moving the
//! top of the main heap. The trend analysis' vectors, which grow with the
//! timeline's points, are room made at start for a full timeline
//! (`stats::trends::reserve`): made and freed every 10 s, they moved the
//! top a little higher each time while the timeline filled.
//!
//! The writers give back after each write because their buffers are
//! transient by nature (the histograms' compression: ~130 KB a
//! histogram, made and dropped by the encoder each time) and live in
//! their own threads' arenas. Given back only by the control thread's
//! timer, they were resident or not at a given moment according to
//! whether that timer had run since the last write: when the timeline
//! first coarsened (its points double in length, and the timer runs at a
//! point's sample) soakd's RSS fell ~600 KB at 10,000 connections, both
//! writers' arenas at once (`/proc/PID/smaps` by mapping; `bench/rss.sh`
//! read it as a 1.1% step).
//!
//! The cost is a walk over the allocator's free lists with its arenas
//! locked one at a time: the workers allocate nothing per request, so
//! they never wait on it. Other C libraries (musl) return freed memory
//! themselves; there it is nothing.

use std::time::Duration;

/// How often the observers give free pages back. The holes grew ~2.5 KB
/// a second in `bench/rss.sh`, so what builds up between two calls is a
/// few pages of a 20 MB process. A call that gives back 32 MB of holes
/// (the unit test below) takes ~3 ms on this machine; one that finds
/// 10 s of holes, far less.
pub const GIVE_BACK_EVERY: Duration = Duration::from_secs(10);

/// Returns the allocator's whole free pages to the kernel.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn give_back() {
    // SAFETY: malloc_trim takes a plain integer and only rearranges the
    // allocator's own free memory, under the allocator's own locks; no
    // live allocation of ours moves or changes.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Elsewhere the allocator gives freed memory back by itself.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn give_back() {}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// This process's resident set, in bytes (statm's second field).
    fn rss() -> u64 {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
        let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
        pages * 4096
    }

    #[test]
    fn free_pages_between_live_allocations_go_back_to_the_kernel() {
        // 64 KiB blocks stay below glibc's mmap threshold (so they come
        // from an arena's heap) and each spans whole pages. Freeing every
        // other one leaves 32 MiB of holes between live blocks: glibc
        // keeps them resident until they are given back.
        const BLOCK: usize = 64 << 10;
        let mut blocks: Vec<Option<Vec<u8>>> = (0..1024).map(|i| Some(vec![i as u8 | 1; BLOCK])).collect();
        for b in blocks.iter_mut().step_by(2) {
            *b = None;
        }
        let before = rss();
        give_back();
        let after = rss();
        // Other tests run beside this one in the same process: the
        // margin is a third of the 32 MiB of holes.
        assert!(
            before.saturating_sub(after) > 10 << 20,
            "RSS {before} -> {after}: the holes were not given back"
        );
        // The live blocks are intact.
        for (i, b) in blocks.iter().enumerate() {
            if let Some(b) = b {
                assert!(b.iter().all(|&x| x == i as u8 | 1));
            }
        }
    }
}
