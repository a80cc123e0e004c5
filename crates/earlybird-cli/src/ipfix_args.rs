//! The IPFIX options of `earlybird flows` (they apply to every `-o` that is
//! an IPFIX output: `FILE.ipfix`, `ipfix+udp://HOST:PORT`,
//! `ipfix+tcp://HOST:PORT`; see docs/IPFIX.md). In a configuration they
//! are the `[ipfix]` table (`--ipfix-mtu` is `[ipfix] mtu`).

use clap::Args;

#[derive(Args, serde::Serialize)]
pub struct IpfixArgs {
    /// IPFIX/UDP: largest message.
    ///
    /// IPFIX over UDP: largest message in bytes of UDP payload (records are
    /// packed into messages up to this size).
    #[arg(
        help_heading = "IPFIX",
        long,
        value_name = "BYTES",
        default_value_t = 1400
    )]
    ipfix_mtu: usize,
    /// IPFIX: observation domain id of every message.
    #[arg(help_heading = "IPFIX", long, value_name = "ID", default_value_t = 0)]
    ipfix_domain: u32,
    /// IPFIX/UDP: resend templates after N s.
    ///
    /// IPFIX over UDP: send the templates again after this many seconds…
    #[arg(
        help_heading = "IPFIX",
        long,
        value_name = "SECS",
        default_value_t = 60.0
    )]
    ipfix_template_refresh: f64,
    /// IPFIX/UDP: or after N messages.
    ///
    /// …or after this many data messages, whichever comes first.
    #[arg(help_heading = "IPFIX", long, value_name = "N", default_value_t = 100)]
    ipfix_template_messages: u32,
    /// IPFIX/TCP: messages queued for the collector.
    ///
    /// IPFIX over TCP: messages queued for a slow or absent collector before
    /// records are dropped (counted, reported; the run never waits for the
    /// collector).
    #[arg(
        help_heading = "IPFIX",
        long,
        value_name = "MESSAGES",
        default_value_t = 256
    )]
    ipfix_queue: usize,
    /// IPFIX/TCP: seconds to drain at the end.
    ///
    /// IPFIX over TCP: seconds the end of the run waits for queued messages to
    /// reach the collector.
    #[arg(
        help_heading = "IPFIX",
        long,
        value_name = "SECS",
        default_value_t = 2.0
    )]
    ipfix_linger: f64,
}
