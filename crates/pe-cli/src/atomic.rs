//! An output file that appears complete or not at all: written under a temporary name in the
//! destination's directory, renamed over the destination only once everything is written.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tempfile::NamedTempFile;

/// A file being written; dropped without [`AtomicFile::commit`], it vanishes.
pub struct AtomicFile {
    writer: BufWriter<NamedTempFile>,
    path: PathBuf,
}

impl AtomicFile {
    /// Starts writing `path`; fails when its directory is missing or not writable.
    pub fn create(path: &Path) -> Result<Self> {
        if path.is_dir() {
            anyhow::bail!("cannot write {}: it is a directory", path.display());
        }
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let mut builder = tempfile::Builder::new();
        builder.prefix(".pe-").suffix(".partial");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o644));
        }
        if !dir.is_dir() {
            anyhow::bail!(
                "cannot write {}: the directory {} does not exist",
                path.display(),
                dir.display()
            );
        }
        // The temporary name would only confuse: report the error's kind for the real path.
        let file = builder
            .tempfile_in(dir)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {}", path.display(), e.kind()))?;
        Ok(Self {
            writer: BufWriter::with_capacity(1 << 20, file),
            path: path.to_path_buf(),
        })
    }

    /// The destination path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes everything and renames the file to its destination.
    pub fn commit(self) -> Result<()> {
        let path = self.path;
        let context = || format!("cannot write {}", path.display());
        let file = self
            .writer
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(context)?;
        file.as_file().sync_all().with_context(context)?;
        file.persist(&path)
            .map_err(|e| e.error)
            .with_context(context)?;
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.writer.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.writer.write_all(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.writer.flush()
    }
}
