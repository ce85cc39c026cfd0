//! Opens a trace file as a byte stream, undoing gzip, bzip2, xz or zstd compression detected
//! from the file's magic bytes (not its name, which may lie).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use crate::TraceError;

/// Read buffer size: large enough that refills are rare next to the per-request work.
const BUFFER_BYTES: usize = 1 << 20;

/// The compression a trace file is stored with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Stored as is.
    None,
    /// gzip (one or more members).
    Gzip,
    /// bzip2 (one or more streams).
    Bzip2,
    /// xz (one or more streams).
    Xz,
    /// Zstandard.
    Zstd,
}

impl Compression {
    /// Recognises a compressed stream by its first bytes.
    pub fn detect(head: &[u8]) -> Compression {
        if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if head.starts_with(b"BZh") {
            Compression::Bzip2
        } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00]) {
            Compression::Xz
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Compression::Zstd
        } else {
            Compression::None
        }
    }

    /// The file-name suffix this compression is usually written with.
    pub fn suffix(self) -> &'static str {
        match self {
            Compression::None => "",
            Compression::Gzip => ".gz",
            Compression::Bzip2 => ".bz2",
            Compression::Xz => ".xz",
            Compression::Zstd => ".zst",
        }
    }
}

/// Opens `path` and returns its decompressed contents as a buffered stream, with the
/// compression found. An empty file is an error: no format has an empty trace.
pub fn open_source(path: &Path) -> Result<(Box<dyn BufRead + Send>, Compression), TraceError> {
    let file = File::open(path).map_err(|e| TraceError::file(path, format!("cannot open: {e}")))?;
    let mut raw = BufReader::with_capacity(BUFFER_BYTES, file);
    let head = raw
        .fill_buf()
        .map_err(|e| TraceError::file(path, format!("cannot read: {e}")))?;
    if head.is_empty() {
        return Err(TraceError::file(
            path,
            "file is empty; expected trace records",
        ));
    }
    let compression = Compression::detect(head);
    let stream: Box<dyn BufRead + Send> = match compression {
        Compression::None => Box::new(raw),
        Compression::Gzip => buffered(flate2::bufread::MultiGzDecoder::new(raw)),
        Compression::Bzip2 => buffered(bzip2::bufread::MultiBzDecoder::new(raw)),
        Compression::Xz => buffered(xz2::bufread::XzDecoder::new_multi_decoder(raw)),
        Compression::Zstd => buffered(
            zstd::stream::read::Decoder::with_buffer(raw)
                .map_err(|e| TraceError::file(path, format!("bad zstd stream: {e}")))?,
        ),
    };
    Ok((stream, compression))
}

fn buffered(decoder: impl Read + Send + 'static) -> Box<dyn BufRead + Send> {
    Box::new(BufReader::with_capacity(BUFFER_BYTES, decoder))
}

/// The first `max_bytes` decompressed bytes of `path` (fewer if the stream is shorter), with the
/// compression found: what format detection and header probes look at.
pub fn read_head(path: &Path, max_bytes: usize) -> Result<(Vec<u8>, Compression), TraceError> {
    let (stream, compression) = open_source(path)?;
    let mut head = Vec::with_capacity(max_bytes);
    stream
        .take(max_bytes as u64)
        .read_to_end(&mut head)
        .map_err(|e| TraceError::file(path, format!("cannot read: {e}")))?;
    Ok((head, compression))
}
