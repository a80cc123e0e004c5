//! The service map: host names (TLS SNI, QUIC SNI, HTTP Host, DNS query
//! names) to an application and its category.
//!
//! Contract: a map is text in the format of `docs/SERVICES.md`: one entry
//! a line, `NAME APP CATEGORY` separated by blanks, where `NAME` is an
//! exact name (`teams.microsoft.com`) or a domain suffix written with a
//! leading `*.` (`*.sharepoint.com`: the domain itself and every name
//! under it); `#` starts a comment; a line `@source TEXT` names where the
//! entries after it come from (the shipped map has one before every group;
//! a user's map may leave it out). Names are matched without regard to
//! case, without a final dot and without an HTTP Host's `:port`. The most
//! specific entry wins: an exact entry, then the longest suffix; among
//! maps, the one added last wins for the same name. Categories are the
//! classifier's category labels ([`CATEGORIES`]); an unknown category,
//! a malformed line, or a suffix that is itself a public suffix of the
//! list's ICANN section (`*.co.uk` would claim a whole country's names; a
//! company's own entries of the private section, as
//! `githubusercontent.com`, are fine) is an error naming the map and
//! line. The registered domain of a name (`example.co.uk` for
//! `www.example.co.uk`) comes from the Public Suffix List, read from
//! Debian's `publicsuffix` package ([`PSL_PATH`]) or any file in its
//! format; without a list, names are matched but no registered domain is
//! known and suffixes are not checked. Nothing here panics on any input.

use std::collections::HashMap;
use std::path::Path;

use publicsuffix::{List, Psl, Type};

/// Where Debian's `publicsuffix` package puts the list.
pub const PSL_PATH: &str = "/usr/share/publicsuffix/public_suffix_list.dat";

/// The map shipped with earlybird (`models/services.txt`).
pub const DEFAULT_MAP: &str = include_str!("../../../../models/services.txt");

/// The categories a map may name: the classifier's category labels (the
/// categories of the labelled corpus, nDPI's names).
pub const CATEGORIES: &[&str] = &[
    "Web",
    "Network",
    "RPC",
    "Chat",
    "VPN",
    "System",
    "VoIP",
    "Game",
    "Cloud",
    "SocialNetwork",
    "Download",
    "Database",
    "Media",
    "DataTransfer",
    "Collaborative",
    "Video",
    "RemoteAccess",
    "Streaming",
    "Email",
    "Advertisement",
    "Music",
    "VirtAssistant",
    "ConnCheck",
    "SoftwareUpdate",
    "Shopping",
];

/// A map that does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("service map {origin}, line {line}: {what}")]
pub struct MapError {
    /// The map (a file name, or `built-in`).
    pub origin: String,
    /// Line number, from 1.
    pub line: usize,
    /// What is wrong.
    pub what: String,
}

/// Where an entry came from: its map and its `@source` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The map.
    pub map: String,
    /// The `@source` text in force at the entry (empty when none).
    pub source: String,
}

#[derive(Debug, Clone)]
struct Entry {
    app: String,
    category: &'static str,
    origin: usize,
}

/// Layered service maps and the Public Suffix List (see the module docs).
#[derive(Default)]
pub struct Services {
    exact: HashMap<String, Entry>,
    suffix: HashMap<String, Entry>,
    origins: Vec<Origin>,
    psl: Option<List>,
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("exact", &self.exact.len())
            .field("suffix", &self.suffix.len())
            .field("psl", &self.psl.is_some())
            .finish()
    }
}

/// A name as matched: lower case, no final dot, no `:port`.
pub fn normalize(name: &str) -> String {
    let mut n = name.trim();
    if let Some((host, port)) = n.rsplit_once(':') {
        // A Host header's port (not an IPv6 address's colons).
        if !host.contains(':') && !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) {
            n = host;
        }
    }
    n.trim_end_matches('.').to_ascii_lowercase()
}

impl Services {
    /// No map, no list.
    pub fn new() -> Services {
        Services::default()
    }

    /// The shipped map, with Debian's list when it is installed.
    pub fn builtin() -> Result<Services, MapError> {
        let mut s = Services::new();
        if let Ok(text) = std::fs::read_to_string(PSL_PATH) {
            s.set_public_suffixes(&text, PSL_PATH)?;
        }
        s.add(DEFAULT_MAP, "built-in")?;
        Ok(s)
    }

    /// Uses the Public Suffix List `text` (its file format) for the
    /// registered domains and the suffix check of the maps added after.
    pub fn set_public_suffixes(&mut self, text: &str, origin: &str) -> Result<(), MapError> {
        let list: List = text.parse().map_err(|e| MapError {
            origin: origin.to_string(),
            line: 0,
            what: format!("not a public suffix list: {e}"),
        })?;
        self.psl = Some(list);
        Ok(())
    }

    /// Adds the map `text` (its entries win over those added before);
    /// `origin` names it in errors.
    pub fn add(&mut self, text: &str, origin: &str) -> Result<(), MapError> {
        let fail = |line: usize, what: String| MapError {
            origin: origin.to_string(),
            line,
            what,
        };
        let mut source = String::new();
        let mut parsed = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            if let Some(rest) = line.strip_prefix("@source") {
                source = rest.trim().to_string();
                if source.is_empty() {
                    return Err(fail(i + 1, "@source without text".into()));
                }
                continue;
            }
            let cols: Vec<&str> = line.split_whitespace().collect();
            let [name, app, category] = cols[..] else {
                return Err(fail(
                    i + 1,
                    format!("expected NAME APP CATEGORY, found {} fields", cols.len()),
                ));
            };
            let Some(category) = CATEGORIES.iter().find(|c| **c == category) else {
                return Err(fail(
                    i + 1,
                    format!(
                        "unknown category {category:?} (known: {})",
                        CATEGORIES.join(", ")
                    ),
                ));
            };
            let (suffix, bare) = match name.strip_prefix("*.") {
                Some(b) => (true, b),
                None => (false, name),
            };
            let bare = normalize(bare);
            if bare.is_empty()
                || bare.contains('*')
                || !bare
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
            {
                return Err(fail(i + 1, format!("not a host name: {name:?}")));
            }
            if suffix && self.is_public_suffix(&bare) {
                return Err(fail(
                    i + 1,
                    format!("{name:?} is a public suffix: it would claim every name under it"),
                ));
            }
            parsed.push((suffix, bare, app.to_string(), *category, source.clone()));
        }
        for (suffix, bare, app, category, source) in parsed {
            let origin = Origin {
                map: origin.to_string(),
                source,
            };
            let o = match self.origins.iter().position(|x| *x == origin) {
                Some(o) => o,
                None => {
                    self.origins.push(origin);
                    self.origins.len() - 1
                }
            };
            let e = Entry {
                app,
                category,
                origin: o,
            };
            if suffix {
                self.suffix.insert(bare, e);
            } else {
                self.exact.insert(bare, e);
            }
        }
        Ok(())
    }

    /// Adds the map file at `path` (see [`Services::add`]).
    pub fn add_file(&mut self, path: &Path) -> Result<(), MapError> {
        let text = std::fs::read_to_string(path).map_err(|e| MapError {
            origin: path.display().to_string(),
            line: 0,
            what: e.to_string(),
        })?;
        self.add(&text, &path.display().to_string())
    }

    fn is_public_suffix(&self, name: &str) -> bool {
        let Some(psl) = &self.psl else { return false };
        psl.suffix(name.as_bytes())
            .is_some_and(|s| s.typ() == Some(Type::Icann) && s.as_bytes() == name.as_bytes())
    }

    /// The registered domain of `name` (one label above its public
    /// suffix), when a list is loaded and the name has one.
    pub fn registered_domain(&self, name: &str) -> Option<String> {
        let n = normalize(name);
        let psl = self.psl.as_ref()?;
        let d = psl.domain(n.as_bytes())?;
        if !d.suffix().is_known() {
            return None;
        }
        Some(String::from_utf8_lossy(d.as_bytes()).into_owned())
    }

    fn entry(&self, name: &str) -> Option<&Entry> {
        let n = normalize(name);
        if let Some(e) = self.exact.get(&n) {
            return Some(e);
        }
        let mut rest = n.as_str();
        loop {
            if let Some(e) = self.suffix.get(rest) {
                return Some(e);
            }
            rest = rest.split_once('.')?.1;
        }
    }

    /// The (application, category) of `name`, when a map knows it.
    pub fn lookup(&self, name: &str) -> Option<(&str, &'static str)> {
        self.entry(name).map(|e| (e.app.as_str(), e.category))
    }

    /// Where the entry that gives `name`'s label comes from.
    pub fn origin(&self, name: &str) -> Option<&Origin> {
        self.entry(name).map(|e| &self.origins[e.origin])
    }

    /// Entries (exact and suffix) of all maps added.
    pub fn len(&self) -> usize {
        self.exact.len() + self.suffix.len()
    }

    /// True when no map added an entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every (application, category) a name can be labelled with, sorted,
    /// each once.
    pub fn apps(&self) -> Vec<(&str, &'static str)> {
        let mut v: Vec<(&str, &'static str)> = (self.exact.values())
            .chain(self.suffix.values())
            .map(|e| (e.app.as_str(), e.category))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// The label of a name no map knows: its protocol (`TLS`, `QUIC`, `HTTP`,
/// `DNS`, `SSH`), given by the field it was read from.
pub fn protocol_label(field: &str) -> Option<&'static str> {
    Some(match field {
        "sni" => "TLS",
        "quic" => "QUIC",
        "http" | "http_host" => "HTTP",
        "dns" | "dns_query" | "dns_name" => "DNS",
        "ssh" | "ssh_client" | "ssh_server" => "SSH",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PSL: &str =
        "// ===BEGIN ICANN DOMAINS===\ncom\norg\nuk\nco.uk\n// ===END ICANN DOMAINS===\n\
        // ===BEGIN PRIVATE DOMAINS===\nusercontent.example.com\n// ===END PRIVATE DOMAINS===\n";

    fn with_psl() -> Services {
        let mut s = Services::new();
        s.set_public_suffixes(PSL, "test").unwrap();
        s
    }

    #[test]
    fn exact_then_longest_suffix() {
        let mut s = with_psl();
        s.add(
            "@source a test\n*.example.com Example Web\n*.video.example.com ExampleVideo Video # longer\nlogin.example.com ExampleLogin Cloud\n",
            "t",
        )
        .unwrap();
        assert_eq!(s.lookup("example.com"), Some(("Example", "Web")));
        assert_eq!(s.lookup("a.b.example.com"), Some(("Example", "Web")));
        assert_eq!(
            s.lookup("x.video.example.com"),
            Some(("ExampleVideo", "Video"))
        );
        assert_eq!(
            s.lookup("LOGIN.Example.com."),
            Some(("ExampleLogin", "Cloud"))
        );
        assert_eq!(
            s.lookup("login.example.com:8443"),
            Some(("ExampleLogin", "Cloud"))
        );
        assert_eq!(s.lookup("notexample.com"), None);
        assert_eq!(s.lookup("com"), None);
        assert_eq!(s.origin("a.example.com").unwrap().source, "a test");
    }

    #[test]
    fn a_later_map_wins() {
        let mut s = with_psl();
        s.add("*.example.com Example Web\n", "first").unwrap();
        s.add("*.example.com Mine Cloud\n", "mine").unwrap();
        assert_eq!(s.lookup("www.example.com"), Some(("Mine", "Cloud")));
        assert_eq!(s.origin("www.example.com").unwrap().map, "mine");
    }

    #[test]
    fn bad_maps_name_their_line() {
        let mut s = with_psl();
        let e = s
            .add("# ok\n\n*.a.com A Web\nb.com B Nonsense\n", "m.txt")
            .unwrap_err();
        assert_eq!((e.origin.as_str(), e.line), ("m.txt", 4));
        assert!(e.what.contains("unknown category"), "{e}");
        let e = s.add("x.com OnlyTwo\n", "m").unwrap_err();
        assert!(e.what.contains("found 2 fields"), "{e}");
        let e = s.add("*.co.uk Everything Web\n", "m").unwrap_err();
        assert!(e.to_string().contains("public suffix"), "{e}");
        // A company's own suffix of the private section is fine.
        s.add("*.usercontent.example.com Example Cloud\n", "m")
            .unwrap();
        let e = s.add("a*b.com A Web\n", "m").unwrap_err();
        assert!(e.what.contains("not a host name"), "{e}");
        // A failed map adds nothing.
        assert!(s.lookup("a.com").is_none());
        assert_eq!(
            s.lookup("x.usercontent.example.com"),
            Some(("Example", "Cloud"))
        );
    }

    #[test]
    fn registered_domains() {
        let s = with_psl();
        assert_eq!(
            s.registered_domain("www.example.co.uk").as_deref(),
            Some("example.co.uk")
        );
        assert_eq!(
            s.registered_domain("a.b.example.com:80").as_deref(),
            Some("example.com")
        );
        assert_eq!(s.registered_domain("co.uk"), None);
        assert_eq!(s.registered_domain("host.unknowntld"), None);
        assert_eq!(Services::new().registered_domain("example.com"), None);
    }

    #[test]
    fn the_shipped_map_reads_and_names_its_sources() {
        let mut s = Services::new();
        if let Ok(text) = std::fs::read_to_string(PSL_PATH) {
            s.set_public_suffixes(&text, PSL_PATH).unwrap();
            assert_eq!(
                s.registered_domain("www.bbc.co.uk").as_deref(),
                Some("bbc.co.uk")
            );
        }
        s.add(DEFAULT_MAP, "built-in").unwrap();
        assert!(s.len() > 20);
        // Every entry follows an @source line.
        let mut source = false;
        for line in DEFAULT_MAP.lines() {
            let l = line.split('#').next().unwrap().trim();
            if l.starts_with("@source") {
                source = true;
            } else if !l.is_empty() {
                assert!(source, "no @source before {l:?}");
            }
        }
        assert_eq!(
            s.lookup("teams.microsoft.com").map(|x| x.1),
            Some("Collaborative")
        );
        assert_eq!(
            s.lookup("swcdn.apple.com").map(|x| x.1),
            Some("SoftwareUpdate")
        );
    }

    #[test]
    fn names_no_map_knows_get_their_protocol() {
        assert_eq!(protocol_label("sni"), Some("TLS"));
        assert_eq!(protocol_label("dns_query"), Some("DNS"));
        assert_eq!(protocol_label("nothing"), None);
    }

    #[test]
    fn normalizing() {
        assert_eq!(normalize(" WWW.Example.ORG. "), "www.example.org");
        assert_eq!(normalize("host:8080"), "host");
        assert_eq!(normalize("[2001:db8::1]:80"), "[2001:db8::1]:80");
    }
}
