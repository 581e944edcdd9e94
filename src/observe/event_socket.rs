//! `--event-socket PATH`: events marked from outside while a soak runs
//! (a CI job's `echo deploy-42 > PATH` before it deploys).
//!
//! PATH is a FIFO the user made (`mkfifo`), read from, or a Unix stream
//! socket soakd makes there (mode 0600; a stale one is replaced). Every
//! line is one event named by the line. It is local only: no network
//! listener is opened, the metrics port stays read-only.
//!
//! A thread of its own with its own poll (a waker ends it), so a writer
//! that never finishes its line cannot hold the control loop; what a
//! writer can make soakd hold is bounded: a line is cut at
//! [`MAX_LINE`] bytes, at most [`MAX_CLIENTS`] connections are read at
//! once (more wait in the kernel's backlog), and marks arriving faster
//! than [`MAX_PER_SECOND`] a second are dropped and counted.

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Instant;

use mio::net::{UnixListener, UnixStream};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use slab::Slab;

use crate::Error;
use crate::netio::{Got, read_some};

/// Longest line kept (the rest of it is dropped).
const MAX_LINE: usize = 256;
/// Most socket connections read at once.
const MAX_CLIENTS: usize = 32;
/// Most marks taken per second.
const MAX_PER_SECOND: u32 = 20;

const WAKE: Token = Token(usize::MAX);
const SOURCE: Token = Token(usize::MAX - 1);

/// A mark: its name (the line) and when it came.
pub type Mark = (String, Instant);

/// The listening thread; dropping it stops it (and removes the socket it
/// made).
pub struct EventSocket {
    waker: Waker,
    thread: Option<JoinHandle<()>>,
    made: Option<PathBuf>,
    /// The marks read so far.
    pub marks: mpsc::Receiver<Mark>,
}

enum Source {
    Fifo(std::fs::File),
    Socket(UnixListener),
}

impl EventSocket {
    /// Opens `path` (a FIFO, or a socket made there) and starts reading.
    /// Fails (a preflight error, exit 2) when it cannot.
    pub fn open(path: &Path) -> Result<EventSocket, Error> {
        let fail = |why: String| {
            Error::Preflight(format!(
                "--event-socket {}: {why}; give a FIFO (mkfifo) or a new path in a writable directory",
                path.display()
            ))
        };
        let fifo = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_fifo());
        let poll = Poll::new().map_err(|e| fail(format!("cannot create a poll ({e})")))?;
        let mut made = None;
        let mut source = if fifo {
            // Read and write: the FIFO never reads as ended when a writer
            // closes, so one open serves every writer.
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path)
                .map_err(|e| fail(format!("cannot open the FIFO ({e})")))?;
            Source::Fifo(f)
        } else {
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
                // A socket left by an earlier run: nobody listens on it.
                let _ = std::fs::remove_file(path);
            }
            let l = UnixListener::bind(path).map_err(|e| fail(format!("cannot make a socket there ({e})")))?;
            {
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
            }
            made = Some(path.to_path_buf());
            Source::Socket(l)
        };
        let registered = match &mut source {
            Source::Fifo(f) => poll
                .registry()
                .register(&mut SourceFd(&f.as_raw_fd()), SOURCE, Interest::READABLE),
            Source::Socket(l) => poll.registry().register(l, SOURCE, Interest::READABLE),
        };
        registered.map_err(|e| fail(format!("cannot watch it ({e})")))?;
        let waker = Waker::new(poll.registry(), WAKE).map_err(|e| fail(format!("cannot create a waker ({e})")))?;
        let (tx, marks) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("soakd-events".into())
            .spawn(move || Reader::new(poll, source, tx).run())
            .map_err(|e| fail(format!("cannot start a thread ({e})")))?;
        Ok(EventSocket {
            waker,
            thread: Some(thread),
            made,
            marks,
        })
    }
}

impl Drop for EventSocket {
    fn drop(&mut self) {
        let _ = self.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(p) = &self.made {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// One socket connection and its unfinished line.
struct Client {
    stream: UnixStream,
    line: Vec<u8>,
}

struct Reader {
    poll: Poll,
    source: Source,
    clients: Slab<Client>,
    fifo_line: Vec<u8>,
    tx: mpsc::Sender<Mark>,
    /// Marks taken in the current second, and when it began.
    budget: (u32, Instant),
    dropped: u64,
}

impl Reader {
    fn new(poll: Poll, source: Source, tx: mpsc::Sender<Mark>) -> Reader {
        Reader {
            poll,
            source,
            clients: Slab::new(),
            fifo_line: Vec::new(),
            tx,
            budget: (0, Instant::now()),
            dropped: 0,
        }
    }

    fn run(mut self) {
        let mut events = Events::with_capacity(64);
        loop {
            if let Err(e) = self.poll.poll(&mut events, None) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                eprintln!("soakd: --event-socket stopped: {e}");
                return;
            }
            for ev in events.iter() {
                match ev.token() {
                    WAKE => return,
                    SOURCE => self.on_source(),
                    Token(k) => self.on_client(k),
                }
            }
        }
    }

    fn on_source(&mut self) {
        match &mut self.source {
            Source::Fifo(_) => {
                let mut buf = [0u8; 4096];
                loop {
                    let Source::Fifo(f) = &mut self.source else { return };
                    match f.read(&mut buf) {
                        Ok(0) => return,
                        Ok(n) => {
                            let mut line = std::mem::take(&mut self.fifo_line);
                            self.lines(&mut line, &buf[..n]);
                            self.fifo_line = line;
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => return,
                    }
                }
            }
            Source::Socket(l) => loop {
                if self.clients.len() >= MAX_CLIENTS {
                    return;
                }
                match l.accept() {
                    Ok((mut stream, _)) => {
                        let entry = self.clients.vacant_entry();
                        if self
                            .poll
                            .registry()
                            .register(&mut stream, Token(entry.key()), Interest::READABLE)
                            .is_ok()
                        {
                            entry.insert(Client {
                                stream,
                                line: Vec::new(),
                            });
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return,
                }
            },
        }
    }

    fn on_client(&mut self, key: usize) {
        let Some(mut c) = self.clients.try_remove(key) else {
            return;
        };
        let mut buf = [0u8; 4096];
        // To the end (`to_end`): a client that writes its lines and closes
        // raises no edge after its close, so a short read proves nothing.
        let done = loop {
            match read_some(&mut c.stream, &mut buf, true) {
                Ok(Got::Data { n, .. }) => self.lines(&mut c.line, &buf[..n]),
                Ok(Got::Empty) => break false,
                Ok(Got::Eof) | Err(_) => break true,
            }
        };
        if done {
            // A last line without its newline counts too.
            if !c.line.is_empty() {
                let line = std::mem::take(&mut c.line);
                self.mark(&line);
            }
            let _ = self.poll.registry().deregister(&mut c.stream);
            // Room again: connections waiting in the backlog.
            self.on_source();
        } else {
            let entry = self.clients.vacant_entry();
            let _ = self
                .poll
                .registry()
                .reregister(&mut c.stream, Token(entry.key()), Interest::READABLE);
            entry.insert(c);
        }
    }

    /// Splits `data` into lines, `line` holding the unfinished one.
    fn lines(&mut self, line: &mut Vec<u8>, data: &[u8]) {
        for &b in data {
            if b == b'\n' {
                let l = std::mem::take(line);
                self.mark(&l);
            } else if line.len() < MAX_LINE {
                line.push(b);
            }
        }
    }

    fn mark(&mut self, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let Some(name) = crate::plan::events::event_name(&text) else {
            return;
        };
        let now = Instant::now();
        if now.duration_since(self.budget.1).as_secs() >= 1 {
            if self.dropped > 0 {
                eprintln!(
                    "soakd: --event-socket: {} marks dropped (more than {MAX_PER_SECOND} a second)",
                    self.dropped
                );
                self.dropped = 0;
            }
            self.budget = (0, now);
        }
        if self.budget.0 >= MAX_PER_SECOND {
            self.dropped += 1;
            return;
        }
        self.budget.0 += 1;
        let _ = self.tx.send((name, now));
    }
}
