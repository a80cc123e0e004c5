//! What a flow table adds up between two ticks of the per-second
//! statistics: flows classified per application, and flows ended per
//! application, per transport and per port class, with their packets and
//! bytes.
//!
//! Contract: a flow consumer (`flow/consumer.rs`), on only when the run
//! keeps per-second statistics; then it counts each verdict
//! ([`Tally::classified`]) and each flow the table ends ([`Tally::ended`]),
//! and the shard takes the sums once per second of packet time
//! ([`Tally::take`]). Application index = the model's class index, the
//! last index = "unknown" (undecided or below the threshold). Flows are
//! counted when they end, with all their packets and bytes: an
//! application's or a transport's traffic is reported in the second its
//! flows end, not spread over the seconds they ran. Port classes
//! ([`PORT_CLASSES`], [`port_class`]) are a fixed, bounded set for TCP and
//! UDP flows: one per listed service port, then the system, registered
//! and ephemeral ranges; a flow of another protocol is in no port class.
//! Nothing here allocates after [`Tally::new`].

use super::consumer::{Consumer, FlowRef};
use super::entry::DECIDED;
use super::record::{EndReason, RecordBatch};
use crate::classify::inline::Inline;
use crate::classify::Verdict;

/// Transport classes of the per-transport figures, by index.
pub const TRANSPORTS: [&str; 4] = ["tcp", "udp", "icmp", "other"];

/// The transport class index of IP protocol `proto`.
#[inline]
pub fn transport_of(proto: u8) -> usize {
    match proto {
        6 => 0,
        17 => 1,
        1 | 58 => 2,
        _ => 3,
    }
}

/// The TCP service ports that have a port class of their own: ssh, smtp,
/// dns (zone transfers, DNS over TCP), http, https, smb, imaps, mysql,
/// rdp, postgresql, http-alt.
pub const TCP_SERVICES: [u16; 11] = [22, 25, 53, 80, 443, 445, 993, 3306, 3389, 5432, 8080];

/// The UDP service ports that have a port class of their own: dns, dhcp
/// (server), ntp, netbios-ns, quic (https over UDP), ssdp, sip, mdns.
pub const UDP_SERVICES: [u16; 8] = [53, 67, 123, 137, 443, 1900, 5060, 5353];

/// Port classes of TCP flows: the services, then the three ranges.
const TCP_CLASSES: usize = TCP_SERVICES.len() + 3;

/// Number of port classes ([`PORT_CLASSES`]).
pub const N_PORT_CLASSES: usize = TCP_CLASSES + UDP_SERVICES.len() + 3;

/// Names of the port classes, by index: `tcp/PORT` for each of
/// [`TCP_SERVICES`], then `tcp/system` (another port below 1024),
/// `tcp/registered` (1024–32767), `tcp/ephemeral` (32768 and above), then
/// the same for UDP.
pub const PORT_CLASSES: [&str; N_PORT_CLASSES] = [
    "tcp/22",
    "tcp/25",
    "tcp/53",
    "tcp/80",
    "tcp/443",
    "tcp/445",
    "tcp/993",
    "tcp/3306",
    "tcp/3389",
    "tcp/5432",
    "tcp/8080",
    "tcp/system",
    "tcp/registered",
    "tcp/ephemeral",
    "udp/53",
    "udp/67",
    "udp/123",
    "udp/137",
    "udp/443",
    "udp/1900",
    "udp/5060",
    "udp/5353",
    "udp/system",
    "udp/registered",
    "udp/ephemeral",
];

/// The port class index of a flow of IP protocol `proto` whose client
/// (first sender) used port `sport` and server `dport`: the class of
/// `dport` when it is a listed service, else of `sport` when that is
/// listed (the first packet seen came from the server: a capture that
/// began mid-connection, or a reply), else the range of `dport`
/// (below 1024, 1024–32767, 32768 and above). `None` for protocols other
/// than TCP and UDP.
#[inline]
pub fn port_class(proto: u8, sport: u16, dport: u16) -> Option<usize> {
    let (services, base): (&[u16], usize) = match proto {
        6 => (&TCP_SERVICES, 0),
        17 => (&UDP_SERVICES, TCP_CLASSES),
        _ => return None,
    };
    let listed = |p: u16| services.iter().position(|&s| s == p);
    let range = match dport {
        0..1024 => 0,
        1024..32768 => 1,
        _ => 2,
    };
    let i = listed(dport)
        .or_else(|| listed(sport))
        .unwrap_or(services.len() + range);
    Some(base + i)
}

/// Flows, packets and bytes of one application, transport or port class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sums {
    /// Flows that got their verdict (applications only).
    pub classified: u64,
    /// Flows that ended.
    pub ended: u64,
    /// Packets of the flows that ended (both directions).
    pub packets: u64,
    /// IP bytes of the flows that ended (both directions).
    pub bytes: u64,
}

impl Sums {
    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &Sums) {
        self.classified += o.classified;
        self.ended += o.ended;
        self.packets += o.packets;
        self.bytes += o.bytes;
    }

    /// True when nothing was counted.
    pub fn is_zero(&self) -> bool {
        *self == Sums::default()
    }
}

/// The sums of one second of one table (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Per application: the model's classes, then "unknown".
    pub apps: Vec<Sums>,
    /// Per transport class ([`TRANSPORTS`]).
    pub transports: [Sums; 4],
    /// Per port class ([`PORT_CLASSES`]).
    pub ports: [Sums; N_PORT_CLASSES],
    /// Per media kind ([`MEDIA_KINDS`]; runs with `--analyzer media`):
    /// `classified` the flows decided, `ended` the media flows that ended,
    /// `packets` and `bytes` what media flows carried in the second, from
    /// the packet that decided them on.
    pub media: [Sums; 3],
}

/// The media kinds of [`Tally::media`], by index.
pub const MEDIA_KINDS: [&str; 3] = ["audio", "video", "file"];

impl Tally {
    /// A tally for a model of `classes` classes (0 without a model).
    pub fn new(classes: usize) -> Tally {
        Tally {
            apps: vec![Sums::default(); classes + 1],
            transports: Default::default(),
            ports: Default::default(),
            media: Default::default(),
        }
    }

    /// Index of class `c` (the unknown slot for [`Verdict::UNKNOWN`] or a
    /// class the model does not have).
    #[inline]
    fn app(&self, c: u16) -> usize {
        let unknown = self.apps.len() - 1;
        if c == Verdict::UNKNOWN {
            unknown
        } else {
            (c as usize).min(unknown)
        }
    }

    /// A flow got verdict class `c`.
    #[inline]
    pub fn classified(&mut self, c: u16) {
        let i = self.app(c);
        self.apps[i].classified += 1;
    }

    /// A flow of protocol `proto` from client port `sport` to server port
    /// `dport`, with verdict class `c`, ended after `packets` packets and
    /// `bytes` IP bytes.
    #[inline]
    pub fn ended(&mut self, c: u16, proto: u8, ports: (u16, u16), packets: u64, bytes: u64) {
        let i = self.app(c);
        let port = port_class(proto, ports.0, ports.1).map(|p| &mut self.ports[p]);
        let sums = [
            Some(&mut self.apps[i]),
            Some(&mut self.transports[transport_of(proto)]),
            port,
        ];
        for s in sums.into_iter().flatten() {
            s.ended += 1;
            s.packets += packets;
            s.bytes += bytes;
        }
    }

    /// The sums so far; counting starts again from zero.
    pub fn take(&mut self) -> Tally {
        let zero = Tally::new(self.apps.len() - 1);
        std::mem::replace(self, zero)
    }

    /// Adds `o` (a tally of as many classes) into `self`.
    pub fn add(&mut self, o: &Tally) {
        for (a, b) in self.apps.iter_mut().zip(&o.apps) {
            a.add(b);
        }
        for (a, b) in self.transports.iter_mut().zip(&o.transports) {
            a.add(b);
        }
        for (a, b) in self.ports.iter_mut().zip(&o.ports) {
            a.add(b);
        }
        for (a, b) in self.media.iter_mut().zip(&o.media) {
            a.add(b);
        }
    }
}

impl Consumer for Tally {
    #[inline]
    fn verdict(&mut self, flow: FlowRef<'_>, _: &Inline) {
        self.classified(flow.entry.app);
    }

    #[inline]
    fn end(&mut self, flow: FlowRef<'_>, _: EndReason, _: &mut RecordBatch) {
        let h = flow.entry;
        let app = if h.state & DECIDED != 0 {
            h.app
        } else {
            Verdict::UNKNOWN
        };
        let ports = h.client_server_ports();
        self.ended(app, h.key.proto, ports, flow.packets(), flow.bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_are_counted_per_application_and_transport() {
        let mut t = Tally::new(2);
        t.classified(1);
        t.ended(1, 6, (50000, 443), 10, 1000);
        t.ended(Verdict::UNKNOWN, 17, (40000, 53), 2, 100);
        t.ended(9, 58, (0, 0), 1, 64);
        assert_eq!(t.apps[1].classified, 1);
        assert_eq!((t.apps[1].ended, t.apps[1].bytes), (1, 1000));
        // Unknown, and a class the model does not have, count as unknown.
        assert_eq!((t.apps[2].ended, t.apps[2].packets), (2, 3));
        assert_eq!(t.transports[0].bytes, 1000);
        assert_eq!(t.transports[1].bytes, 100);
        assert_eq!(t.transports[2].bytes, 64);
        let taken = t.take();
        assert!(t.apps.iter().all(Sums::is_zero) && t.apps.len() == 3);
        let mut sum = Tally::new(2);
        sum.add(&taken);
        sum.add(&taken);
        assert_eq!(sum.apps[1].bytes, 2000);
        let https = PORT_CLASSES.iter().position(|n| *n == "tcp/443").unwrap();
        assert_eq!((sum.ports[https].ended, sum.ports[https].bytes), (2, 2000));
        let dns = PORT_CLASSES.iter().position(|n| *n == "udp/53").unwrap();
        assert_eq!(sum.ports[dns].packets, 4);
        // ICMPv6 has no port class.
        let all: u64 = sum.ports.iter().map(|s| s.ended).sum();
        assert_eq!(all, 4);
    }

    fn class(proto: u8, sport: u16, dport: u16) -> Option<&'static str> {
        port_class(proto, sport, dport).map(|i| PORT_CLASSES[i])
    }

    #[test]
    fn the_names_follow_the_service_lists() {
        for (i, p) in TCP_SERVICES.iter().enumerate() {
            assert_eq!(PORT_CLASSES[i], format!("tcp/{p}"));
            assert_eq!(class(6, 40000, *p), Some(PORT_CLASSES[i]));
        }
        for (i, p) in UDP_SERVICES.iter().enumerate() {
            assert_eq!(PORT_CLASSES[TCP_CLASSES + i], format!("udp/{p}"));
            assert_eq!(class(17, 40000, *p), Some(PORT_CLASSES[TCP_CLASSES + i]));
        }
        let mut names = PORT_CLASSES.to_vec();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), N_PORT_CLASSES);
    }

    #[test]
    fn flows_are_keyed_by_the_server_port() {
        // The server port when listed; else the client port when listed
        // (first packet from the server); else the server port's range.
        assert_eq!(class(6, 51000, 443), Some("tcp/443"));
        assert_eq!(class(6, 443, 51000), Some("tcp/443"));
        assert_eq!(class(6, 22, 80), Some("tcp/80"));
        assert_eq!(class(6, 51000, 1023), Some("tcp/system"));
        assert_eq!(class(6, 51000, 0), Some("tcp/system"));
        assert_eq!(class(6, 51000, 1024), Some("tcp/registered"));
        assert_eq!(class(6, 51000, 32767), Some("tcp/registered"));
        assert_eq!(class(6, 80, 32768), Some("tcp/80"));
        assert_eq!(class(6, 1000, 32768), Some("tcp/ephemeral"));
        assert_eq!(class(6, 1000, 65535), Some("tcp/ephemeral"));
        // The lists are per transport: 123 is a UDP service only.
        assert_eq!(class(17, 40000, 123), Some("udp/123"));
        assert_eq!(class(6, 40000, 123), Some("tcp/system"));
        assert_eq!(class(17, 5353, 5353), Some("udp/5353"));
        assert_eq!(class(17, 40000, 9999), Some("udp/registered"));
        assert_eq!(class(1, 0, 0), None);
        assert_eq!(class(132, 40000, 443), None);
    }
}
