//! The names soakd counts things under: error kinds and close reasons.
//!
//! Declared once with [`name_table!`]; the report, the metric labels and
//! the docs all take their names from here.

name_table! {
    /// Why a request or connection failed. The names are a contract shared
    /// by the report, the metrics and the docs.
    pub enum ErrorKind {
        /// The target refused the connection (ECONNREFUSED).
        ConnectRefused = "connect_refused",
        /// The connect did not finish within `--connect-timeout` (or ETIMEDOUT).
        ConnectTimeout = "connect_timeout",
        /// Any other connect failure (unreachable network, reset during connect).
        ConnectOther = "connect_other",
        /// No local address/port left (EADDRNOTAVAIL: ephemeral ports exhausted).
        AddrUnavailable = "addr_unavailable",
        /// No file descriptor left (EMFILE/ENFILE).
        FdLimit = "fd_limit",
        /// The established connection was reset (ECONNRESET, EPIPE).
        Reset = "reset",
        /// The peer closed while a response was still owed.
        Eof = "eof",
        /// No complete response within `--request-timeout`.
        Timeout = "timeout",
        /// A response that cannot be parsed or framed, or bytes nobody asked for.
        Protocol = "protocol",
        /// The server's certificate failed verification (unknown issuer,
        /// expired, wrong name).
        TlsCertificate = "tls_certificate",
        /// Any other TLS handshake failure: an alert from the server,
        /// plaintext on a TLS port, a close or reset during the handshake,
        /// a handshake that did not finish within the connect timeout.
        TlsHandshake = "tls_handshake",
        // HTTP/2
        /// The server reset the stream (RST_STREAM with any code but
        /// REFUSED_STREAM, which is retried).
        StreamReset = "stream_reset",
        /// The server ended the connection with GOAWAY and an error code.
        GoawayError = "goaway_error",
        /// The server broke HTTP/2's rules: a bad frame or header block, a
        /// flood of control frames, a flow-control violation.
        H2Protocol = "h2_protocol",
        /// `--http 2` and the server would not speak HTTP/2 (ALPN picked
        /// another protocol, or h2c was answered with something else).
        H2NotNegotiated = "h2_not_negotiated",
        // WebSocket
        /// The WebSocket upgrade was refused (an answer other than 101, a
        /// wrong Sec-WebSocket-Accept, a subprotocol or extension not
        /// offered) or did not finish within the connect timeout.
        WsHandshake = "ws_handshake",
        /// A frame that breaks RFC 6455 (reserved bits, an unknown opcode,
        /// a masked server frame, a bad close, text that is not UTF-8) or a
        /// message over `--ws-max-message`; soakd closes with 1002, 1007 or
        /// 1009.
        WsProtocol = "ws_protocol",
        /// The server closed the WebSocket with a code other than 1000
        /// (normal) or 1001 (going away), or while a reply was owed.
        WsClosed = "ws_closed",
        // WebSocket: ping timeout
        /// A ping soakd sent got no pong within `--ws-ping-timeout`: the
        /// socket is failed (close 1011) and the slot reconnects.
        WsPingTimeout = "ws_ping_timeout",
        // HTTP/2 (header-list limit)
        /// A request not sent because its header list is larger than the
        /// server's SETTINGS_MAX_HEADER_LIST_SIZE (counted as missed, with
        /// this kind as the reason).
        H2HeaderListTooLarge = "h2_header_list_too_large",
        // HTTP/2 (retries)
        /// A request the server did not process (REFUSED_STREAM, or a
        /// stream above a GOAWAY's last) on four connections' worth of
        /// tries in a row: soakd stops sending it again and it fails.
        H2RetriesExhausted = "h2_retries_exhausted",
        // Owed output
        /// A request or message not sent because the server stopped
        /// reading: more than 64 KiB were already owed to it on the
        /// connection (counted as missed, with this kind as the reason; the
        /// request or ping timeout then ends a peer that stopped for good).
        SendStalled = "send_stalled",
        // gRPC
        /// A gRPC call ended with a status other than OK (the code is
        /// counted apart, in the workload's `grpc` figures); the
        /// connection stays.
        GrpcStatus = "grpc_status",
        // HTTP/2 keepalive (--h2-ping)
        /// The server ended the connection with GOAWAY ENHANCE_YOUR_CALM
        /// and the debug data "too_many_pings": soakd's `--h2-ping` is
        /// more often than the server's keepalive policy allows (gRPC's
        /// `min_ping_interval_without_data`, grpc-go's EnforcementPolicy).
        TooManyPings = "too_many_pings",
        /// An HTTP/2 PING soakd sent (`--h2-ping`) got no ACK within
        /// [`H2_PING_TIMEOUT`](crate::plan::defaults::H2_PING_TIMEOUT): the
        /// connection is dead or the server stopped reading.
        H2PingTimeout = "h2_ping_timeout",
        // HTTP/3 over QUIC
        /// The QUIC connection was idle past the negotiated
        /// `max_idle_timeout` (no packet from the server in that time,
        /// keep-alive PINGs included).
        QuicIdleTimeout = "quic_idle_timeout",
        /// The server answered with a QUIC stateless reset: it has no
        /// state for the connection (restarted, or the connection was
        /// routed to another instance).
        QuicStatelessReset = "quic_stateless_reset",
        /// The server speaks no QUIC version soakd does (version
        /// negotiation failed).
        QuicVersion = "quic_version",
        /// A QUIC transport error, detected by either side (the code's
        /// name is logged once per code).
        QuicTransport = "quic_transport",
        /// The server closed the connection with an HTTP/3 error code
        /// other than H3_NO_ERROR (its name is logged once per code).
        H3Closed = "h3_closed",
        /// The server broke HTTP/3's rules on a stream soakd reads: a
        /// malformed frame, a field section that is not valid QPACK
        /// without a dynamic table, a response without a status.
        H3Protocol = "h3_protocol",
    }
}

impl ErrorKind {
    /// The kinds that are limits of soakd's own host (ports exhausted,
    /// descriptors exhausted), not the target's failures: `soakd compare`
    /// leaves them out of the error rate it judges, and an outage is not
    /// made of them.
    pub const HOST: [ErrorKind; 2] = [ErrorKind::AddrUnavailable, ErrorKind::FdLimit];

    /// True for failures to establish a connection.
    pub fn is_connect(self) -> bool {
        matches!(
            self,
            ErrorKind::ConnectRefused
                | ErrorKind::ConnectTimeout
                | ErrorKind::ConnectOther
                | ErrorKind::AddrUnavailable
                | ErrorKind::FdLimit
                | ErrorKind::TlsCertificate
                | ErrorKind::TlsHandshake
                | ErrorKind::H2NotNegotiated
                | ErrorKind::WsHandshake
                | ErrorKind::QuicVersion
        )
    }
}

name_table! {
    /// Why an established connection was closed.
    pub enum CloseReason {
        /// The server closed it without owing a response (`Connection:
        /// close`, HTTP/1.0, an idle close, a close-delimited body).
        ServerClose = "server_close",
        /// An error (see [`ErrorKind`]).
        Error = "error",
        /// soakd's planned churn: `--close`, `--max-requests-per-conn`,
        /// `--max-conn-lifetime`.
        Churn = "churn",
        /// The run stopped.
        Shutdown = "shutdown",
    }
}

name_table! {
    /// Response status classes, as counted and labelled (`code`).
    pub enum StatusClass {
        /// 100-199 (only a final 1xx counts; interim ones are skipped).
        Informational = "1xx",
        /// 200-299.
        Success = "2xx",
        /// 300-399.
        Redirection = "3xx",
        /// 400-499.
        ClientError = "4xx",
        /// 500-599, and anything out of range.
        ServerError = "5xx",
    }
}

impl StatusClass {
    /// The class a status code is counted under.
    #[inline]
    pub fn of(status: u16) -> StatusClass {
        match status {
            100..=199 => StatusClass::Informational,
            200..=299 => StatusClass::Success,
            300..=399 => StatusClass::Redirection,
            400..=499 => StatusClass::ClientError,
            _ => StatusClass::ServerError,
        }
    }
}

name_table! {
    /// The response checks a request may carry (`check` label). A failed
    /// check is not an error of the connection: it is counted apart and
    /// the connection is kept.
    pub enum CheckKind {
        /// The status was not one of `expect_status` (default 2xx or 3xx).
        Status = "status",
        /// A header of `expect_header` was missing or had another value.
        Header = "header",
        /// `expect_body_contains` was not found in the body's first
        /// `check_body_limit` bytes.
        Body = "body",
        /// The body was longer than `max_body_bytes`.
        Size = "size",
    }
}

/// Reads a count per kind (`[u64; N]`) from a `--state` checkpoint that an
/// older soakd wrote: it knew fewer kinds (`send_stalled` came with issue
/// 28, more come with later protocols). Kinds are only ever appended to
/// their table (`stats::tests::names_are_the_contract` holds the order), so a shorter
/// array is the older build's counts, and the kinds it did not have start
/// at 0. A soak that outlives an upgrade continues; a longer array (a
/// newer soakd's checkpoint) is refused.
pub fn counts_from_older<'de, D, const N: usize>(d: D) -> Result<[u64; N], D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::Deserialize;
    let counts = Vec::<u64>::deserialize(d)?;
    if counts.len() > N {
        return Err(serde::de::Error::custom(format!(
            "{} counts where this soakd knows {N} kinds: written by a newer soakd",
            counts.len()
        )));
    }
    let mut all = [0; N];
    all[..counts.len()].copy_from_slice(&counts);
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_older_count_array_reads_as_a_prefix() {
        #[derive(serde::Deserialize)]
        struct C {
            #[serde(deserialize_with = "counts_from_older")]
            errors: [u64; 4],
        }
        let c: C = serde_json::from_str(r#"{"errors":[1,2]}"#).unwrap();
        assert_eq!(c.errors, [1, 2, 0, 0]);
        let c: C = serde_json::from_str(r#"{"errors":[1,2,3,4]}"#).unwrap();
        assert_eq!(c.errors, [1, 2, 3, 4]);
        let e = serde_json::from_str::<C>(r#"{"errors":[1,2,3,4,5]}"#).err().unwrap();
        assert!(e.to_string().contains("written by a newer soakd"), "{e}");
    }

    #[test]
    fn names_round_trip_and_are_unique() {
        let names: std::collections::HashSet<_> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names.len(), ErrorKind::COUNT);
        for k in ErrorKind::ALL {
            assert_eq!(ErrorKind::from_name(k.name()), Some(k));
            assert_eq!(ErrorKind::ALL[k as usize], k);
        }
        for r in CloseReason::ALL {
            assert_eq!(CloseReason::ALL[r as usize], r);
        }
        assert_eq!(StatusClass::of(204).name(), "2xx");
        assert_eq!(StatusClass::of(700).name(), "5xx");
    }
}
