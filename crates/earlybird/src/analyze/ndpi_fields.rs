//! The name and record fields of the `ndpi` analyzer (`ndpi.rs`), compiled
//! in every build so the field reference (`docs/RECORD_FIELDS.md`) is the
//! same with and without the `ndpi` feature.
//!
//! Contract: constants only; `ndpi.rs` uses them as its `NAME`, `ABOUT`
//! and `FIELDS`.

use crate::schema::{Field, FieldType};

/// `--analyzer ndpi`.
pub const NAME: &str = "ndpi";
/// One line for `--help` and the field reference.
pub const ABOUT: &str = "nDPI's application, category and confidence per flow (libndpi)";
/// The cargo feature that builds it.
pub const FEATURE: &str = "ndpi";
/// The record fields, in order.
pub const FIELDS: &[Field] = &[
    Field::new(
        "ndpi_app_label",
        FieldType::Str,
        "",
        "nDPI's verdict as ndpiReader prints it: MASTER.APP (e.g. TLS.Google) or one protocol (DNS); Unknown when nDPI found nothing",
    ),
    Field::new(
        "ndpi_master_proto",
        FieldType::Str,
        "",
        "nDPI's master protocol (e.g. TLS; the application itself when there is no master)",
    ),
    Field::new(
        "ndpi_app_proto",
        FieldType::Str,
        "",
        "nDPI's application protocol (e.g. Google; the master when nDPI named only that)",
    ),
    Field::new(
        "ndpi_category",
        FieldType::Str,
        "",
        "nDPI's category of the application (e.g. Web, Media)",
    ),
    Field::new(
        "ndpi_confidence",
        FieldType::Str,
        "",
        "How nDPI decided: DPI, DPI (cache), Match by port, Match by IP, Unknown, …",
    ),
    Field::new(
        "ndpi_packets",
        FieldType::U64,
        "packets",
        "Packets of the flow shown to nDPI",
    ),
];
