//! TLS records that end within the congestion window at a connection's start and after idle.
//!
//! rustls cuts each write of plaintext into records of up to 16 KiB, and a record is
//! decrypted only once all of it has arrived. hyper hands a response's head and its first
//! DATA frames over in one write, so the head travelled in a 16 KiB record of about 12
//! segments of 1448 bytes, more than TCP's initial window of 10 leaves after the session
//! ticket and SETTINGS: over a 100 ms link a 20 KB response's head waited for the second
//! flight (TTFB 205-211 ms, where h3's was 101 ms).
//!
//! [`Records`] sits between the HTTP codec and TLS. During the first flight after the
//! handshake it reads the window before each write (TCP_INFO: the congestion window less the
//! segments in flight and the bytes queued). The flight's first write longer than a segment
//! sends its first segment as a record of its own, where the window has room for that
//! record's 22 bytes: a response's head is then read when that segment arrives, however the
//! rest of the flight is paced. A write whose records end within the window goes through
//! whole; the first that would cross its edge is cut there, so no record of the flight waits
//! for the next one; records after the cut are full and start the next flight. Cutting every
//! record to a segment instead would cost 22 bytes a segment and a segment for each short
//! write: a 10 KB response, which fits the initial window with 14 bytes to spare, then took a
//! second round trip (201 ms instead of 111 over a 100 ms link).
//!
//! After the server has sent nothing for the connection's retransmission timeout, Linux
//! restarts the window from its initial one (RFC 5681 4.1) when the next write queues; before
//! that write TCP_INFO still shows the old window, so the first flight after such a gap (and
//! after a second in any case) counts at most the window the connection started with. On a
//! path whose MSS carries a full record in one segment (loopback) nothing is cut.

use std::io;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use qbench_core::report::sender::{
    TlsRecords, TLS_FULL_RECORD, TLS_IDLE_RESTART_MAX_MS, TLS_RECORD_OVERHEAD,
};

/// Linux's least retransmission timeout (TCP_RTO_MIN): a shorter gap never restarts a window.
const RTO_MIN: Duration = Duration::from_millis(200);
const IDLE_RESTART_MAX: Duration = Duration::from_millis(TLS_IDLE_RESTART_MAX_MS);
const FULL: u64 = TLS_FULL_RECORD;
const OVERHEAD: u64 = TLS_RECORD_OVERHEAD;
/// Room below which a write is not cut: the window is full and the write waits for the next
/// flight whole.
const MIN_CUT: u64 = 256;

/// The sender's window as TCP_INFO gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Congestion window, in segments.
    pub cwnd: u32,
    /// Segments sent and neither acknowledged nor lost.
    pub in_flight: u32,
    pub mss: u32,
    /// Bytes written and not yet sent.
    pub notsent: u32,
    pub rto: Duration,
}

impl Window {
    /// Bytes the window still takes, counting at most `cap` segments of it.
    fn room(&self, cap: Option<u32>) -> u64 {
        let segments = cap.map_or(self.cwnd, |c| self.cwnd.min(c));
        let free = u64::from(segments.saturating_sub(self.in_flight));
        (free * u64::from(self.mss)).saturating_sub(u64::from(self.notsent))
    }
}

/// Where [`Records`] reads the window.
pub trait ReadWindow {
    fn window(&mut self) -> Option<Window>;
}

/// The window of a TCP socket (which outlives the [`Records`] holding it).
pub struct TcpWindow(pub RawFd);

impl ReadWindow for TcpWindow {
    fn window(&mut self) -> Option<Window> {
        let i = crate::telemetry::tcp_info(self.0)?;
        let in_flight = (i.tcpi_unacked + i.tcpi_retrans)
            .saturating_sub(i.tcpi_sacked)
            .saturating_sub(i.tcpi_lost);
        Some(Window {
            cwnd: i.tcpi_snd_cwnd,
            in_flight,
            mss: i.tcpi_snd_mss,
            notsent: i.tcpi_notsent_bytes,
            rto: Duration::from_micros(u64::from(i.tcpi_rto)),
        })
    }
}

/// Bytes on the wire of `len` bytes of plaintext in full records and a last partial one.
fn wire(len: u64) -> u64 {
    len + OVERHEAD * len.div_ceil(FULL)
}

/// The most plaintext whose records take at most `room` bytes on the wire.
fn fitting(room: u64) -> u64 {
    let full = room / (FULL + OVERHEAD);
    full * FULL + (room % (FULL + OVERHEAD)).saturating_sub(OVERHEAD)
}

/// Whether a send gap of `gap` restarts the window: longer than the RTO (`rto`), or than a
/// second. Without an RTO, any gap that could pass the least one counts.
fn restarts(gap: Duration, rto: Option<Duration>) -> bool {
    gap >= IDLE_RESTART_MAX || gap >= RTO_MIN && rto.is_none_or(|r| gap >= r)
}

/// When writes are measured against the window: the state of one connection.
#[derive(Debug, Clone)]
pub struct Ramp {
    /// The window when the handshake ended, in segments: a restarted one is at most this.
    initial: u32,
    /// Bytes of a first flight: `initial` segments.
    flight: u64,
    /// Of those, what this flight has not used yet; 0 once it is over.
    left: u64,
    /// The flight follows a gap: count at most `initial` segments of the window.
    capped: bool,
    /// The flight's first write longer than a segment has sent its first segment apart.
    split: bool,
    /// The last write tried, sent or not.
    last: Option<Instant>,
}

impl Ramp {
    /// The ramp of a connection whose window is `w` when its handshake ends; `None` when a
    /// full record fits one segment.
    pub fn new(w: &Window) -> Option<Self> {
        if u64::from(w.mss) >= FULL + OVERHEAD || w.mss == 0 {
            return None;
        }
        let flight = u64::from(w.cwnd) * u64::from(w.mss);
        Some(Self {
            initial: w.cwnd,
            flight,
            left: flight,
            capped: false,
            split: false,
            last: None,
        })
    }

    /// Plaintext bytes a write of `len` tried at `now` may hand to TLS (`None`: all of them).
    fn limit(&mut self, now: Instant, len: usize, read: &mut impl ReadWindow) -> Option<usize> {
        let gap = self.last.map(|t| now.saturating_duration_since(t));
        self.last = Some(now);
        let mut w = None;
        if gap.is_some_and(|g| g >= RTO_MIN) {
            w = read.window();
            if gap.is_some_and(|g| restarts(g, w.map(|w| w.rto))) {
                self.left = self.flight;
                self.capped = true;
                self.split = false;
            }
        }
        if self.left == 0 {
            return None;
        }
        let Some(w) = w.or_else(|| read.window()) else {
            self.left = 0;
            return None;
        };
        let room = w.room(self.capped.then_some(self.initial));
        let (len, mss) = (len as u64, u64::from(w.mss));
        // One segment's record: a head in it is read when that segment arrives, however the
        // rest of the flight is paced. It costs one record's 22 bytes, so only where the
        // flight has room for them (or is crossed anyway).
        let segment = mss.saturating_sub(OVERHEAD);
        if !self.split && len > segment && segment > 0 {
            self.split = true;
            let rest = wire(len - segment);
            if mss + rest <= room || wire(len) > room && mss + MIN_CUT <= room {
                self.left = self.left.saturating_sub(mss);
                return usize::try_from(segment).ok();
            }
        }
        if wire(len) <= room {
            // A short write still takes a segment of its own.
            self.left = self.left.saturating_sub(wire(len).max(mss));
            return None;
        }
        // This write fills the flight: the records after it start the next one, full.
        self.left = 0;
        let cut = fitting(room);
        (cut >= MIN_CUT).then(|| usize::try_from(cut).unwrap_or(usize::MAX))
    }
}

/// Writes to `T` (the TLS stream) cut per [`Ramp`]; reads untouched.
pub struct Records<T, W> {
    inner: T,
    ramp: Option<Ramp>,
    read: W,
}

impl<T, W: ReadWindow> Records<T, W> {
    /// `read` gives the window of the TCP socket `inner` writes to.
    pub fn new(inner: T, mut read: W, sizing: TlsRecords) -> Self {
        let ramp = match sizing {
            TlsRecords::Full => None,
            TlsRecords::Dynamic => read.window().and_then(|w| Ramp::new(&w)),
        };
        Self { inner, ramp, read }
    }

    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    fn limit(&mut self, len: usize) -> Option<usize> {
        self.ramp
            .as_mut()?
            .limit(Instant::now(), len, &mut self.read)
    }
}

/// The first `limit` bytes of `bufs`.
fn clip<'a>(bufs: &'a [io::IoSlice<'a>], limit: usize) -> Vec<io::IoSlice<'a>> {
    let mut left = limit;
    let mut out = Vec::new();
    for b in bufs {
        if left == 0 {
            break;
        }
        let n = b.len().min(left);
        out.push(io::IoSlice::new(&b[..n]));
        left -= n;
    }
    out
}

impl<T: AsyncRead + Unpin, W: Unpin> AsyncRead for Records<T, W> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin, W: ReadWindow + Unpin> AsyncWrite for Records<T, W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let n = self
            .limit(buf.len())
            .map_or(buf.len(), |l| l.min(buf.len()));
        Pin::new(&mut self.inner).poll_write(cx, &buf[..n])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let len = bufs.iter().map(|b| b.len()).sum();
        match self.limit(len) {
            Some(limit) if limit < len => {
                Pin::new(&mut self.inner).poll_write_vectored(cx, &clip(bufs, limit))
            }
            _ => Pin::new(&mut self.inner).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tokio::io::AsyncWriteExt;

    const MS: Duration = Duration::from_millis(1);

    /// A socket whose window the test sets, counting how often it is read.
    struct Fake {
        w: Window,
        reads: usize,
    }

    impl ReadWindow for Fake {
        fn window(&mut self) -> Option<Window> {
            self.reads += 1;
            Some(self.w)
        }
    }

    fn fake(cwnd: u32, in_flight: u32) -> Fake {
        Fake {
            w: Window {
                cwnd,
                in_flight,
                mss: 1448,
                notsent: 0,
                rto: 300 * MS,
            },
            reads: 0,
        }
    }

    #[test]
    fn a_response_that_fits_goes_whole_when_a_record_more_would_not() {
        let mut f = fake(10, 1);
        let mut r = Ramp::new(&f.w).unwrap();
        let t = Instant::now();
        // SETTINGS, behind the session ticket.
        assert_eq!(r.limit(t, 50, &mut f), None);
        // A 10 KB response's head and body, behind the ticket, SETTINGS and its ACK: 7
        // segments are left, 10,136 bytes; its one record takes 10,122, two would take 10,144.
        f.w.in_flight = 3;
        assert_eq!(r.limit(t, 10_100, &mut f), None);
    }

    #[test]
    fn a_response_that_fits_with_room_to_spare_sends_its_first_segment_apart() {
        let mut f = fake(10, 3);
        let mut r = Ramp::new(&f.w).unwrap();
        let t = Instant::now();
        assert_eq!(r.limit(t, 5_000, &mut f), Some(1426));
        f.w.in_flight = 4;
        assert_eq!(r.limit(t, 3_574, &mut f), None);
        // Once a flight: the next response in it goes whole.
        f.w.in_flight = 7;
        assert_eq!(r.limit(t, 3_000, &mut f), None);
    }

    #[test]
    fn the_write_that_crosses_the_windows_edge_is_cut_there() {
        let mut f = fake(10, 3);
        let mut r = Ramp::new(&f.w).unwrap();
        let t = Instant::now();
        // A 20 KB response's head and first DATA frame: the first segment apart, then the
        // rest of the window, 6 segments.
        assert_eq!(r.limit(t, 16_500, &mut f), Some(1426));
        f.w.in_flight = 4;
        assert_eq!(r.limit(t, 15_074, &mut f), Some(8_666));
        assert_eq!(wire(8_666), 6 * 1448);
        // The rest starts the next flight, in full records, and the window is not read again.
        let reads = f.reads;
        assert_eq!(r.limit(t, 6_408, &mut f), None);
        assert_eq!(r.limit(t + MS, 16_393, &mut f), None);
        assert_eq!(f.reads, reads);
    }

    #[test]
    fn a_full_window_is_not_cut_into_crumbs() {
        let mut f = fake(10, 10);
        let mut r = Ramp::new(&fake(10, 0).w).unwrap();
        assert_eq!(r.limit(Instant::now(), 20_000, &mut f), None);
        assert_eq!(r.left, 0);
    }

    #[test]
    fn after_a_gap_past_the_rto_a_flight_counts_at_most_the_initial_window() {
        let mut f = fake(10, 0);
        let mut r = Ramp::new(&f.w).unwrap();
        let t = Instant::now();
        assert_eq!(r.limit(t, 100_000, &mut f), Some(1426));
        assert_eq!(r.limit(t, 98_574, &mut f), Some(14_458));
        // The window grew; the connection goes quiet for less than the least RTO, then for
        // less than its RTO: no restart.
        f.w.cwnd = 40;
        assert_eq!(r.limit(t + 150 * MS, 100_000, &mut f), None);
        assert_eq!(r.limit(t + 400 * MS, 100_000, &mut f), None);
        // Past it: the kernel will restart from 10 segments, which TCP_INFO does not show yet.
        assert_eq!(r.limit(t + 701 * MS, 100_000, &mut f), Some(1426));
        f.w.in_flight = 1;
        assert_eq!(r.limit(t + 701 * MS, 98_574, &mut f), Some(13_010));
        // A second restarts whatever the RTO says.
        f.w.rto = Duration::from_secs(3);
        f.w.in_flight = 0;
        assert_eq!(r.limit(t + 1701 * MS, 100_000, &mut f), Some(1426));
        assert!(restarts(250 * MS, None));
        assert!(!restarts(999 * MS, Some(Duration::from_secs(3))));
    }

    #[test]
    fn a_trickle_of_short_writes_ends_the_ramp_after_a_flight() {
        let mut f = fake(10, 0);
        let mut r = Ramp::new(&f.w).unwrap();
        let t = Instant::now();
        for _ in 0..10 {
            assert_eq!(r.limit(t, 100, &mut f), None);
        }
        assert_eq!(f.reads, 10);
        assert_eq!(r.limit(t, 100_000, &mut f), None);
        assert_eq!(f.reads, 10, "read after the flight");
    }

    #[test]
    fn a_full_record_in_one_segment_needs_no_ramp() {
        let mut f = fake(10, 0);
        f.w.mss = 65_483;
        assert!(Ramp::new(&f.w).is_none());
        f.w.mss = 16_406;
        assert!(Ramp::new(&f.w).is_none());
        f.w.mss = 16_405;
        assert!(Ramp::new(&f.w).is_some());
        f.w.mss = 0;
        assert!(Ramp::new(&f.w).is_none());
    }

    #[test]
    fn record_sizes_on_the_wire() {
        assert_eq!(wire(0), 0);
        assert_eq!(wire(1), 23);
        assert_eq!(wire(16_384), 16_406);
        assert_eq!(wire(16_385), 16_429);
        assert_eq!(fitting(16_406), 16_384);
        assert_eq!(fitting(16_405), 16_383);
        assert_eq!(fitting(22), 0);
    }

    proptest! {
        #[test]
        fn fitting_is_the_most_plaintext_the_room_takes(room in 0u64..10_000_000) {
            let p = fitting(room);
            prop_assert!(wire(p) <= room);
            prop_assert!(wire(p + 1) > room);
        }
    }

    #[test]
    fn clip_takes_the_first_bytes_across_slices() {
        let (a, b) = ([1u8; 10], [2u8; 10]);
        let bufs = [io::IoSlice::new(&a), io::IoSlice::new(&b)];
        let c = clip(&bufs, 15);
        assert_eq!(c.iter().map(|s| s.len()).collect::<Vec<_>>(), vec![10, 5]);
        assert_eq!(clip(&bufs, 10).len(), 1);
        assert_eq!(clip(&bufs, 100).iter().map(|s| s.len()).sum::<usize>(), 20);
    }

    /// Records the length of each write it is handed.
    #[derive(Default)]
    struct Recorder(Vec<usize>);

    impl AsyncWrite for Recorder {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.0.push(buf.len());
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[io::IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let n = bufs.iter().map(|b| b.len()).sum();
            self.0.push(n);
            Poll::Ready(Ok(n))
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_head_and_its_body_reach_tls_cut_at_the_windows_edge() {
        let mut w = Records::new(Recorder::default(), fake(10, 3), TlsRecords::Dynamic);
        let (head, body) = ([7u8; 100], vec![8u8; 64 * 1024]);
        let mut both = bytes::Buf::chain(&head[..], &body[..]);
        w.write_all_buf(&mut both).await.unwrap();
        // The window stays at 7 segments here (nothing is sent): the head's segment, then a cut
        // at 7 segments, then the rest whole.
        assert_eq!(
            w.get_ref().0,
            vec![1426, 10_114, 100 + 64 * 1024 - 1426 - 10_114]
        );
        let mut full = Records::new(Recorder::default(), fake(10, 3), TlsRecords::Full);
        let mut both = bytes::Buf::chain(&head[..], &body[..]);
        full.write_all_buf(&mut both).await.unwrap();
        assert_eq!(full.get_ref().0, vec![100 + 64 * 1024]);
    }
}
