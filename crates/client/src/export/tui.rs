//! The terminal side of the live view: a thread that owns the terminal (alternate screen, raw
//! mode) while a held load runs, redraws the view four times a second and turns `q`, Esc and
//! Ctrl-C into the SIGINT the run already stops on, so the view ends the way an interrupt does:
//! the load stops starting requests and the runs so far are reported. Lines for the user are
//! kept back meanwhile and written when the terminal is given back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::console as stdio;
use anyhow::Context;
use qbench_core::report::load::IntervalRecord;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::live_view::{draw, View};

/// How often the view is redrawn (and keys read): the gauge moves between intervals.
const TICK: Duration = Duration::from_millis(250);

/// The view on the terminal, given back when dropped.
pub struct Screen {
    view: Arc<Mutex<View>>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

fn lock(v: &Mutex<View>) -> MutexGuard<'_, View> {
    v.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether a key waits on the terminal (stdin), within `TICK`. A terminal that hung up (its
/// window closed) has none and never will: the wait is slept out rather than handed to
/// crossterm's poll, which returns at once there and would spin the thread.
fn key_waiting() -> bool {
    let mut p = libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, for the duration of the call.
    let n = unsafe { libc::poll(&mut p, 1, TICK.as_millis() as libc::c_int) };
    let gone = p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0;
    if n < 0 || gone {
        std::thread::sleep(TICK);
        return false;
    }
    n > 0 && p.revents & libc::POLLIN != 0
}

/// Keys that stop the load: in raw mode Ctrl-C is a key, not a signal.
fn stops(k: KeyEvent) -> bool {
    k.kind == KeyEventKind::Press
        && match k.code {
            KeyCode::Char('q') | KeyCode::Esc => true,
            KeyCode::Char('c') => k.modifiers.contains(KeyModifiers::CONTROL),
            _ => false,
        }
}

impl Screen {
    /// Takes the terminal (stdout, which must be one) over.
    pub fn start(view: View) -> anyhow::Result<Self> {
        let mut term = ratatui::try_init().context("--tui: cannot take the terminal over")?;
        stdio::hold();
        let view = Arc::new(Mutex::new(view));
        let stop = Arc::new(AtomicBool::new(false));
        let (v, s) = (view.clone(), stop.clone());
        let spawned = std::thread::Builder::new()
            .name("qbench-tui".into())
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    {
                        let mut v = lock(&v);
                        v.messages = stdio::recent(3);
                        if term.draw(|f| draw(f, &v)).is_err() {
                            break;
                        }
                    }
                    // crossterm reads where the terminal's keys come from, which may not be
                    // stdin: it is asked too, without waiting, so that a read never blocks
                    // the thread that `close` joins.
                    if key_waiting() && event::poll(Duration::ZERO).unwrap_or(false) {
                        if let Ok(Event::Key(k)) = event::read() {
                            if stops(k) {
                                // SAFETY: signalling our own process, as the terminal would.
                                unsafe { libc::kill(libc::getpid(), libc::SIGINT) };
                            }
                        }
                    }
                }
                let _ = ratatui::try_restore();
            });
        match spawned {
            Ok(t) => Ok(Self {
                view,
                stop,
                thread: Mutex::new(Some(t)),
            }),
            Err(e) => {
                let _ = ratatui::try_restore();
                stdio::release();
                Err(e).context("--tui: cannot start the view's thread")
            }
        }
    }

    /// Adds interval `r` of run `run`, and the busiest client thread over it.
    pub fn add(&self, run: u32, r: &IntervalRecord, busiest: Option<(String, f64)>) {
        lock(&self.view).add(run, r, busiest);
    }

    /// Gives the terminal back and writes the lines kept from it; once.
    pub fn close(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(t) = thread {
            // The thread checks `stop` every `TICK`.
            let _ = t.join();
            stdio::release();
        }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q_esc_and_ctrl_c_stop_other_keys_do_not() {
        let key = |code, modifiers| KeyEvent::new(code, modifiers);
        assert!(stops(key(KeyCode::Char('q'), KeyModifiers::NONE)));
        assert!(stops(key(KeyCode::Esc, KeyModifiers::NONE)));
        assert!(stops(key(KeyCode::Char('c'), KeyModifiers::CONTROL)));
        assert!(!stops(key(KeyCode::Char('c'), KeyModifiers::NONE)));
        assert!(!stops(key(KeyCode::Enter, KeyModifiers::NONE)));
    }
}
