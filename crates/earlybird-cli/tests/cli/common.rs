//! Helpers shared by the CLI tests.

use std::process::Command;

/// Runs the `earlybird` binary; returns (exit code, stdout, stderr).
pub fn eb(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_earlybird"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
