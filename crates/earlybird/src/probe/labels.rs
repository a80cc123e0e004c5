//! The run's labeller: the shipped service map with the user's maps
//! (`services`) laid over it, Debian's Public Suffix List when installed,
//! the model's classes, and what records keep of names (`names`,
//! `names-key`), counting the model's agreement with the payload labels
//! at `[learn] level` (`classify/drift.rs`); and the analyzers a run turns on (the labellers with
//! `labellers`).
//!
//! Contract: [`Config::labeller`] reads the maps (a map that does not read
//! is an [`Error::Config`] naming the map and line) and builds the
//! [`Labeller`] for the analyzer fields the run's records carry. It reads
//! files and creates nothing.

use std::sync::Arc;

use super::config::Config;
use crate::classify::labeller::{Labeller, Privacy, DEFAULT_NAMES_KEY};
use crate::classify::services::Services;
use crate::schema::Field;
use crate::{Error, Result};

impl Config {
    /// The analyzers the run turns on: those named (`analyzer`), then, with
    /// `labellers`, the payload labellers ([`crate::analyze::LABELLERS`])
    /// not named already.
    pub fn analyzers(&self) -> Vec<String> {
        let mut on = self.analyzer.clone();
        if self.labellers {
            for a in crate::analyze::LABELLERS {
                if !on.iter().any(|x| x == a) {
                    on.push(a.to_string());
                }
            }
        }
        on
    }

    /// The labeller of a run whose model has `classes` (the port table's
    /// when `by_port`) and whose records carry the analyzer cells
    /// `analyzed`.
    pub(super) fn labeller(
        &self,
        classes: &[String],
        by_port: bool,
        analyzed: &[Field],
    ) -> Result<Arc<Labeller>> {
        let mut services = Services::builtin().map_err(|e| Error::Config(e.to_string()))?;
        for path in &self.services {
            services
                .add_file(path)
                .map_err(|e| Error::Config(e.to_string()))?;
        }
        let privacy = match (self.names.as_str(), &self.names_key) {
            ("keep", _) => Privacy::Keep,
            ("drop", _) => Privacy::Drop,
            ("hash", key) => Privacy::Hash(
                key.as_deref()
                    .unwrap_or(DEFAULT_NAMES_KEY)
                    .as_bytes()
                    .to_vec(),
            ),
            (n, _) => return Err(Error::Usage(format!("--names {n:?}: keep, hash or drop"))),
        };
        // The port table's verdicts are labelled `port`, a trained model's `stat`.
        let l = Labeller::new(Arc::new(services), classes, by_port, analyzed)
            .map_err(|e| Error::Config(e.to_string()))?
            .with_privacy(privacy);
        // The model's agreement with the payload labels, at the level
        // self-training learns (`--learn-level`, with or without `--learn`).
        let level: crate::classify::LabelLevel = (self.learn.level.parse())
            .map_err(|e: crate::Error| Error::Usage(format!("--learn-level: {e}")))?;
        let drift = crate::classify::drift::Drift::new(level, &l.names());
        Ok(Arc::new(l.with_drift(Arc::new(drift))))
    }
}
