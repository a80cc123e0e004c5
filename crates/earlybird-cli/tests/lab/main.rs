//! The CLI against real programs between network namespaces, one test at
//! a time: the labelled traffic lab (`lab_cli`), the lab of today's calls
//! (`calls_cli`), media detection of real
//! senders (`media_lab_cli`) and SIPp calls (`sipp_cli`). One area:
//! `cargo test -p earlybird-cli --test lab sipp_cli::`.
//!
//! A binary of its own, apart from `cli` (`../cli/main.rs`), because these
//! tests time real programs (delays, jitter and loss through
//! `lab/linkem.py`, talk times within 10 ms, classifier floors) on a
//! machine of two cores: when each was a test binary of its own, the lab
//! and media tests had the machine to themselves. Cargo runs test
//! binaries one after another, and each test here first takes
//! [`netlab::alone`], so none of them shares the machine with another
//! test.
//!
//! The helpers are those of the other binaries: `common` (running the
//! `earlybird` binary) from `cli`, `lib_common` (veth pairs) from the
//! engine's tests, and `netlab` (two namespaces over an emulated lossy
//! link).

#[path = "../cli/common.rs"]
mod common;
#[path = "../../../earlybird/tests/engine/common.rs"]
mod lib_common;
mod netlab;

mod calls_cli;
mod lab_cli;
mod media_lab_cli;
mod sipp_cli;
