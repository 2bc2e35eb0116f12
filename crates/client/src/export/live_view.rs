//! What the live view of a held load shows (`--tui`), drawn from the same intervals as the
//! `--interval` lines and the served metrics: rate and goodput now, latency percentiles over
//! time, the run's latency histogram, errors by kind, requests in flight, open-loop start lag
//! and how busy the client's busiest thread is. Pure: drawn into any ratatui backend, so tests
//! draw it into a buffer.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use qbench_core::histogram::LatencyHistogram;
use qbench_core::report::live::Live;
use qbench_core::report::load::IntervalRecord;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Bar, BarChart, BarGroup, Block, Chart, Dataset, Gauge, GraphType, Paragraph, Sparkline,
    Wrap,
};
use ratatui::Frame;

use super::text::numbers::count;

/// Intervals kept for the latency-over-time chart: ten minutes of 1 s intervals. Older ones
/// scroll out, so a view held for days uses the same memory as one held for a minute.
pub const MAX_POINTS: usize = 600;

/// Histogram bar edges, microseconds: 100 us to 10 s, as the served metrics bucket them.
const EDGES_US: [u64; 16] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// One interval, as the chart draws it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Seconds since the view started.
    pub t: f64,
    pub rate: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// The live view's state.
pub struct View {
    /// What runs: protocol, target and load, in one line.
    pub title: String,
    pub runs: u32,
    /// A held load's length, warm-up included: what the run's gauge fills towards.
    pub window: Option<Duration>,
    live: Live,
    /// The last interval's completed rate and goodput (bit/s).
    rate: f64,
    goodput_bps: f64,
    points: VecDeque<Point>,
    started: Instant,
    run_started: Instant,
    /// Lines kept back from the terminal while the view holds it, the latest last.
    pub messages: Vec<String>,
}

impl View {
    pub fn new(title: String, runs: u32, window: Option<Duration>) -> Self {
        let now = Instant::now();
        Self {
            title,
            runs,
            window,
            live: Live::default(),
            rate: 0.0,
            goodput_bps: 0.0,
            points: VecDeque::with_capacity(MAX_POINTS),
            started: now,
            run_started: now,
            messages: Vec::new(),
        }
    }

    /// Adds interval `r` of run `run`, and the busiest client thread over it.
    pub fn add(&mut self, run: u32, r: &IntervalRecord, busiest: Option<(String, f64)>) {
        if run != self.live.run {
            self.run_started = Instant::now();
        }
        if let Err(e) = self.live.add(run, r) {
            self.messages.push(format!("warning: live view: {e}"));
        }
        self.live.busiest = busiest;
        let secs = r.seconds();
        (self.rate, self.goodput_bps) = if secs > 0.0 {
            (
                r.completed as f64 / secs,
                r.payload_bytes as f64 * 8.0 / secs,
            )
        } else {
            (0.0, 0.0)
        };
        let ms = |us: Option<u64>| us.map_or(0.0, |v| v as f64 / 1e3);
        if self.points.len() == MAX_POINTS {
            self.points.pop_front();
        }
        self.points.push_back(Point {
            t: self.started.elapsed().as_secs_f64(),
            rate: self.rate,
            p50_ms: ms(r.latency.summary.p50_us),
            p99_ms: ms(r.latency.summary.p99_us),
        });
    }

    #[cfg(test)]
    pub fn points(&self) -> &VecDeque<Point> {
        &self.points
    }
}

fn ms(us: Option<u64>) -> String {
    us.map_or_else(|| "-".into(), |v| format!("{:.2} ms", v as f64 / 1e3))
}

fn label(us: u64) -> String {
    match us {
        u if u >= 1_000_000 => format!("{}s", u as f64 / 1e6),
        u if u >= 1_000 => format!("{}ms", u as f64 / 1e3),
        u => format!("{u}us"),
    }
}

/// The run's latency histogram as bars between `EDGES_US`, from the first bar with a count to
/// the last; the last bar also holds everything above 10 s.
pub fn bars(h: &LatencyHistogram) -> Vec<(String, u64)> {
    let mut below = 0;
    let mut out: Vec<(String, u64)> = EDGES_US
        .iter()
        .map(|&edge| {
            let at = h.count_at_or_below(edge);
            let n = at.saturating_sub(below);
            below = at;
            (format!("≤{}", label(edge)), n)
        })
        .collect();
    if let Some(last) = out.last_mut() {
        last.1 += h.len().saturating_sub(below);
    }
    let first = out.iter().position(|b| b.1 > 0);
    let end = out.iter().rposition(|b| b.1 > 0);
    match (first, end) {
        (Some(a), Some(b)) => out[a..=b].to_vec(),
        _ => Vec::new(),
    }
}

fn figures(v: &View) -> Vec<Line<'static>> {
    let l = &v.live;
    let s = l.latency.summary();
    let t = l.ttfb.summary();
    let mut lines = vec![
        Line::from(format!("rate       {}/s", count(v.rate.round() as u64))),
        Line::from(format!("goodput    {:.1} Mbit/s", v.goodput_bps / 1e6)),
        Line::from(format!("in flight  {}", count(l.in_flight))),
        Line::from(format!(
            "requests   {} ok, {} failed, {} dropped",
            count(l.completed),
            count(l.failed),
            count(l.dropped)
        )),
        Line::from(format!(
            "latency    p50 {}  p90 {}",
            ms(s.p50_us),
            ms(s.p90_us)
        )),
        Line::from(format!(
            "           p99 {}  max {}",
            ms(s.p99_us),
            ms(s.max_us)
        )),
        Line::from(format!(
            "ttfb       p50 {}  p99 {}",
            ms(t.p50_us),
            ms(t.p99_us)
        )),
    ];
    if !l.start_lag.is_empty() {
        let g = l.start_lag.summary();
        lines.push(Line::from(format!(
            "start lag  p50 {}  p99 {}",
            ms(g.p50_us),
            ms(g.p99_us)
        )));
    }
    if let Some((name, busy)) = &l.busiest {
        let style = if *busy > qbench_core::stats::saturation::BUSY_LIMIT {
            Style::new().fg(Color::Red)
        } else {
            Style::new()
        };
        lines.push(Line::styled(
            format!(
                "busiest    {:.0}% {}",
                busy * 100.0,
                crate::console::printable(name)
            ),
            style,
        ));
    }
    lines
}

fn errors(v: &View) -> Vec<Line<'static>> {
    if v.live.errors.0.is_empty() {
        return vec![Line::from("none")];
    }
    v.live
        .errors
        .0
        .iter()
        .map(|(kind, n)| {
            Line::styled(
                format!("{:<14} {}", kind.as_str(), count(*n)),
                Style::new().fg(Color::Red),
            )
        })
        .collect()
}

fn gauge(f: &mut Frame<'_>, v: &View, area: Rect) {
    let elapsed = v.run_started.elapsed();
    let (ratio, of) = match v.window {
        Some(w) if !w.is_zero() => (
            (elapsed.as_secs_f64() / w.as_secs_f64()).clamp(0.0, 1.0),
            format!(" of {:.0} s", w.as_secs_f64()),
        ),
        _ => (0.0, String::new()),
    };
    let text = format!(
        "run {}/{}: {:.1} s{of}",
        v.live.run + 1,
        v.runs,
        elapsed.as_secs_f64()
    );
    f.render_widget(
        Gauge::default()
            .block(Block::bordered().title(crate::console::printable(&v.title)))
            .gauge_style(Style::new().fg(Color::Cyan))
            .ratio(ratio)
            .label(text),
        area,
    );
}

fn over_time(f: &mut Frame<'_>, v: &View, area: Rect) {
    let p50: Vec<(f64, f64)> = v.points.iter().map(|p| (p.t, p.p50_ms)).collect();
    let p99: Vec<(f64, f64)> = v.points.iter().map(|p| (p.t, p.p99_ms)).collect();
    let t0 = v.points.front().map_or(0.0, |p| p.t);
    let t1 = v.points.back().map_or(1.0, |p| p.t).max(t0 + 1.0);
    let top = p99.iter().map(|p| p.1).fold(0.0, f64::max).max(0.001) * 1.1;
    let chart = Chart::new(vec![
        Dataset::default()
            .name("p50")
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(Style::new().fg(Color::Green))
            .data(&p50),
        Dataset::default()
            .name("p99")
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(Style::new().fg(Color::Yellow))
            .data(&p99),
    ])
    .block(Block::bordered().title(vec![
        Span::raw("latency over time, per interval: "),
        Span::styled("p50", Style::new().fg(Color::Green)),
        Span::raw(", "),
        Span::styled("p99", Style::new().fg(Color::Yellow)),
    ]))
    .x_axis(Axis::default().bounds([t0, t1]).labels(vec![
        Line::from(format!("{t0:.0}s")),
        Line::from(format!("{t1:.0}s")),
    ]))
    .y_axis(
        Axis::default()
            .bounds([0.0, top])
            .labels(vec![Line::from("0"), Line::from(format!("{top:.1}ms"))]),
    );
    f.render_widget(chart, area);
}

fn histogram(f: &mut Frame<'_>, v: &View, area: Rect) {
    let bars: Vec<Bar<'_>> = bars(&v.live.latency)
        .into_iter()
        .map(|(edge, n)| Bar::with_label(edge, n).text_value(count(n)))
        .collect();
    let width = match bars.len() {
        0 => 1,
        n => (area.width.saturating_sub(2) / n as u16)
            .saturating_sub(1)
            .clamp(3, 9),
    };
    f.render_widget(
        BarChart::default()
            .block(Block::bordered().title("latency histogram, this run"))
            .data(BarGroup::default().bars(&bars))
            .bar_width(width)
            .bar_gap(1)
            .bar_style(Style::new().fg(Color::Blue)),
        area,
    );
}

/// Draws the whole view into `f`'s area.
pub fn draw(f: &mut Frame<'_>, v: &View) {
    let [top, middle, bottom, foot] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Min(10),
        Constraint::Min(8),
        Constraint::Length(4),
    ])
    .areas(f.area());
    gauge(f, v, top);
    let [left, right] =
        Layout::horizontal([Constraint::Length(46), Constraint::Min(20)]).areas(middle);
    let lines = figures(v);
    let [now, rate] = Layout::vertical([
        Constraint::Length(lines.len() as u16 + 2),
        Constraint::Min(3),
    ])
    .areas(left);
    f.render_widget(
        Paragraph::new(lines)
            .block(Block::bordered().title("this run (rate, goodput: last interval)")),
        now,
    );
    let width = usize::from(rate.width.saturating_sub(2));
    let from = v.points.len().saturating_sub(width);
    let rates: Vec<u64> = v
        .points
        .iter()
        .skip(from)
        .map(|p| p.rate.round() as u64)
        .collect();
    let top = rates.iter().copied().max().unwrap_or(0);
    f.render_widget(
        Sparkline::default()
            .block(Block::bordered().title(format!("rate over time, top {}/s", count(top))))
            .style(Style::new().fg(Color::Cyan))
            .data(&rates),
        rate,
    );
    over_time(f, v, right);
    let [left, right] =
        Layout::horizontal([Constraint::Length(46), Constraint::Min(20)]).areas(bottom);
    f.render_widget(
        Paragraph::new(errors(v)).block(Block::bordered().title("errors, this run")),
        left,
    );
    histogram(f, v, right);
    let mut foot_lines: Vec<Line<'_>> = v
        .messages
        .iter()
        .rev()
        .take(1)
        .map(|m| Line::from(crate::console::printable(m)))
        .collect();
    foot_lines.push(Line::styled(
        "q or Ctrl-C stops the load; the runs so far are reported",
        Style::new().fg(Color::DarkGray),
    ));
    f.render_widget(
        Paragraph::new(foot_lines)
            .wrap(Wrap { trim: true })
            .block(Block::bordered()),
        foot,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use qbench_core::{ErrorCounts, ErrorKind, HistogramExport};
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn interval(ms: &[u64], errors: u64) -> IntervalRecord {
        let mut h = LatencyHistogram::new();
        for &m in ms {
            h.record(Duration::from_millis(m));
        }
        let mut e = ErrorCounts::default();
        for _ in 0..errors {
            e.add(ErrorKind::Timeout);
        }
        IntervalRecord {
            start_us: 0,
            end_us: 500_000,
            warmup: false,
            completed: ms.len() as u64,
            failed: errors,
            dropped: 0,
            payload_bytes: ms.len() as u64 * 10_000,
            in_flight: 4,
            errors: e,
            latency: HistogramExport::from(&h),
            ttfb: Some(HistogramExport::from(&h)),
            start_lag: None,
        }
    }

    fn screen(v: &View, w: u16, h: u16) -> String {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        t.draw(|f| draw(f, v)).unwrap();
        let buf = t.backend().buffer().clone();
        (0..h)
            .map(|y| (0..w).map(|x| buf[(x, y)].symbol()).collect::<String>() + "\n")
            .collect()
    }

    #[test]
    fn bars_span_the_counted_buckets_and_add_up() {
        let mut h = LatencyHistogram::new();
        for m in [1, 1, 3, 40, 20_000] {
            h.record(Duration::from_millis(m));
        }
        let b = bars(&h);
        assert_eq!(b.first().map(|b| b.0.as_str()), Some("≤1ms"));
        assert_eq!(b.last().map(|b| b.0.as_str()), Some("≤10s"));
        assert_eq!(b.iter().map(|b| b.1).sum::<u64>(), 5);
        assert_eq!(b[0].1, 2);
        assert!(bars(&LatencyHistogram::new()).is_empty());
    }

    #[test]
    fn the_view_shows_rate_percentiles_errors_and_the_busiest_thread() {
        let mut v = View::new(
            "qbench h3 -> 127.0.0.1:4433".into(),
            2,
            Some(Duration::from_secs(10)),
        );
        v.add(
            0,
            &interval(&[2, 2, 2, 30], 3),
            Some(("qbench-client".into(), 0.95)),
        );
        let s = screen(&v, 110, 32);
        assert!(s.contains("qbench h3 -> 127.0.0.1:4433"), "{s}");
        assert!(s.contains("run 1/2"), "{s}");
        // 4 requests in half a second.
        assert!(s.contains("rate       8/s"), "{s}");
        assert!(s.contains("goodput    0.6 Mbit/s"), "{s}");
        assert!(s.contains("in flight  4"), "{s}");
        assert!(s.contains("4 ok, 3 failed"), "{s}");
        assert!(s.contains("p99 30."), "{s}");
        assert!(s.contains("timeout"), "{s}");
        assert!(s.contains("busiest    95% qbench-client"), "{s}");
        assert!(s.contains("latency over time"), "{s}");
        assert!(s.contains("rate over time, top 8/s"), "{s}");
        assert!(s.contains("≤2.5ms"), "{s}");
        // A new run starts its counts afresh; the chart keeps the earlier run's points.
        v.add(1, &interval(&[5], 0), None);
        let s = screen(&v, 110, 32);
        assert!(s.contains("run 2/2"), "{s}");
        assert!(s.contains("1 ok, 0 failed"), "{s}");
        assert_eq!(v.points().len(), 2);
    }

    #[test]
    fn points_are_bounded_and_a_tiny_terminal_does_not_panic() {
        let mut v = View::new("t\x1b]0;x\x07".into(), 1, None);
        for _ in 0..MAX_POINTS + 5 {
            v.add(0, &interval(&[1], 0), None);
        }
        assert_eq!(v.points().len(), MAX_POINTS);
        for (w, h) in [(1, 1), (10, 5), (40, 12), (300, 80)] {
            let s = screen(&v, w, h);
            assert!(!s.contains('\x1b'));
        }
    }
}
