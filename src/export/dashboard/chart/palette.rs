//! Colours: the Okabe-Ito palette for series (safe for the common forms of colour
//! blindness), shades for a series' second and third value column, and ColorBrewer
//! ramps (Blues, RdBu) for heatmaps.

use plotters::style::RGBColor;

/// Okabe & Ito (2008), yellow last: it is the hardest to see on white.
pub(crate) const SERIES: [RGBColor; 8] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(230, 159, 0),   // orange
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 0, 0),       // black
    RGBColor(240, 228, 66),  // yellow
];

/// The series that name no one, drawn after the named ones in greys:
/// `(other)` (the groups a job's `top=N` summed) and `(null)` (rows without a value).
pub(crate) const NEUTRAL_SERIES: [(&str, RGBColor); 2] =
    [("(other)", RGBColor(136, 136, 136)), ("(null)", RGBColor(200, 200, 200))];

/// Fill opacity of a series' 1st, 2nd, 3rd value column in grouped bars.
pub(crate) const SHADES: [f64; 3] = [1.0, 0.45, 0.2];

pub(crate) fn shade(value_index: usize) -> f64 {
    SHADES[value_index.min(SHADES.len() - 1)]
}

pub(crate) const TEXT: RGBColor = RGBColor(51, 51, 51);
pub(crate) const AXIS: RGBColor = RGBColor(120, 120, 120);
pub(crate) const GRID: RGBColor = RGBColor(226, 226, 226);
pub(crate) const MISSING: RGBColor = RGBColor(235, 235, 235);

pub(crate) fn hex(colour: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", colour.0, colour.1, colour.2)
}

/// ColorBrewer Blues, light to dark.
const BLUES: [RGBColor; 5] = [
    RGBColor(239, 243, 255),
    RGBColor(189, 215, 231),
    RGBColor(107, 174, 214),
    RGBColor(49, 130, 189),
    RGBColor(8, 81, 156),
];

/// ColorBrewer RdBu reversed: negative blue, zero near white, positive red.
const BLUE_RED: [RGBColor; 7] = [
    RGBColor(33, 102, 172),
    RGBColor(103, 169, 207),
    RGBColor(209, 229, 240),
    RGBColor(247, 247, 247),
    RGBColor(253, 219, 199),
    RGBColor(239, 138, 98),
    RGBColor(178, 24, 43),
];

/// A heatmap's value -> colour mapping over `[lo, hi]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HeatScale {
    pub lo: f64,
    pub hi: f64,
    diverging: bool,
}

impl HeatScale {
    /// Diverging around zero when the values have both signs, sequential otherwise.
    pub(crate) fn new(min: f64, max: f64) -> HeatScale {
        if min < 0.0 && max > 0.0 {
            let m = min.abs().max(max);
            HeatScale { lo: -m, hi: m, diverging: true }
        } else if min < 0.0 {
            HeatScale { lo: min, hi: 0.0, diverging: true }
        } else {
            let hi = if max > min { max } else { min + 1.0 };
            HeatScale { lo: min.min(0.0), hi, diverging: false }
        }
    }

    pub(crate) fn colour(&self, value: f64) -> RGBColor {
        let t = ((value - self.lo) / (self.hi - self.lo)).clamp(0.0, 1.0);
        if self.diverging {
            ramp(&BLUE_RED, t)
        } else {
            ramp(&BLUES, t)
        }
    }
}

fn ramp(stops: &[RGBColor], t: f64) -> RGBColor {
    let pos = t * (stops.len() - 1) as f64;
    let i = (pos.floor() as usize).min(stops.len() - 2);
    let f = pos - i as f64;
    let (a, b) = (stops[i], stops[i + 1]);
    let mix = |x: u8, y: u8| (x as f64 + (y as f64 - x as f64) * f).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}
