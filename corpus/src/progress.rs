//! The progress bar of every `index` command (`rcp-bm25`, `rcp-dense`, `rcp-pg`, `rcpctl index
//! add`): one look, and a rate people read (`1,409/s`, not indicatif's `1,409.3267/s`).

use indicatif::{ProgressBar, ProgressState, ProgressStyle};

/// A bar over `len` documents on stderr (drawn only when stderr is a terminal): elapsed time,
/// position, the rate of [`human_rate`] and the time left. `label` goes before the bar
/// (`embedding`), or nothing when empty.
pub fn bar(len: u64, label: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    let template = format!(
        "{{spinner}} [{{elapsed_precise}}] {label}{}{{wide_bar}} {{pos}}/{{len}} docs ({{rate}}, eta {{eta}})",
        if label.is_empty() { "" } else { " " }
    );
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style.with_key("rate", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = w.write_str(&human_rate(s.per_sec()));
        }));
    }
    bar
}

/// A rate per second as people write it: whole numbers with thousands separators from 100 up
/// (`1,409/s`), one decimal below (`19.4/s`).
pub fn human_rate(per_sec: f64) -> String {
    if !per_sec.is_finite() || per_sec < 0.0 {
        return "-/s".to_owned();
    }
    if per_sec < 100.0 {
        return format!("{per_sec:.1}/s");
    }
    let digits = format!("{:.0}", per_sec.round());
    let mut grouped = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!("{grouped}/s")
}

#[cfg(test)]
mod tests {
    use super::human_rate;

    #[test]
    fn rates_read_as_people_write_them() {
        assert_eq!(human_rate(1409.3267), "1,409/s");
        assert_eq!(human_rate(1_234_567.8), "1,234,568/s");
        assert_eq!(human_rate(999.6), "1,000/s");
        assert_eq!(human_rate(100.0), "100/s");
        assert_eq!(human_rate(19.44), "19.4/s");
        assert_eq!(human_rate(0.0), "0.0/s");
        assert_eq!(human_rate(f64::NAN), "-/s");
    }
}
