//! Numbers and dates as a reader sees them: table cells rounded per unit, axis
//! ticks, axis labels with their unit. Drawing and the template both call here, so
//! a chart's ticks and its table agree.

use super::spec::Unit;

impl Unit {
    /// The unit as printed after an axis label: `"Cost per 1K tokens (USD)"`.
    pub fn suffix(&self) -> &'static str {
        match self {
            Unit::Usd => "USD",
            Unit::Rate => "%",
            Unit::Ms => "ms",
            Unit::Gib => "GiB",
            Unit::Count(what) => what,
            Unit::Index => "index",
            Unit::Date => "UTC",
            Unit::Category(unit) | Unit::Other(unit) => unit,
        }
    }

    /// `"{label} ({unit})"`, or the label alone when the unit is empty.
    pub fn label(&self, label: &str) -> String {
        match self.suffix() {
            "" => label.to_string(),
            unit => format!("{label} ({unit})"),
        }
    }

    /// Factor from stored value to drawn value (rates are drawn in percent).
    pub(crate) fn plot_scale(&self) -> f64 {
        match self {
            Unit::Rate => 100.0,
            _ => 1.0,
        }
    }

    /// A table cell: rates as `12.3%`, ms with one decimal, USD with 4 significant
    /// digits, counts whole with thousands separators.
    pub fn cell(&self, value: f64) -> String {
        if !value.is_finite() {
            return value.to_string();
        }
        match self {
            Unit::Rate => format!("{:.1}%", value * 100.0),
            Unit::Ms => group_thousands(&format!("{value:.1}")),
            Unit::Usd | Unit::Other(_) | Unit::Category(_) => significant(value, 4),
            Unit::Gib => significant(value, 3),
            Unit::Count(_) => group_thousands(&format!("{value:.0}")),
            Unit::Index => format!("{value:.0}"),
            Unit::Date => date_label(value as i32),
        }
    }
}

/// `value` rounded to `digits` significant digits, never dropping integer digits
/// (123456.7 USD reads `123,457`, not `123,500`), thousands grouped.
pub fn significant(value: f64, digits: u32) -> String {
    if value == 0.0 || !value.is_finite() {
        return if value == 0.0 { "0".into() } else { value.to_string() };
    }
    let magnitude = value.abs().log10().floor() as i32;
    let mut decimals = (digits as i32 - 1 - magnitude).max(0) as usize;
    let mut text = format!("{value:.decimals$}");
    // 9.99996 rounds up to 10.000: one decimal too many for the digit budget.
    let rounded: f64 = text.parse().unwrap_or(value);
    if decimals > 0 && rounded.abs().log10().floor() as i32 > magnitude {
        decimals -= 1;
        text = format!("{value:.decimals$}");
    }
    group_thousands(&text)
}

/// Axis tick text for a tick at `value` on an axis whose ticks are `step` apart.
pub(crate) fn tick(value: f64, step: f64) -> String {
    // A step of 2.5 x 10^k needs one decimal more than its power of ten (2.5, 0.25).
    let decimals =
        if step <= 0.0 { 0 } else { (-step.log10().floor() as i64 + i64::from(is_half_step(step))).max(0) as usize };
    let value = if value.abs() < step * 1e-9 { 0.0 } else { value };
    group_thousands(&format!("{value:.decimals$}"))
}

/// Steps like 0.25 or 0.025 need one more decimal than their magnitude says.
fn is_half_step(step: f64) -> bool {
    let scaled = step / 10f64.powf(step.log10().floor());
    (scaled - 2.5).abs() < 1e-9
}

/// `1234567.5` -> `1,234,567.5`; leaves numbers below 10,000 alone (`1234`), as
/// style guides for tables do.
pub(crate) fn group_thousands(text: &str) -> String {
    let (sign, rest) = match text.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", text),
    };
    let (int, frac) = match rest.find('.') {
        Some(dot) => rest.split_at(dot),
        None => (rest, ""),
    };
    if int.len() <= 4 || !int.bytes().all(|b| b.is_ascii_digit()) {
        return text.to_string();
    }
    let mut grouped = String::with_capacity(text.len() + int.len() / 3);
    for (i, digit) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    format!("{sign}{grouped}{frac}")
}

/// Days since 1970-01-01 (Arrow `Date32`) as `(year, month, day)`, proleptic
/// Gregorian (H. Hinnant's `civil_from_days`).
pub(crate) fn civil_from_days(days: i32) -> (i64, u32, u32) {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `YYYY-MM-DD` of a `Date32` value.
pub fn date_label(days: i32) -> String {
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `YYYY-MM-DD HH:MM:SS` (UTC) of milliseconds since the epoch; `.mmm` is added
/// only when the instant is not on a whole second.
pub fn time_label(millis: i64) -> String {
    let (days, ms_of_day) = (millis.div_euclid(86_400_000), millis.rem_euclid(86_400_000));
    let (h, m, s, ms) = (ms_of_day / 3_600_000, ms_of_day / 60_000 % 60, ms_of_day / 1000 % 60, ms_of_day % 1000);
    let date = date_label(days as i32);
    if ms == 0 {
        format!("{date} {h:02}:{m:02}:{s:02}")
    } else {
        format!("{date} {h:02}:{m:02}:{s:02}.{ms:03}")
    }
}

/// Short time for axis ticks `step_s` seconds apart: `HH:MM`, with `:SS` below a
/// minute, and `MM-DD HH:MM` at midnight so a second day is named.
pub(crate) fn time_tick(seconds: f64, step_s: f64) -> String {
    let total = seconds.round() as i64;
    let (days, of_day) = (total.div_euclid(86_400), total.rem_euclid(86_400));
    let (h, m, s) = (of_day / 3600, of_day / 60 % 60, of_day % 60);
    if step_s < 60.0 {
        format!("{h:02}:{m:02}:{s:02}")
    } else if of_day == 0 {
        let (_, month, day) = civil_from_days(days as i32);
        format!("{month:02}-{day:02} {h:02}:{m:02}")
    } else {
        format!("{h:02}:{m:02}")
    }
}

/// Short date for axis ticks: `MM-DD`, or `YYYY-MM` when ticks are a month apart or more.
pub(crate) fn date_tick(days: i32, step_days: i32) -> String {
    let (y, m, d) = civil_from_days(days);
    if step_days >= 28 {
        format!("{y:04}-{m:02}")
    } else {
        format!("{m:02}-{d:02}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_percentages_with_one_decimal() {
        assert_eq!(Unit::Rate.cell(0.12345), "12.3%");
        assert_eq!(Unit::Rate.cell(1.0), "100.0%");
    }

    #[test]
    fn milliseconds_have_one_decimal() {
        assert_eq!(Unit::Ms.cell(182.449), "182.4");
        assert_eq!(Unit::Ms.cell(12345.67), "12,345.7");
    }

    #[test]
    fn usd_has_four_significant_digits() {
        assert_eq!(Unit::Usd.cell(0.0012345678), "0.001235");
        assert_eq!(Unit::Usd.cell(12.34567), "12.35");
        assert_eq!(Unit::Usd.cell(9.99996), "10.00");
        assert_eq!(Unit::Usd.cell(123456.7), "123,457");
        assert_eq!(Unit::Usd.cell(0.0), "0");
    }

    #[test]
    fn counts_are_whole_and_grouped() {
        assert_eq!(Unit::Count("requests").cell(1234567.0), "1,234,567");
        assert_eq!(Unit::Count("requests").cell(1234.0), "1234");
    }

    #[test]
    fn axis_labels_carry_their_unit() {
        assert_eq!(Unit::Usd.label("Cost per 1K tokens"), "Cost per 1K tokens (USD)");
        assert_eq!(Unit::Rate.label("Implicit truncation"), "Implicit truncation (%)");
    }

    #[test]
    fn date32_values_read_as_calendar_dates() {
        assert_eq!(date_label(0), "1970-01-01");
        assert_eq!(date_label(20_089), "2025-01-01");
        assert_eq!(date_label(-1), "1969-12-31");
        assert_eq!(date_label(11_016), "2000-02-29");
    }

    #[test]
    fn timestamps_read_as_utc_date_and_time() {
        // 2024-06-01 00:01:00 UTC is 1_717_200_060 s after the epoch.
        assert_eq!(time_label(1_717_200_060_000), "2024-06-01 00:01:00");
        assert_eq!(time_label(1_717_200_060_250), "2024-06-01 00:01:00.250");
        assert_eq!(time_label(-1000), "1969-12-31 23:59:59");
        assert_eq!(time_tick(1_717_200_060.0, 60.0), "00:01");
        assert_eq!(time_tick(1_717_200_000.0, 3600.0), "06-01 00:00");
        assert_eq!(time_tick(1_717_200_005.0, 5.0), "00:00:05");
    }

    #[test]
    fn ticks_have_as_many_decimals_as_their_step() {
        assert_eq!(tick(0.5, 0.25), "0.50");
        assert_eq!(tick(7.5, 2.5), "7.5");
        assert_eq!(tick(75.0, 25.0), "75");
        assert_eq!(tick(20.0, 5.0), "20");
        assert_eq!(tick(0.002, 0.001), "0.002");
        assert_eq!(tick(15000.0, 5000.0), "15,000");
    }
}
