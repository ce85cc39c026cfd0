//! Byte counts as people and libCacheSim write them: `4096`, `4k`, `64kb`, `64MiB`, `1gb`.

/// Parses a byte count: digits with an optional unit `b`, `k`/`kb`/`kib`, `m`/`mb`/`mib`,
/// `g`/`gb`/`gib` or `t`/`tb`/`tib`, case-insensitive, all powers of 1024 as libCacheSim reads
/// sizes. The error says what was expected.
pub fn parse_bytes(text: &str) -> Result<u64, SizeError> {
    let lower = text.trim().to_ascii_lowercase();
    let digits_end = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (digits, unit) = lower.split_at(digits_end);
    let shift = match unit.trim() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(SizeError::Malformed { text: text.into() }),
    };
    let count: u64 = digits
        .parse()
        .map_err(|_| SizeError::Malformed { text: text.into() })?;
    count
        .checked_mul(1u64 << shift)
        .ok_or_else(|| SizeError::TooLarge { text: text.into() })
}

/// A byte count that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// Not digits with a unit.
    #[error("expected a size in bytes such as 4096, 4kb or 64mb, found \"{text}\"")]
    Malformed { text: String },
    /// More bytes than 64 bits count.
    #[error("size \"{text}\" is too large")]
    TooLarge { text: String },
}

/// Serde for byte sizes in configs: a number of bytes, or text as [`parse_bytes`] reads it
/// (`"64k"`, `"512m"`); written back as a number.
pub mod byte_size {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes the number of bytes.
    pub fn serialize<S: Serializer>(bytes: &u64, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(*bytes)
    }

    /// Reads a number of bytes or a size like `"64k"`.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Size {
            Number(u64),
            Text(String),
        }
        match Size::deserialize(deserializer)? {
            Size::Number(bytes) => Ok(bytes),
            Size::Text(text) => super::parse_bytes(&text).map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_as_powers_of_1024() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("4k"), Ok(4096));
        assert_eq!(parse_bytes("64MB"), Ok(64 << 20));
        assert_eq!(parse_bytes("2GiB"), Ok(2 << 30));
        assert_eq!(parse_bytes(" 1tb "), Ok(1 << 40));
    }

    #[test]
    fn rejects_bad_sizes_saying_what_was_expected() {
        assert!(parse_bytes("12qb")
            .unwrap_err()
            .to_string()
            .contains("such as 4096"));
        assert!(parse_bytes("mb")
            .unwrap_err()
            .to_string()
            .contains("such as 4096"));
        assert!(parse_bytes("-1").is_err());
        assert!(parse_bytes("99999999999999tb")
            .unwrap_err()
            .to_string()
            .contains("too large"));
    }
}
