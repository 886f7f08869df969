//! Byte sizes as people write them on a command line or in a run file:
//! `512M`, `2G`, `1.5GiB`, `1048576`, `none`.

use crate::error::Result;

/// Parses a size: bytes, or a number with K, M, G or T (powers of 1024;
/// `B` and `iB` suffixes accepted), or `none` (no limit: 0).
pub fn parse_size(text: &str) -> Result<usize> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("none") {
        return Ok(0);
    }
    let not_a_size = || config_err!("`{text}` is not a size (e.g. 512M, 2G, none)");
    let upper = t.to_ascii_uppercase();
    let digits = upper.trim_end_matches(['B', 'I']);
    let (number, shift) = match digits.chars().last() {
        Some('K') => (&digits[..digits.len() - 1], 10),
        Some('M') => (&digits[..digits.len() - 1], 20),
        Some('G') => (&digits[..digits.len() - 1], 30),
        Some('T') => (&digits[..digits.len() - 1], 40),
        _ => (digits, 0),
    };
    let value: f64 = number.trim().parse().map_err(|_| not_a_size())?;
    if !value.is_finite() || value < 0.0 {
        return Err(not_a_size());
    }
    Ok((value * (1u64 << shift) as f64) as usize)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("none").unwrap(), 0);
        assert_eq!(parse_size("1048576").unwrap(), 1 << 20);
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size(" 2g ").unwrap(), 2 << 30);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size("4kb").unwrap(), 4096);
        for bad in ["", "M", "-1M", "inf", "NaN", "12Q", "1..2G"] {
            let e = parse_size(bad).unwrap_err().to_string();
            assert!(e.contains("is not a size"), "{bad}: {e}");
        }
    }
}
