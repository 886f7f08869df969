//! Axis arithmetic shared by the chart kinds: "nice" value ticks, date ticks, and
//! the order of category labels (context bins sort by their lower edge).

use crate::export::dashboard::frame::Cell;

/// Tick positions and the distance between them (for tick label decimals).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Ticks {
    pub values: Vec<f64>,
    pub step: f64,
}

impl Ticks {
    pub(crate) fn lo(&self) -> f64 {
        self.values[0]
    }
    pub(crate) fn hi(&self) -> f64 {
        self.values[self.values.len() - 1]
    }
}

/// About `target` round-numbered ticks covering `[lo, hi]` (steps 1, 2, 2.5, 5 x 10^k).
pub(crate) fn nice_ticks(lo: f64, hi: f64, target: usize) -> Ticks {
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else if lo == 0.0 {
        (0.0, 1.0)
    } else {
        (lo.min(0.0), hi.max(0.0) + lo.abs())
    };
    let raw = (hi - lo) / target.max(1) as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * magnitude);
    let first = (lo / step + 1e-9).floor() as i64;
    let last = (hi / step - 1e-9).ceil() as i64;
    let values = (first..=last).map(|k| k as f64 * step).collect();
    Ticks { values, step }
}

/// Ticks for a value axis over `values`, starting at zero when all are positive
/// (bars and rates read wrong from a cut-off baseline).
pub(crate) fn value_ticks(values: impl Iterator<Item = f64>, target: usize) -> Ticks {
    let (mut min, mut max) = (0.0f64, 0.0f64);
    for v in values {
        min = min.min(v);
        max = max.max(v);
    }
    nice_ticks(min, max, target)
}

/// Date ticks (days since epoch) at most `max_labels`, ending on `last`.
pub(crate) fn date_ticks(first: i32, last: i32, max_labels: usize) -> (Vec<f64>, i32) {
    let span = (last - first).max(0);
    let step = [1, 2, 7, 14, 28, 56, 91, 182, 364]
        .into_iter()
        .find(|s| ((span / s) as usize) < max_labels.max(1))
        .unwrap_or(365);
    let mut ticks: Vec<f64> = (0..).map(|k| last - k * step).take_while(|d| *d >= first).map(f64::from).collect();
    ticks.reverse();
    (ticks, step)
}

/// Time ticks (seconds since the epoch) at most `max_labels`, on round clock
/// times (a multiple of the step since midnight UTC); the step is returned too.
pub(crate) fn time_ticks(first: f64, last: f64, max_labels: usize) -> (Vec<f64>, f64) {
    let span = (last - first).max(0.0);
    let steps = [1.0, 5.0, 10.0, 15.0, 30.0, 60.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 10800.0, 21600.0];
    let step = steps.into_iter().find(|s| span / s < max_labels.max(1) as f64).unwrap_or(43_200.0);
    let start = (first / step).ceil() as i64;
    let end = (last / step).floor() as i64;
    let ticks: Vec<f64> = (start..=end).map(|k| k as f64 * step).collect();
    if ticks.is_empty() {
        (vec![first], step)
    } else {
        (ticks, step)
    }
}

/// Every `k`-th index so that at most `max` of `n` labels are shown.
pub(crate) fn thinned(n: usize, max: usize) -> Vec<f64> {
    let k = n.div_ceil(max.max(1)).max(1);
    (0..n).step_by(k).map(|i| i as f64).collect()
}

/// Distinct labels of `cells` in reading order: numbers ascending, context bins by
/// lower edge (`0-1K` < `1K-2K` < ... < `128K+`), anything else by first appearance.
pub(crate) fn ordered_labels<'a>(cells: impl Iterator<Item = &'a Cell>) -> Vec<String> {
    let mut distinct: Vec<&Cell> = Vec::new();
    for cell in cells {
        if !distinct.contains(&cell) {
            distinct.push(cell);
        }
    }
    if distinct.iter().all(|c| matches!(c, Cell::Num(_))) {
        distinct.sort_by(|a, b| a.num().partial_cmp(&b.num()).unwrap_or(std::cmp::Ordering::Equal));
    } else if distinct.iter().all(|c| c.seconds().is_some()) {
        distinct.sort_by(|a, b| a.seconds().partial_cmp(&b.seconds()).unwrap_or(std::cmp::Ordering::Equal));
    } else {
        let edges: Option<Vec<u64>> = distinct.iter().map(|c| bin_lower_edge(&c.label())).collect();
        if let Some(edges) = edges {
            let mut keyed: Vec<(u64, &Cell)> = edges.into_iter().zip(distinct).collect();
            keyed.sort_by_key(|(edge, _)| *edge);
            distinct = keyed.into_iter().map(|(_, c)| c).collect();
        }
    }
    distinct.into_iter().map(Cell::label).collect()
}

/// Lower edge of a `context_bin` label (`"1K-2K"` -> 1024, `"128K+"` -> 131072,
/// `"0-512"` -> 0); None for anything else.
pub(crate) fn bin_lower_edge(label: &str) -> Option<u64> {
    let (lower, rest) = match label.find(['-', '+']) {
        Some(i) => label.split_at(i),
        None => return None,
    };
    if rest != "+" && !rest.starts_with('-') {
        return None;
    }
    let (digits, factor) = match lower.strip_suffix('K') {
        Some(d) => (d, 1024),
        None => match lower.strip_suffix('M') {
            Some(d) => (d, 1024 * 1024),
            None => (lower, 1),
        },
    };
    digits.parse::<u64>().ok().map(|v| v * factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_bins_sort_by_lower_edge() {
        let cells: Vec<Cell> = ["2K-4K", "0-1K", "128K+", "1K-2K"].iter().map(|s| Cell::Text(s.to_string())).collect();
        assert_eq!(ordered_labels(cells.iter()), ["0-1K", "1K-2K", "2K-4K", "128K+"]);
    }

    #[test]
    fn other_labels_keep_first_appearance() {
        let cells: Vec<Cell> = ["b", "a", "b", "c"].iter().map(|s| Cell::Text(s.to_string())).collect();
        assert_eq!(ordered_labels(cells.iter()), ["b", "a", "c"]);
    }

    #[test]
    fn nice_ticks_cover_the_range_with_round_steps() {
        let ticks = nice_ticks(0.0, 0.0137, 6);
        assert!((ticks.step - 0.0025).abs() < 1e-12);
        assert_eq!(ticks.values.len(), 7);
        assert!((ticks.hi() - 0.015).abs() < 1e-12);
    }

    #[test]
    fn nice_ticks_start_at_zero_for_positive_values() {
        let ticks = value_ticks([3.0, 61.0].into_iter(), 5);
        assert_eq!(ticks.values, vec![0.0, 20.0, 40.0, 60.0, 80.0]);
    }

    #[test]
    fn time_ticks_fall_on_round_clock_times() {
        // 00:00:30 to 00:35:10 (seconds of a day): 5-minute steps, 00:05 first.
        let (ticks, step) = time_ticks(30.0, 2110.0, 8);
        assert_eq!(step, 300.0);
        assert_eq!(ticks, vec![300.0, 600.0, 900.0, 1200.0, 1500.0, 1800.0, 2100.0]);
    }

    #[test]
    fn date_ticks_end_on_the_last_day() {
        let (ticks, step) = date_ticks(100, 129, 6);
        assert_eq!(step, 7);
        assert_eq!(ticks, vec![101.0, 108.0, 115.0, 122.0, 129.0]);
    }
}
