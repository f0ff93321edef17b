//! ONNX Runtime, loaded once per process from the library a model directory holds (see
//! [`crate::models`]): the one loading path of the embedder and the reranker.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use ort::environment::Environment;

use crate::model::ModelFiles;

/// Why ONNX Runtime could not be made ready.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The shared library could not be loaded.
    #[error("could not load ONNX Runtime from {path}")]
    Load {
        /// The library.
        path: PathBuf,
        /// The loader's error (shared: the library is loaded once per process).
        #[source]
        cause: Arc<ort::LoadDynamicError>,
    },
    /// The ONNX Runtime environment could not be created.
    #[error("could not create the ONNX Runtime environment")]
    Environment(#[source] Arc<ort::Error>),
}

/// Points `ort` at the library `path`, once per process (it cannot be changed later); every
/// later call returns the first call's outcome.
pub(crate) fn load_library(path: &Path) -> &'static Result<(), Arc<ort::LoadDynamicError>> {
    static INIT: OnceLock<Result<(), Arc<ort::LoadDynamicError>>> = OnceLock::new();
    INIT.get_or_init(|| ort::init_from(path).map(drop).map_err(Arc::new))
}

/// The process's ONNX Runtime environment, on the library of `files`, created on first use.
/// Every model of the process runs on it: sessions built directly on `ort` (the reranker's)
/// and the embedder's fastembed sessions (handed it explicitly), since ONNX Runtime allows one
/// environment per process.
pub fn environment(files: &ModelFiles) -> Result<Environment, RuntimeError> {
    static ENV: OnceLock<Result<Environment, Arc<ort::Error>>> = OnceLock::new();
    let path = files.onnxruntime();
    load_library(&path).clone().map_err(|cause| RuntimeError::Load { path, cause })?;
    ENV.get_or_init(|| ort::init().with_name("rcp").build().map_err(Arc::new))
        .clone()
        .map_err(RuntimeError::Environment)
}
