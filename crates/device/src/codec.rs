//! The CPU as a compressor (seed 004 §3.2 and §4's Compression-Store): 4 KiB pages compressed
//! with lz4 or zstd into 512 B sectors, page data of a chosen compressibility, and a
//! micro-benchmark of what compressing and decompressing cost on this machine, which the timed
//! simulator charges.
//!
//! The paper used a dictionary-based Lempel-Ziv codec (LZ78) at 4 KiB granularity, measured at
//! 11 µs to compress and 4 µs to decompress a page on a 2.2 GHz Azure VM (Fig 4c); lz4 and zstd
//! are today's Lempel-Ziv codecs (LZ77 family), lz4 the fast one.

use std::time::Instant;

use crate::error::{DecompressError, SpecError};
use serde::Serialize;

/// Bytes of a page.
pub const PAGE_BYTES: usize = 4096;
/// Bytes of a sector of the compressed store.
pub const SECTOR_BYTES: usize = 512;
/// Sectors of a page.
pub const SECTORS_PER_PAGE: u16 = (PAGE_BYTES / SECTOR_BYTES) as u16;

/// A page codec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Codec {
    Lz4,
    Zstd,
}

/// zstd's level for pages: its fastest, as a cache on the request path needs.
const ZSTD_LEVEL: i32 = 1;

impl Codec {
    /// Every codec, in the order help lists them.
    pub const ALL: [Codec; 2] = [Codec::Lz4, Codec::Zstd];

    /// The name configs and flags use.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }

    /// The codec called `name`, or a one-line error listing the codecs.
    pub fn parse(name: &str) -> Result<Codec, SpecError> {
        Codec::ALL
            .into_iter()
            .find(|codec| codec.name().eq_ignore_ascii_case(name.trim()))
            .ok_or_else(|| SpecError::UnknownCodec {
                name: name.to_string(),
            })
    }

    /// Compresses `page` into `out` (replacing its contents); returns the sectors the result
    /// takes, [`SECTORS_PER_PAGE`] when compressing gains nothing (the page is then kept as
    /// it is).
    pub fn compress(self, page: &[u8], out: &mut Vec<u8>) -> u16 {
        out.clear();
        match self {
            Codec::Lz4 => out.extend_from_slice(&lz4_flex::block::compress_prepend_size(page)),
            Codec::Zstd => {
                // Compressing from memory to memory cannot fail but for a bad level.
                let compressed = zstd::bulk::compress(page, ZSTD_LEVEL).expect("zstd level 1");
                out.extend_from_slice(&compressed);
            }
        }
        sectors_for(out.len())
    }

    /// Decompresses what [`compress`](Self::compress) wrote back into a page.
    pub fn decompress(self, compressed: &[u8], page: &mut Vec<u8>) -> Result<(), DecompressError> {
        page.clear();
        let failed = |reason: String| DecompressError {
            codec: self.name(),
            reason,
        };
        let data = match self {
            Codec::Lz4 => lz4_flex::block::decompress_size_prepended(compressed)
                .map_err(|e| failed(e.to_string()))?,
            Codec::Zstd => {
                zstd::bulk::decompress(compressed, PAGE_BYTES).map_err(|e| failed(e.to_string()))?
            }
        };
        page.extend_from_slice(&data);
        Ok(())
    }
}

/// Sectors `bytes` of compressed data occupy: rounded up to whole sectors (§4: "by appending
/// zeros"), a whole page when that gains nothing.
pub fn sectors_for(bytes: usize) -> u16 {
    (bytes.div_ceil(SECTOR_BYTES).max(1) as u16).min(SECTORS_PER_PAGE)
}

/// Fills `page` with data that compresses to about `1 - compressibility` of its size: a
/// seeded random prefix and a run of one byte for the rest, distinct per `key`.
pub fn fill_page(key: u64, compressibility: f64, page: &mut [u8]) {
    let random = ((1.0 - compressibility.clamp(0.0, 1.0)) * page.len() as f64) as usize;
    let mut state = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for chunk in page[..random].chunks_mut(8) {
        // xorshift64*: fast, and random enough that no codec finds matches in it.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let word = state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
    page[random..].fill(key as u8);
}

/// What a codec costs on this machine at one compressibility.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CodecCost {
    pub codec: Codec,
    pub compressibility: f64,
    pub compress_us_per_kib: f64,
    pub decompress_us_per_kib: f64,
    /// Mean sectors a compressed page takes (8: incompressible).
    pub mean_sectors: f64,
}

/// Compresses and decompresses `pages` distinct pages of `compressibility` with `codec` and
/// times both (the micro-benchmark the timed simulator takes its costs from). Wall-clock time:
/// on a noisy machine, run it with enough pages and quote the machine.
pub fn measure(codec: Codec, compressibility: f64, pages: usize) -> CodecCost {
    let pages = pages.max(1);
    let mut inputs = vec![0u8; pages * PAGE_BYTES];
    for (index, page) in inputs.chunks_mut(PAGE_BYTES).enumerate() {
        fill_page(index as u64, compressibility, page);
    }
    let mut compressed: Vec<Vec<u8>> = vec![Vec::with_capacity(PAGE_BYTES); pages];
    let mut sectors = 0u64;
    let started = Instant::now();
    for (page, out) in inputs.chunks(PAGE_BYTES).zip(compressed.iter_mut()) {
        sectors += u64::from(codec.compress(page, out));
    }
    let compress_s = started.elapsed().as_secs_f64();
    let mut page = Vec::with_capacity(PAGE_BYTES);
    let started = Instant::now();
    for data in &compressed {
        codec
            .decompress(data, &mut page)
            .expect("what this codec compressed decompresses");
    }
    let decompress_s = started.elapsed().as_secs_f64();
    let kib = (pages * PAGE_BYTES) as f64 / 1024.0;
    CodecCost {
        codec,
        compressibility,
        compress_us_per_kib: compress_s * 1e6 / kib,
        decompress_us_per_kib: decompress_s * 1e6 / kib,
        mean_sectors: sectors as f64 / pages as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_round_trip_through_both_codecs() {
        let mut page = vec![0u8; PAGE_BYTES];
        let (mut compressed, mut back) = (Vec::new(), Vec::new());
        for codec in Codec::ALL {
            for compressibility in [0.0, 0.5, 0.9] {
                fill_page(7, compressibility, &mut page);
                codec.compress(&page, &mut compressed);
                codec.decompress(&compressed, &mut back).unwrap();
                assert_eq!(back, page, "{codec:?} at {compressibility}");
            }
        }
    }

    #[test]
    fn sectors_follow_the_compressibility() {
        let mut page = vec![0u8; PAGE_BYTES];
        let mut out = Vec::new();
        for codec in Codec::ALL {
            let sectors: Vec<u16> = [0.0, 0.5, 0.9]
                .iter()
                .map(|&c| {
                    fill_page(3, c, &mut page);
                    codec.compress(&page, &mut out)
                })
                .collect();
            // Random data gains nothing; half random needs about half the sectors; a tenth
            // random fits in one.
            assert_eq!(sectors[0], SECTORS_PER_PAGE, "{codec:?}");
            assert!((4..=5).contains(&sectors[1]), "{codec:?}: {sectors:?}");
            assert_eq!(sectors[2], 1, "{codec:?}");
        }
        assert_eq!(sectors_for(0), 1);
        assert_eq!(sectors_for(513), 2);
        assert_eq!(sectors_for(9000), SECTORS_PER_PAGE);
    }

    #[test]
    fn names_parse_and_unknown_ones_are_refused() {
        assert_eq!(Codec::parse("LZ4"), Ok(Codec::Lz4));
        assert_eq!(Codec::parse("zstd"), Ok(Codec::Zstd));
        let err = Codec::parse("lzma").unwrap_err().to_string();
        assert!(err.contains("expected lz4 or zstd"), "{err}");
    }

    #[test]
    fn measuring_reports_positive_costs_and_the_sectors() {
        let cost = measure(Codec::Lz4, 0.5, 64);
        assert!(cost.compress_us_per_kib > 0.0 && cost.decompress_us_per_kib > 0.0);
        assert!((4.0..=5.0).contains(&cost.mean_sectors), "{cost:?}");
    }
}
