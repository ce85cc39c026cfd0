//! Cache sizes as libCacheSim's `cachesim` writes them: absolute (`4096`, `64kb`, `64mb`,
//! `1gb`, `2GiB`), fractions of the working set (`0.01`), or `auto`.

pub use heterarchy_trace::units::parse_bytes;

/// One requested cache size, before the working set is known.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SizeSpec {
    /// Bytes (or objects with `--ignore-obj-size`).
    Absolute(u64),
    /// A fraction of the working set, in (0, 1].
    Fraction(f64),
}

/// Fractions of the working set that `auto` stands for: log-spaced from 0.1% to 80%, so the
/// knee of most miss-ratio curves falls between two of them.
pub const AUTO_FRACTIONS: [f64; 8] = [0.001, 0.003, 0.01, 0.03, 0.1, 0.2, 0.4, 0.8];

/// Parses a comma-separated size list.
pub fn parse_sizes(list: &str) -> Result<Vec<SizeSpec>, String> {
    let mut sizes = Vec::new();
    for item in list
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
    {
        if item.eq_ignore_ascii_case("auto") {
            sizes.extend(AUTO_FRACTIONS.iter().map(|&f| SizeSpec::Fraction(f)));
        } else {
            sizes.push(parse_size(item)?);
        }
    }
    if sizes.is_empty() {
        return Err(format!(
            "no cache size in \"{list}\"; expected e.g. 64mb,0.01,auto"
        ));
    }
    Ok(sizes)
}

/// Parses one size: an integer with an optional unit, or a fraction in (0, 1).
pub fn parse_size(item: &str) -> Result<SizeSpec, String> {
    let lower = item.to_ascii_lowercase();
    if lower.contains('.') && lower.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return match lower.parse::<f64>() {
            Ok(fraction) if fraction > 0.0 && fraction <= 1.0 => Ok(SizeSpec::Fraction(fraction)),
            _ => Err(format!(
                "bad cache size \"{item}\": a fraction of the working set must be in (0, 1]"
            )),
        };
    }
    parse_bytes(item)
        .map(SizeSpec::Absolute)
        .map_err(|e| format!("bad cache size: {e}"))
}

/// Resolves a size against the working set (bytes, or objects with `--ignore-obj-size`),
/// truncating as libCacheSim does (`int(fraction * working_set)`).
pub fn resolve(spec: SizeSpec, working_set: u64) -> u64 {
    match spec {
        SizeSpec::Absolute(bytes) => bytes,
        SizeSpec::Fraction(fraction) => (fraction * working_set as f64) as u64,
    }
}

/// Formats bytes for people: `64 MiB`, `1.5 GiB`, `4096 B`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 || value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_fractions_and_auto() {
        assert_eq!(parse_size("4096"), Ok(SizeSpec::Absolute(4096)));
        assert_eq!(parse_size("64mb"), Ok(SizeSpec::Absolute(64 << 20)));
        assert_eq!(parse_size("2GiB"), Ok(SizeSpec::Absolute(2 << 30)));
        assert_eq!(parse_size("4k"), Ok(SizeSpec::Absolute(4096)));
        assert_eq!(parse_size("0.01"), Ok(SizeSpec::Fraction(0.01)));
        assert_eq!(parse_sizes("auto").unwrap().len(), AUTO_FRACTIONS.len());
        assert_eq!(parse_sizes("1mb, 0.1").unwrap().len(), 2);
    }

    #[test]
    fn rejects_bad_sizes_with_a_reason() {
        assert!(parse_size("1.5").unwrap_err().contains("(0, 1]"));
        assert!(parse_size("12qb").unwrap_err().contains("such as 4096"));
        assert!(parse_size("mb").is_err());
        assert!(parse_sizes(",").is_err());
        assert!(parse_size("99999999999999tb")
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn resolves_fractions_by_truncation() {
        assert_eq!(resolve(SizeSpec::Fraction(0.1), 1005), 100);
        assert_eq!(resolve(SizeSpec::Absolute(7), 1005), 7);
        assert_eq!(human_bytes(64 << 20), "64 MiB");
        assert_eq!(human_bytes(1536), "1.5 KiB");
    }
}
