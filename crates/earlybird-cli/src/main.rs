//! The `earlybird` command line: argument parsing only; every subcommand is
//! one call into the engine.
fn main() {}
