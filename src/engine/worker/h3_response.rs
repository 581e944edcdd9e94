//! A response on an HTTP/3 request stream, as its bytes arrive: the
//! frames read, the field section decoded (the static QPACK table only),
//! the status kept and the fields and body fed to the request's checks.
//! Nothing of a response is kept but its status; a field section's
//! Huffman-coded strings are decoded into one per-thread buffer.

use quinn_proto::StreamId;

use crate::plan::CheckState;
use crate::stats::ErrorKind;
use crate::wire::h3::{self, Frame, FrameReader};

/// One request stream: an in-flight entry's stream and what is known of
/// its response.
#[derive(Debug, Default)]
pub(super) struct Lane {
    /// The stream, while the entry is in flight.
    pub(super) id: Option<StreamId>,
    /// Bytes of the request not yet taken by the stream (its flow-control
    /// window was smaller than the request).
    pub(super) unsent: u32,
    /// The response's frames.
    pub(super) reader: FrameReader,
    /// The final status, once its field section arrived.
    pub(super) status: u16,
    /// The request's checks, as the response walks past them.
    pub(super) check: CheckState,
}

/// Feeds one chunk of a response stream to its lane: the field section's
/// status and fields, the body's bytes, to the checks as they pass.
pub(super) fn read_response(
    lane: &mut Lane,
    checks: Option<&crate::plan::Checks>,
    mut b: &[u8],
) -> Result<(), ErrorKind> {
    while !b.is_empty() {
        let (used, frame) = lane.reader.next(b).map_err(|_| ErrorKind::H3Protocol)?;
        match frame {
            Some(Frame::Headers(block)) if lane.status == 0 => {
                let mut status = 0u16;
                let mut seen = 0u64;
                let fields = checks.filter(|c| c.wants_fields());
                let decoded = SCRATCH.with_borrow_mut(|scratch| {
                    h3::decode_block(block, scratch, |n, v| {
                        if n == b":status" {
                            status = std::str::from_utf8(v).ok().and_then(|s| s.parse().ok()).unwrap_or(0);
                        } else if let Some(c) = fields
                            && !n.starts_with(b":")
                        {
                            c.on_field(&mut seen, n, v);
                        }
                    })
                });
                if decoded.is_err() || status == 0 {
                    return Err(ErrorKind::H3Protocol);
                }
                // An interim answer (1xx): the final one follows.
                if status >= 200 {
                    lane.status = status;
                    if let Some(c) = fields {
                        c.end_fields(&mut lane.check, seen);
                    }
                }
            }
            // Trailers: nothing soakd judges.
            Some(Frame::Headers(_)) => {}
            Some(Frame::Data(d)) => {
                if lane.status == 0 {
                    return Err(ErrorKind::H3Protocol);
                }
                if let Some(c) = checks
                    && c.wants_body()
                    && !d.is_empty()
                {
                    c.on_body(&mut lane.check, d);
                }
            }
            Some(Frame::Settings(_) | Frame::Goaway(_)) => return Err(ErrorKind::H3Protocol),
            Some(Frame::Other(_)) | None => {}
        }
        b = &b[used..];
    }
    Ok(())
}

thread_local! {
    /// Huffman-decoded strings of a field section (kept, so steady state
    /// allocates nothing).
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}
