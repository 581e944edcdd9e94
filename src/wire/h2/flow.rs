//! HTTP/2 flow control and the peer's SETTINGS, for both sides.
//!
//! The client (`engine/worker/h2.rs`) and the built-in target's server
//! (`server/h2_conn.rs`) each once kept their own windows and applied
//! SETTINGS their own way; these are the rules written once (RFC 9113
//! §5.2, §6.5, §6.9):
//!
//! - [`PeerSettings`]: what the peer announced that bears on what we send
//!   (streams, initial window, frame size, header-list size). A new
//!   SETTINGS_INITIAL_WINDOW_SIZE shifts every open stream's send window by
//!   the difference, so [`PeerSettings::apply`] returns that shift.
//! - [`SendWindow`]: credit the peer gave us (connection or stream); it may
//!   go negative after a shrinking SETTINGS, and a WINDOW_UPDATE that takes
//!   it past 2^31−1 is the peer's FLOW_CONTROL_ERROR.
//! - [`RecvWindow`]: what we let the peer send (connection or stream), the
//!   DATA taken since we last credited it, and when a WINDOW_UPDATE is owed:
//!   once the bytes taken reach a threshold the caller picks (the client
//!   waits for half its large window, so a response costs few updates; the
//!   target credits at once). DATA past the window is the peer's error.
//!
//! Values are validated by the frame decoder (out-of-range SETTINGS are a
//! connection error there); nothing here allocates.

use super::frame::{DEFAULT_MAX_FRAME_SIZE, DEFAULT_WINDOW, ErrorCode, MAX_WINDOW, Settings, setting};

/// What the peer announced, as it bears on what we may send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerSettings {
    /// SETTINGS_MAX_CONCURRENT_STREAMS (`u32::MAX`: none given).
    pub max_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: a new stream's send window.
    pub initial_window: i64,
    /// SETTINGS_MAX_FRAME_SIZE: the largest frame payload we may send.
    pub max_frame: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE (`u32::MAX`: none given).
    pub max_header_list: u32,
}

impl Default for PeerSettings {
    /// The protocol's defaults, in force until the peer's SETTINGS arrive.
    fn default() -> PeerSettings {
        PeerSettings {
            max_streams: u32::MAX,
            initial_window: i64::from(DEFAULT_WINDOW),
            max_frame: DEFAULT_MAX_FRAME_SIZE,
            max_header_list: u32::MAX,
        }
    }
}

impl PeerSettings {
    /// Applies a SETTINGS frame's parameters (in order, as the RFC says);
    /// returns how much every open stream's send window moves (a new
    /// initial window minus the old one). Unknown parameters are ignored.
    pub fn apply(&mut self, params: &Settings<'_>) -> i64 {
        let mut shift = 0;
        for (id, v) in params.iter() {
            match id {
                setting::MAX_CONCURRENT_STREAMS => self.max_streams = v,
                setting::INITIAL_WINDOW_SIZE => {
                    shift += i64::from(v) - self.initial_window;
                    self.initial_window = i64::from(v);
                }
                setting::MAX_FRAME_SIZE => self.max_frame = v,
                setting::MAX_HEADER_LIST_SIZE => self.max_header_list = v,
                _ => {}
            }
        }
        shift
    }

    /// The peer's stream limit as a gauge shows it (0: none given).
    pub fn streams_limit(&self) -> u32 {
        if self.max_streams == u32::MAX {
            0
        } else {
            self.max_streams
        }
    }
}

/// Credit the peer gave us to send DATA (a connection's or a stream's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendWindow(i64);

impl SendWindow {
    /// A window of `initial` bytes.
    pub fn new(initial: i64) -> SendWindow {
        SendWindow(initial)
    }

    /// Bytes that may be sent now (0 when the window is spent or negative).
    #[inline]
    pub fn room(&self) -> u32 {
        self.0.clamp(0, i64::from(MAX_WINDOW)) as u32
    }

    /// `n` bytes were sent.
    #[inline]
    pub fn spend(&mut self, n: u32) {
        self.0 -= i64::from(n);
    }

    /// A WINDOW_UPDATE of `increment`; past 2^31−1 it is the peer's
    /// FLOW_CONTROL_ERROR.
    pub fn grow(&mut self, increment: u32) -> Result<(), ErrorCode> {
        self.0 += i64::from(increment);
        if self.0 > i64::from(MAX_WINDOW) {
            Err(ErrorCode::FlowControlError)
        } else {
            Ok(())
        }
    }

    /// A new SETTINGS_INITIAL_WINDOW_SIZE moved a stream's window by
    /// `shift` (it may go negative: sending waits until updates lift it).
    pub fn shift(&mut self, shift: i64) {
        self.0 += shift;
    }
}

/// What we let the peer send (a connection's or a stream's window), and
/// the credit we owe back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvWindow {
    /// Bytes the peer may still send.
    left: i64,
    /// Bytes taken since we last credited the window.
    taken: u32,
}

impl RecvWindow {
    /// A window of `size` bytes (what we announced).
    pub fn new(size: u32) -> RecvWindow {
        RecvWindow {
            left: i64::from(size),
            taken: 0,
        }
    }

    /// `n` bytes of DATA arrived (its flow-controlled length, padding
    /// included); past the window it is the peer's FLOW_CONTROL_ERROR.
    #[inline]
    pub fn take(&mut self, n: u32) -> Result<(), ErrorCode> {
        self.left -= i64::from(n);
        self.taken = self.taken.saturating_add(n);
        if self.left < 0 {
            Err(ErrorCode::FlowControlError)
        } else {
            Ok(())
        }
    }

    /// The WINDOW_UPDATE increment owed once `threshold` bytes or more
    /// were taken since the last one (the window opens again by it);
    /// `None` below the threshold or when nothing was taken.
    #[inline]
    pub fn credit(&mut self, threshold: u32) -> Option<u32> {
        if self.taken == 0 || self.taken < threshold {
            return None;
        }
        let n = std::mem::take(&mut self.taken);
        self.left += i64::from(n);
        Some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::h2::{Frame, FrameDecoder, encode_settings};

    fn settings(params: &[(u16, u32)]) -> Vec<u8> {
        let mut b = Vec::new();
        encode_settings(&mut b, false, params);
        b
    }

    #[test]
    fn settings_apply_in_order_and_shift_the_streams() {
        let mut p = PeerSettings::default();
        assert_eq!(p.streams_limit(), 0);
        let bytes = settings(&[
            (setting::MAX_CONCURRENT_STREAMS, 10),
            (setting::INITIAL_WINDOW_SIZE, 100_000),
            (setting::INITIAL_WINDOW_SIZE, 1_000),
            (setting::MAX_FRAME_SIZE, 20_000),
            (0x99, 7),
        ]);
        let mut d = FrameDecoder::new(1 << 20, 1 << 20);
        let Some((Frame::Settings { params, .. }, _)) = d.decode(&bytes).unwrap() else {
            panic!("a SETTINGS frame")
        };
        let shift = p.apply(&params);
        assert_eq!(shift, 1_000 - i64::from(DEFAULT_WINDOW));
        assert_eq!((p.streams_limit(), p.initial_window, p.max_frame), (10, 1_000, 20_000));
        let mut w = SendWindow::new(i64::from(DEFAULT_WINDOW));
        w.spend(60_000);
        w.shift(shift);
        assert_eq!(w.room(), 0, "a shrunk window may go negative");
        w.grow(100_000).unwrap();
        assert_eq!(w.room(), 100_000 + 1_000 - 60_000);
        assert_eq!(w.grow(MAX_WINDOW), Err(ErrorCode::FlowControlError));
    }

    #[test]
    fn receive_windows_credit_at_their_threshold_and_refuse_overruns() {
        let mut r = RecvWindow::new(100);
        r.take(30).unwrap();
        assert_eq!(r.credit(50), None);
        r.take(30).unwrap();
        assert_eq!(r.credit(50), Some(60));
        assert_eq!(r.credit(1), None, "nothing taken since");
        r.take(100).unwrap();
        assert_eq!(r.take(1), Err(ErrorCode::FlowControlError));
    }
}
