//! Model files from and to Python: a model's parts (algorithm name, body
//! JSON as `docs/MODEL_FORMAT.md` defines it, classes, N, threshold) made
//! into an earlybird model file by the engine (`Model::from_body`, checked
//! as a loaded model is, then `Model::save`), and a model file read back
//! into those parts (`Model::load`, `Model::body_json`). The scikit-learn
//! conversion itself is in `python/earlybird/sklearn.py`.

use earlybird::{Model, ModelInfo};
use pyo3::prelude::*;

use crate::{to_py, ModelError};

/// Writes a model file from its parts; a body the engine does not accept
/// raises `ModelError` saying why.
#[pyfunction]
#[pyo3(signature = (path, algo, body, classes, packets, threshold, trained_on))]
fn model_save(
    path: std::path::PathBuf,
    algo: &str,
    body: &str,
    classes: Vec<String>,
    packets: usize,
    threshold: f32,
    trained_on: String,
) -> PyResult<()> {
    let info = ModelInfo {
        classes,
        packets,
        threshold,
        trained_on,
        ..ModelInfo::default()
    };
    let model = Model::from_body(info, algo, body.as_bytes())
        .map_err(|e| ModelError::new_err(format!("model {}: {e}", path.display())))?;
    model.save(&path).map_err(to_py)
}

/// A model file's parts: (algorithm, body JSON, classes, N, threshold,
/// trained_on).
#[pyfunction]
fn model_load(
    path: std::path::PathBuf,
) -> PyResult<(String, String, Vec<String>, usize, f32, String)> {
    let m = Model::load(&path).map_err(to_py)?;
    let body = m
        .body_json()
        .map_err(|e| ModelError::new_err(format!("model {}: {e}", path.display())))?;
    Ok((
        m.kind.algo().to_string(),
        String::from_utf8_lossy(&body).into_owned(),
        m.info.classes,
        m.info.packets,
        m.info.threshold,
        m.info.trained_on,
    ))
}

/// Adds the functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(model_save, m)?)?;
    m.add_function(wrap_pyfunction!(model_load, m)?)?;
    Ok(())
}
