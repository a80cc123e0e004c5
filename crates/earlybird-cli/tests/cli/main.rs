//! The CLI's integration tests, in one test binary: each file of this
//! folder is a module (a command or an area), so a test's name starts with
//! its file's, e.g.
//! `flows_cli::writes_one_csv_line_per_flow_and_labels_them`. One area:
//! `cargo test -p earlybird-cli --test cli flows_cli::`. One binary rather
//! than one per file, since each test binary is linked anew. The modules
//! share `common` (running the `earlybird` binary) and `lib_common` (the
//! engine's test helpers: veth pairs, tools). The tests against real
//! programs over an emulated link are the `lab` binary (`../lab/main.rs`).
//!
//! The modules share one process, and tests of different modules run at
//! the same time: none sets environment variables, changes the current
//! directory (children get `Command::current_dir`) or handles a signal
//! (the signals they send go to children they started). The veth pairs and
//! namespaces are named after a tag and the process id
//! (`lib_common::Veth::create`): each test's tag must differ from every
//! other's in this binary.

mod common;
#[path = "../../../earlybird/tests/engine/common.rs"]
mod lib_common;

mod callstage_cli;
mod clickhouse_cli;
mod community_id_cli;
mod config_cli;
mod dns_name_cli;
mod dump_cli;
mod faults_cli;
mod filter_cli;
mod flows_cli;
mod gen_handshakes_cli;
mod grafana_cli;
mod handshake_flood_cli;
mod inputs_cli;
mod ipfix_cli;
mod ipfix_labels_cli;
mod label_cli;
mod labels_cli;
mod live_cli;
mod live_stamps_cli;
mod media_cli;
mod metrics_cli;
mod netflow_cli;
mod notify_cli;
mod parquet_cli;
mod payload_labels_cli;
mod postgres_cli;
mod replay_cli;
mod sample_cli;
mod selftrain_cli;
mod sip_tcp_cli;
mod snaplen_cli;
mod timestamps_cli;
mod tls_cli;
mod train_evaluate;
mod voip_cli;
mod xdp_cli;
