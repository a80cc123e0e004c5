//! The category of a model class that is a protocol (the default model's
//! classes are nDPI's master protocols: `TLS`, `WhatsApp`, `NTP`, …), so
//! a record labelled by the model carries a category too.
//!
//! Contract: [`of`] looks a class up in the shipped table
//! `models/class_categories.txt` (written by `scripts/class_categories.py`
//! from the labels the default model was trained on: the category of the
//! flows of each protocol that carry no application on top of it). The
//! table is plain text, `CLASS CATEGORY` a line, `#` starts a comment;
//! classes match exactly (case included). A class the table does not name
//! has no category (`None`). Pure lookups over a `'static` text; a line
//! that is not two words is skipped (a unit test holds the shipped table to
//! the format).

use rustc_hash::FxHashMap as HashMap;
use std::sync::OnceLock;

/// The shipped table (`models/class_categories.txt`).
pub const TABLE: &str = include_str!("../../../../models/class_categories.txt");

/// The (class, category) entries of `text`, in order, and the lines that
/// are not entries nor comments or blank (1-based).
fn entries(text: &str) -> (Vec<(&str, &str)>, Vec<usize>) {
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (None, _, _) => {}
            (Some(class), Some(cat), None) => out.push((class, cat)),
            _ => bad.push(i + 1),
        }
    }
    (out, bad)
}

/// The category of model class `class` in the shipped table, if it names
/// one (see the module docs). The table is read once per process: a
/// model's classes are looked up one by one when a run starts.
pub fn of(class: &str) -> Option<&'static str> {
    static BY_CLASS: OnceLock<HashMap<&'static str, &'static str>> = OnceLock::new();
    let by_class = BY_CLASS.get_or_init(|| {
        let mut m = HashMap::default();
        for (c, cat) in entries(TABLE).0 {
            // The first line naming a class wins, as a scan would find it.
            m.entry(c).or_insert(cat);
        }
        m
    });
    by_class.get(class).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_table_reads_whole_and_names_each_class_once() {
        let (e, bad) = entries(TABLE);
        assert!(bad.is_empty(), "malformed lines {bad:?}");
        assert!(e.len() > 50, "{} entries", e.len());
        let mut classes: Vec<&str> = e.iter().map(|(c, _)| *c).collect();
        classes.sort_unstable();
        classes.dedup();
        assert_eq!(classes.len(), e.len(), "a class named twice");
    }

    #[test]
    fn classes_get_their_protocols_category() {
        assert_eq!(of("TLS"), Some("Web"));
        assert_eq!(of("DNS"), Some("Network"));
        assert_eq!(of("Service_Location_Protocol"), Some("RPC"));
        assert_eq!(of("tls"), None);
        assert_eq!(of("NoSuchClass"), None);
    }

    #[test]
    fn malformed_lines_are_found() {
        let (e, bad) = entries("# c\nA B\n\nC\nD E F\n G H # x\n");
        assert_eq!(e, [("A", "B"), ("G", "H")]);
        assert_eq!(bad, [4, 5]);
    }
}
