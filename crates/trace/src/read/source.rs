//! Opens a trace file as a byte stream, undoing gzip, bzip2, xz or zstd compression detected
//! from the file's magic bytes (not its name, which may lie).

use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

/// Where a trace's bytes come from: a file, read as a stream, or bytes in memory — what any
/// reader gave (standard input, a pipe, a fuzzer's input), read to its end first, since
/// detection and the readers each start from the first byte. Errors name it by its name.
#[derive(Clone, Debug)]
pub enum TraceInput {
    /// A file, opened afresh for each pass.
    File(PathBuf),
    /// Bytes in memory, with the name errors give them (`<stdin>`, say).
    Bytes { name: PathBuf, bytes: Arc<[u8]> },
}

impl TraceInput {
    /// A trace file.
    pub fn file(path: impl Into<PathBuf>) -> TraceInput {
        TraceInput::File(path.into())
    }

    /// Bytes in memory, named `name` in errors.
    pub fn bytes(name: impl Into<PathBuf>, bytes: impl Into<Arc<[u8]>>) -> TraceInput {
        TraceInput::Bytes {
            name: name.into(),
            bytes: bytes.into(),
        }
    }

    /// All that `reader` gives, named `name` in errors.
    pub fn from_reader(
        name: impl Into<PathBuf>,
        mut reader: impl Read,
    ) -> Result<TraceInput, TraceError> {
        let name = name.into();
        let mut bytes = Vec::new();
        reader
            .read_to_end(&mut bytes)
            .map_err(|e| TraceError::file(&name, format!("cannot read: {e}")))?;
        Ok(TraceInput::bytes(name, bytes))
    }

    /// The file's path, or the bytes' name: what errors and name-based detection go by.
    pub fn name(&self) -> &Path {
        match self {
            TraceInput::File(path) => path,
            TraceInput::Bytes { name, .. } => name,
        }
    }

    /// Its size in bytes as stored (compressed or not), if known without reading it.
    pub(crate) fn stored_bytes(&self) -> Option<u64> {
        match self {
            TraceInput::File(path) => std::fs::metadata(path).ok().map(|m| m.len()),
            TraceInput::Bytes { bytes, .. } => Some(bytes.len() as u64),
        }
    }
}

impl From<&Path> for TraceInput {
    fn from(path: &Path) -> TraceInput {
        TraceInput::file(path)
    }
}

impl From<&PathBuf> for TraceInput {
    fn from(path: &PathBuf) -> TraceInput {
        TraceInput::file(path)
    }
}

impl From<PathBuf> for TraceInput {
    fn from(path: PathBuf) -> TraceInput {
        TraceInput::File(path)
    }
}

impl From<&TraceInput> for TraceInput {
    fn from(input: &TraceInput) -> TraceInput {
        input.clone()
    }
}

/// Opens `input` and returns its decompressed contents as a buffered stream, with the
/// compression found. An empty trace is an error: no format has one.
pub fn open_source(
    input: &TraceInput,
) -> Result<(Box<dyn BufRead + Send>, Compression), TraceError> {
    open_buffered(input, BUFFER_BYTES)
}

/// [`open_source`] with read buffers of `buffer_bytes` for a file and for a decompressed stream
/// (bytes in memory are their own buffer): a probe of a trace's head needs no more than it reads.
fn open_buffered(
    input: &TraceInput,
    buffer_bytes: usize,
) -> Result<(Box<dyn BufRead + Send>, Compression), TraceError> {
    let path = input.name();
    let mut raw: Box<dyn BufRead + Send> = match input {
        TraceInput::File(path) => Box::new(BufReader::with_capacity(
            buffer_bytes,
            File::open(path).map_err(|e| TraceError::file(path, format!("cannot open: {e}")))?,
        )),
        TraceInput::Bytes { bytes, .. } => Box::new(Cursor::new(Arc::clone(bytes))),
    };
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
    let stream = match compression {
        Compression::None => raw,
        Compression::Gzip => buffered(flate2::bufread::MultiGzDecoder::new(raw), buffer_bytes),
        Compression::Bzip2 => buffered(bzip2::bufread::MultiBzDecoder::new(raw), buffer_bytes),
        Compression::Xz => buffered(
            xz2::bufread::XzDecoder::new_multi_decoder(raw),
            buffer_bytes,
        ),
        Compression::Zstd => buffered(
            zstd::stream::read::Decoder::with_buffer(raw)
                .map_err(|e| TraceError::file(path, format!("bad zstd stream: {e}")))?,
            buffer_bytes,
        ),
    };
    Ok((stream, compression))
}

fn buffered(decoder: impl Read + Send + 'static, buffer_bytes: usize) -> Box<dyn BufRead + Send> {
    Box::new(BufReader::with_capacity(buffer_bytes, decoder))
}

/// The first `max_bytes` decompressed bytes of `input` (fewer if the stream is shorter), with
/// the compression found: what format detection and header probes look at.
pub fn read_head(
    input: &TraceInput,
    max_bytes: usize,
) -> Result<(Vec<u8>, Compression), TraceError> {
    let path = input.name();
    let (stream, compression) = open_buffered(input, max_bytes.clamp(1, BUFFER_BYTES))?;
    let mut head = Vec::with_capacity(max_bytes);
    stream
        .take(max_bytes as u64)
        .read_to_end(&mut head)
        .map_err(|e| TraceError::file(path, format!("cannot read: {e}")))?;
    Ok((head, compression))
}
