//! With the allocator's thresholds fixed, memory freed and allocated again stays in the
//! process: no page faults after the first round. (Its own test binary: the thresholds are
//! process-wide.)

use std::hint::black_box;

fn minor_faults() -> u64 {
    // SAFETY: getrusage only writes into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) }, 0);
    ru.ru_minflt as u64
}

/// Allocates `blocks` buffers of `size` bytes, writes every page, frees them all.
fn round(blocks: usize, size: usize) {
    let mut held = Vec::with_capacity(blocks);
    for _ in 0..blocks {
        let mut v = vec![0u8; size];
        for page in v.chunks_mut(4096) {
            page[0] = 1;
        }
        held.push(black_box(v));
    }
    drop(held);
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn freed_buffers_are_reused_without_faulting_again() {
    qbench_stack::heap::keep_freed_memory();
    // Four 1 MiB buffers a round: with glibc's moving thresholds the first free raises the
    // mmap threshold to 1 MiB and the trim threshold to 2 MiB, so every later round grows
    // the heap by 4 MiB, faults in 1024 pages and trims them again.
    let (blocks, size, rounds) = (4, 1 << 20, 50);
    round(blocks, size);
    let before = minor_faults();
    for _ in 0..rounds {
        round(blocks, size);
    }
    let faults = minor_faults() - before;
    let pages_per_round = (blocks * size / 4096) as u64;
    assert!(
        faults < pages_per_round,
        "{faults} faults over {rounds} rounds of {pages_per_round} pages"
    );
}
