//! Backends named on a command line or in a config, as nbdkit names its plugins:
//! `ram:SIZE`, `file:PATH[:SIZE][:direct]`, `blockdev:PATH[:direct]`, `pmem:PATH:SIZE`,
//! `btt:PATH:SIZE[:512|:4k]`.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use heterarchy_trace::units::parse_bytes;
use serde::{Deserialize, Serialize};

use super::btt::{BttBackend, BttOptions};
use super::{Backend, FileBackend, PacedBackend, PmemBackend, RamBackend, Throttle};
use crate::error::SpecError;

/// Which storage, where and how large.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum BackendSpec {
    /// Process memory, lost at exit.
    Ram { size_bytes: u64 },
    /// A regular file (created or extended to the size given) or a block device.
    File {
        path: PathBuf,
        size_bytes: Option<u64>,
        /// O_DIRECT: bypass the page cache.
        direct: bool,
    },
    /// A memory-mapped file standing for persistent memory.
    Pmem { path: PathBuf, size_bytes: u64 },
    /// A Block Translation Table on such a file: sectors written atomically (seed 001 §2.2).
    Btt {
        path: PathBuf,
        size_bytes: u64,
        sector_bytes: u32,
    },
}

impl FromStr for BackendSpec {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<BackendSpec, SpecError> {
        let syntax = || SpecError::StorageSyntax {
            text: text.to_string(),
        };
        let Some((kind, rest)) = text.split_once(':') else {
            return Err(syntax());
        };
        let mut parts: Vec<&str> = rest.split(':').collect();
        let direct = parts.len() > 1 && parts.last() == Some(&"direct");
        if direct {
            parts.pop();
        }
        let size_of = |part: &str| {
            parse_bytes(part).map_err(|error| SpecError::StorageSize {
                text: text.to_string(),
                error,
            })
        };
        let bad = |reason: String| SpecError::Storage {
            text: text.to_string(),
            reason,
        };
        let spec = match kind {
            "ram" if parts.len() == 1 && !direct => BackendSpec::Ram {
                size_bytes: size_of(parts[0])?,
            },
            "file" if !rest.is_empty() => {
                let size_bytes = match parts.as_slice() {
                    [_, .., last] if parts.len() > 1 && parse_bytes(last).is_ok() => {
                        let size = size_of(last)?;
                        parts.pop();
                        Some(size)
                    }
                    _ => None,
                };
                BackendSpec::File {
                    path: PathBuf::from(parts.join(":")),
                    size_bytes,
                    direct,
                }
            }
            "blockdev" if !rest.is_empty() => BackendSpec::File {
                path: PathBuf::from(parts.join(":")),
                size_bytes: None,
                direct,
            },
            "pmem" if parts.len() >= 2 && !direct => {
                let size = parts.pop().map(size_of).transpose()?.unwrap_or(0);
                BackendSpec::Pmem {
                    path: PathBuf::from(parts.join(":")),
                    size_bytes: size,
                }
            }
            "btt" if parts.len() >= 2 && !direct => {
                let sector_bytes = match parts.last().copied() {
                    Some("512") if parts.len() >= 3 => 512,
                    Some("4k" | "4K" | "4096") if parts.len() >= 3 => 4096,
                    // PATH:SIZE:SIZE: the last is a sector size, and not one a BTT has.
                    Some(last)
                        if parts.len() >= 3
                            && parse_bytes(last).is_ok()
                            && parse_bytes(parts[parts.len() - 2]).is_ok() =>
                    {
                        return Err(bad(format!("sectors of {last}: expected 512 or 4k")));
                    }
                    _ => 0,
                };
                if sector_bytes != 0 {
                    parts.pop();
                }
                let size = parts.pop().map(size_of).transpose()?.unwrap_or(0);
                BackendSpec::Btt {
                    path: PathBuf::from(parts.join(":")),
                    size_bytes: size,
                    sector_bytes: if sector_bytes == 0 {
                        4096
                    } else {
                        sector_bytes
                    },
                }
            }
            _ => return Err(syntax()),
        };
        if matches!(
            spec,
            BackendSpec::Ram { size_bytes: 0 }
                | BackendSpec::Pmem { size_bytes: 0, .. }
                | BackendSpec::Btt { size_bytes: 0, .. }
        ) {
            return Err(bad("the size must be above 0".to_string()));
        }
        Ok(spec)
    }
}

impl TryFrom<String> for BackendSpec {
    type Error = SpecError;

    fn try_from(text: String) -> Result<BackendSpec, SpecError> {
        text.parse()
    }
}

impl From<BackendSpec> for String {
    fn from(spec: BackendSpec) -> String {
        spec.to_string()
    }
}

impl fmt::Display for BackendSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendSpec::Ram { size_bytes } => write!(f, "ram:{size_bytes}"),
            BackendSpec::File {
                path,
                size_bytes,
                direct,
            } => {
                write!(f, "file:{}", path.display())?;
                if let Some(size) = size_bytes {
                    write!(f, ":{size}")?;
                }
                if *direct {
                    write!(f, ":direct")?;
                }
                Ok(())
            }
            BackendSpec::Pmem { path, size_bytes } => {
                write!(f, "pmem:{}:{size_bytes}", path.display())
            }
            BackendSpec::Btt {
                path,
                size_bytes,
                sector_bytes,
            } => write!(f, "btt:{}:{size_bytes}:{sector_bytes}", path.display()),
        }
    }
}

/// Opens (creating where a size is given) the storage `spec` names.
pub fn open_backend(spec: &BackendSpec) -> io::Result<Box<dyn Backend>> {
    open_backend_paced(spec, None)
}

/// [`open_backend`], each access to the medium paced by `pace` when given: a BTT's own
/// accesses (data, flog, map) are paced one by one, under the BTT, as the device it stands for
/// would take them.
pub fn open_backend_paced(
    spec: &BackendSpec,
    pace: Option<Arc<Throttle>>,
) -> io::Result<Box<dyn Backend>> {
    let paced = |backend: Box<dyn Backend>| -> Box<dyn Backend> {
        match &pace {
            Some(throttle) => Box::new(PacedBackend::new(backend, Arc::clone(throttle))),
            None => backend,
        }
    };
    let backend: Box<dyn Backend> = match spec {
        BackendSpec::Ram { size_bytes } => Box::new(RamBackend::new(*size_bytes)?),
        BackendSpec::File {
            path,
            size_bytes,
            direct,
        } => Box::new(FileBackend::open(path, *size_bytes, *direct)?),
        BackendSpec::Pmem { path, size_bytes } => Box::new(PmemBackend::open(path, *size_bytes)?),
        BackendSpec::Btt {
            path,
            size_bytes,
            sector_bytes,
        } => {
            let media = paced(Box::new(PmemBackend::open(path, *size_bytes)?));
            let options = BttOptions {
                sector_bytes: *sector_bytes,
                ..BttOptions::default()
            };
            return Ok(Box::new(BttBackend::open(media, options)?));
        }
    };
    Ok(paced(backend))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> BackendSpec {
        text.parse().unwrap()
    }

    #[test]
    fn parses_every_kind_and_prints_it_back() {
        assert_eq!(
            parse("ram:64m"),
            BackendSpec::Ram {
                size_bytes: 64 << 20
            }
        );
        assert_eq!(
            parse("file:/tmp/a:b:1g:direct"),
            BackendSpec::File {
                path: "/tmp/a:b".into(),
                size_bytes: Some(1 << 30),
                direct: true
            }
        );
        assert_eq!(
            parse("file:disk.img"),
            BackendSpec::File {
                path: "disk.img".into(),
                size_bytes: None,
                direct: false
            }
        );
        assert_eq!(
            parse("blockdev:/dev/nvme0n1:direct"),
            BackendSpec::File {
                path: "/dev/nvme0n1".into(),
                size_bytes: None,
                direct: true
            }
        );
        assert_eq!(
            parse("pmem:/mnt/pm/cache:2gb"),
            BackendSpec::Pmem {
                path: "/mnt/pm/cache".into(),
                size_bytes: 2 << 30
            }
        );
        assert_eq!(
            parse("btt:/mnt/pm/disk:1g:512"),
            BackendSpec::Btt {
                path: "/mnt/pm/disk".into(),
                size_bytes: 1 << 30,
                sector_bytes: 512
            }
        );
        assert_eq!(
            parse("btt:/mnt/pm/disk:1g"),
            BackendSpec::Btt {
                path: "/mnt/pm/disk".into(),
                size_bytes: 1 << 30,
                sector_bytes: 4096
            }
        );
        for text in [
            "ram:4096",
            "file:x:1024:direct",
            "pmem:/p:65536",
            "btt:/p:65536:512",
        ] {
            assert_eq!(parse(text).to_string(), text);
        }
    }

    #[test]
    fn a_btt_spec_opens_atomic_sectors_on_a_pmem_file() {
        let dir = tempfile::tempdir().unwrap();
        let spec = parse(&format!("btt:{}:32m:4k", dir.path().join("pm").display()));
        let btt = open_backend(&spec).unwrap();
        assert!(
            btt.describe().starts_with("btt (4096 B sectors, 1 arenas)"),
            "{}",
            btt.describe()
        );
        btt.write_at(8192, &[7; 4096]).unwrap();
        drop(btt);
        let btt = open_backend(&spec).unwrap();
        let mut back = [0; 4096];
        btt.read_at(8192, &mut back).unwrap();
        assert_eq!(back, [7; 4096]);
        assert!(btt.write_at(btt.size_bytes() - 1, &[0; 2]).is_err());
    }

    #[test]
    fn bad_specs_say_what_was_expected() {
        for text in [
            "ram",
            "ram:",
            "ram:0",
            "disk:/x",
            "pmem:/x",
            "pmem:/x:zero",
            "btt:/x",
            "btt:/x:0:512",
            "file:",
        ] {
            let error = text.parse::<BackendSpec>().unwrap_err().to_string();
            assert!(error.contains(text), "{error}");
        }
        let error = "ram:12q".parse::<BackendSpec>().unwrap_err().to_string();
        assert!(error.contains("expected a size"), "{error}");
        let error = "btt:/x:64m:1k"
            .parse::<BackendSpec>()
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("sectors of 1k") && error.contains("512 or 4k"),
            "{error}"
        );
    }
}
