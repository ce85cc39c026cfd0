//! Where a writer's bytes go: a buffered file, compressed when the name ends in `.gz`, `.bz2`,
//! `.xz` or `.zst`/`.zstd` (the inverse of the readers' transparent decompression).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// Write buffer size: large enough that system calls are rare next to encoding.
const BUFFER_BYTES: usize = 1 << 20;
/// zstd's default level: fast, and still a good ratio on traces.
const ZSTD_LEVEL: i32 = 3;

/// A file being written, possibly through a compressor.
pub(crate) enum Sink {
    Plain(BufWriter<File>),
    Gzip(flate2::write::GzEncoder<BufWriter<File>>),
    Bzip2(bzip2::write::BzEncoder<BufWriter<File>>),
    Xz(xz2::write::XzEncoder<BufWriter<File>>),
    Zstd(zstd::stream::write::Encoder<'static, BufWriter<File>>),
}

impl Sink {
    /// Creates (or truncates) `path`, compressing by its suffix.
    pub(crate) fn create(path: &Path) -> io::Result<Sink> {
        let file = File::create(path).map_err(|e| with_path(path, "cannot create", e))?;
        let out = BufWriter::with_capacity(BUFFER_BYTES, file);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        Ok(if name.ends_with(".gz") {
            Sink::Gzip(flate2::write::GzEncoder::new(
                out,
                flate2::Compression::default(),
            ))
        } else if name.ends_with(".bz2") {
            Sink::Bzip2(bzip2::write::BzEncoder::new(
                out,
                bzip2::Compression::default(),
            ))
        } else if name.ends_with(".xz") {
            Sink::Xz(xz2::write::XzEncoder::new(out, 6))
        } else if name.ends_with(".zst") || name.ends_with(".zstd") {
            Sink::Zstd(
                zstd::stream::write::Encoder::new(out, ZSTD_LEVEL)
                    .map_err(|e| with_path(path, "cannot start zstd", e))?,
            )
        } else {
            Sink::Plain(out)
        })
    }

    /// Ends any compressed stream and flushes everything to the file.
    pub(crate) fn finish(self) -> io::Result<()> {
        let mut out = match self {
            Sink::Plain(out) => out,
            Sink::Gzip(encoder) => encoder.finish()?,
            Sink::Bzip2(encoder) => encoder.finish()?,
            Sink::Xz(encoder) => encoder.finish()?,
            Sink::Zstd(encoder) => encoder.finish()?,
        };
        out.flush()
    }
}

impl Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Plain(out) => out.write(bytes),
            Sink::Gzip(out) => out.write(bytes),
            Sink::Bzip2(out) => out.write(bytes),
            Sink::Xz(out) => out.write(bytes),
            Sink::Zstd(out) => out.write(bytes),
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Sink::Plain(out) => out.write_all(bytes),
            Sink::Gzip(out) => out.write_all(bytes),
            Sink::Bzip2(out) => out.write_all(bytes),
            Sink::Xz(out) => out.write_all(bytes),
            Sink::Zstd(out) => out.write_all(bytes),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Plain(out) => out.flush(),
            Sink::Gzip(out) => out.flush(),
            Sink::Bzip2(out) => out.flush(),
            Sink::Xz(out) => out.flush(),
            Sink::Zstd(out) => out.flush(),
        }
    }
}

/// `err` with the path and action in its message, so it stands alone on one line.
pub(crate) fn with_path(path: &Path, action: &str, err: io::Error) -> io::Error {
    io::Error::new(err.kind(), format!("{}: {action}: {err}", path.display()))
}
