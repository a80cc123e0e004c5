//! The model `bench`, `model` and `evaluate` take: the default model built into the binary
//! (`models/default.ebm`, trained by `models/train_default.sh`; also named
//! `--model default`), another model file (`--model PATH`) or none
//! (`--no-model`), with its threshold replaced by `--threshold`.
//!
//! Contract: [`model_ref`] returns the `ModelRef` for the pipeline (class
//! names included, to be used as `ExportOptions::class_names`); a model file
//! that cannot be read or is not a valid model is an error naming the file;
//! a threshold outside [0, 1] is an error.

use std::path::Path;
use std::sync::Arc;

use earlybird::{Model, ModelRef};

/// The name `--model` gives the built-in model (a file of that name is
/// `./default`).
pub const DEFAULT_NAME: &str = earlybird::DEFAULT_MODEL_NAME;

/// The model `--model` names: the built-in one for `None` or `default`.
pub fn load(path: Option<&Path>) -> Result<Model, String> {
    Model::named(path).map_err(|e| e.to_string())
}

/// Model for a run: `path` if given (`default`: the built-in model),
/// nothing with `none`, else the default; `threshold` replaces the model's.
pub fn model_ref(
    path: Option<&Path>,
    none: bool,
    threshold: Option<f32>,
) -> Result<ModelRef, String> {
    if none {
        return Ok(ModelRef::default());
    }
    let mut model = load(path)?;
    if let Some(t) = threshold {
        if !(0.0..=1.0).contains(&t) {
            return Err(format!("--threshold {t} is outside [0, 1]"));
        }
        if model.cascade().is_some() {
            return Err(
                "--threshold does not apply to a cascade model: each of its stages has its own threshold (train it again with another --target-precision)"
                    .into(),
            );
        }
        model.info.threshold = t;
    }
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
        let m = Model::builtin().unwrap();
        assert!(!m.info.classes.is_empty());
        let r = model_ref(None, false, None).unwrap();
        assert_eq!(r.classes.len(), m.info.classes.len());
        assert!(model_ref(None, true, None).unwrap().model.is_none());
        let Err(e) = model_ref(Some(Path::new("/nonexistent/m.ebm")), false, None) else {
            panic!("a missing model file must be an error");
        };
        assert!(e.contains("/nonexistent/m.ebm"), "{e}");
        assert_eq!(load(Some(Path::new("default"))).unwrap(), m);
        let named = model_ref(Some(Path::new("default")), false, Some(0.75)).unwrap();
        assert_eq!(named.classes.len(), m.info.classes.len());
        assert!(model_ref(None, false, Some(1.5)).is_err());
    }
}
