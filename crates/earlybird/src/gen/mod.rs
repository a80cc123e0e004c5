//! (to be written) Synthetic traffic generator.
