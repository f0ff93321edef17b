//! What the benches' pictures share (their `--svg FILE`, drawn with plotters' SVG backend):
//! point markers, log-axis ticks, titles, number formats and the date in a caption.

use plotters::coord::Shift;
use plotters::prelude::*;

/// The outline of a point marker around (0, 0), by series: circle, triangle, square, diamond,
/// down triangle, hexagon (then again).
pub fn marker(series: usize) -> Vec<(i32, i32)> {
    let polygon = |corners: usize, radius: f64, turn: f64| -> Vec<(i32, i32)> {
        (0..corners)
            .map(|i| {
                let a = turn + std::f64::consts::TAU * i as f64 / corners as f64;
                ((radius * a.cos()).round() as i32, (radius * a.sin()).round() as i32)
            })
            .collect()
    };
    let quarter = std::f64::consts::FRAC_PI_4;
    match series % 6 {
        0 => polygon(16, 4.5, 0.0),
        1 => polygon(3, 6.0, -2.0 * quarter),
        2 => polygon(4, 5.5, quarter),
        3 => polygon(4, 6.0, 0.0),
        4 => polygon(3, 6.0, 2.0 * quarter),
        _ => polygon(6, 5.0, 0.0),
    }
}

/// Puts a title and a smaller second line above the drawing; returns the area below them.
pub fn titled<'a>(
    root: &DrawingArea<SVGBackend<'a>, Shift>,
    title: &str,
    subtitle: &str,
) -> Result<DrawingArea<SVGBackend<'a>, Shift>, DrawingAreaErrorKind<std::io::Error>> {
    root.titled(title, ("sans-serif", 24))?
        .titled(subtitle, ("sans-serif", 17).into_font().color(&RGBColor(90, 90, 90)))
}

/// Ticks of a log axis within `lo..hi`: 1, 2 and 5 times each power of ten; the powers alone
/// past three decades; every integer multiple when that leaves fewer than three ticks.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let within = |steps: &[f64]| -> Vec<f64> {
        (lo.log10().floor() as i32..=hi.log10().ceil() as i32)
            .flat_map(|e| steps.iter().map(move |m| m * 10f64.powi(e)))
            .filter(|v| (lo..=hi).contains(v))
            .collect()
    };
    let ticks = within(if hi / lo > 1_000.0 { &[1.0] } else { &[1.0, 2.0, 5.0] });
    if ticks.len() >= 3 { ticks } else { within(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]) }
}

/// `12,345` for counts and rates.
pub fn thousands(v: f64) -> String {
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 { format!("-{out}") } else { out }
}

/// Today's date (UTC), `YYYY-MM-DD`.
pub fn today() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    // Days since 1970-01-01 to a civil date (H. Hinnant's algorithm).
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_and_numbers() {
        assert_eq!(log_ticks(1.0, 100.0), [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]);
        assert_eq!(log_ticks(1.0, 1e5), [1.0, 10.0, 100.0, 1e3, 1e4, 1e5]);
        assert_eq!(log_ticks(3.0, 9.0), [3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
        assert_eq!(thousands(1234567.0), "1,234,567");
        assert_eq!(today().len(), 10);
        assert_eq!(marker(0).len(), 16);
    }
}
