//! The allocator's give-back policy, set once at start-up by both binaries, and the
//! allocator they choose.
//!
//! glibc returns the top of a heap to the kernel once more than `M_TRIM_THRESHOLD` of it is
//! free, and serves blocks above `M_MMAP_THRESHOLD` with their own mapping; both thresholds
//! move with the workload unless set. A transfer frees and reallocates buffers of a few
//! hundred KiB (h2 frames of 256 KiB, TLS and socket buffers) thousands of times per second,
//! so each round trip through the kernel costs a `brk` or `munmap` and then a page fault per
//! 4 KiB touched again: measured on loopback, tens of thousands of faults and about a
//! thousand `brk` calls per GB of h2, about a tenth of the transfer's CPU. Fixed thresholds
//! keep that memory in the process instead: freed heap is kept up to [`KEEP_FREE`] and blocks
//! up to [`MAP_ABOVE`] come from the heap.

/// Free memory a heap keeps before trimming.
pub const KEEP_FREE: usize = 64 << 20;
/// Blocks at least this large get a mapping of their own (and give it back when freed).
pub const MAP_ABOVE: usize = 32 << 20;

/// Sets glibc's thresholds; does nothing with other C libraries.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt takes the allocator's lock and only changes its parameters.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, KEEP_FREE as libc::c_int);
        libc::mallopt(libc::M_MMAP_THRESHOLD, MAP_ABOVE as libc::c_int);
    }
}

#[cfg(feature = "jemalloc")]
pub use tikv_jemallocator::Jemalloc;

/// Makes jemalloc the calling binary's allocator, with its freed pages going back to the
/// system after 100 ms instead of 10 s: `qbench-server`, `qbench serve` and `qbench proxy`
/// are network services whose memory a peer drives up and down, and with the default decay
/// a proxy held by a never-reading h3 client grew by 60 MB where glibc grew by 37 (its
/// test's bound is 64 MiB); with these, 35-46. A small request costs the same.
///
/// jemalloc reads its options once, at its start, from `const char *malloc_conf` (a thin
/// pointer to a C string), so this is for a binary's root module and nowhere else.
#[cfg(feature = "jemalloc")]
#[macro_export]
macro_rules! jemalloc {
    () => {
        #[global_allocator]
        static ALLOCATOR: $crate::heap::Jemalloc = $crate::heap::Jemalloc;

        #[allow(non_upper_case_globals)]
        #[export_name = "_rjem_malloc_conf"]
        pub static malloc_conf: &u8 = &b"dirty_decay_ms:100,muzzy_decay_ms:0\0"[0];
    };
}
