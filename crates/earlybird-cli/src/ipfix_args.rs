//! The IPFIX options of `earlybird flows` (they apply to every `-o` that is
//! an IPFIX output: `FILE.ipfix`, `ipfix+udp://HOST:PORT`,
//! `ipfix+tcp://HOST:PORT`; see docs/IPFIX.md).

use std::time::Duration;

use clap::Args;
use earlybird::ipfix::IpfixOptions;

#[derive(Args)]
pub struct IpfixArgs {
    /// IPFIX over UDP: largest message in bytes of UDP payload (records
    /// are packed into messages up to this size).
    #[arg(long, value_name = "BYTES", default_value_t = 1400)]
    ipfix_mtu: usize,
    /// IPFIX: observation domain id of every message.
    #[arg(long, value_name = "ID", default_value_t = 0)]
    ipfix_domain: u32,
    /// IPFIX over UDP: send the templates again after this many seconds…
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    ipfix_template_refresh: f64,
    /// …or after this many data messages, whichever comes first.
    #[arg(long, value_name = "N", default_value_t = 100)]
    ipfix_template_messages: u32,
    /// IPFIX over TCP: messages queued for a slow or absent collector
    /// before records are dropped (counted, reported; the run never waits
    /// for the collector).
    #[arg(long, value_name = "MESSAGES", default_value_t = 256)]
    ipfix_queue: usize,
    /// IPFIX over TCP: seconds the end of the run waits for queued messages
    /// to reach the collector.
    #[arg(long, value_name = "SECS", default_value_t = 2.0)]
    ipfix_linger: f64,
}

impl IpfixArgs {
    /// The options, for biflow or unidirectional records.
    pub fn options(&self, biflow: bool) -> Result<IpfixOptions, String> {
        let secs = |s: f64, what: &str| {
            if s.is_finite() && s >= 0.0 {
                Ok(Duration::from_secs_f64(s))
            } else {
                Err(format!("--{what} must be a number of seconds"))
            }
        };
        Ok(IpfixOptions {
            biflow,
            mtu: self.ipfix_mtu,
            domain: self.ipfix_domain,
            template_refresh: secs(self.ipfix_template_refresh, "ipfix-template-refresh")?,
            template_refresh_messages: self.ipfix_template_messages.max(1),
            tcp_queue: self.ipfix_queue.max(1),
            tcp_linger: secs(self.ipfix_linger, "ipfix-linger")?,
        })
    }
}
