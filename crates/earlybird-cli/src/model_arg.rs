//! The model `earlybird flows` runs: the default model built into the binary
//! (`models/default.ebm`, trained by `models/train_default.sh`), another
//! model file (`--model PATH`) or none (`--no-model`).
//!
//! Contract: [`model_ref`] returns the `ModelRef` for the pipeline (class
//! names included, to be used as `ExportOptions::class_names`); a model file
//! that cannot be read or is not a valid model is an error naming the file.

use std::path::Path;
use std::sync::Arc;

use earlybird::{Model, ModelRef};

/// The default model, embedded at build time.
pub static DEFAULT_MODEL: &[u8] = include_bytes!("../../../models/default.ebm");

/// Parses the embedded default model.
pub fn default_model() -> Result<Model, String> {
    Model::from_bytes(DEFAULT_MODEL).map_err(|e| format!("built-in default model: {e}"))
}

/// Model for a run: `path` if given, nothing with `none`, else the default.
pub fn model_ref(path: Option<&Path>, none: bool) -> Result<ModelRef, String> {
    let model = match (path, none) {
        (_, true) => return Ok(ModelRef::default()),
        (Some(p), false) => Model::load(p).map_err(|e| e.to_string())?,
        (None, false) => default_model()?,
    };
    let classes: Arc<[String]> = model.info.classes.clone().into();
    Ok(ModelRef {
        model: Some(Arc::new(model)),
        classes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_model_loads() {
        let m = default_model().unwrap();
        assert!(!m.info.classes.is_empty());
        let r = model_ref(None, false).unwrap();
        assert_eq!(r.classes.len(), m.info.classes.len());
        assert!(model_ref(None, true).unwrap().model.is_none());
        let Err(e) = model_ref(Some(Path::new("/nonexistent/m.ebm")), false) else {
            panic!("a missing model file must be an error");
        };
        assert!(e.contains("/nonexistent/m.ebm"), "{e}");
    }
}
