//! The run's labeller: the shipped service map, Debian's Public Suffix
//! List when installed, and the model's classes.
//!
//! Contract: [`Config::labeller`] reads the maps (a map that does not read
//! is an [`Error::Config`] naming the map and line) and builds the
//! [`Labeller`] for the analyzer fields the run's records carry. It reads
//! files and creates nothing.

use std::sync::Arc;

use super::config::Config;
use crate::classify::labeller::Labeller;
use crate::classify::services::Services;
use crate::classify::Model;
use crate::schema::Field;
use crate::{Error, Result};

impl Config {
    /// The labeller of a run whose model has `classes` and whose records
    /// carry the analyzer cells `analyzed`.
    pub(super) fn labeller(&self, classes: &[String], analyzed: &[Field]) -> Result<Arc<Labeller>> {
        let services = Services::builtin().map_err(|e| Error::Config(e.to_string()))?;
        // The port table's verdicts are labelled `port`, a trained model's `stat`.
        let by_port = !self.no_model && Model::named(self.model.as_deref())?.kind.algo() == "ports";
        let l = Labeller::new(Arc::new(services), classes, by_port, analyzed)
            .map_err(|e| Error::Config(e.to_string()))?;
        Ok(Arc::new(l))
    }
}
