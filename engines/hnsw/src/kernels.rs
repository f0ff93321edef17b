//! Dot-product kernels over `f32` and IEEE half-precision (`f16`, stored as `u16` bits), with
//! an AVX2 + FMA + F16C path chosen at run time and a portable path everywhere else.
//!
//! The choice is made once per index ([`Simd::detect`]) and passed to every call, so the hot
//! loop pays one predictable branch, never a feature probe. Nothing here is compiled for a
//! newer CPU than the build target: the wide path exists only inside `#[target_feature]`
//! functions that are called after the CPU said it has those features.

#![allow(unsafe_code)]

use std::sync::atomic::AtomicU32;

use half::f16;

/// Which kernels this CPU runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Simd {
    /// AVX2 with fused multiply-add and F16C conversions (x86-64).
    Avx2,
    /// Plain Rust loops (the compiler may still vectorise them for the build target).
    Portable,
}

impl Simd {
    /// The widest kernels this CPU supports.
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2")
                && std::is_x86_feature_detected!("fma")
                && std::is_x86_feature_detected!("f16c")
            {
                return Simd::Avx2;
            }
        }
        Simd::Portable
    }

    /// `a · b` over the shorter length.
    #[inline]
    pub fn dot_f32(self, a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len());
        let (a, b) = (&a[..n], &b[..n]);
        #[cfg(target_arch = "x86_64")]
        if self == Simd::Avx2 {
            // SAFETY: `Simd::Avx2` is only produced by `detect` after the CPU reported AVX2,
            // FMA and F16C; both slices hold `n` elements.
            return unsafe { avx2::dot(a, b) };
        }
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    /// `a · b` for an `f32` query and an `f16` row, over the shorter length.
    #[inline]
    pub fn dot_f32_f16(self, a: &[f32], b: &[u16]) -> f32 {
        let n = a.len().min(b.len());
        let (a, b) = (&a[..n], &b[..n]);
        #[cfg(target_arch = "x86_64")]
        if self == Simd::Avx2 {
            // SAFETY: as in `dot_f32`.
            return unsafe { avx2::dot(a, b) };
        }
        a.iter().zip(b).map(|(x, &y)| x * f16::from_bits(y).to_f32()).sum()
    }

    /// `a · b` for an `f32` query and an `i8` row (its codes, not yet multiplied by the row's
    /// scale), over the shorter length.
    #[inline]
    pub fn dot_f32_i8(self, a: &[f32], b: &[i8]) -> f32 {
        let n = a.len().min(b.len());
        let (a, b) = (&a[..n], &b[..n]);
        #[cfg(target_arch = "x86_64")]
        if self == Simd::Avx2 {
            // SAFETY: as in `dot_f32`.
            return unsafe { avx2::dot(a, b) };
        }
        a.iter().zip(b).map(|(x, &y)| x * f32::from(y)).sum()
    }

    /// `a · b` for two `f16` rows, over the shorter length.
    #[inline]
    pub fn dot_f16(self, a: &[u16], b: &[u16]) -> f32 {
        let n = a.len().min(b.len());
        let (a, b) = (&a[..n], &b[..n]);
        #[cfg(target_arch = "x86_64")]
        if self == Simd::Avx2 {
            // SAFETY: as in `dot_f32`.
            return unsafe { avx2::dot(a, b) };
        }
        a.iter().zip(b).map(|(&x, &y)| f16::from_bits(x).to_f32() * f16::from_bits(y).to_f32()).sum()
    }
}

/// `v` as `i8` codes and one scale, `v ≈ scale × codes`: the scale maps the largest
/// magnitude to 127, each code is rounded to nearest (an all-zero row has scale 0).
pub fn to_i8(v: &[f32]) -> (Vec<i8>, f32) {
    let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if !(max > 0.0 && max.is_finite()) {
        return (vec![0; v.len()], 0.0);
    }
    let scale = max / 127.0;
    (v.iter().map(|&x| (x / scale).round().clamp(-127.0, 127.0) as i8).collect(), scale)
}

/// `f32` to `f16` bits, round to nearest even.
pub fn to_f16(v: &[f32]) -> Vec<u16> {
    v.iter().map(|&x| f16::from_f32(x).to_bits()).collect()
}

/// Asks the CPU to start loading the first four cache lines of `words` (a hint; never
/// faults); the hardware prefetcher follows on as the kernel streams through the rest.
#[inline]
pub fn prefetch(words: &[AtomicU32]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let p = words.as_ptr().cast::<i8>();
        for line in 0..(words.len() / 16).clamp(1, 16) {
            // SAFETY: `line * 64` bytes lies within `words` (16 words per line, and at least
            // one line is only requested at offset 0, the start of the slice); a prefetch is a
            // hint that never faults in any case.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.add(line * 64)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = words;
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// Sum of the eight lanes.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps::<1>(s, s));
        _mm_cvtss_f32(s)
    }

    /// An element the kernel reads eight at a time as `f32` lanes: `f32` itself, or `f16`
    /// stored as its `u16` bits.
    pub(super) trait Lanes: Copy {
        /// Eight elements at `p` as `f32` lanes.
        ///
        /// # Safety
        /// Eight readable elements at `p`; the CPU has AVX2, FMA and F16C.
        unsafe fn load8(p: *const Self) -> __m256;

        /// One element as `f32`, for the tail.
        fn to_f32(self) -> f32;
    }

    impl Lanes for f32 {
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn load8(p: *const f32) -> __m256 {
            // SAFETY: the caller guarantees eight readable `f32` at `p`.
            unsafe { _mm256_loadu_ps(p) }
        }

        #[inline]
        fn to_f32(self) -> f32 {
            self
        }
    }

    impl Lanes for u16 {
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn load8(p: *const u16) -> __m256 {
            // SAFETY: the caller guarantees eight readable `u16` at `p`.
            _mm256_cvtph_ps(unsafe { _mm_loadu_si128(p.cast()) })
        }

        #[inline]
        fn to_f32(self) -> f32 {
            half::f16::from_bits(self).to_f32()
        }
    }

    impl Lanes for i8 {
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn load8(p: *const i8) -> __m256 {
            // SAFETY: the caller guarantees eight readable `i8` at `p`; `_mm_loadl_epi64`
            // reads exactly eight bytes and has no alignment requirement.
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(unsafe { _mm_loadl_epi64(p.cast()) }))
        }

        #[inline]
        fn to_f32(self) -> f32 {
            f32::from(self)
        }
    }

    /// `a · b` with four independent accumulators of eight lanes, then a scalar tail.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C; `a.len() == b.len()`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot<A: Lanes, B: Lanes>(a: &[A], b: &[B]) -> f32 {
        let n = a.len();
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut i = 0;
        // SAFETY (every load below): `i + 8 * k + 8 <= n` for each load, and both slices
        // hold `n` elements.
        unsafe {
            while i + 32 <= n {
                for (k, acc) in acc.iter_mut().enumerate() {
                    let o = i + 8 * k;
                    *acc = _mm256_fmadd_ps(A::load8(pa.add(o)), B::load8(pb.add(o)), *acc);
                }
                i += 32;
            }
            while i + 8 <= n {
                acc[0] = _mm256_fmadd_ps(A::load8(pa.add(i)), B::load8(pb.add(i)), acc[0]);
                i += 8;
            }
        }
        let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
        hsum(sum) + a[i..].iter().zip(&b[i..]).map(|(x, y)| x.to_f32() * y.to_f32()).sum::<f32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n: usize, seed: u32) -> Vec<f32> {
        (0..n).map(|i| ((i as u32).wrapping_mul(2_654_435_761) ^ seed) as f32 / u32::MAX as f32 - 0.5).collect()
    }

    #[test]
    fn every_kernel_agrees_with_the_portable_one_at_every_length() {
        let simd = Simd::detect();
        for n in [0, 1, 7, 8, 9, 31, 32, 33, 100, 384] {
            let (a, b) = (rows(n, 1), rows(n, 99));
            let (ah, bh) = (to_f16(&a), to_f16(&b));
            let close = |x: f32, y: f32| (x - y).abs() <= 1e-4 * (1.0 + y.abs());
            assert!(close(simd.dot_f32(&a, &b), Simd::Portable.dot_f32(&a, &b)), "f32 n={n}");
            assert!(close(simd.dot_f32_f16(&a, &bh), Simd::Portable.dot_f32_f16(&a, &bh)), "f32×f16 n={n}");
            assert!(close(simd.dot_f16(&ah, &bh), Simd::Portable.dot_f16(&ah, &bh)), "f16 n={n}");
            let (bi, scale) = to_i8(&b);
            assert!(close(simd.dot_f32_i8(&a, &bi), Simd::Portable.dot_f32_i8(&a, &bi)), "f32×i8 n={n}");
            let exact: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((Simd::Portable.dot_f16(&ah, &bh) - exact).abs() < 1e-2, "f16 rounding n={n}");
            // Each code is off by at most half a step, so the dot by at most that times Σ|a|.
            let bound = 0.5 * scale * a.iter().map(|x| x.abs()).sum::<f32>() + 1e-5;
            assert!((simd.dot_f32_i8(&a, &bi) * scale - exact).abs() <= bound, "i8 rounding n={n}");
        }
    }

    #[test]
    fn int8_codes_round_trip_within_half_a_step() {
        let v = rows(384, 5);
        let (codes, scale) = to_i8(&v);
        let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        assert!((scale * 127.0 - max).abs() < 1e-6);
        assert!(codes.iter().any(|&c| c.unsigned_abs() == 127));
        for (&c, &x) in codes.iter().zip(&v) {
            assert!((f32::from(c) * scale - x).abs() <= scale * 0.5 + 1e-7);
        }
        assert_eq!(to_i8(&[0.0, 0.0]), (vec![0, 0], 0.0));
        // A NaN (which no unit vector holds) neither sets the scale nor leaves a code but 0.
        assert_eq!(to_i8(&[f32::NAN, 1.0]), (vec![0, 127], 1.0 / 127.0));
    }
}
