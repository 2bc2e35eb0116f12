//! The allocator's give-back policy, set once at start-up by both binaries.
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
