//! Byte counts as people and libCacheSim write them: `4096`, `4k`, `64kb`, `64MiB`, `1gb`.

/// Parses a byte count: digits with an optional unit `b`, `k`/`kb`/`kib`, `m`/`mb`/`mib`,
/// `g`/`gb`/`gib` or `t`/`tb`/`tib`, case-insensitive, all powers of 1024 as libCacheSim reads
/// sizes. The error says what was expected.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
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
        _ => return Err(expected_size(text)),
    };
    let count: u64 = digits.parse().map_err(|_| expected_size(text))?;
    count
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("size \"{text}\" is too large"))
}

fn expected_size(text: &str) -> String {
    format!("expected a size in bytes such as 4096, 4kb or 64mb, found \"{text}\"")
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
        assert!(parse_bytes("12qb").unwrap_err().contains("such as 4096"));
        assert!(parse_bytes("mb").unwrap_err().contains("such as 4096"));
        assert!(parse_bytes("-1").is_err());
        assert!(parse_bytes("99999999999999tb")
            .unwrap_err()
            .contains("too large"));
    }
}
