//! DSCP marking by application: once a flow is classified, its later packets
//! carry the verdict in the IP DSCP field so routers can apply QoS (HPTRAC).
//!
//! Contract:
//! - [`DscpMap::load`] reads a TOML file mapping class names (as the model
//!   names them) to DSCP values, either numbers 0..=63 or PHB names (see
//!   [`dscp::parse_phb`]):
//!   ```toml
//!   default = "CS0"        # optional: DSCP of classes not listed and of "unknown"
//!   [classes]
//!   "TLS.YouTube" = "AF41"
//!   DNS = 46
//!   ```
//!   Errors are [`Error::Io`] (cannot read) or [`Error::Config`] naming the
//!   file and the offending key or value. [`DscpMap::resolve`] turns the map
//!   into a table indexed by the model's class numbers; a class name in the
//!   file that the model does not have is an error listing the model's
//!   classes. The key `unknown` is always accepted: it is the DSCP of flows
//!   whose verdict is [`crate::classify::Verdict::UNKNOWN`]
//!   ([`DscpMap::unknown`]).
//! - `None` in the table means "leave the packet unchanged" (no `default`
//!   and the class is not listed).
//! - [`rewrite_dscp`] edits one packet in place (no allocation, never
//!   panics); [`MarkWriter`] writes every packet, marked or not, to a
//!   classic pcap file, copying it once into the writer's own buffer (it is
//!   also the writer of `-w` without `--mark`, which marks nothing).
//! - Which packets get marked is the caller's decision: packets of a flow
//!   after the packet at which its verdict was taken. Only the innermost IP
//!   header (the one the flow is keyed on, `Decoded::ip_offset`) is marked;
//!   tunnel outer headers are left as they are.

pub mod dscp;
pub mod marker;
pub mod pcap_out;

#[cfg(test)]
mod corpus_tests;

pub use dscp::parse_phb;
pub use marker::Marker;
pub use pcap_out::{MarkCounters, MarkWriter};

use std::path::Path;

use crate::error::{Error, Result};

/// Class name → DSCP, as read from a TOML file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DscpMap {
    /// Where the map came from (used in error messages).
    source: String,
    /// DSCP of classes not listed, and of unknown verdicts when `unknown` is
    /// not listed.
    default: Option<u8>,
    /// Listed classes, in file order.
    classes: Vec<(String, u8)>,
}

/// Name of the pseudo-class for flows without a verdict.
pub const UNKNOWN_CLASS: &str = "unknown";

impl DscpMap {
    /// Reads and checks the TOML file at `path`.
    pub fn load(path: &Path) -> Result<DscpMap> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        DscpMap::parse(&path.display().to_string(), &text)
    }

    /// Same as [`DscpMap::load`] over text; `source` names it in errors.
    pub fn parse(source: &str, text: &str) -> Result<DscpMap> {
        let err = |msg: String| Error::file(source, None, msg);
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            Error::file(source, line, e.to_string().trim_end())
        })?;
        let mut map = DscpMap {
            source: source.to_string(),
            default: None,
            classes: Vec::new(),
        };
        for (key, value) in &table {
            match (key.as_str(), value) {
                ("default", v) => {
                    map.default = Some(dscp_value("default", v).map_err(|e| err(e.to_string()))?)
                }
                ("classes", toml::Value::Table(classes)) => {
                    for (name, v) in classes {
                        let d = dscp_value(&format!("classes.\"{name}\""), v)
                            .map_err(|e| err(e.to_string()))?;
                        map.classes.push((name.clone(), d));
                    }
                }
                ("classes", v) => {
                    return Err(err(format!(
                        "`classes` must be a table ([classes]), got {}",
                        v.type_str()
                    )))
                }
                (other, _) => {
                    return Err(err(format!(
                        "unknown key `{other}` (expected `default` and a [classes] table)"
                    )))
                }
            }
        }
        Ok(map)
    }

    /// The DSCP for each class index of a model whose classes are
    /// `class_names` (`None`: leave the packet unchanged). Fails when the
    /// file names a class the model does not have.
    pub fn resolve(&self, class_names: &[String]) -> Result<Vec<Option<u8>>> {
        let missing: Vec<&str> = self
            .classes
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| *n != UNKNOWN_CLASS && !class_names.iter().any(|c| c == n))
            .collect();
        if !missing.is_empty() {
            return Err(Error::file(
                &self.source,
                None,
                format!(
                    "class{} {} not in the model; available classes: {}",
                    if missing.len() == 1 { "" } else { "es" },
                    quoted(missing.iter().copied()),
                    quoted(class_names.iter().map(String::as_str)),
                ),
            ));
        }
        Ok(class_names.iter().map(|c| self.get(c)).collect())
    }

    /// The DSCP for flows whose verdict is unknown: the `unknown` entry if
    /// listed, else `default`.
    pub fn unknown(&self) -> Option<u8> {
        self.get(UNKNOWN_CLASS)
    }

    /// The DSCP for class `name`: its entry, else `default`.
    fn get(&self, name: &str) -> Option<u8> {
        self.classes
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, d)| d)
            .or(self.default)
    }
}

/// A DSCP map's value that is not a DSCP; each names its key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DscpError {
    /// A number outside 0..=63.
    #[error("{key} = {value}: a DSCP number must be in 0..=63")]
    Range {
        /// The key (`default`, `classes."DNS"`).
        key: String,
        /// The number given.
        value: i64,
    },
    /// A string that is no PHB name.
    #[error("{key} = \"{value}\": not a PHB name (CS0-CS7, AF11-AF43, EF, LE, DF) nor a number")]
    Phb {
        /// The key.
        key: String,
        /// The string given.
        value: String,
    },
    /// A table where a DSCP was expected (a class name with a dot).
    #[error(
        "{key}: expected a DSCP number 0..=63 or a PHB name, got a table \
         (quote class names that contain dots: \"TLS.YouTube\" = \"AF41\")"
    )]
    Table {
        /// The key.
        key: String,
    },
    /// A value of another type.
    #[error("{key}: expected a DSCP number 0..=63 or a PHB name, got {ty}")]
    Type {
        /// The key.
        key: String,
        /// The TOML type given.
        ty: &'static str,
    },
}

/// A DSCP given as an integer 0..=63 or a PHB name; `key` names it in errors.
fn dscp_value(key: &str, v: &toml::Value) -> std::result::Result<u8, DscpError> {
    let key = key.to_string();
    match v {
        toml::Value::Integer(n) => u8::try_from(*n)
            .ok()
            .filter(|&d| d <= dscp::MAX_DSCP)
            .ok_or(DscpError::Range { key, value: *n }),
        toml::Value::String(s) => parse_phb(s).ok_or_else(|| DscpError::Phb {
            key,
            value: s.clone(),
        }),
        toml::Value::Table(_) => Err(DscpError::Table { key }),
        other => Err(DscpError::Type {
            key,
            ty: other.type_str(),
        }),
    }
}

fn quoted<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn numbers_and_phb_names_resolve_by_class_index() {
        let map = DscpMap::parse(
            "m.toml",
            "default = \"CS0\"\n[classes]\n\"TLS.YouTube\" = \"AF41\"\nDNS = 46\nunknown = \"le\"\n",
        )
        .unwrap();
        let table = map
            .resolve(&names(&["DNS", "HTTP", "TLS.YouTube"]))
            .unwrap();
        assert_eq!(table, vec![Some(46), Some(0), Some(34)]);
        assert_eq!(map.unknown(), Some(1));
    }

    #[test]
    fn without_default_unlisted_classes_are_left_unchanged() {
        let map = DscpMap::parse("m.toml", "[classes]\nDNS = \"EF\"\n").unwrap();
        assert_eq!(
            map.resolve(&names(&["HTTP", "DNS"])).unwrap(),
            vec![None, Some(46)]
        );
        assert_eq!(map.unknown(), None);
        let empty = DscpMap::parse("e.toml", "").unwrap();
        assert_eq!(empty.resolve(&names(&["A"])).unwrap(), vec![None]);
        let only_default = DscpMap::parse("d.toml", "default = 8").unwrap();
        assert_eq!(only_default.unknown(), Some(8));
    }

    fn err(text: &str) -> String {
        DscpMap::parse("bad.toml", text).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_file_and_the_offending_entry() {
        let e = err("[classes]\nDNS = 64\n");
        assert!(
            e.contains("bad.toml") && e.contains("classes.\"DNS\" = 64"),
            "{e}"
        );
        let e = err("[classes]\nDNS = -1\n");
        assert!(e.contains("classes.\"DNS\" = -1"), "{e}");
        let e = err("default = \"AF44\"\n");
        assert!(e.contains("default = \"AF44\"") && e.contains("PHB"), "{e}");
        let e = err("[classes]\nDNS = 4.5\n");
        assert!(e.contains("classes.\"DNS\"") && e.contains("float"), "{e}");
        let e = err("[classes]\nTLS.YouTube = \"AF41\"\n");
        assert!(e.contains("classes.\"TLS\"") && e.contains("quote"), "{e}");
        let e = err("dfault = 1\n");
        assert!(e.contains("unknown key `dfault`"), "{e}");
        let e = err("classes = 3\n");
        assert!(e.contains("`classes` must be a table"), "{e}");
        let e = err("[classes\n");
        assert!(e.starts_with("bad.toml, line 1: "), "{e}");
    }

    #[test]
    fn a_file_error_carries_the_path_and_the_line() {
        let e = DscpMap::parse("bad.toml", "default = 1\n[classes\n").unwrap_err();
        match &e {
            Error::File { path, line, reason } => {
                assert_eq!(path, Path::new("bad.toml"));
                assert_eq!(*line, Some(2), "{reason}");
            }
            other => panic!("not a file error: {other:?}"),
        }
        assert!(e.to_string().starts_with("bad.toml, line 2: "), "{e}");
        let e = DscpMap::parse("m.toml", "[classes]\nDNS = 64\n").unwrap_err();
        assert!(
            matches!(&e, Error::File { path, line: None, reason }
                if path == Path::new("m.toml") && reason.starts_with("classes.\"DNS\" = 64")),
            "{e:?}"
        );
        let v = toml::Value::Integer(64);
        assert_eq!(
            dscp_value("default", &v),
            Err(DscpError::Range {
                key: "default".into(),
                value: 64
            })
        );
    }

    #[test]
    fn classes_missing_from_the_model_are_listed_with_the_available_ones() {
        let map = DscpMap::parse("m.toml", "[classes]\nDNS = 1\nSkype = 2\nZoom = 3\n").unwrap();
        let e = map
            .resolve(&names(&["DNS", "HTTP"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("m.toml"), "{e}");
        assert!(
            e.contains("classes \"Skype\", \"Zoom\" not in the model"),
            "{e}"
        );
        assert!(e.contains("available classes: \"DNS\", \"HTTP\""), "{e}");
    }

    #[test]
    fn load_reads_files_and_names_missing_ones() {
        let dir = std::env::temp_dir().join(format!("earlybird-mark-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("dscp.toml");
        std::fs::write(&path, "[classes]\nDNS = \"CS5\"\n").unwrap();
        let map = DscpMap::load(&path).unwrap();
        assert_eq!(map.resolve(&names(&["DNS"])).unwrap(), vec![Some(40)]);
        let missing = dir.join("nope.toml");
        let e = DscpMap::load(&missing).unwrap_err().to_string();
        assert!(e.contains("nope.toml"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
