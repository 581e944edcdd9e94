//! Files written whole: a reader sees the old file or the new one, never
//! half of either.
//!
//! A report written with a plain `fs::write` on a full disk leaves a
//! truncated file that looks like a report (issue 18: 8,192 bytes of a
//! 14 KiB `r.json`), and a crash mid-write leaves the same. Every file soakd
//! writes whole (the report, the HTML page, a merged report or HDR log, a
//! state file) goes through [`write_atomic`]: a temporary file in the same
//! directory (so the rename cannot cross file systems), written, fsynced,
//! renamed over the target, then the directory fsynced so the rename itself
//! survives a power cut. On any failure the temporary file is removed and
//! the old file is left as it was.
//!
//! A week-long soak's result must not be lost because its report cannot
//! go where it was asked to: [`write_with_fallback`] then writes it to the
//! temporary directory (`$TMPDIR`, else `/tmp`) under a name that says what
//! it is, and as a last resort onto stderr, and says where it went.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` atomically (see the module doc). On error,
/// `path` is unchanged and no temporary file is left behind.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// [`write_atomic`] of what `fill` writes, through a buffer of its own:
/// the file's bytes are never all in memory (a `--state` checkpoint of
/// megabytes is streamed, so the writer's memory does not grow with it).
pub fn write_atomic_with(path: &Path, fill: impl FnOnce(&mut dyn io::Write) -> io::Result<()>) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
    let (tmp, file) = create_temp(dir, &name.to_string_lossy())?;
    let mut out = io::BufWriter::with_capacity(64 * 1024, file);
    let written = fill(&mut out)
        .and_then(|()| out.into_inner().map_err(io::IntoInnerError::into_error))
        .and_then(|file| file.sync_all().map(|()| file))
        .and_then(|file| {
            drop(file);
            fs::rename(&tmp, path)
        });
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    // The rename is done; a failed directory fsync (some file systems do
    // not support it) does not undo it, so it is not an error of the write.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Whether [`write_atomic`] could write `path`: not a directory, and its
/// directory takes a new file (a probe, removed at once; mode bits do not
/// tell, with ACLs, read-only mounts and root). Neither creates nor
/// truncates `path` itself, so a failed run leaves no empty file.
pub fn check_writable(path: &Path) -> io::Result<()> {
    if path.is_dir() {
        return Err(io::Error::new(io::ErrorKind::IsADirectory, "it is a directory"));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map_or("probe".into(), |n| n.to_string_lossy().into_owned());
    let (tmp, file) = create_temp(dir, &name)?;
    drop(file);
    fs::remove_file(&tmp)
}

/// A new, hidden temporary file beside the target: `.NAME.PID.N.tmp`,
/// created exclusively so two writers never share one.
fn create_temp(dir: &Path, name: &str) -> io::Result<(PathBuf, File)> {
    let pid = std::process::id();
    for n in 0..100u32 {
        let tmp = dir.join(format!(".{name}.{pid}.{n}.tmp"));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "100 temporary files .{name}.{pid}.*.tmp already exist in {}",
            dir.display()
        ),
    ))
}

/// Where a file went when it could not go where it was asked.
#[derive(Debug, PartialEq, Eq)]
pub enum Fallback {
    /// Written whole to this file instead.
    File(PathBuf),
    /// Printed on stderr (nothing else was writable).
    Stderr,
    /// Nowhere: not even stderr took it.
    Lost,
}

/// Writes `bytes` to `path` atomically; when that fails, to the temporary
/// directory as `soakd-KIND-PID-UNIXSECONDS.EXT` (`ext` from `path`), and
/// when that fails too, onto stderr if `stderr_ok` (text, e.g. JSON; not a
/// whole HTML page). Returns the first error and where the bytes went
/// instead; `Ok` when they went to `path`.
pub fn write_with_fallback(
    path: &Path,
    bytes: &[u8],
    kind: &str,
    stderr_ok: bool,
) -> Result<(), (io::Error, Fallback)> {
    write_with_fallback_in(path, bytes, kind, stderr_ok, &std::env::temp_dir())
}

/// [`write_with_fallback`] with the fallback directory given (for tests).
fn write_with_fallback_in(
    path: &Path,
    bytes: &[u8],
    kind: &str,
    stderr_ok: bool,
    fallback_dir: &Path,
) -> Result<(), (io::Error, Fallback)> {
    let Err(e) = write_atomic(path, bytes) else {
        return Ok(());
    };
    let ext = path
        .extension()
        .map_or("out".into(), |x| x.to_string_lossy().into_owned());
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let other = fallback_dir.join(format!("soakd-{kind}-{}-{secs}.{ext}", std::process::id()));
    // The same directory as the target is not tried: it is what just failed.
    if other != path && write_atomic(&other, bytes).is_ok() {
        return Err((e, Fallback::File(other)));
    }
    if stderr_ok {
        let mut err = io::stderr().lock();
        let printed = writeln!(err, "soakd: the {kind} follows, as nothing else could take it:")
            .and_then(|()| err.write_all(bytes))
            .and_then(|()| writeln!(err))
            .and_then(|()| err.flush());
        if printed.is_ok() {
            return Err((e, Fallback::Stderr));
        }
    }
    Err((e, Fallback::Lost))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("soakd-fsio-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn names(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replaces_the_file_whole_and_leaves_no_temporary() {
        let d = dir("replace");
        let p = d.join("r.json");
        write_atomic(&p, b"old").unwrap();
        write_atomic(&p, b"new and longer").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"new and longer");
        assert_eq!(names(&d), ["r.json"]);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary() {
        let d = dir("fail");
        let p = d.join("r.json");
        write_atomic(&p, b"old").unwrap();
        // A directory where the file should be cannot be renamed over: the
        // write fails after the temporary was written.
        let blocked = d.join("sub");
        fs::create_dir(&blocked).unwrap();
        fs::write(blocked.join("x"), b"x").unwrap();
        assert!(write_atomic(&blocked, b"new").is_err());
        assert_eq!(fs::read(&p).unwrap(), b"old");
        assert_eq!(names(&d), ["r.json", "sub"]);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn falls_back_to_the_other_directory_and_names_it() {
        let d = dir("fallback");
        let spare = dir("fallback-spare");
        let missing = d.join("no-such-dir").join("r.json");
        let (e, went) = write_with_fallback_in(&missing, b"{}", "report", true, &spare).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let Fallback::File(f) = went else {
            panic!("not written to a file: {went:?}")
        };
        assert!(
            f.starts_with(&spare) && f.extension().is_some_and(|x| x == "json"),
            "{f:?}"
        );
        assert_eq!(fs::read(&f).unwrap(), b"{}");
        // Neither place writable: stderr takes it.
        let nowhere = d.join("also-missing");
        let (_, went) = write_with_fallback_in(&missing, b"{}", "report", true, &nowhere).unwrap_err();
        assert_eq!(went, Fallback::Stderr);
        let (_, went) = write_with_fallback_in(&missing, b"<html>", "HTML report", false, &nowhere).unwrap_err();
        assert_eq!(went, Fallback::Lost);
        fs::remove_dir_all(&d).unwrap();
        fs::remove_dir_all(&spare).unwrap();
    }
}
