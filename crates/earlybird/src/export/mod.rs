//! (to be written) Exporters.
