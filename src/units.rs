//! Parsing and formatting of the units people type and read: `10s`, `1m`, `10k`,
//! `635.91us`, `916.76MB`. Output follows wrk's conventions so its block reads the same.

use std::time::Duration;

/// The longest duration accepted: a year. Longer ones are typos, and a deadline that
/// far (`Instant + d`) can overflow the clock's arithmetic.
const MAX_DURATION_S: f64 = 365.0 * 24.0 * 3600.0;

/// Parses a duration such as `10s`, `1m`, `500ms`, `1h` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.starts_with('-') {
        return Err(format!("a duration cannot be negative: `{s}`"));
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("invalid duration `{s}`: expected e.g. 10s, 500ms, 1m"))?;
    let secs = match unit {
        "" | "s" => value,
        "ms" => value / 1e3,
        "us" => value / 1e6,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("invalid duration unit in `{s}`: use ms, s, m or h")),
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("invalid duration `{s}`"));
    }
    if secs > MAX_DURATION_S {
        return Err(format!("invalid duration `{s}`: at most a year (8760h)"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses a count such as `1000`, `10k`, `2M` (decimal multipliers, as wrk does).
pub fn parse_count(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.chars().last() {
        Some('k' | 'K') => (&s[..s.len() - 1], 1_000f64),
        Some('m' | 'M') => (&s[..s.len() - 1], 1_000_000f64),
        Some('g' | 'G') => (&s[..s.len() - 1], 1_000_000_000f64),
        _ => (s, 1f64),
    };
    let value: f64 = num
        .parse()
        .map_err(|_| format!("invalid number `{s}`: expected e.g. 100, 10k, 1M"))?;
    if !value.is_finite() || value < 0.0 || value.fract() * mult != (value.fract() * mult).trunc() {
        return Err(format!("invalid number `{s}`"));
    }
    Ok((value * mult) as u64)
}

/// Formats a latency in microseconds the way wrk does: `635.91us`, `12.92ms`, `1.20s`.
pub fn fmt_us(us: f64) -> String {
    if us < 1000.0 {
        format!("{us:.2}us")
    } else if us < 1_000_000.0 {
        format!("{:.2}ms", us / 1e3)
    } else if us < 60_000_000.0 {
        format!("{:.2}s", us / 1e6)
    } else {
        format!("{:.2}m", us / 60e6)
    }
}

/// Formats a byte count with binary multipliers and wrk's suffixes: `916.76MB`.
pub fn fmt_bytes(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut v = bytes;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.2}{}", UNITS[i])
}

/// Formats a count with decimal multipliers: `56.20k`.
pub fn fmt_count(n: f64) -> String {
    if n >= 1e9 {
        format!("{:.2}G", n / 1e9)
    } else if n >= 1e6 {
        format!("{:.2}M", n / 1e6)
    } else if n >= 1e3 {
        format!("{:.2}k", n / 1e3)
    } else {
        format!("{n:.2}")
    }
}

/// Formats a duration compactly for headers: `10s`, `1.5s`, `250ms`.
pub fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        let t = format!("{s:.2}");
        format!("{}s", t.trim_end_matches('0').trim_end_matches('.'))
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// Seconds since the Unix epoch as `2026-11-25T10:04:05` (UTC, the form JUnit's
/// schema takes: no zone). Civil-from-days: Howard Hinnant, "chrono-Compatible
/// Low-Level Date Algorithms".
pub fn iso8601(unix_s: f64) -> String {
    let secs = unix_s.max(0.0) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("10x").is_err());
        assert!(parse_duration("s").is_err());
        // Found by the cli fuzz target: these panicked (Duration::from_secs_f64).
        assert!(parse_duration("99999999999999999999999999999999").is_err());
        assert!(parse_duration("1e400").is_err());
        assert!(parse_duration("8761h").is_err());
        assert_eq!(
            parse_duration("8760h").unwrap(),
            Duration::from_secs(31_536_000)
        );
    }

    #[test]
    fn counts() {
        assert_eq!(parse_count("10k").unwrap(), 10_000);
        assert_eq!(parse_count("2M").unwrap(), 2_000_000);
        assert_eq!(parse_count("1.5k").unwrap(), 1_500);
        assert_eq!(parse_count("7").unwrap(), 7);
        assert!(parse_count("ten").is_err());
        assert!(parse_count("-1").is_err());
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_us(635.914), "635.91us");
        assert_eq!(fmt_us(12_920.0), "12.92ms");
        assert_eq!(fmt_us(1_200_000.0), "1.20s");
        assert_eq!(fmt_bytes(961_290_485.0), "916.76MB");
        assert_eq!(fmt_count(56_200.0), "56.20k");
        assert_eq!(fmt_duration(Duration::from_secs(10)), "10s");
        assert_eq!(fmt_duration(Duration::from_millis(1500)), "1.5s");
    }
}
