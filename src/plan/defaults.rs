//! Every default and limit of a plan, written once.
//!
//! The command line, the config file, `--help` texts and the docs all mean
//! these values; keeping them here means a changed default cannot leave one
//! of them behind.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use super::http::HttpVersion;
use super::tls_version::TlsVersion;

/// Connections per workload.
pub const CONNECTIONS: u32 = 100;
/// New connections per second while ramping up.
pub const RAMP: u32 = 1000;
/// Request method.
pub const METHOD: &str = "GET";
/// Requests in flight per connection.
pub const PIPELINE: u16 = 1;
/// Deepest pipeline accepted.
pub const MAX_PIPELINE: u16 = 1024;
/// The shortest TCP keepalive idle time: the kernel counts it in whole
/// seconds.
pub const MIN_TCP_KEEPALIVE: Duration = Duration::from_secs(1);
/// Unanswered TCP keepalive probes before the kernel gives a connection up
/// (ETIMEDOUT, counted as `timeout`); they go every third of the idle time.
pub const TCP_KEEPALIVE_PROBES: u32 = 3;
/// Time a connect may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Time a request may wait for its complete response.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Lowest TLS version offered: 1.2, which every server still speaking
/// TLS accepts; 1.0 and 1.1 are not offered at all (rustls has neither).
pub const TLS_MIN: TlsVersion = TlsVersion::V12;
/// Highest TLS version offered.
pub const TLS_MAX: TlsVersion = TlsVersion::V13;
/// Resume TLS sessions when a slot reconnects: what real clients do, so a
/// churning soak measures the handshakes a server really sees.
pub const TLS_RESUMPTION: bool = true;
/// Time allowed for responses in flight after a stop.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest request body. Request bytes are kept once per workload and
/// shared by every worker, so this bounds soakd's own memory per workload;
/// 16 MiB is far beyond what an API soak sends.
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// Where the Prometheus endpoint listens: loopback, so a soak never exposes
/// its figures (or the target's name) to the network unasked.
pub const METRICS_LISTEN: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9469));

/// Length of one HDR interval log interval: short enough that a soak of
/// minutes has a dozen samples per workload for `soakd compare`, long
/// enough that a day's log stays small.
pub const HDR_LOG_INTERVAL: Duration = Duration::from_secs(10);
/// How often the server watch reads every source (`--target-metrics`,
/// `--prometheus`, the pid files and cgroups): Prometheus' own default
/// scrape interval, and 360 values in an hour for the slopes.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(10);
/// The largest exposition (or query answer) the watch reads: node
/// exporters write ~100 KB, a cluster's kube-state-metrics tens of MB;
/// past this a scrape is a `too_large` failure, not memory soakd keeps.
pub const WATCH_MAX_BODY: usize = 16 * 1024 * 1024;
/// How often `--state` is written: a restart loses at most this much of
/// the run (plus the restart itself); a checkpoint costs the control
/// thread a copy of the totals and a writer thread an encode and an
/// fsync, so every 30 s is noise even at 15,000 connections.
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(30);
/// `soakd compare`: the smallest relative change that counts (10%).
pub const TOLERANCE: f64 = 0.10;
/// `--baseline`: how much of the run each live verdict judges. Five
/// minutes of a paced soak hold thirty 10 s intervals for the rank test
/// (so a regression is named within one or two windows) and smooth a
/// minute-long hiccup of a shared machine away; a shorter one answers
/// sooner with fewer samples (`--baseline-window 1m` gives six).
pub const BASELINE_WINDOW: Duration = Duration::from_secs(300);
/// `soakd compare`: the smallest change of a latency that counts, however
/// large relative to the baseline. Below a millisecond, run-to-run
/// differences on a shared machine are the scheduler's, not the server's
/// (see docs/verdicts.md for the measurements behind it).
pub const MIN_LATENCY_CHANGE: Duration = Duration::from_millis(1);
/// `soakd compare`: the smallest change of the error rate that counts
/// (0.1 percentage point): from 0 to 1 error in 10,000 is not a verdict.
pub const MIN_ERROR_RATE_CHANGE: f64 = 0.001;
/// `soakd compare`: the significance level of the rank test on
/// per-interval samples.
pub const SIGNIFICANCE: f64 = 0.01;

/// The comparison rules' defaults, for `soakd compare`, `--baseline` and
/// the live baseline windows (`--tolerance` replaces the first).
impl Default for crate::stats::judge::Options {
    fn default() -> Self {
        crate::stats::judge::Options {
            tolerance: TOLERANCE,
            min_latency_change: MIN_LATENCY_CHANGE.as_secs_f64(),
            min_error_rate_change: MIN_ERROR_RATE_CHANGE,
            significance: SIGNIFICANCE,
        }
    }
}
// Outages and events
/// A second is part of an outage when errors exceed this share of its
/// attempts (`--outage-errors`): a few errors a second are noise, a twentieth
/// of everything failing is not.
pub const OUTAGE_ERRORS: f64 = 0.05;
/// ... or when open connections fall below this share of those desired
/// (`--outage-open`): a tenth lost at once is no churn.
pub const OUTAGE_OPEN: f64 = 0.90;
/// How long errors and connections must stay back for an outage to end
/// (`--outage-settle`): a server that flaps for a minute is one outage,
/// not twelve.
pub const OUTAGE_SETTLE: Duration = Duration::from_secs(5);
/// An outage starting this close to an event is attributed to it
/// (`--event-window`): a deploy's effect shows within a couple of minutes.
pub const EVENT_WINDOW: Duration = Duration::from_secs(120);
/// How long an event's command may run before it is killed (`timeout`
/// of an `[[event]]`).
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(600);

/// Longest default warmup: however long the soak, ten minutes is enough
/// for caches, JITs and pools to settle.
pub const MAX_WARMUP: Duration = Duration::from_secs(600);

/// The warmup of a run of length `run` (the planned duration, or the time
/// it ran when it had none): 10% of it, at most [`MAX_WARMUP`]. The
/// report's trends skip it (after the ramp), so a server filling its
/// caches does not read as a leak. A `--warmup` flag can feed this later.
pub fn default_warmup(run: Duration) -> Duration {
    (run / 10).min(MAX_WARMUP)
}

/// Worker threads when not given: one per available CPU, or with
/// `soakd run --processes N` the process's part of them (at least one):
/// N processes of one thread per CPU each would only crowd the cores.
pub fn threads() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cpus / PROCESSES.load(std::sync::atomic::Ordering::Relaxed).max(1)).max(1)
}

/// Processes sharing this host's CPUs (see [`threads`]); 1 but in a shard
/// of `soakd run --processes N`.
static PROCESSES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);

/// Says this process is one of `n` sharing the host's CPUs (a shard of
/// `soakd run --processes n`), before its plan is built.
pub fn share_cpus(n: usize) {
    PROCESSES.store(n, std::sync::atomic::Ordering::Relaxed);
}

// HTTP/2
/// The HTTP version: `auto` offers h2 and HTTP/1.1 over TLS (ALPN) and
/// speaks HTTP/1.1 on `http://`.
pub const HTTP: HttpVersion = HttpVersion::Auto;
/// Concurrent HTTP/2 streams per connection (capped by the server's
/// SETTINGS_MAX_CONCURRENT_STREAMS).
pub const STREAMS: u16 = 1;
/// soakd's HTTP/2 receive windows (connection and each stream), bytes:
/// 16 MiB, so a 1 MB response at 100 ms RTT is not window-bound (the
/// window is credit, not a buffer: received data is counted and dropped).
pub const H2_WINDOW: u32 = 16 * 1024 * 1024;
/// The smallest `--h2-window`: the RFC's initial window.
pub const MIN_H2_WINDOW: u32 = 65_535;
/// The largest `--h2-window` (2^31 - 1, RFC 9113 §6.9.1).
pub const MAX_H2_WINDOW: u32 = (1 << 31) - 1;

/// Most requests in one workload's mix. Each is a value of the `request`
/// metric label, so this bounds that label's cardinality (and the per-request
/// histograms every worker keeps).
pub const MAX_REQUESTS: usize = 64;
/// Largest weight of one request in a mix. The selection cycle is the sum of
/// the weights (divided by their greatest common divisor) bytes long.
pub const MAX_WEIGHT: u32 = 10_000;
/// Weight of a request that gives none.
pub const WEIGHT: u32 = 1;

/// How often each HTTP/2 connection sends a PING (`--h2-ping`, gRPC's
/// keepalive): off unless asked, as gRPC clients default to (a server
/// enforces a minimum interval and punishes pings more often than that).
pub const H2_PING: Option<Duration> = None;

/// HTTP/3: send the first requests of a resumed connection as 0-RTT data
/// (`--h3-0rtt`): off unless asked, as 0-RTT requests can be replayed
/// (RFC 9001 §9.2) and not every request is safe to send twice.
pub const H3_0RTT: bool = false;
/// How long a PING of `--h2-ping` may go without its ACK before the
/// connection is failed (`h2_ping_timeout`): gRPC's default keepalive
/// timeout (20 s in C-core, grpc-go and grpc-java).
pub const H2_PING_TIMEOUT: Duration = Duration::from_secs(20);

// WebSocket
/// How often a held WebSocket pings the server (`--ws-ping`; `off`,
/// `None`, never).
pub const WS_PING: Option<Duration> = Some(Duration::from_secs(30));
/// The largest WebSocket message accepted (`--ws-max-message`), bytes.
pub const WS_MAX_MESSAGE: u32 = 1024 * 1024;
/// How long a closing WebSocket waits for the server's close frame at the
/// end of a run.
pub const WS_CLOSE_WAIT: Duration = Duration::from_secs(1);
/// How long a ping may wait for its pong (`--ws-ping-timeout`; `off`
/// never) before the socket is failed with `ws_ping_timeout`. 10 s: far
/// above any pong a live server sends (a pong is answered by the server's
/// read loop, not its application), so a slow server is not cut off, and
/// well inside the default 30 s ping interval, so a dead socket is found
/// before the next ping would be written into it. Python's `websockets`
/// waits 20 s, browsers' and proxies' idle timers 30–60 s: soakd, which
/// looks for sockets that silently died, should notice first.
pub const WS_PING_TIMEOUT: Option<Duration> = Some(Duration::from_secs(10));
/// The shortest ping interval or ping timeout: pings closer together
/// would flood a server, and no server answers faster under load.
pub const MIN_WS_PING: Duration = Duration::from_millis(10);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_is_a_tenth_capped_at_ten_minutes() {
        assert_eq!(default_warmup(Duration::from_secs(180)), Duration::from_secs(18));
        assert_eq!(default_warmup(Duration::from_secs(6000)), MAX_WARMUP);
        assert_eq!(default_warmup(Duration::from_secs(7 * 86400)), MAX_WARMUP);
        assert_eq!(default_warmup(Duration::ZERO), Duration::ZERO);
    }
}
