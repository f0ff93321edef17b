//! §4.6 timestamps: RFC 3339 / ISO 8601 strings and integer epoch milliseconds, as compared
//! by `date` filter fields (§8).

use serde_json::Value;

/// Converts a §4.6 timestamp to milliseconds since the Unix epoch: an RFC 3339 / ISO 8601
/// string (`YYYY-MM-DD`, optionally `THH:MM[:SS[.fff]]` and `Z`/`±HH:MM`; no offset means
/// UTC) or an integer number of milliseconds. `None` for anything else.
pub fn date_to_epoch_ms(value: &Value) -> Option<i64> {
    match value {
        Value::String(s) => parse_rfc3339_ms(s),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Some(i)
            } else if n.is_u64() {
                None // beyond i64: not a plausible timestamp
            } else {
                let f = n.as_f64()?;
                (f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e15).then_some(f as i64)
            }
        }
        _ => None,
    }
}

const MS_PER_DAY: i64 = 86_400_000;

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(y) => 29,
        _ => 28,
    }
}

/// Leap years in `[0, y)` minus a constant: differences give leap years between two years
/// (proleptic Gregorian; floor division keeps year 0 and before correct).
fn leaps_before(y: i64) -> i64 {
    let p = y - 1;
    p.div_euclid(4) - p.div_euclid(100) + p.div_euclid(400)
}

fn days_since_epoch(y: i64, m: u32, d: u32) -> i64 {
    const BEFORE_MONTH: [i64; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let mut days = 365 * (y - 1970) + leaps_before(y) - leaps_before(1970);
    days += BEFORE_MONTH[(m as usize - 1) % 12];
    if m > 2 && is_leap(y) {
        days += 1;
    }
    days + i64::from(d) - 1
}

/// A cursor over the ASCII bytes of a timestamp.
struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn digits(&mut self, n: usize) -> Option<u32> {
        let s = self.b.get(self.i..self.i + n)?;
        let mut v = 0u32;
        for &c in s {
            if !c.is_ascii_digit() {
                return None;
            }
            v = v * 10 + u32::from(c - b'0');
        }
        self.i += n;
        Some(v)
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn done(&self) -> bool {
        self.i == self.b.len()
    }
}

/// Parses `YYYY-MM-DD[(T|t| )HH:MM[:SS[(.|,)fraction]][Z|z|±HH[:]MM]]` to epoch ms.
pub(super) fn parse_rfc3339_ms(s: &str) -> Option<i64> {
    let mut c = Cursor { b: s.as_bytes(), i: 0 };
    let year = i64::from(c.digits(4)?);
    if !c.eat(b'-') {
        return None;
    }
    let month = c.digits(2)?;
    if !c.eat(b'-') {
        return None;
    }
    let day = c.digits(2)?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    let mut ms = days_since_epoch(year, month, day) * MS_PER_DAY;
    if c.done() {
        return Some(ms);
    }
    if !(c.eat(b'T') || c.eat(b't') || c.eat(b' ')) {
        return None;
    }
    let hour = c.digits(2)?;
    if !c.eat(b':') {
        return None;
    }
    let minute = c.digits(2)?;
    let mut second = 0;
    let mut millis = 0;
    if c.eat(b':') {
        second = c.digits(2)?;
        if c.eat(b'.') || c.eat(b',') {
            let start = c.i;
            let mut scale = 100;
            while let Some(d) = c.peek().filter(u8::is_ascii_digit) {
                millis += u32::from(d - b'0') * scale;
                scale /= 10;
                c.i += 1;
            }
            if c.i == start {
                return None;
            }
        }
    }
    // 60 admits a leap second.
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    ms += ((i64::from(hour) * 60 + i64::from(minute)) * 60 + i64::from(second)) * 1000 + i64::from(millis);
    match c.peek() {
        Some(b'Z' | b'z') => c.i += 1,
        Some(sign @ (b'+' | b'-')) => {
            c.i += 1;
            let oh = c.digits(2)?;
            c.eat(b':');
            let om = c.digits(2)?;
            if oh > 23 || om > 59 {
                return None;
            }
            let offset = (i64::from(oh) * 60 + i64::from(om)) * 60_000;
            ms += if sign == b'+' { -offset } else { offset };
        }
        _ => {}
    }
    c.done().then_some(ms)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn date_parsing() {
        let d = |s: &str| date_to_epoch_ms(&json!(s));
        assert_eq!(d("1970-01-01"), Some(0));
        assert_eq!(d("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(d("2017-06-12T00:00:00Z"), Some(1_497_225_600_000));
        assert_eq!(d("2017-06-12"), Some(1_497_225_600_000));
        assert_eq!(d("2000-02-29T12:34:56.789Z"), Some(951_827_696_789));
        assert_eq!(d("2000-02-29t12:34:56,7z"), Some(951_827_696_700));
        assert_eq!(d("2000-02-29 12:34"), Some(951_827_640_000));
        assert_eq!(d("2000-02-29T12:34:56.123456789Z"), Some(951_827_696_123));
        assert_eq!(d("1969-12-31"), Some(-86_400_000));
        assert_eq!(d("0000-01-01"), Some(-62_167_219_200_000));
        assert_eq!(d("9999-12-31T23:59:59Z"), Some(253_402_300_799_000));
        assert_eq!(d("2024-03-01T00:00:00+01:00"), d("2024-02-29T23:00:00Z"));
        assert_eq!(d("2024-03-01T00:00:00-0530"), d("2024-03-01T05:30:00Z"));
        assert_eq!(d("2016-12-31T23:59:60Z"), Some(1_483_228_800_000));
        assert_eq!(date_to_epoch_ms(&json!(1_497_225_600_000i64)), Some(1_497_225_600_000));
        assert_eq!(date_to_epoch_ms(&json!(-5)), Some(-5));
        assert_eq!(date_to_epoch_ms(&json!(1.0e3)), Some(1000));
        for bad in [
            "",
            "2017",
            "2017-06",
            "2017-6-12",
            "17-06-12",
            "2017-13-01",
            "2017-00-10",
            "2017-02-29",
            "1900-02-29",
            "2017-04-31",
            "2017-06-00",
            "2017-06-12T",
            "2017-06-12T24:00",
            "2017-06-12T12",
            "2017-06-12T12:60",
            "2017-06-12T12:00:61",
            "2017-06-12T12:00:00.",
            "2017-06-12T12:00:00+25:00",
            "2017-06-12T12:00:00+01",
            "2017-06-12X12:00",
            "2017-06-12T12:00Zjunk",
            "２０１７-06-12",
            "yesterday",
        ] {
            assert_eq!(d(bad), None, "{bad:?}");
        }
        assert_eq!(date_to_epoch_ms(&json!(1.5)), None);
        assert_eq!(date_to_epoch_ms(&json!(u64::MAX)), None);
        assert_eq!(date_to_epoch_ms(&json!(true)), None);
        assert_eq!(date_to_epoch_ms(&json!(null)), None);
    }
}
