//! The engine's integration tests, in one test binary: each file of this
//! folder is a module (an area of the engine), so a test's name starts with
//! its file's, e.g. `shards::real_captures_same_records_with_any_shard_count`.
//! One area: `cargo test -p earlybird --test engine shards::`. One binary
//! rather than one per file: each test binary links the engine and its
//! dependencies anew, and with a binary per file those links were most of
//! the time to rebuild the tests after a change to the engine.
//! `common` holds the helpers the modules share (the CLI's tests use it
//! too, as `lib_common`).
//!
//! The modules share one process, and tests of different modules run at
//! the same time: none sets environment variables, changes the current
//! directory or handles a signal (the engine's own SIGBUS guard,
//! `source::vanish`, serves any number of runs in a process). The live
//! tests' veth pairs and namespaces are named after a tag and the process
//! id (`common::Veth::create`): each test's tag must differ from every
//! other's in this binary.

mod common;

mod alarms;
mod analyzers;
mod classifier_pool;
mod classify_corpus;
mod corpus_robustness;
mod events;
mod golden;
mod inputs;
mod interrupt;
mod layering;
mod link_types;
mod live;
mod mark_flows;
mod media;
mod media_calls;
mod ndpi_flows;
mod placement;
mod records;
mod replay;
mod retime;
mod sampling;
mod series;
mod shards;
mod slow_exporter;
mod truncate_while_read;
mod voip_calls;
mod voip_gen;
mod voip_wire;
mod write_pcap;
