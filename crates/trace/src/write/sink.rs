//! Where a writer's bytes go: a buffered file, compressed when the name ends in `.gz`, `.bz2`,
//! `.xz` or `.zst`/`.zstd` (the inverse of the readers' transparent decompression).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Write buffer size: large enough that system calls are rare next to encoding.
const BUFFER_BYTES: usize = 1 << 20;
/// zstd's default level: fast, and still a good ratio on traces.
const ZSTD_LEVEL: i32 = 3;

/// A file being written, possibly through a compressor; its errors name the file.
pub(crate) struct Sink {
    path: PathBuf,
    encoder: Encoder,
}

/// The compressor, if any, in front of the buffered file.
enum Encoder {
    Plain(BufWriter<File>),
    Gzip(flate2::write::GzEncoder<BufWriter<File>>),
    Bzip2(bzip2::write::BzEncoder<BufWriter<File>>),
    Xz(xz2::write::XzEncoder<BufWriter<File>>),
    Zstd(zstd::stream::write::Encoder<'static, BufWriter<File>>),
}

impl Sink {
    /// Creates (or truncates) `path`, compressing by its suffix.
    pub(crate) fn create(path: &Path) -> io::Result<Sink> {
        Ok(Sink {
            path: path.to_path_buf(),
            encoder: Encoder::create(path)?,
        })
    }

    /// The file's path, for the writers' own errors.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes all of `bytes`; the error names the file.
    pub(crate) fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.encoder
            .write_all(bytes)
            .map_err(|e| with_path(&self.path, "write failed", e))
    }

    /// Ends any compressed stream and flushes everything to the file; the error names it.
    pub(crate) fn finish(self) -> io::Result<()> {
        self.encoder
            .finish()
            .map_err(|e| with_path(&self.path, "write failed", e))
    }
}

impl Encoder {
    fn create(path: &Path) -> io::Result<Encoder> {
        let file = File::create(path).map_err(|e| with_path(path, "cannot create", e))?;
        let out = BufWriter::with_capacity(BUFFER_BYTES, file);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        Ok(if name.ends_with(".gz") {
            Encoder::Gzip(flate2::write::GzEncoder::new(
                out,
                flate2::Compression::default(),
            ))
        } else if name.ends_with(".bz2") {
            Encoder::Bzip2(bzip2::write::BzEncoder::new(
                out,
                bzip2::Compression::default(),
            ))
        } else if name.ends_with(".xz") {
            Encoder::Xz(xz2::write::XzEncoder::new(out, 6))
        } else if name.ends_with(".zst") || name.ends_with(".zstd") {
            Encoder::Zstd(
                zstd::stream::write::Encoder::new(out, ZSTD_LEVEL)
                    .map_err(|e| with_path(path, "cannot start zstd", e))?,
            )
        } else {
            Encoder::Plain(out)
        })
    }

    fn finish(self) -> io::Result<()> {
        let mut out = match self {
            Encoder::Plain(out) => out,
            Encoder::Gzip(encoder) => encoder.finish()?,
            Encoder::Bzip2(encoder) => encoder.finish()?,
            Encoder::Xz(encoder) => encoder.finish()?,
            Encoder::Zstd(encoder) => encoder.finish()?,
        };
        out.flush()
    }
}

impl Write for Encoder {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Encoder::Plain(out) => out.write(bytes),
            Encoder::Gzip(out) => out.write(bytes),
            Encoder::Bzip2(out) => out.write(bytes),
            Encoder::Xz(out) => out.write(bytes),
            Encoder::Zstd(out) => out.write(bytes),
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Encoder::Plain(out) => out.write_all(bytes),
            Encoder::Gzip(out) => out.write_all(bytes),
            Encoder::Bzip2(out) => out.write_all(bytes),
            Encoder::Xz(out) => out.write_all(bytes),
            Encoder::Zstd(out) => out.write_all(bytes),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Encoder::Plain(out) => out.flush(),
            Encoder::Gzip(out) => out.flush(),
            Encoder::Bzip2(out) => out.flush(),
            Encoder::Xz(out) => out.flush(),
            Encoder::Zstd(out) => out.flush(),
        }
    }
}

/// `err` with the path and action in its message, so it stands alone on one line.
pub(crate) fn with_path(path: &Path, action: &str, err: io::Error) -> io::Error {
    io::Error::new(err.kind(), format!("{}: {action}: {err}", path.display()))
}
