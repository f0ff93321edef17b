//! PostgreSQL's binaries: `$RCP_PG_BIN`, else the pinned `pgserver` wheel (PostgreSQL 16 with
//! pgvector, relocatable), downloaded once with `pip download` through [`rcp_wheel`] (so the
//! machine's index configuration applies; `RCP_PIP` names the pip command), checked against its
//! pinned SHA-256 and unpacked.
//!
//! The wheel is cached in `<user cache dir>/rcp/wheels/`; it is unpacked into
//! `<user cache dir>/rcp/postgres/pgserver-<version>/`, or, when the server must run as another
//! user (see [`crate::cluster::server_user`]), into `<temp dir>/rcp-pg-local/pgserver-<version>/`,
//! which that user can read. Concurrent callers serialise on a lock file; a finished unpacking
//! is marked with the wheel's hash, so it is done once.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use rcp_wheel::{Target, WheelSpec, hash_file};

use crate::error::{LocalError, io_err};

/// The pinned `pgserver` release on PyPI.
pub const PGSERVER_VERSION: &str = "0.1.4";

/// `pgserver==<version>`, for messages.
pub const PGSERVER_WHEEL: &str = "pgserver==0.1.4";

/// One pinned wheel file of the release: the CPython 3.11 build for a platform (the PostgreSQL
/// binaries inside do not depend on Python's version; pinning one build pins one hash).
#[derive(Debug, Clone, Copy)]
struct PlatformWheel {
    os: &'static str,
    arch: &'static str,
    /// pip's `--platform` tag.
    platform: &'static str,
    file: &'static str,
    sha256: &'static str,
}

impl PlatformWheel {
    /// The exact build to fetch, whatever this machine's Python is.
    const fn spec(self) -> WheelSpec {
        let target = Target { platform: self.platform, python_version: "3.11", implementation: "cp", abi: "cp311" };
        WheelSpec::new("pgserver", PGSERVER_VERSION).target(target).sha256(self.sha256)
    }
}

const WHEELS: &[PlatformWheel] = &[
    PlatformWheel {
        os: "linux",
        arch: "x86_64",
        platform: "manylinux2014_x86_64",
        file: "pgserver-0.1.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        sha256: "d595789b47624a3d963aa9aa6359da9be31beb7e61f1a45541953242068b8813",
    },
    PlatformWheel {
        os: "macos",
        arch: "x86_64",
        platform: "macosx_10_9_x86_64",
        file: "pgserver-0.1.4-cp311-cp311-macosx_10_9_x86_64.whl",
        sha256: "854fa9394d495b3a332c954b63d4356b56d29220530e6d2aae146821bf87e05a",
    },
    PlatformWheel {
        os: "macos",
        arch: "aarch64",
        platform: "macosx_11_0_arm64",
        file: "pgserver-0.1.4-cp311-cp311-macosx_11_0_arm64.whl",
        sha256: "0cc5a64f40749c0e9752cd63784e63dfcf1f3e5ecd2279b6b59f7c64fb520fb4",
    },
];

/// The directory holding `initdb`, `pg_ctl`, `postgres` and `psql`: `$RCP_PG_BIN` when set,
/// else the pinned wheel's, provisioned on first use. `progress` hears each step taken.
pub fn binaries(progress: &mut dyn FnMut(&str)) -> Result<PathBuf, LocalError> {
    if let Some(dir) = std::env::var_os("RCP_PG_BIN").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        return if dir.join("pg_ctl").is_file() { Ok(dir) } else { Err(LocalError::BadBinDir(dir)) };
    }
    let wheel = platform_wheel()?;
    let root = install_root(crate::cluster::server_user().is_some());
    let bin = root.join("pgserver/pginstall/bin");
    if is_complete(&root, wheel) {
        return Ok(bin);
    }
    let parent = root.parent().unwrap_or(&root);
    fs::create_dir_all(parent).map_err(io_err(parent))?;
    let _lock = lock(&parent.join(".lock"))?;
    if is_complete(&root, wheel) {
        return Ok(bin);
    }
    let file = cached_wheel(wheel, progress)?;
    progress(&format!("unpack   {} into {}", wheel.file, root.display()));
    unpack(&file, &root)?;
    Ok(bin)
}

fn platform_wheel() -> Result<PlatformWheel, LocalError> {
    let (os, arch) = (std::env::consts::OS, std::env::consts::ARCH);
    WHEELS.iter().find(|w| w.os == os && w.arch == arch).copied().ok_or(LocalError::UnsupportedPlatform {
        version: PGSERVER_VERSION,
        os,
        arch,
    })
}

fn cache_dir() -> PathBuf {
    dirs::cache_dir().unwrap_or_else(std::env::temp_dir).join("rcp")
}

/// Where the wheel is unpacked: the user cache, or a temp directory another user can read.
fn install_root(shared: bool) -> PathBuf {
    let name = format!("pgserver-{PGSERVER_VERSION}");
    if shared { std::env::temp_dir().join("rcp-pg-local").join(name) } else { cache_dir().join("postgres").join(name) }
}

const COMPLETE: &str = ".complete";

fn is_complete(root: &Path, wheel: PlatformWheel) -> bool {
    fs::read_to_string(root.join(COMPLETE)).is_ok_and(|s| s.trim() == wheel.sha256)
        && root.join("pgserver/pginstall/bin/pg_ctl").is_file()
}

/// The verified wheel in the cache, downloaded when missing or damaged.
fn cached_wheel(wheel: PlatformWheel, progress: &mut dyn FnMut(&str)) -> Result<PathBuf, LocalError> {
    let dir = cache_dir().join("wheels");
    let path = dir.join(wheel.file);
    if path.is_file() && hash_file(&path).is_ok_and(|h| h == wheel.sha256) {
        progress(&format!("ok       {} (sha256 verified)", wheel.file));
        return Ok(path);
    }
    let staging = dir.join(format!(".staging-{}", std::process::id()));
    fs::create_dir_all(&staging).map_err(io_err(&staging))?;
    let result = rcp_wheel::download(&wheel.spec(), &staging, progress)
        .map_err(LocalError::from)
        .and_then(|got| fs::rename(&got, &path).map_err(io_err(&path)));
    let _ = fs::remove_dir_all(&staging);
    result.map(|()| path)
}

#[cfg(test)]
fn verify(path: &Path, wheel: PlatformWheel) -> Result<(), LocalError> {
    Ok(rcp_wheel::verify(&wheel.spec(), path)?)
}

/// Unpacks the whole wheel into `root` through a staging directory renamed into place, with
/// each file's mode from the archive, readable by every user (the server's may be another).
fn unpack(wheel: &Path, root: &Path) -> Result<(), LocalError> {
    let parent = root.parent().unwrap_or(root);
    let staging = parent.join(format!(".unpack-{}", std::process::id()));
    let _ = fs::remove_dir_all(&staging);
    let result = extract_all(wheel, &staging).and_then(|()| {
        let sha = hash_file(wheel).map_err(io_err(wheel))?;
        fs::write(staging.join(COMPLETE), sha).map_err(io_err(&staging))?;
        if root.exists() {
            fs::remove_dir_all(root).map_err(io_err(root))?;
        }
        fs::rename(&staging, root).map_err(io_err(root))
    });
    if result.is_err() {
        let _ = fs::remove_dir_all(&staging);
    }
    result
}

fn extract_all(wheel: &Path, into: &Path) -> Result<(), LocalError> {
    use std::os::unix::fs::PermissionsExt;
    let archive_err =
        |e: zip::result::ZipError| LocalError::Wheel { wheel: wheel.to_path_buf(), detail: e.to_string() };
    let file = File::open(wheel).map_err(io_err(wheel))?;
    let mut archive = zip::ZipArchive::new(file).map_err(archive_err)?;
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i).map_err(archive_err)?;
        let Some(name) = entry.enclosed_name() else { continue };
        let path = into.join(name);
        if entry.is_dir() {
            fs::create_dir_all(&path).map_err(io_err(&path))?;
            continue;
        }
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(io_err(dir))?;
        }
        let mut out = File::create(&path).map_err(io_err(&path))?;
        io::copy(&mut entry, &mut out).map_err(io_err(&path))?;
        let mode = entry.unix_mode().unwrap_or(0o644) & 0o777;
        let mode = if mode & 0o111 != 0 { mode | 0o555 } else { mode | 0o444 };
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).map_err(io_err(&path))?;
    }
    make_dirs_searchable(into)
}

fn make_dirs_searchable(dir: &Path) -> Result<(), LocalError> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).map_err(io_err(dir))?;
    for entry in fs::read_dir(dir).map_err(io_err(dir))? {
        let path = entry.map_err(io_err(dir))?.path();
        if path.is_dir() {
            make_dirs_searchable(&path)?;
        }
    }
    Ok(())
}

/// An exclusive advisory lock, released when the file is dropped.
fn lock(path: &Path) -> Result<File, LocalError> {
    let f = fs::OpenOptions::new().create(true).truncate(false).write(true).open(path).map_err(io_err(path))?;
    f.lock().map_err(io_err(path))?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_wheel_is_pinned_to_its_release() {
        for w in WHEELS {
            assert_eq!(w.sha256.len(), 64, "{}", w.file);
            assert!(w.sha256.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()), "{}", w.file);
            assert!(w.file.starts_with(&format!("pgserver-{PGSERVER_VERSION}-cp311-cp311-")), "{}", w.file);
        }
    }

    #[test]
    fn a_damaged_wheel_is_refused_with_advice() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("pgserver.whl");
        fs::write(&path, b"not a wheel").expect("write");
        let err = verify(&path, WHEELS[0]).expect_err("wrong hash").to_string();
        assert!(err.contains("is not the pinned") && err.contains("delete the file"), "{err}");
        let err = extract_all(&path, &dir.path().join("x")).expect_err("not a zip").to_string();
        assert!(err.contains("delete the file"), "{err}");
    }
}
