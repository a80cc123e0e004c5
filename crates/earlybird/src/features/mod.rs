//! Per-flow feature state machines.
