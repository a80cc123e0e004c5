//! IPFIX messages (RFC 7011 §3): the message header, template sets and
//! data sets, built into one reused buffer.
//!
//! Contract: a [`Message`] collects data records of any template, opening a
//! new data set whenever the template changes, and never grows past its
//! maximum length ([`Message::fits`] says whether a record still fits);
//! [`Message::seal`] writes the header (version 10, length, export time,
//! sequence number, observation domain) and returns the bytes, after which
//! the message is empty again. [`template_message`] builds a message
//! holding template sets only. The buffer is allocated (and zeroed) once,
//! with room behind the message for one more record, so that a record can
//! be encoded straight into it ([`Message::append`]) and only counted in
//! when it fits.

use super::elements::{Template, VARLEN};
use super::record::SLACK;

/// IPFIX version number.
pub(crate) const VERSION: u16 = 10;
/// Bytes of the message header.
pub(crate) const HEADER: usize = 16;
/// Bytes of a set header.
pub(crate) const SET_HEADER: usize = 4;
/// Set id of template sets.
pub(crate) const TEMPLATE_SET: u16 = 2;
/// The largest message the 16-bit length field can state.
pub(crate) const MAX_MESSAGE: usize = 65535;

/// A message being filled with data records.
pub(crate) struct Message {
    /// The message (`..end`) and the room behind it: `2 × max +`
    /// [`SET_HEADER`] + [`SLACK`] bytes, zeroed once.
    buf: Vec<u8>,
    /// End of the message in `buf`.
    end: usize,
    max: usize,
    domain: u32,
    /// Data records in the message.
    records: u32,
    /// Start of the open data set and its id.
    set: Option<(usize, u16)>,
    /// Export time: the latest flow end (seconds since 1970) among its
    /// records.
    time: u32,
}

impl Message {
    /// An empty message of at most `max` bytes for observation domain
    /// `domain`.
    pub(crate) fn new(max: usize, domain: u32) -> Message {
        Message {
            buf: vec![0; 2 * max + SET_HEADER + SLACK],
            end: HEADER,
            max,
            domain,
            records: 0,
            set: None,
            time: 0,
        }
    }

    /// Data records in the message.
    pub(crate) fn records(&self) -> u32 {
        self.records
    }

    /// Whether a record of `len` bytes of template `id` fits.
    #[inline]
    pub(crate) fn fits(&self, id: u16, len: usize) -> bool {
        let set = match self.set {
            Some((_, open)) if open == id => 0,
            _ => SET_HEADER,
        };
        self.end + set + len <= self.max
    }

    /// Appends a record of template `id` (the caller checked
    /// [`Message::fits`]); `time` is the flow's end in seconds since 1970.
    #[inline]
    pub(crate) fn push(&mut self, id: u16, record: &[u8], time: u32) {
        let at = self.open(id);
        self.buf[at..at + record.len()].copy_from_slice(record);
        self.end = at + record.len();
        self.records += 1;
        self.time = self.time.max(time);
    }

    /// Encodes a record of template `id` straight into the message: `enc`
    /// writes it at the start of the slice it is given (at least `max` +
    /// [`SLACK`] bytes, whatever it holds) and returns its length, at most
    /// `max`. Returns false, the message unchanged, when the record does
    /// not fit (the caller sends the message and encodes it again);
    /// `time` is the flow's end in seconds since 1970.
    #[inline]
    pub(crate) fn append(
        &mut self,
        id: u16,
        time: u32,
        enc: impl FnOnce(&mut [u8]) -> usize,
    ) -> bool {
        let same = matches!(self.set, Some((_, open)) if open == id);
        let at = self.end + if same { 0 } else { SET_HEADER };
        let len = enc(&mut self.buf[at..]);
        if at + len > self.max {
            return false;
        }
        self.open(id);
        self.end = at + len;
        self.records += 1;
        self.time = self.time.max(time);
        true
    }

    /// Opens a data set of template `id` unless it is the open one;
    /// returns where its next record goes.
    #[inline]
    fn open(&mut self, id: u16) -> usize {
        if !matches!(self.set, Some((_, open)) if open == id) {
            self.close_set();
            let at = self.end;
            self.set = Some((at, id));
            let id = id.to_be_bytes();
            self.buf[at..at + SET_HEADER].copy_from_slice(&[id[0], id[1], 0, 0]);
            self.end = at + SET_HEADER;
        }
        self.end
    }

    fn close_set(&mut self) {
        if let Some((start, _)) = self.set.take() {
            let len = (self.end - start) as u16;
            self.buf[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
        }
    }

    /// Finishes the message with sequence number `seq` (data records sent
    /// before it in this stream) and returns its bytes; the message is
    /// empty again at the next [`Message::push`].
    pub(crate) fn seal(&mut self, seq: u32) -> &[u8] {
        self.close_set();
        let len = self.end;
        write_header(&mut self.buf[..HEADER], len, self.time, seq, self.domain);
        self.records = 0;
        self.time = 0;
        // The bytes stay readable until the next push overwrites them.
        self.set = None;
        &self.buf[..len]
    }

    /// Empties a sealed message.
    pub(crate) fn clear(&mut self) {
        self.end = HEADER;
        self.records = 0;
        self.set = None;
        self.time = 0;
    }
}

/// Writes a message header into `h` (16 bytes).
pub(crate) fn write_header(h: &mut [u8], len: usize, time: u32, seq: u32, domain: u32) {
    h[0..2].copy_from_slice(&VERSION.to_be_bytes());
    h[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    h[4..8].copy_from_slice(&time.to_be_bytes());
    h[8..12].copy_from_slice(&seq.to_be_bytes());
    h[12..16].copy_from_slice(&domain.to_be_bytes());
}

/// Gives the template message `tmpl` the export time and sequence number
/// of the data message `data` it is sent before.
pub(crate) fn stamp_like(tmpl: &mut [u8], data: &[u8]) {
    tmpl[4..12].copy_from_slice(&data[4..12]);
}

/// Bytes of the template record of `t` (RFC 7011 §3.4.1).
pub(crate) fn template_len(t: &Template) -> usize {
    4 + t
        .fields
        .iter()
        .map(|f| if f.pen != 0 { 8 } else { 4 })
        .sum::<usize>()
}

/// Appends the template record of `t` to `out`.
fn put_template(out: &mut Vec<u8>, t: &Template) {
    out.extend_from_slice(&t.id.to_be_bytes());
    out.extend_from_slice(&(t.fields.len() as u16).to_be_bytes());
    for f in &t.fields {
        let id = if f.pen != 0 { f.id | 0x8000 } else { f.id };
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&f.len.to_be_bytes());
        if f.pen != 0 {
            out.extend_from_slice(&f.pen.to_be_bytes());
        }
    }
    debug_assert!(t.fields.iter().all(|f| f.len == VARLEN || f.len > 0));
}

/// The messages announcing `templates`, as few as fit in `max` bytes each
/// (header fields other than the length and domain are filled when sent,
/// [`stamp_like`]); `None` when one template alone does not fit.
pub(crate) fn template_messages(
    templates: &[Template],
    max: usize,
    domain: u32,
) -> Option<Vec<Vec<u8>>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut cur: Vec<u8> = Vec::new();
    let close = |cur: &mut Vec<u8>, out: &mut Vec<Vec<u8>>| {
        if cur.len() > HEADER + SET_HEADER {
            let set_len = (cur.len() - HEADER) as u16;
            cur[HEADER + 2..HEADER + 4].copy_from_slice(&set_len.to_be_bytes());
            let len = cur.len();
            write_header(&mut cur[..HEADER], len, 0, 0, domain);
            out.push(std::mem::take(cur));
        }
    };
    for t in templates {
        let need = template_len(t);
        if HEADER + SET_HEADER + need > max {
            return None;
        }
        if !cur.is_empty() && cur.len() + need > max {
            close(&mut cur, &mut out);
        }
        if cur.is_empty() {
            cur.resize(HEADER, 0);
            cur.extend_from_slice(&TEMPLATE_SET.to_be_bytes());
            cur.extend_from_slice(&[0, 0]);
        }
        put_template(&mut cur, t);
    }
    close(&mut cur, &mut out);
    Some(out)
}

/// The id of the first set of message `m`.
#[cfg(test)]
pub(crate) fn set_id(m: &[u8]) -> u16 {
    u16::from_be_bytes([m[HEADER], m[HEADER + 1]])
}

#[cfg(test)]
mod tests {
    use super::super::elements::templates;
    use super::*;

    #[test]
    fn data_sets_change_with_the_template_and_lengths_add_up() {
        let mut m = Message::new(100, 7);
        assert!(m.fits(256, 76));
        assert!(!m.fits(256, 81));
        m.push(256, &[1; 10], 5);
        m.push(256, &[2; 10], 9);
        assert!(m.fits(256, 100 - 16 - 4 - 20));
        assert!(!m.fits(257, 100 - 16 - 4 - 20));
        m.push(257, &[3; 4], 3);
        assert_eq!(m.records(), 3);
        let b = m.seal(42).to_vec();
        assert_eq!(b.len(), 16 + 4 + 20 + 4 + 4);
        assert_eq!(&b[0..2], &[0, 10]);
        assert_eq!(u16::from_be_bytes([b[2], b[3]]) as usize, b.len());
        assert_eq!(u32::from_be_bytes(b[4..8].try_into().unwrap()), 9);
        assert_eq!(u32::from_be_bytes(b[8..12].try_into().unwrap()), 42);
        assert_eq!(u32::from_be_bytes(b[12..16].try_into().unwrap()), 7);
        assert_eq!(&b[16..20], &[1, 0, 0, 24]);
        assert_eq!(&b[40..44], &[1, 1, 0, 8]);
        m.clear();
        assert_eq!(m.records(), 0);
        assert_eq!(m.seal(0).len(), HEADER);
    }

    #[test]
    fn appended_records_equal_pushed_ones_and_one_too_long_leaves_no_trace() {
        let mut pushed = Message::new(100, 7);
        let mut appended = Message::new(100, 7);
        let put = |b: &mut [u8], n: usize, v: u8| {
            b[..n].fill(v);
            n
        };
        for (id, n, v) in [(256u16, 10usize, 1u8), (256, 10, 2), (257, 4, 3)] {
            pushed.push(id, &vec![v; n], u32::from(v));
            assert!(appended.append(id, u32::from(v), |b| put(b, n, v)));
        }
        // 48 bytes used: a record of 257 fits up to 52 bytes, one of 256
        // (a new set) up to 48.
        assert!(!appended.append(256, 99, |b| put(b, 49, 9)));
        assert!(!appended.append(257, 99, |b| put(b, 53, 9)));
        assert_eq!(appended.records(), 3);
        assert_eq!(pushed.seal(5).to_vec(), appended.seal(5).to_vec());
        appended.clear();
        assert!(appended.append(258, 1, |b| put(b, 80, 4)));
        assert!(!appended.fits(258, 1));
        assert_eq!(appended.seal(0).len(), 100);
    }

    #[test]
    fn templates_split_over_messages_that_fit() {
        let t = templates(true);
        let one = template_messages(&t, MAX_MESSAGE, 1).unwrap();
        assert_eq!(one.len(), 1);
        let total: usize = t.iter().map(template_len).sum();
        assert_eq!(one[0].len(), HEADER + SET_HEADER + total);
        assert_eq!(set_id(&one[0]), TEMPLATE_SET);
        let small = HEADER + SET_HEADER + template_len(&t[1]) + 8;
        let many = template_messages(&t, small, 1).unwrap();
        assert_eq!(many.len(), 4);
        assert!(many.iter().all(|m| m.len() <= small));
        assert!(template_messages(&t, 40, 1).is_none());
    }
}
