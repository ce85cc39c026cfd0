//! Waking an event loop when a held answer falls due (docs/architecture.md, "Serving"): the
//! answers of paced devices are held, never slept through, so that one client's device time
//! holds up no one else on the loop. A timerfd wakes the loop a little early, and it polls
//! without sleeping until the answer is due.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// The loop wakes this long before a held answer is due and polls without sleeping until
/// then: on a virtual machine a timer's wake-up comes tens of microseconds late, which at
/// queue depth 16 left a paced device's answers 40 us behind the model.
pub const SPIN_BEFORE: Duration = Duration::from_micros(50);
/// A timerfd: wakes a sleeping loop [`SPIN_BEFORE`] the earliest held answer is due.
pub struct Timer {
    fd: OwnedFd,
    /// When it fires, if armed. Setting a timerfd costs more on a virtual machine than the
    /// request it paces (a third of the loop's time at queue depth 16 when armed for every
    /// answer), so it is set only before the loop sleeps, and only to fire earlier.
    fires_at: Option<Instant>,
}

impl Timer {
    pub fn new() -> io::Result<Timer> {
        // SAFETY: timerfd_create returns a new descriptor or -1; nothing else is touched.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a new descriptor that nothing else owns.
        Ok(Timer {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            fires_at: None,
        })
    }

    /// Fires once [`SPIN_BEFORE`] `due` (at once if that has passed), unless it already
    /// fires by then: an early wake-up only finds nothing due yet.
    fn arm(&mut self, due: Instant) {
        let wake = due.checked_sub(SPIN_BEFORE).unwrap_or(due);
        if self.fires_at.is_some_and(|fires_at| fires_at <= wake) {
            return;
        }
        self.fires_at = Some(wake);
        let after = wake.saturating_duration_since(Instant::now());
        let after = after.max(Duration::from_nanos(1));
        let setting = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: after.as_secs() as libc::time_t,
                tv_nsec: after.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: a valid timerfd and a setting on the stack; the old value is not asked for.
        unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &setting, std::ptr::null_mut()) };
    }

    /// Takes the expiry count, so the descriptor is readable only at the next expiry.
    pub fn clear(&mut self) {
        self.fires_at = None;
        let mut count = [0u8; 8];
        // SAFETY: reads at most 8 bytes into the buffer; a non-blocking read may fail harmlessly.
        unsafe { libc::read(self.fd.as_raw_fd(), count.as_mut_ptr().cast(), 8) };
    }
}

impl Timer {
    /// The descriptor, to register with the loop's poll.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// How long the loop may sleep in its next poll when the earliest held answer is due at
    /// `first_due`: not at all when it is close, else until the timer (armed now) wakes it.
    pub fn poll_timeout(&mut self, first_due: Option<Instant>) -> Option<Duration> {
        let due = first_due?;
        if due <= Instant::now() + SPIN_BEFORE {
            return Some(Duration::ZERO);
        }
        self.arm(due);
        None
    }
}
