//! IPFIX exporter (RFC 7011/7012): flow records to a collector over UDP or
//! TCP, or to a file of concatenated messages (RFC 5655).
//!
//! Contract: [`IpfixExporter`] writes every flow record as one data record
//! of one of four templates (IPv4, IPv6, each with or without the ICMP
//! type/code; `elements.rs`), biflows per RFC 5103 (reverse elements with
//! enterprise number 29305; unidirectional runs have none), verdict and
//! early packets as enterprise elements of [`PEN_EARLYBIRD`], and, when the
//! run has the `media` analyzer on (its fields in
//! [`ExportOptions::analyzed`]), its verdict as three more, and when it
//! has a payload labeller on, the label fields (names, fingerprints, the
//! label's category, source and statistical verdict) as IANA's elements
//! where IANA has one and enterprise elements otherwise — every element is
//! listed in `docs/IPFIX.md`. Other analyzer fields are not exported. Records are packed into messages
//! of at most [`IpfixOptions::mtu`] bytes (UDP) or 65535 (TCP, file),
//! whose sequence number counts the data records handed to the output
//! before them (records a network output then drops included, so a
//! collector sees the gap); the export time is packet time (the latest
//! flow end in the message), so a file run writes the same bytes each
//! time. A message leaves when the next record does not fit, on
//! [`Exporter::flush`] (the live run's 1 s flush) and at
//! [`Exporter::finish`]. Where messages go and when templates are sent,
//! and how network failures are counted without ever blocking or ending
//! the output: `transport.rs`. While the exporter thread lags, the shards
//! encode the data records ([`Exporter::renderer`]) and the exporter only
//! packs them into its messages: the bytes are the same either way.
//! Outputs are named `ipfix:PATH`,
//! `ipfix+udp://HOST:PORT` and `ipfix+tcp://HOST:PORT`. An output of
//! early-verdict events ([`open_events`]) writes each event as a data
//! record of template 260 or 261 (`events.rs`) through the same messages
//! and transports. Records of other kinds are refused with an error. One
//! message buffer and one record buffer are allocated when the exporter is
//! built; nothing per record. On the exporter thread a flow record is
//! encoded straight into the message (`Message::append`), with no copy in
//! between; one that does not fit is encoded again into the next message.
//! The shards' renderer encodes into a buffer of its own and appends the
//! record behind its frame (`IpfixRecords`).

pub(crate) mod elements;
pub(crate) mod events;
pub(crate) mod message;
pub(crate) mod record;
pub(crate) mod transport;

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use super::{early_of, fields, ExportOptions, Exporter, Renderer};
use crate::classify::Verdict;
use crate::error::{Error, Result};
use crate::flow::events::VERDICTS;
use crate::flow::record::{FlowRecord, RecordBatch};
use crate::schema::{Kind, RowBatch, Value};
use elements::Template;
use message::{Message, HEADER, MAX_MESSAGE, SET_HEADER};
use transport::{FileTransport, NetConfig, TcpTransport, Transport, UdpTransport};

pub use elements::{PEN_EARLYBIRD, PEN_REVERSE};

/// Prefix of a UDP collector output: `ipfix+udp://HOST:PORT`.
pub const UDP_PREFIX: &str = "ipfix+udp://";
/// Prefix of a TCP collector output: `ipfix+tcp://HOST:PORT`.
pub const TCP_PREFIX: &str = "ipfix+tcp://";

/// Settings of IPFIX outputs.
#[derive(Debug, Clone)]
pub struct IpfixOptions {
    /// Biflow records (RFC 5103 reverse elements); false for a
    /// unidirectional run, whose records have one direction.
    pub biflow: bool,
    /// UDP: largest message, bytes of UDP payload.
    pub mtu: usize,
    /// Observation domain id of every message.
    pub domain: u32,
    /// UDP: templates are sent again after this long…
    pub template_refresh: Duration,
    /// …or after this many data messages, whichever comes first.
    pub template_refresh_messages: u32,
    /// TCP: messages waiting for the connection at most; more are dropped.
    pub tcp_queue: usize,
    /// TCP: how long the end of the run waits for queued messages.
    pub tcp_linger: Duration,
}

impl Default for IpfixOptions {
    fn default() -> Self {
        IpfixOptions {
            biflow: true,
            mtu: 1400,
            domain: 0,
            template_refresh: Duration::from_secs(60),
            template_refresh_messages: 100,
            tcp_queue: 256,
            tcp_linger: Duration::from_secs(2),
        }
    }
}

/// Where an IPFIX output named on the command line goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination<'a> {
    /// `ipfix+udp://HOST:PORT`
    Udp(&'a str),
    /// `ipfix+tcp://HOST:PORT`
    Tcp(&'a str),
}

/// The collector an output name gives (`ipfix+udp://…`, `ipfix+tcp://…`),
/// `None` for a file name.
pub fn destination(out: &Path) -> Option<Destination<'_>> {
    let s = out.to_str()?;
    if let Some(rest) = s.strip_prefix(UDP_PREFIX) {
        Some(Destination::Udp(rest))
    } else {
        s.strip_prefix(TCP_PREFIX).map(Destination::Tcp)
    }
}

/// Whether the output name is a collector, not a file.
pub fn is_network(out: &Path) -> bool {
    destination(out).is_some()
}

/// Opens the IPFIX output `out`: a collector (`ipfix+udp://HOST:PORT`,
/// `ipfix+tcp://HOST:PORT`) or a file (any other name; `-` is standard
/// output). Errors name the
/// output: a file that cannot be created, a name that does not resolve,
/// options that leave no room for a record.
pub fn open(out: &Path, opts: &ExportOptions, ipfix: &IpfixOptions) -> Result<Box<dyn Exporter>> {
    open_kind(out, &fields::FLOWS, opts, ipfix)
}

/// Opens an IPFIX output of early-verdict events
/// ([`crate::flow::events::VERDICTS`], `--events`) at `out`, as [`open`]
/// does for flows: templates 260 and 261 (`docs/IPFIX.md`).
pub fn open_events(out: &Path, ipfix: &IpfixOptions) -> Result<Box<dyn Exporter>> {
    open_kind(out, &VERDICTS, &ExportOptions::default(), ipfix)
}

/// [`open`] for records of `kind` (flows or early-verdict events).
fn open_kind(
    out: &Path,
    kind: &'static Kind,
    opts: &ExportOptions,
    ipfix: &IpfixOptions,
) -> Result<Box<dyn Exporter>> {
    let (name, max) = match destination(out) {
        Some(Destination::Udp(hp)) => (format!("{UDP_PREFIX}{hp}"), ipfix.mtu),
        Some(Destination::Tcp(hp)) => (format!("{TCP_PREFIX}{hp}"), MAX_MESSAGE),
        None if out.as_os_str() == "-" => ("ipfix:stdout".to_string(), MAX_MESSAGE),
        None => (format!("ipfix:{}", out.display()), MAX_MESSAGE),
    };
    let plan = Plan::new(&name, max, kind, opts, ipfix)?;
    let net = NetConfig {
        refresh: ipfix.template_refresh,
        refresh_messages: ipfix.template_refresh_messages.max(1),
        queue: ipfix.tcp_queue,
        linger: ipfix.tcp_linger,
    };
    let addr = |hp: &str| {
        transport::resolve(hp).map_err(|e| Error::Output {
            name: name.clone(),
            reason: format!("collector address: {e}"),
        })
    };
    let t: Box<dyn Transport> = match destination(out) {
        Some(Destination::Udp(hp)) => Box::new(UdpTransport::connect(
            addr(hp)?,
            plan.template_msgs.clone(),
            net,
            &name,
        )?),
        Some(Destination::Tcp(hp)) => Box::new(TcpTransport::start(
            addr(hp)?,
            plan.template_msgs.clone(),
            net,
            &name,
        )?),
        None if out.as_os_str() == "-" => Box::new(FileTransport::over(
            Box::new(std::io::stdout()),
            plan.template_msgs.clone(),
            &name,
        )),
        None => Box::new(FileTransport::create(
            out,
            plan.template_msgs.clone(),
            &name,
        )?),
    };
    Ok(Box::new(IpfixExporter::new(plan, t, name)))
}

/// An IPFIX exporter writing messages to `w` (a file's bytes: templates
/// first), for tests and other writers. Panics only if `opts` asks for
/// more early packets than a message can carry (N ≤ 32 always fits).
pub fn to_writer(
    w: Box<dyn Write + Send>,
    name: &str,
    opts: &ExportOptions,
    ipfix: &IpfixOptions,
) -> Box<dyn Exporter> {
    let plan =
        Plan::new(name, MAX_MESSAGE, &fields::FLOWS, opts, ipfix).expect("records fit in 64 KiB");
    let t = FileTransport::over(w, plan.template_msgs.clone(), name);
    Box::new(IpfixExporter::new(plan, Box::new(t), name.to_string()))
}

/// An IPFIX exporter of early-verdict events writing messages to `w`.
pub fn events_to_writer(
    w: Box<dyn Write + Send>,
    name: &str,
    ipfix: &IpfixOptions,
) -> Box<dyn Exporter> {
    let plan = Plan::new(
        name,
        MAX_MESSAGE,
        &VERDICTS,
        &ExportOptions::default(),
        ipfix,
    )
    .expect("events fit in 64 KiB");
    let t = FileTransport::over(w, plan.template_msgs.clone(), name);
    Box::new(IpfixExporter::new(plan, Box::new(t), name.to_string()))
}

/// What an exporter is built from: templates, their messages, class names.
struct Plan {
    kind: &'static Kind,
    templates: Vec<Template>,
    template_msgs: Vec<Vec<u8>>,
    max: usize,
    domain: u32,
    names: Vec<Vec<u8>>,
    early: usize,
    record_max: usize,
    /// Column of the `media` field in the records' analyzer cells, when
    /// the run has the media analyzer on (its verdict is exported).
    media: Option<usize>,
    /// Seed of the records' Community ID; `None`: the templates go
    /// without it.
    seed: Option<u16>,
    /// Column of each label field in the records' analyzer cells, when
    /// the run has a payload labeller on and its records have the field
    /// (`elements::LABEL_FIELDS` order; those are exported).
    labels: LabelCols,
}

/// Columns of the label fields in a run's analyzer cells (see
/// [`Plan::labels`]).
type LabelCols = [Option<usize>; elements::LABEL_FIELDS.len()];

/// The label fields' columns in `analyzed`, when a payload labeller is on
/// (one of its fields is there); all `None` otherwise.
fn label_cols(analyzed: &[crate::schema::Field]) -> LabelCols {
    let col = |name: &str| analyzed.iter().position(|f| f.name == name);
    let labelled = elements::LABEL_FIELDS[..elements::LABEL_OWN]
        .iter()
        .any(|n| col(n).is_some());
    std::array::from_fn(|k| col(elements::LABEL_FIELDS[k]).filter(|_| labelled))
}

/// Whether a payload labeller is on: `label_cols` gives every column,
/// the label's own fields included, or none.
fn labelled(cols: &LabelCols) -> bool {
    cols[elements::LABEL_OWN].is_some()
}

/// The label values of record `i` of `batch` from the columns `cols`:
/// strings cut at a character boundary to `elements::LABEL_MAX` bytes each
/// and `elements::LABEL_BUDGET` together (in template order: the later
/// fields are cut first), numbers as
/// their elements' bytes; a null cell is an empty string or 0.
fn label_values<'a>(cols: &LabelCols, batch: &'a RecordBatch, i: usize) -> record::Labels<'a> {
    let mut out = record::Labels::default();
    let mut budget = elements::LABEL_BUDGET;
    // In template order: the label's own fields, then the names.
    let n = cols.len();
    for k in (elements::LABEL_OWN..n).chain(0..elements::LABEL_OWN) {
        let Some(j) = cols[k] else {
            continue;
        };
        match (record::label_len(k), batch.analyzed.get(i, j)) {
            (None, Value::Text(t)) => {
                let mut n = t.len().min(elements::LABEL_MAX).min(budget);
                while !t.is_char_boundary(n) {
                    n -= 1;
                }
                budget -= n;
                out.text[k] = &t.as_bytes()[..n];
            }
            (Some(1), Value::U64(v)) => out.fixed[k][0] = v.min(255) as u8,
            (Some(4), Value::F64(v)) => out.fixed[k] = (v as f32).to_be_bytes(),
            // model_id: no model decided the flow.
            (Some(2), Value::Null) => out.fixed[k] = [0xff, 0xff, 0, 0],
            (Some(2), Value::U64(v)) => {
                let [a, b] = (v.min(0xfffe) as u16).to_be_bytes();
                out.fixed[k] = [a, b, 0, 0];
            }
            _ => {}
        }
    }
    out
}

impl Plan {
    fn new(
        name: &str,
        max: usize,
        kind: &'static Kind,
        opts: &ExportOptions,
        ipfix: &IpfixOptions,
    ) -> Result<Plan> {
        let err = |reason: String| Error::Output {
            name: name.to_string(),
            reason,
        };
        if max > MAX_MESSAGE {
            return Err(err(format!(
                "messages may not exceed {MAX_MESSAGE} bytes (asked for {max})"
            )));
        }
        let events = kind.is(&VERDICTS);
        if !events && !kind.is(&fields::FLOWS) {
            return Err(err(format!(
                "IPFIX takes flow records and early-verdict events, not {} records",
                kind.name
            )));
        }
        let media = match events {
            true => None,
            false => opts.analyzed.iter().position(|f| f.name == MEDIA_FIELD),
        };
        let labels = match events {
            true => [None; elements::LABEL_FIELDS.len()],
            false => label_cols(&opts.analyzed),
        };
        let templates = match events {
            true => elements::event_templates(),
            false => elements::templates_with(
                ipfix.biflow,
                media.is_some(),
                opts.community_id().is_some(),
                &labels.map(|c| c.is_some()),
            ),
        };
        let names: Vec<Vec<u8>> = opts.class_names.iter().map(|s| clamp(s).to_vec()).collect();
        let name_max = names.iter().map(Vec::len).max().unwrap_or(0).max(7);
        let early = opts.early_packets;
        let record_max = match events {
            // The application name: one length byte and at most 254 bytes.
            true => templates
                .iter()
                .map(|t| t.fixed_len + 255)
                .max()
                .unwrap_or(0),
            false => templates
                .iter()
                .map(|t| record::max_len(t, name_max, early))
                .max()
                .unwrap_or(0),
        };
        if HEADER + SET_HEADER + record_max > max {
            return Err(err(format!(
                "a message of {max} bytes cannot hold a record ({} bytes with its headers)",
                HEADER + SET_HEADER + record_max
            )));
        }
        let template_msgs = message::template_messages(&templates, max, ipfix.domain)
            .ok_or_else(|| err(format!("a message of {max} bytes cannot hold a template")))?;
        Ok(Plan {
            kind,
            templates,
            template_msgs,
            max,
            domain: ipfix.domain,
            names,
            early,
            record_max,
            media,
            seed: opts.community_id(),
            labels,
        })
    }
}

/// The record field of the media analyzer's verdict; `media_share` and
/// `media_packet` follow it (`analyze/media.rs`).
const MEDIA_FIELD: &str = "media";

/// A class name as at most 65535 bytes, cut at a character boundary.
fn clamp(s: &str) -> &[u8] {
    let mut end = s.len().min(usize::from(u16::MAX));
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s.as_bytes()[..end]
}

/// Flow records as IPFIX messages (see the module docs).
pub struct IpfixExporter {
    name: String,
    /// Flows, or early-verdict events.
    kind: &'static Kind,
    templates: Vec<Template>,
    names: Vec<Vec<u8>>,
    early: usize,
    media: Option<usize>,
    seed: Option<u16>,
    labels: LabelCols,
    msg: Message,
    /// Early-verdict events are encoded here first.
    record: Vec<u8>,
    /// The longest flow record, bytes.
    record_max: usize,
    /// Data records handed to the transport so far (mod 2³²).
    seq: u32,
    transport: Box<dyn Transport>,
}

impl IpfixExporter {
    fn new(plan: Plan, transport: Box<dyn Transport>, name: String) -> Self {
        IpfixExporter {
            name,
            kind: plan.kind,
            templates: plan.templates,
            names: plan.names,
            early: plan.early,
            media: plan.media,
            seed: plan.seed,
            labels: plan.labels,
            msg: Message::new(plan.max, plan.domain),
            record: Vec::with_capacity(plan.record_max),
            record_max: plan.record_max,
            seq: 0,
            transport,
        }
    }

    /// Encodes record `i` of `batch` into the message; false when it does
    /// not fit.
    #[inline]
    fn append(&mut self, batch: &RecordBatch, i: usize) -> bool {
        let (t, end_secs) = template_and_time(&self.templates, &batch.records[i]);
        let (names, early, media, seed) = (&self.names, self.early, self.media, self.seed);
        let labels = &self.labels;
        self.msg.append(t.id, end_secs, |buf| {
            encode_one(buf, t, names, early, (media, labels), seed, batch, i)
        })
    }

    /// Hands the message to the transport, if it holds any record.
    fn send(&mut self) -> Result<()> {
        let n = self.msg.records();
        if n == 0 {
            return Ok(());
        }
        let bytes = self.msg.seal(self.seq);
        let r = self.transport.send(bytes, n);
        self.msg.clear();
        self.seq = self.seq.wrapping_add(n);
        r
    }
}

/// The template of record `r` and its export time (the flow's end, Unix
/// seconds).
#[inline]
fn template_and_time<'a>(templates: &'a [Template], r: &FlowRecord) -> (&'a Template, u32) {
    let t = &templates[record::template_of(r)];
    let end_secs = (r.last_ts / 1_000_000_000).min(u64::from(u32::MAX)) as u32;
    (t, end_secs)
}

/// Writes record `i` of `batch` for template `t` at the start of `buf` (at
/// least [`record::max_len`] + [`record::SLACK`] bytes) and returns its
/// length. `media` is the column of the media verdict in the batch's
/// analyzer cells, if the run has one, with the columns of the exported
/// label fields; `seed` the Community ID's (`None`: none).
#[allow(clippy::too_many_arguments)]
fn encode_one(
    buf: &mut [u8],
    t: &Template,
    names: &[Vec<u8>],
    early: usize,
    (media, labels): (Option<usize>, &LabelCols),
    seed: Option<u16>,
    batch: &RecordBatch,
    i: usize,
) -> usize {
    const UNKNOWN: &[u8] = b"unknown";
    let r = &batch.records[i];
    let app = match r.verdict.class {
        Verdict::UNKNOWN => UNKNOWN,
        c => names.get(usize::from(c)).map_or(UNKNOWN, Vec::as_slice),
    };
    let early = early_of(batch, i, early);
    let m = match media {
        None => record::Media::default(),
        Some(j) => {
            let cells = &batch.analyzed;
            let kind = match cells.get(i, j) {
                Value::Text(k) => k,
                _ => "",
            };
            let share = match cells.get(i, j + 1) {
                Value::F64(v) => Some(v),
                _ => None,
            };
            let packet = match cells.get(i, j + 2) {
                Value::U64(v) => Some(v),
                _ => None,
            };
            record::Media::of(kind, share, packet)
        }
    };
    let cid = seed.and_then(|s| crate::export::community_id::of_record(s, &r.key, r.icmp));
    let cid = cid.as_ref().map_or(&[][..], |c| &c.as_bytes()[..]);
    let l;
    let l = match labelled(labels) {
        true => {
            l = label_values(labels, batch, i);
            &l
        }
        false => &record::Labels::NONE,
    };
    record::encode_into(buf, t, r, app, cid, early, &m, l)
}

/// Bytes before each record in rendered text: template id (2), record
/// length (2), export time (4), little-endian.
const FRAME: usize = 8;

/// The encoding half of [`IpfixExporter`] for flow records, run by a
/// [`Renderer`] on another thread (the shard, while the exporter thread
/// lags): each record as a frame (template id, length, export time) and
/// its data record, which the exporter packs into its messages
/// ([`Exporter::write_rendered`]); sequence numbers and message bounds
/// stay the exporter's. Each record is encoded into a small buffer kept
/// for the purpose (zeroed once) and copied behind its frame: encoding in
/// place would need the text zero-filled first, which costs more than the
/// copy of a record that is still in the L1 cache.
struct IpfixRecords {
    templates: Vec<Template>,
    names: Vec<Vec<u8>>,
    early: usize,
    media: Option<usize>,
    seed: Option<u16>,
    labels: LabelCols,
    /// The longest record, bytes.
    record_max: usize,
    /// One record: `record_max` + [`record::SLACK`] bytes.
    scratch: Vec<u8>,
}

impl IpfixRecords {
    /// Appends the frames and records of `batch` to `out`.
    fn render(&mut self, batch: &RecordBatch, out: &mut Vec<u8>) {
        out.reserve(batch.len() * (FRAME + self.record_max));
        for i in 0..batch.len() {
            let r = &batch.records[i];
            let (t, time) = template_and_time(&self.templates, r);
            let len = encode_one(
                &mut self.scratch,
                t,
                &self.names,
                self.early,
                (self.media, &self.labels),
                self.seed,
                batch,
                i,
            );
            let (id, len16, time) = (
                t.id.to_le_bytes(),
                (len as u16).to_le_bytes(),
                time.to_le_bytes(),
            );
            out.extend_from_slice(&[
                id[0], id[1], len16[0], len16[1], time[0], time[1], time[2], time[3],
            ]);
            out.extend_from_slice(&self.scratch[..len]);
        }
    }
}

impl Exporter for IpfixExporter {
    fn kind(&self) -> &'static Kind {
        self.kind
    }

    fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        if !self.kind.is(&fields::FLOWS) {
            return Err(super::wrong_kind(
                &self.name,
                self.kind,
                &fields::FLOWS,
                batch.len(),
            ));
        }
        for i in 0..batch.len() {
            // Encoded straight into the message; when it is full, sent, and
            // the record encoded again into the next one (a record always
            // fits an empty message: `Plan::new`).
            if !self.append(batch, i) {
                self.send()?;
                let appended = self.append(batch, i);
                debug_assert!(appended);
            }
        }
        Ok(())
    }

    fn write_rows(&mut self, rows: &RowBatch) -> Result<()> {
        if !self.kind.is(&VERDICTS) || !rows.kind().is(&VERDICTS) {
            return Err(super::wrong_kind(
                &self.name,
                self.kind,
                rows.kind(),
                rows.len(),
            ));
        }
        for i in 0..rows.len() {
            let Some((id, time)) =
                events::encode(&mut self.record, &self.templates, rows.rows(), i)
            else {
                continue;
            };
            if !self.msg.fits(id, self.record.len()) {
                self.send()?;
            }
            self.msg.push(id, &self.record, time);
        }
        Ok(())
    }

    /// The templates carry no packet size or inter-arrival statistics
    /// (docs/IPFIX.md).
    fn reads_moments(&self) -> bool {
        false
    }

    /// Only runs with a payload labeller export the label fields.
    fn reads_label_cells(&self) -> bool {
        labelled(&self.labels)
    }

    fn renderer(&self) -> Option<Renderer> {
        if !self.kind.is(&fields::FLOWS) {
            return None;
        }
        let mut records = IpfixRecords {
            templates: self.templates.clone(),
            names: self.names.clone(),
            early: self.early,
            media: self.media,
            seed: self.seed,
            labels: self.labels,
            record_max: self.record_max,
            scratch: vec![0; self.record_max + record::SLACK],
        };
        Some(Renderer::direct(move |batch, out| {
            records.render(batch, out)
        }))
    }

    fn write_rendered(&mut self, text: &[u8], _records: usize) -> Result<()> {
        let mut at = 0;
        while at + FRAME <= text.len() {
            let id = u16::from_le_bytes([text[at], text[at + 1]]);
            let len = usize::from(u16::from_le_bytes([text[at + 2], text[at + 3]]));
            let time = u32::from_le_bytes([text[at + 4], text[at + 5], text[at + 6], text[at + 7]]);
            let Some(record) = text.get(at + FRAME..at + FRAME + len) else {
                break;
            };
            if !self.msg.fits(id, len) {
                self.send()?;
            }
            self.msg.push(id, record, time);
            at += FRAME + len;
        }
        if at != text.len() {
            return Err(Error::Output {
                name: self.name.clone(),
                reason: format!("rendered records cut short at byte {at} of {}", text.len()),
            });
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.send()?;
        self.transport.flush()
    }

    fn finish(&mut self) -> Result<()> {
        let sent = self.send();
        let done = self.transport.finish();
        sent.and(done)
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn reopen(&mut self) -> Result<bool> {
        self.send()?;
        self.transport.reopen()
    }
}

#[cfg(test)]
mod tests;
