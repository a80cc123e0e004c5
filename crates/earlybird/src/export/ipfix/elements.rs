//! The information elements earlybird exports over IPFIX, and its templates.
//!
//! Contract: [`ELEMENTS`] is the one list of the fields of a data record,
//! in template order, each with its element id, enterprise number, length
//! on the wire, abstract data type (RFC 7012), where its value comes from
//! ([`Source`]) and which templates carry it ([`When`]); [`LIST_MEMBERS`] are
//! the enterprise elements inside the basicLists (RFC 6313) of early
//! packets. The templates ([`templates`]) are built from these tables, the
//! record encoder (`record.rs`) walks them, and `docs/IPFIX.md` holds the
//! table [`markdown`] generates (a test keeps the two equal). Nothing here
//! fails or allocates per record.

use std::fmt::Write as _;

/// The private enterprise number of earlybird's own elements: 32473, the
/// number IANA reserves for documentation (RFC 5612), since earlybird has
/// no number of its own. Collectors that do not know it skip the elements
/// (their length is in the template).
pub const PEN_EARLYBIRD: u32 = 32473;

/// The enterprise number of reverse elements (RFC 5103): the element of
/// the same id for the reverse direction of a biflow.
pub const PEN_REVERSE: u32 = 29305;

/// Length of a variable-length element in a template (RFC 7011 §7).
pub(crate) const VARLEN: u16 = 0xFFFF;

/// IANA element id of basicList (RFC 6313).
pub(crate) const BASIC_LIST: u16 = 291;

/// Semantic of the early-packet lists: "ordered" (RFC 6313 §4.5.5), the
/// i-th value is the i-th packet's.
pub(crate) const ORDERED: u8 = 0x04;

/// Where a field's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    StartNs,
    EndNs,
    StartMs,
    EndMs,
    SrcV4,
    DstV4,
    SrcV6,
    DstV6,
    SrcPort,
    DstPort,
    Proto,
    IcmpTypeCode,
    /// Octets of direction 0 (client → server) or 1.
    Octets(usize),
    Packets(usize),
    /// Union of the TCP flags seen in direction 0 or 1.
    TcpFlags(usize),
    Vlan,
    EndReason,
    SrcMac,
    DstMac,
    App,
    Confidence,
    AtPacket,
    /// The basicList of [`LIST_MEMBERS`]`[i]`.
    Early(usize),
    /// The record's Community ID (variable length: empty when none).
    CommunityId,
    /// The `media` analyzer's verdict: kind code, share of windows, packet
    /// (`docs/MEDIA.md`; runs with `--analyzer media` only).
    MediaKind,
    MediaShare,
    MediaPacket,
    /// Field `i` of an early-verdict event ([`crate::flow::events::VERDICTS`];
    /// the elements of [`EVENT_ELEMENTS`] only).
    Cell(usize),
    /// The record field [`LABEL_FIELDS`]`[i]` (a payload labeller's, or the
    /// label's).
    Label(usize),
}

/// The record fields of the payload labels exported over IPFIX, in the
/// order of [`Source::Label`].
pub(crate) const LABEL_FIELDS: [&str; 17] = [
    "sni",
    "alpn",
    "tls_version",
    "ja4",
    "ja3",
    "ech",
    "http_host",
    "http_user_agent",
    "dns_query",
    "dns_name",
    "ssh_client",
    "ssh_server",
    "category",
    "label_source",
    "stat_app",
    "stat_confidence",
    "model_id",
];

/// The label fields after the payload labellers' own: present in every
/// labelled record, exported when a labeller is on.
pub(crate) const LABEL_OWN: usize = 12;

/// Most bytes of one label string (one length byte: RFC 7011 §7).
pub(crate) const LABEL_MAX: usize = 254;

/// Most bytes of a record's label strings together: what would not fit is
/// cut, the later fields first, so that a record with every name long
/// still fits a datagram of the default `--ipfix-mtu`.
pub(crate) const LABEL_BUDGET: usize = 640;

/// Which templates carry a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum When {
    Always,
    V4,
    V6,
    /// IPv4 flows of ICMP (protocol 1) whose first packet had a type.
    IcmpV4,
    /// IPv6 flows of ICMPv6 (protocol 58) whose first packet had a type.
    IcmpV6,
    /// Biflow runs only (reverse elements).
    Biflow,
    /// Runs with the `media` analyzer on (`--analyzer media`).
    Media,
    /// Runs that keep the Community ID (all but `--no-community-id`).
    CommunityId,
    /// Runs with a payload labeller on whose records have the field
    /// (the default; with `--no-labellers`, `--analyzer` with `tls`,
    /// `http`, `dns` or `ssh`).
    Labels,
}

/// One field of a data record.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Element {
    /// Element name (IANA's, or earlybird's for its own).
    pub name: &'static str,
    pub id: u16,
    /// Enterprise number; 0 for IANA elements.
    pub pen: u32,
    /// Length on the wire; [`VARLEN`] for variable length.
    pub len: u16,
    /// Abstract data type (RFC 7012 §3.1).
    pub ty: &'static str,
    pub src: Source,
    pub when: When,
    /// What it holds, for `docs/IPFIX.md`.
    pub meaning: &'static str,
}

// One row of the table: the fields in the order the table shows them.
#[allow(clippy::too_many_arguments)]
const fn e(
    name: &'static str,
    id: u16,
    pen: u32,
    len: u16,
    ty: &'static str,
    src: Source,
    when: When,
    meaning: &'static str,
) -> Element {
    Element {
        name,
        id,
        pen,
        len,
        ty,
        src,
        when,
        meaning,
    }
}

use Source as S;
use When as W;

/// The fields of a data record, in template order.
#[rustfmt::skip]
pub(crate) const ELEMENTS: &[Element] = &[
    e("flowStartNanoseconds", 156, 0, 8, "dateTimeNanoseconds", S::StartNs, W::Always,
      "Timestamp of the flow's first packet (NTP format: seconds since 1900 and a binary fraction)."),
    e("flowEndNanoseconds", 157, 0, 8, "dateTimeNanoseconds", S::EndNs, W::Always,
      "Timestamp of the flow's last packet."),
    e("flowStartMilliseconds", 152, 0, 8, "dateTimeMilliseconds", S::StartMs, W::Always,
      "First packet in milliseconds since 1970 (truncated): for collectors without the nanosecond elements (nfdump 1.7)."),
    e("flowEndMilliseconds", 153, 0, 8, "dateTimeMilliseconds", S::EndMs, W::Always,
      "Last packet in milliseconds since 1970 (truncated)."),
    e("sourceIPv4Address", 8, 0, 4, "ipv4Address", S::SrcV4, W::V4,
      "Client address (the side that sent the flow's first packet)."),
    e("destinationIPv4Address", 12, 0, 4, "ipv4Address", S::DstV4, W::V4,
      "Server address."),
    e("sourceIPv6Address", 27, 0, 16, "ipv6Address", S::SrcV6, W::V6,
      "Client address."),
    e("destinationIPv6Address", 28, 0, 16, "ipv6Address", S::DstV6, W::V6,
      "Server address."),
    e("sourceTransportPort", 7, 0, 2, "unsigned16", S::SrcPort, W::Always,
      "Client port (0 for protocols without ports)."),
    e("destinationTransportPort", 11, 0, 2, "unsigned16", S::DstPort, W::Always,
      "Server port."),
    e("protocolIdentifier", 4, 0, 1, "unsigned8", S::Proto, W::Always,
      "IP protocol number."),
    e("icmpTypeCodeIPv4", 32, 0, 2, "unsigned16", S::IcmpTypeCode, W::IcmpV4,
      "ICMP type × 256 + code of the flow's first packet (ICMP flows only)."),
    e("icmpTypeCodeIPv6", 139, 0, 2, "unsigned16", S::IcmpTypeCode, W::IcmpV6,
      "ICMPv6 type × 256 + code of the flow's first packet (ICMPv6 flows only)."),
    e("octetDeltaCount", 1, 0, 8, "unsigned64", S::Octets(0), W::Always,
      "Bytes (sum of IP lengths) client → server."),
    e("packetDeltaCount", 2, 0, 8, "unsigned64", S::Packets(0), W::Always,
      "Packets client → server."),
    e("reverseOctetDeltaCount", 1, PEN_REVERSE, 8, "unsigned64", S::Octets(1), W::Biflow,
      "Bytes server → client (RFC 5103)."),
    e("reversePacketDeltaCount", 2, PEN_REVERSE, 8, "unsigned64", S::Packets(1), W::Biflow,
      "Packets server → client (RFC 5103)."),
    // Before tcpControlBits on purpose: nfdump 1.7 maps a reverse element
    // it has no reverse slot for onto the forward one, and the later field
    // of a record wins there.
    e("reverseTcpControlBits", 6, PEN_REVERSE, 2, "unsigned16", S::TcpFlags(1), W::Biflow,
      "TCP flags seen server → client (FIN 0x01 … CWR 0x80; 0 for other protocols and with --stats basic)."),
    e("tcpControlBits", 6, 0, 2, "unsigned16", S::TcpFlags(0), W::Always,
      "TCP flags seen client → server (bit per flag seen in any packet)."),
    e("vlanId", 58, 0, 2, "unsigned16", S::Vlan, W::Always,
      "802.1Q VLAN id, 0 when untagged."),
    e("flowEndReason", 136, 0, 1, "unsigned8", S::EndReason, W::Always,
      "1 idle timeout, 2 active timeout, 3 end of flow detected (TCP FIN both ways or RST), 4 forced end (end of input, stop), 5 lack of resources (evicted from a full table)."),
    e("sourceMacAddress", 56, 0, 6, "macAddress", S::SrcMac, W::Always,
      "Source MAC of the flow's first packet."),
    e("destinationMacAddress", 80, 0, 6, "macAddress", S::DstMac, W::Always,
      "Destination MAC of the flow's first packet."),
    e("earlybirdApplication", 1, PEN_EARLYBIRD, VARLEN, "string", S::App, W::Always,
      "The flow's application (record field app, UTF-8): the payload label where there is one, else the model's class name, \"unknown\" when neither (docs/SERVICES.md)."),
    e("earlybirdConfidence", 2, PEN_EARLYBIRD, 4, "float32", S::Confidence, W::Always,
      "Confidence of the verdict, 0 to 1."),
    e("earlybirdDecidedAtPacket", 3, PEN_EARLYBIRD, 1, "unsigned8", S::AtPacket, W::Always,
      "1-based packet of the flow at which the verdict was taken; 0 = never."),
    e("earlybirdCommunityId", 11, PEN_EARLYBIRD, VARLEN, "string", S::CommunityId, W::CommunityId,
      "Community ID v1 of the flow (record field community_id, seed --community-id-seed): 30 ASCII bytes, empty when the record has none. IANA has no element for it."),
    e("basicList", BASIC_LIST, 0, VARLEN, "basicList", S::Early(0), W::Always,
      "Ordered list of earlybirdEarlyPacketSize, one per early packet (up to -n of them)."),
    e("basicList", BASIC_LIST, 0, VARLEN, "basicList", S::Early(1), W::Always,
      "Ordered list of earlybirdEarlyPacketDirection."),
    e("basicList", BASIC_LIST, 0, VARLEN, "basicList", S::Early(2), W::Always,
      "Ordered list of earlybirdEarlyPacketGapMicroseconds."),
    e("earlybirdMediaKind", 8, PEN_EARLYBIRD, 1, "unsigned8", S::MediaKind, W::Media,
      "The media analyzer's verdict (record field media): 0 undecided, 1 audio, 2 video, 3 file, 4 none (ruled out)."),
    e("earlybirdMediaShare", 9, PEN_EARLYBIRD, 4, "float32", S::MediaShare, W::Media,
      "Smallest share of windows passing the verdict kind's tests when it was decided (media_share); 0 when none or undecided."),
    e("earlybirdMediaPacket", 10, PEN_EARLYBIRD, 4, "unsigned32", S::MediaPacket, W::Media,
      "Packet of the flow (1 = first) at which the media verdict was decided (media_packet); 0 while undecided."),
    e("applicationName", 96, 0, VARLEN, "string", S::App, W::Labels,
      "The flow's application (record field app), as earlybirdApplication: IANA's element, for collectors that know it."),
    e("applicationCategoryName", 372, 0, VARLEN, "string", S::Label(12), W::Labels,
      "Category of the application (record field category; docs/SERVICES.md); empty when none."),
    e("earlybirdLabelSource", 23, PEN_EARLYBIRD, VARLEN, "string", S::Label(13), W::Labels,
      "Where the application came from (label_source): sni, quic, http, dns, ssh, stat, port or none."),
    e("earlybirdStatApplication", 24, PEN_EARLYBIRD, VARLEN, "string", S::Label(14), W::Labels,
      "The model's early verdict beside the payload label (stat_app)."),
    e("earlybirdStatConfidence", 25, PEN_EARLYBIRD, 4, "float32", S::Label(15), W::Labels,
      "Confidence of that verdict, 0 to 1 (stat_confidence)."),
    e("earlybirdModelId", 26, PEN_EARLYBIRD, 2, "unsigned16", S::Label(16), W::Labels,
      "Number of the model that decided the flow (model_id): 0 the run's own, then the models a --learn run swapped in (DIR/models.jsonl); 65535 when no model decided it."),
    e("earlybirdTlsServerName", 12, PEN_EARLYBIRD, VARLEN, "string", S::Label(0), W::Labels,
      "Server name of the TLS or QUIC ClientHello (sni); IANA has no element for it. Empty when none."),
    e("earlybirdTlsAlpn", 13, PEN_EARLYBIRD, VARLEN, "string", S::Label(1), W::Labels,
      "ALPN protocols offered, comma-separated (alpn)."),
    e("earlybirdTlsVersion", 14, PEN_EARLYBIRD, VARLEN, "string", S::Label(2), W::Labels,
      "TLS version the ServerHello chose (tls_version)."),
    e("earlybirdJa4", 15, PEN_EARLYBIRD, VARLEN, "string", S::Label(3), W::Labels,
      "JA4 fingerprint of the ClientHello (ja4)."),
    e("earlybirdJa3", 16, PEN_EARLYBIRD, VARLEN, "string", S::Label(4), W::Labels,
      "JA3 hash of the ClientHello, 32 hex digits (ja3)."),
    e("earlybirdTlsEch", 17, PEN_EARLYBIRD, 1, "unsigned8", S::Label(5), W::Labels,
      "1 when the ClientHello offered an Encrypted Client Hello (ech), else 0."),
    e("httpRequestHost", 460, 0, VARLEN, "string", S::Label(6), W::Labels,
      "Host of the first HTTP request (http_host)."),
    e("httpUserAgent", 468, 0, VARLEN, "string", S::Label(7), W::Labels,
      "User-Agent of the first HTTP request (http_user_agent)."),
    e("earlybirdDnsQuery", 18, PEN_EARLYBIRD, VARLEN, "string", S::Label(8), W::Labels,
      "Name of the flow's first DNS question (dns_query)."),
    e("earlybirdDnsName", 19, PEN_EARLYBIRD, VARLEN, "string", S::Label(9), W::Labels,
      "Name an earlier DNS answer gave the server address (dns_name)."),
    e("earlybirdSshClient", 20, PEN_EARLYBIRD, VARLEN, "string", S::Label(10), W::Labels,
      "The SSH client's software banner (ssh_client)."),
    e("earlybirdSshServer", 21, PEN_EARLYBIRD, VARLEN, "string", S::Label(11), W::Labels,
      "The SSH server's software banner (ssh_server)."),
];

/// The fields of an early-verdict event's data record (`--events`), in
/// template order; `Source::Cell` names the event field each comes from.
#[rustfmt::skip]
pub(crate) const EVENT_ELEMENTS: &[Element] = &[
    e("sourceIPv4Address", 8, 0, 4, "ipv4Address", S::Cell(0), W::V4,
      "Client address, as in the flow's record."),
    e("destinationIPv4Address", 12, 0, 4, "ipv4Address", S::Cell(1), W::V4,
      "Server address."),
    e("sourceIPv6Address", 27, 0, 16, "ipv6Address", S::Cell(0), W::V6,
      "Client address."),
    e("destinationIPv6Address", 28, 0, 16, "ipv6Address", S::Cell(1), W::V6,
      "Server address."),
    e("sourceTransportPort", 7, 0, 2, "unsigned16", S::Cell(2), W::Always,
      "Client port."),
    e("destinationTransportPort", 11, 0, 2, "unsigned16", S::Cell(3), W::Always,
      "Server port."),
    e("protocolIdentifier", 4, 0, 1, "unsigned8", S::Cell(4), W::Always,
      "IP protocol number."),
    e("vlanId", 58, 0, 2, "unsigned16", S::Cell(5), W::Always,
      "802.1Q VLAN id, 0 when untagged."),
    e("flowStartNanoseconds", 156, 0, 8, "dateTimeNanoseconds", S::Cell(8), W::Always,
      "Timestamp of the flow's first packet."),
    e("observationTimeNanoseconds", 325, 0, 8, "dateTimeNanoseconds", S::Cell(9), W::Always,
      "Packet time at which the verdict was known (the event's decided_ts)."),
    e("earlybirdApplication", 1, PEN_EARLYBIRD, VARLEN, "string", S::Cell(11), W::Always,
      "The verdict: the model's class name, \"unknown\" below its threshold."),
    e("earlybirdConfidence", 2, PEN_EARLYBIRD, 4, "float32", S::Cell(12), W::Always,
      "Confidence of the verdict, 0 to 1."),
    e("earlybirdDecidedAtPacket", 3, PEN_EARLYBIRD, 1, "unsigned8", S::Cell(13), W::Always,
      "The early packet (1-based) the verdict was taken at."),
    e("earlybirdTimeToDecisionNanoseconds", 7, PEN_EARLYBIRD, 8, "unsigned64", S::Cell(10), W::Always,
      "Nanoseconds of packet time from the flow's first packet to the verdict."),
    e("earlybirdModelId", 26, PEN_EARLYBIRD, 2, "unsigned16", S::Cell(14), W::Always,
      "Number of the model that took the verdict (the event's model_id): 0 the run's own, then the models a --learn run swapped in."),
];

/// Template id of early-verdict events of IPv4 flows (IPv6: the next).
pub(crate) const FIRST_EVENT_TEMPLATE: u16 = 260;

/// The two templates of early-verdict events: IPv4 (260) and IPv6 (261).
pub(crate) fn event_templates() -> Vec<Template> {
    (0..2)
        .map(|i| {
            let v6 = i == 1;
            let fields = EVENT_ELEMENTS.iter().filter(|el| match el.when {
                W::V4 => !v6,
                W::V6 => v6,
                _ => true,
            });
            template(FIRST_EVENT_TEMPLATE + i, fields.collect())
        })
        .collect()
}

/// Template `id` of `fields`, with the bytes of its fixed-length fields.
fn template(id: u16, fields: Vec<&'static Element>) -> Template {
    let fixed_len = fields
        .iter()
        .filter(|f| f.len != VARLEN)
        .map(|f| usize::from(f.len))
        .sum();
    let (mut var_base, mut apps, mut early_per_packet, mut labels) = (0, 0, 0, 0);
    for f in fields.iter().filter(|f| f.len == VARLEN) {
        var_base += 3;
        match f.src {
            Source::Early(i) => {
                // Semantic (1), member id (2), member length (2), PEN (4).
                var_base += 9;
                early_per_packet += usize::from(LIST_MEMBERS[i].len);
            }
            Source::CommunityId => var_base += crate::export::community_id::LEN,
            Source::Label(_) => labels = LABEL_BUDGET,
            _ => apps += 1,
        }
    }
    var_base += labels;
    let plan = super::record::Plan::of(fields.iter().map(|f| f.src));
    Template {
        id,
        fields,
        fixed_len,
        var_base,
        apps,
        early_per_packet,
        plan,
    }
}

/// The elements inside the early-packet basicLists, in the order of
/// [`Source::Early`].
#[rustfmt::skip]
pub(crate) const LIST_MEMBERS: [Element; 3] = [
    e("earlybirdEarlyPacketSize", 4, PEN_EARLYBIRD, 2, "unsigned16", S::Early(0), W::Always,
      "IP length of an early packet (CSV pkt*i*_size)."),
    e("earlybirdEarlyPacketDirection", 5, PEN_EARLYBIRD, 1, "signed8", S::Early(1), W::Always,
      "Direction of an early packet: 1 client → server, -1 server → client (CSV pkt*i*_dir)."),
    e("earlybirdEarlyPacketGapMicroseconds", 6, PEN_EARLYBIRD, 4, "unsigned32", S::Early(2), W::Always,
      "Microseconds since the flow's previous packet (either direction), 0 for the first (CSV pkt*i*_iat_us)."),
];

/// First template id (ids below 256 are set ids).
pub(crate) const FIRST_TEMPLATE: u16 = 256;

/// One template: its id and fields.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    pub id: u16,
    pub fields: Vec<&'static Element>,
    /// Bytes of the fixed-length fields of a record.
    pub fixed_len: usize,
    /// Bytes of the variable-length fields that do not depend on the
    /// record: their 3-byte length prefixes and the basicList headers.
    pub var_base: usize,
    /// Application-name fields (each adds the name's bytes).
    pub apps: usize,
    /// Bytes each early packet adds (one member in each basicList).
    pub early_per_packet: usize,
    /// How the record encoder writes its fields (`record.rs`).
    pub plan: super::record::Plan,
}

/// The template a record of `ipv6` (with an ICMP type when `icmp`) uses:
/// its index in [`templates`]' list.
#[inline]
pub(crate) fn template_index(ipv6: bool, icmp: bool) -> usize {
    usize::from(ipv6) | (usize::from(icmp) << 1)
}

/// The four templates of a run: IPv4, IPv6, and each with the ICMP
/// type/code; ids 256 to 259 in [`template_index`] order. Biflow runs
/// carry the reverse elements, unidirectional ones do not.
pub(crate) fn templates(biflow: bool) -> Vec<Template> {
    templates_for(biflow, false)
}

/// [`templates`], with the media verdict's elements when `media` (runs
/// with the `media` analyzer on).
pub(crate) fn templates_for(biflow: bool, media: bool) -> Vec<Template> {
    templates_with(biflow, media, true, &[false; LABEL_FIELDS.len()])
}

/// [`templates_for`], with the Community ID's element when `cid`, and the
/// label elements whose field `labels` has (by [`LABEL_FIELDS`] index;
/// none unless a payload labeller is on). `applicationName` goes with
/// `category`.
pub(crate) fn templates_with(
    biflow: bool,
    media: bool,
    cid: bool,
    labels: &[bool; LABEL_FIELDS.len()],
) -> Vec<Template> {
    (0..4)
        .map(|i| {
            let (v6, icmp) = (i & 1 == 1, i & 2 == 2);
            let fields = ELEMENTS.iter().filter(|el| match el.when {
                W::Always => true,
                W::V4 => !v6,
                W::V6 => v6,
                W::IcmpV4 => icmp && !v6,
                W::IcmpV6 => icmp && v6,
                W::Biflow => biflow,
                W::Media => media,
                W::CommunityId => cid,
                W::Labels => match el.src {
                    Source::Label(k) => labels[k],
                    _ => labels[LABEL_OWN],
                },
            });
            template(FIRST_TEMPLATE + i as u16, fields.collect())
        })
        .collect()
}

/// The Markdown table of every element, for `docs/IPFIX.md`.
pub(crate) fn markdown() -> String {
    let mut s = String::from(TABLE_HEAD);
    for el in ELEMENTS {
        let t = match el.when {
            W::Always => "all",
            W::V4 => "IPv4",
            W::V6 => "IPv6",
            W::IcmpV4 => "IPv4 ICMP",
            W::IcmpV6 => "IPv6 ICMPv6",
            W::Biflow => "biflow runs",
            W::Media => "--analyzer media runs",
            W::CommunityId => "all but --no-community-id runs",
            W::Labels => "labeller runs",
        };
        row(&mut s, el, t);
    }
    for el in &LIST_MEMBERS {
        row(&mut s, el, "in a basicList");
    }
    s
}

/// The Markdown table of the early-verdict event elements, for
/// `docs/IPFIX.md`.
pub(crate) fn event_markdown() -> String {
    let mut s = String::from(TABLE_HEAD);
    for el in EVENT_ELEMENTS {
        let t = match el.when {
            W::V4 => "260 (IPv4)",
            W::V6 => "261 (IPv6)",
            _ => "260, 261",
        };
        row(&mut s, el, t);
    }
    s
}

/// The head of an element table in `docs/IPFIX.md`.
const TABLE_HEAD: &str = "| Element | Id | PEN | Length | Type | Templates | Meaning |\n\
                          |---|---|---|---|---|---|---|\n";

/// One element's row of a table, carried by `templates`.
fn row(s: &mut String, el: &Element, templates: &str) {
    let len = if el.len == VARLEN {
        "variable".to_string()
    } else {
        el.len.to_string()
    };
    let _ = writeln!(
        s,
        "| {} | {} | {} | {} | {} | {} | {} |",
        el.name, el.id, el.pen, len, el.ty, templates, el.meaning
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/IPFIX.md` holds the table the code exports
    /// (`EARLYBIRD_BLESS=1` rewrites it).
    #[test]
    fn doc_table_matches_the_elements() {
        doc_table("elements", markdown());
        doc_table("events", event_markdown());
    }

    /// The table between `<!-- NAME:begin -->` and `<!-- NAME:end -->`.
    fn doc_table(name: &str, table: String) {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/IPFIX.md");
        let doc = std::fs::read_to_string(path).expect("docs/IPFIX.md");
        let (begin, end) = (
            format!("<!-- {name}:begin -->\n"),
            format!("<!-- {name}:end -->"),
        );
        let a = doc.find(&begin).expect("begin marker") + begin.len();
        let b = doc.find(&end).expect("end marker");
        if doc[a..b] != table && std::env::var_os("EARLYBIRD_BLESS").is_some() {
            let new = format!("{}{table}{}", &doc[..a], &doc[b..]);
            std::fs::write(path, new).unwrap();
            return;
        }
        assert_eq!(
            doc[a..b],
            table,
            "docs/IPFIX.md: element table differs (EARLYBIRD_BLESS=1 rewrites it)"
        );
    }

    #[test]
    fn templates_differ_in_addresses_icmp_and_reverse_elements() {
        let bi = templates(true);
        let uni = templates(false);
        for (i, t) in bi.iter().enumerate() {
            assert_eq!(t.id, 256 + i as u16);
            let has = |name: &str| t.fields.iter().any(|f| f.name == name);
            assert_eq!(has("sourceIPv6Address"), i & 1 == 1);
            assert_eq!(has("sourceIPv4Address"), i & 1 == 0);
            assert_eq!(has("icmpTypeCodeIPv4"), i == 2);
            assert_eq!(has("icmpTypeCodeIPv6"), i == 3);
            assert!(has("reverseOctetDeltaCount"));
            assert_eq!(uni[i].fields.len() + 3, t.fields.len());
            assert!(uni[i].fields.iter().all(|f| f.pen != PEN_REVERSE));
        }
        assert_eq!(template_index(true, true), 3);
        for (t, m) in bi.iter().zip(templates_for(true, true)) {
            let names: Vec<&str> = m.fields.iter().map(|f| f.name).collect();
            assert_eq!(m.fields.len(), t.fields.len() + 3);
            assert_eq!(
                names[names.len() - 3..],
                [
                    "earlybirdMediaKind",
                    "earlybirdMediaShare",
                    "earlybirdMediaPacket"
                ]
            );
            assert_eq!(m.fixed_len, t.fixed_len + 9);
        }
    }
}
