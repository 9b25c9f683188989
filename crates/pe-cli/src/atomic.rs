//! An output file that appears complete or not at all: written under a temporary name in the
//! destination's directory, renamed over the destination only once everything is written.
//! The temporary file is removed on error, and on Ctrl-C or SIGTERM too.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use tempfile::NamedTempFile;

/// Temporary files being written, removed by the interrupt handler.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Makes Ctrl-C and SIGTERM remove the temporary files of unfinished outputs before exiting.
pub fn clean_up_on_interrupt() -> Result<()> {
    ctrlc::set_handler(|| {
        if let Ok(pending) = PENDING.lock() {
            for path in pending.iter() {
                let _ = std::fs::remove_file(path);
            }
        }
        eprintln!("pe: interrupted; no output was written");
        std::process::exit(130);
    })
    .context("cannot install the Ctrl-C handler")
}

/// The directory `path` is written in: its parent, or `.` for a bare file name.
pub fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// A file being written; dropped without [`AtomicFile::commit`], it vanishes.
pub struct AtomicFile {
    /// `None` once committed.
    writer: Option<BufWriter<NamedTempFile>>,
    temporary: PathBuf,
    path: PathBuf,
}

impl AtomicFile {
    /// Starts writing `path`; fails when its directory is missing or not writable.
    pub fn create(path: &Path) -> Result<Self> {
        if path.is_dir() {
            bail!("cannot write {}: it is a directory", path.display());
        }
        let dir = directory_of(path);
        if !dir.is_dir() {
            bail!(
                "cannot write {}: the directory {} does not exist",
                path.display(),
                dir.display()
            );
        }
        let mut builder = tempfile::Builder::new();
        builder.prefix(".pe-").suffix(".partial");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o644));
        }
        // The temporary name would only confuse: report the error's kind for the real path.
        let file = builder
            .tempfile_in(dir)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {}", path.display(), e.kind()))?;
        let temporary = file.path().to_path_buf();
        if let Ok(mut pending) = PENDING.lock() {
            pending.push(temporary.clone());
        }
        Ok(Self {
            writer: Some(BufWriter::with_capacity(1 << 20, file)),
            temporary,
            path: path.to_path_buf(),
        })
    }

    /// The destination path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes everything and renames the file to its destination.
    pub fn commit(mut self) -> Result<()> {
        let context = || format!("cannot write {}", self.path.display());
        let writer = self
            .writer
            .take()
            .context("the file was already committed")?;
        let file = writer
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(context)?;
        file.as_file().sync_all().with_context(context)?;
        file.persist(&self.path)
            .map_err(|e| e.error)
            .with_context(context)?;
        Ok(())
    }

    fn writer(&mut self) -> std::io::Result<&mut BufWriter<NamedTempFile>> {
        self.writer
            .as_mut()
            .ok_or_else(|| std::io::Error::other("the file was already committed"))
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        // Dropping the writer (if not committed) deletes the temporary file.
        self.writer = None;
        if let Ok(mut pending) = PENDING.lock() {
            pending.retain(|p| *p != self.temporary);
        }
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.writer()?.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.writer()?.write_all(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.writer()?.flush()
    }
}
