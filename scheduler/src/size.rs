//! Byte sizes written as `24MiB`, `1.5GiB`, `500kB` or plain bytes, parsed and printed.
use crate::PlanError;

/// Parses a size: a number (may be fractional) with an optional unit. Binary units `KiB MiB GiB TiB`,
/// decimal units `kB KB MB GB TB`, and `B` or no unit for bytes. Case of the unit letters is ignored
/// except that an `i` always means binary.
pub fn parse_size(input: &str) -> Result<u64, PlanError> {
    let err = |reason: &str| PlanError::Size {
        input: input.to_string(),
        reason: reason.to_string(),
    };
    let s = input.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let num: String = num.chars().filter(|&c| c != '_').collect();
    if num.is_empty() {
        return Err(err("expected a number, e.g. 24MiB, 1.5GiB or 1048576"));
    }
    let value: f64 = num.parse().map_err(|_| err("not a number"))?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "t" | "tb" => 1e12,
        "ki" | "kib" => 1024.0,
        "mi" | "mib" => 1024.0 * 1024.0,
        "gi" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "ti" | "tib" => 1024.0_f64.powi(4),
        _ => {
            return Err(err(
                "unknown unit (use B, KiB, MiB, GiB, TiB, kB, MB, GB or TB)",
            ))
        }
    };
    let bytes = value * mult;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(err("out of range"));
    }
    if bytes.fract() != 0.0 && mult == 1.0 {
        return Err(err("a byte count must be whole"));
    }
    Ok(bytes.round() as u64)
}

/// Formats bytes with a binary unit and up to 2 decimals, e.g. `1.50 GiB`, `24 MiB`, `512 B`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 || v.fract() == 0.0 {
        format!("{} {}", v as u64, UNITS[u])
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_size("24MiB").unwrap(), 24 * 1024 * 1024);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 * 512 * 1024 * 1024);
        assert_eq!(parse_size("1048576").unwrap(), 1 << 20);
        assert_eq!(parse_size(" 2 kB ").unwrap(), 2000);
        assert_eq!(parse_size("3B").unwrap(), 3);
        assert!(parse_size("1.5").is_err());
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("3 parsecs").is_err());
        assert!(parse_size("-1MiB").is_err());
    }

    #[test]
    fn formats() {
        assert_eq!(format_size(24 << 20), "24 MiB");
        assert_eq!(format_size(3 << 29), "1.50 GiB");
        assert_eq!(format_size(100), "100 B");
    }
}
