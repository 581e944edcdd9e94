//! `--h2-ping`, HTTP/2's keepalive (gRPC's): a PING on each connection
//! every interval from the connection's own timer, its ACK timed, a PING
//! left unanswered failing the connection, and the GOAWAY a server sends
//! when pings come more often than its policy allows. And what a
//! request's timeout means on a connection that is alive: a stream that
//! times out while the server keeps talking (other answers, PING ACKs) is
//! cancelled alone, as a gRPC client cancels one call; only a connection
//! silent since the request was written is failed with everything on it. A file of its own
//! beside the client's state machine, which it reaches only through the
//! protocol seam's timer (`H2::deadline`, `H2::on_time`, shared with the
//! held streams) and two frames.

use super::{H2, Output, Tally, encode_ping};
use crate::netio::pool;
use crate::plan::defaults::H2_PING_TIMEOUT;
use crate::stats::ErrorKind;
use crate::wire::h2::{ErrorCode, encode_rst_stream};

impl H2 {
    /// `--h2-ping`: the next PING, or the ACK owed, whichever is first.
    #[inline]
    pub(super) fn ping_deadline(&self) -> Option<u64> {
        let ack_due = match self.ping_sent {
            0 => u64::MAX,
            sent => sent + H2_PING_TIMEOUT.as_nanos() as u64,
        };
        let d = self.ping_at.min(ack_due);
        (d != u64::MAX).then_some(d)
    }

    /// `--h2-ping`'s timer fired: a PING whose ACK is overdue fails the
    /// connection; a PING due goes out (one at a time: while one waits
    /// for its ACK, the next is skipped, as gRPC's keepalive does).
    pub(super) fn ping_on_time(&mut self, t: &mut Tally<'_>) -> Output {
        let now = t.now;
        if self.ping_sent != 0 && now >= self.ping_sent + H2_PING_TIMEOUT.as_nanos() as u64 {
            crate::netio::log_once("h2-ping-timeout", || {
                format!(
                    "an HTTP/2 PING got no ACK within {}: the connection is failed (h2_ping_timeout) and reconnects",
                    humantime::format_duration(H2_PING_TIMEOUT)
                )
            });
            return Output::Error(ErrorKind::H2PingTimeout);
        }
        if now < self.ping_at {
            return Output::Taken;
        }
        let every = self.rt.ping;
        self.ping_at = if self.ping_at + every > now {
            self.ping_at + every
        } else {
            now + every
        };
        if self.ping_sent != 0 || self.goaway.is_some() {
            return Output::Taken;
        }
        self.ping_sent = now.max(1);
        t.st.ws.pings += 1;
        let data = self.ping_sent.to_be_bytes();
        match self.control(|out| encode_ping(out, false, data)) {
            Some(out) => out,
            None => Output::Ready,
        }
    }

    /// Entry `e`'s request, written at `written`, timed out: when the
    /// server has sent anything since, its stream alone is cancelled
    /// (RST_STREAM CANCEL if its HEADERS went out) and it fails as
    /// `timeout`; `None` when the connection has been silent since (the
    /// caller fails the connection).
    pub(in crate::engine::worker) fn cancel(&mut self, e: u16, written: u64) -> Option<Output> {
        if self.last_rx <= written || self.hold.is_some() {
            return None;
        }
        let s = &self.streams[e as usize];
        if s.rendered {
            encode_rst_stream(pool::get(&mut self.out), s.id, ErrorCode::Cancel);
            self.ready = true;
        }
        self.streams.close(e as usize);
        Some(Output::Failed {
            entry: e,
            kind: ErrorKind::Timeout,
        })
    }

    /// A PING's ACK: only our own PING's carries its send time.
    pub(super) fn on_ping_ack(&mut self, t: &mut Tally<'_>, data: [u8; 8]) {
        if self.ping_sent != 0 && data == self.ping_sent.to_be_bytes() {
            crate::stats::record_ns(&mut t.st.ws.ping_rtt, t.now.saturating_sub(self.ping_sent));
            t.st.ws.pongs += 1;
            self.ping_sent = 0;
        }
    }
}

/// True for GOAWAY ENHANCE_YOUR_CALM "too_many_pings" (gRPC C-core's and
/// grpc-go's answer to pings more frequent than their keepalive policy),
/// said once in the log with the policy and the fix; `every` is
/// `--h2-ping` in ns.
pub(super) fn too_many_pings(code: ErrorCode, debug: &[u8], every: u64) -> bool {
    if code != ErrorCode::EnhanceYourCalm || debug != b"too_many_pings" {
        return false;
    }
    crate::netio::log_once("h2-too-many-pings", || {
        format!(
            "the server ended a connection with GOAWAY ENHANCE_YOUR_CALM \"too_many_pings\": --h2-ping {} is more often than its keepalive policy allows (gRPC's grpc.http2.min_ping_interval_without_data_ms, 5 minutes by default; grpc-go's EnforcementPolicy.MinTime); give a longer --h2-ping or have the server permit it",
            humantime::format_duration(std::time::Duration::from_nanos(every))
        )
    });
    true
}
