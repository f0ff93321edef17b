//! Read-only memory maps of finished files: a saved graph read once on load, and a flat table
//! of little-endian `f32` rows served in place (the dense store's snapshot vectors), so a
//! restart pays neither a copy of the file nor its parse.
//!
//! Mapping a file is `unsafe` in Rust because the map's bytes change if anyone writes the file
//! while it is mapped, and a read past a file that was truncated meanwhile raises `SIGBUS`.
//! This module is the only place that maps a file, and it rests on three conditions its
//! callers keep (the dense store does, see its `store` module):
//!
//! * only *finished* files are mapped: written through a temporary file, fsynced and renamed
//!   into place, never opened for writing again (a newer generation is a new file);
//! * the file's length is checked against what the caller expects **before** it is mapped
//!   ([`Mapped::open`]), and the caller checks a checksum it recorded when it wrote the file,
//!   so a file that was truncated or damaged on disk is refused instead of served;
//! * one process at a time owns the directory (the store's lock), so no other process of
//!   this project writes or truncates the file while it is mapped; removing it (a superseded
//!   generation) is harmless, since the map keeps the pages.

#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::path::Path;

// A map is read as native `f32` words; the files hold little-endian ones.
const _: () = assert!(cfg!(target_endian = "little"), "rcp-hnsw maps little-endian files in place");

/// A finished file mapped read-only (an empty file is an empty slice, with no map).
#[derive(Debug)]
pub struct Mapped {
    map: Option<memmap2::Mmap>,
}

impl Mapped {
    /// Maps `path` read-only after checking that it holds exactly `expected` bytes; with
    /// `populate`, every page is read in now (for a file about to be read whole).
    pub fn open(path: &Path, expected: u64, populate: bool) -> io::Result<Self> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        if len != expected {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {len} bytes, expected {expected}", path.display()),
            ));
        }
        if len == 0 {
            return Ok(Self { map: None });
        }
        let mut options = memmap2::MmapOptions::new();
        if populate {
            options.populate();
        }
        // SAFETY: the file is a finished one with the length checked just above, which no
        // process of this project writes or truncates while it is mapped (module docs).
        let map = unsafe { options.map(&file)? };
        if map.len() as u64 != expected {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: changed while mapped", path.display()),
            ));
        }
        Ok(Self { map: Some(map) })
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or_default()
    }

    /// The file read as little-endian `f32`s (a trailing partial word is not part of it).
    pub fn f32s(&self) -> &[f32] {
        let bytes = self.bytes();
        if bytes.is_empty() {
            return &[];
        }
        // SAFETY: a map starts on a page boundary, so the pointer is aligned for `f32`; every
        // bit pattern is a valid `f32`; `len / 4` words lie inside the map, which lives as long
        // as `self`; the target is little-endian (asserted above); the bytes do not change
        // while mapped (module docs).
        unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<f32>(), bytes.len() / 4) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_floats_in_place_and_refuses_a_wrong_length() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.f32");
        let v = [1.5f32, -2.0, 0.25];
        std::fs::write(&path, v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
        let m = Mapped::open(&path, 12, false).unwrap();
        assert_eq!(m.f32s(), &v);
        assert_eq!(m.bytes().len(), 12);
        let err = Mapped::open(&path, 16, true).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        std::fs::write(&path, b"").unwrap();
        assert!(Mapped::open(&path, 0, false).unwrap().f32s().is_empty());
    }
}
