//! A future whose state is asked of the memory system whole, each time it is polled.
//!
//! With 6,400 requests in flight, a closed loop's worker and its request's boxed future are
//! cold whenever a response wakes them: every other request's state has passed through the
//! cache since. Touched as the code reaches them, their cache lines arrive one miss after
//! another; asked for together as the poll begins, they arrive side by side.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Most bytes of a future's state asked for at each poll: a future larger than the request
/// paths' (1.3 KB at most) would have mostly lines that its poll does not read.
const MAX_BYTES: usize = 4096;

pin_project_lite::pin_project! {
    pub(crate) struct Prefetched<F> {
        #[pin]
        inner: F,
    }
}

impl<F> Prefetched<F> {
    pub(crate) fn new(inner: F) -> Self {
        Self { inner }
    }
}

impl<F: Future> Future for Prefetched<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        #[cfg(target_arch = "x86_64")]
        {
            let start = std::ptr::from_ref(&*self).cast::<u8>();
            for off in (0..size_of::<Self>().min(MAX_BYTES)).step_by(64) {
                // SAFETY: a prefetch is a hint: it reads nothing into the program and cannot
                // fault, and every address is within `self`.
                unsafe {
                    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                        start.add(off).cast::<i8>(),
                    );
                }
            }
        }
        self.project().inner.poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wrapped future's wake-ups and output pass through unchanged, whatever its size.
    #[tokio::test]
    async fn polls_the_inner_future_to_its_end() {
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let big = [7u8; 3 * MAX_BYTES];
        let waiting = tokio::spawn(Prefetched::new(async move {
            let n = rx.await.expect("sent");
            n + u32::from(big[big.len() - 1])
        }));
        tokio::task::yield_now().await;
        tx.send(35).expect("receiver");
        assert_eq!(waiting.await.expect("task"), 42);
        assert_eq!(Prefetched::new(async { "ready" }).await, "ready");
    }
}
