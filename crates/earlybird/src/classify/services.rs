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
//! known and suffixes are not checked. A list given as text is checked
//! for its format when it is set; the installed one ([`Services::builtin`])
//! is read and checked only when it is first needed: when a map is added
//! ([`Services::add`]) or a registered domain asked for (the shipped map
//! is not checked at run time: its unit test checks it against the
//! installed list, so a run that adds no map of its own never reads the
//! list). A map's suffixes are looked up in the list's rules for their
//! top-level domains alone, and the whole list is built into a tree only
//! when a registered domain is first asked for (a run's maps use a few of
//! its 10,000 rules). Nothing here panics on any input.

// The maps are built in every run before its first packet and hold no
// name from the traffic (a lookup inserts nothing): FxHash, not SipHash.
use rustc_hash::FxHashMap as HashMap;
use std::path::Path;
use std::sync::OnceLock;

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
    psl: Option<SuffixList>,
    /// The installed list, not read yet: read when first needed
    /// ([`Services::builtin`]).
    installed: Option<&'static str>,
    /// The installed list as read for a registered domain (which cannot
    /// set `psl`); `None` in it: missing or not a list.
    read_late: OnceLock<Option<SuffixList>>,
}

/// The Public Suffix List as read: its text, checked, and the whole list
/// as a tree once a registered domain was asked for.
struct SuffixList {
    text: String,
    whole: OnceLock<Option<List>>,
}

/// A rule line of the list's format (as the `publicsuffix` crate reads
/// it): outside the comments, its first word; `None` for the section
/// markers, comments and blank lines.
fn rule_of(line: &str) -> Option<&str> {
    if line.starts_with("//") {
        return None;
    }
    line.split_whitespace().next()
}

/// The line opens a section of the list (ICANN's or the private one).
fn opens_section(line: &str) -> bool {
    // (A byte search first: most lines hold no `B`.)
    line.contains('B')
        && (line.contains("BEGIN ICANN DOMAINS") || line.contains("BEGIN PRIVATE DOMAINS"))
}

/// The top-level label of a rule or name (`uk` of `!city.kawasaki.jp`'s
/// `jp`, of `co.uk`'s `uk`).
fn top_label(rule: &str) -> &str {
    rule.rsplit('.').next().unwrap_or(rule)
}

/// Why `text` is not a list in the format the `publicsuffix` crate reads
/// (no rule in a section, an exception rule of one label, an empty label),
/// checked without building its tree.
fn list_error(text: &str) -> Option<String> {
    let mut in_section = false;
    let mut rules = 0usize;
    for line in text.lines() {
        if opens_section(line) {
            in_section = true;
            continue;
        }
        let Some(rule) = rule_of(line) else { continue };
        if !in_section {
            continue;
        }
        let bare = match rule.strip_prefix('!') {
            Some(b) if !b.contains('.') => {
                return Some(format!("exception rule {rule:?} at the first label"))
            }
            Some(b) => b,
            None => rule,
        };
        if bare.split('.').any(str::is_empty) {
            return Some(format!("empty label in rule {rule:?}"));
        }
        rules += 1;
    }
    (rules == 0).then(|| "no rule in an ICANN or private section".to_string())
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

    /// The shipped map, with Debian's list when it is installed (read
    /// when first needed: see the module docs).
    pub fn builtin() -> Result<Services, MapError> {
        let mut s = Services::new();
        s.insert(DEFAULT_MAP, "built-in", false)?;
        s.installed = Some(PSL_PATH);
        Ok(s)
    }

    /// Reads and checks the installed list if it is still unread; a list
    /// that does not read is an error naming its file, a missing file
    /// means no list.
    fn read_installed(&mut self) -> Result<(), MapError> {
        if let Some(path) = self.installed.take() {
            match self.read_late.take() {
                Some(Some(list)) => self.psl = Some(list),
                // Unread, or read and refused: read again to say why.
                _ => {
                    if let Ok(text) = std::fs::read_to_string(path) {
                        self.set_public_suffixes(&text, path)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The list in use: the one set or read, else the installed one read
    /// now (`None` when it is missing or does not read).
    fn list(&self) -> Option<&SuffixList> {
        if let Some(psl) = &self.psl {
            return Some(psl);
        }
        let path = self.installed?;
        let late = self.read_late.get_or_init(|| {
            let text = std::fs::read_to_string(path).ok()?;
            list_error(&text).is_none().then(|| SuffixList {
                text,
                whole: OnceLock::new(),
            })
        });
        late.as_ref()
    }

    /// Uses the Public Suffix List `text` (its file format) for the
    /// registered domains and the suffix check of the maps added after.
    pub fn set_public_suffixes(&mut self, text: &str, origin: &str) -> Result<(), MapError> {
        if let Some(e) = list_error(text) {
            return Err(MapError {
                origin: origin.to_string(),
                line: 0,
                what: format!("not a public suffix list: {e}"),
            });
        }
        self.psl = Some(SuffixList {
            text: text.to_string(),
            whole: OnceLock::new(),
        });
        self.installed = None;
        self.read_late = OnceLock::new();
        Ok(())
    }

    /// The list's rules whose top-level label is one of `tops`, as a tree
    /// (the rules that can match a name under those labels, sections
    /// kept), or `None` without a list or such a rule.
    fn rules_under(&self, tops: &[&str]) -> Option<List> {
        let psl = self.psl.as_ref()?;
        let mut kept = String::new();
        for line in psl.text.lines() {
            let keep =
                opens_section(line) || rule_of(line).is_some_and(|r| tops.contains(&top_label(r)));
            if keep {
                kept.push_str(line);
                kept.push('\n');
            }
        }
        kept.parse().ok()
    }

    /// Adds the map `text` (its entries win over those added before);
    /// `origin` names it in errors (so does a list read now that does not
    /// read: see the module docs).
    pub fn add(&mut self, text: &str, origin: &str) -> Result<(), MapError> {
        self.read_installed()?;
        self.insert(text, origin, true)
    }

    /// [`Services::add`] with the list read as it is, its suffixes checked
    /// against it when `check`.
    fn insert(&mut self, text: &str, origin: &str, check: bool) -> Result<(), MapError> {
        let fail = |line: usize, what: String| MapError {
            origin: origin.to_string(),
            line,
            what,
        };
        let mut source = String::new();
        let mut parsed = Vec::new();
        // The first line that does not read; a suffix that is a public
        // suffix on an earlier line is reported before it (below).
        let mut bad = None;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            if let Some(rest) = line.strip_prefix("@source") {
                source = rest.trim().to_string();
                if source.is_empty() {
                    bad = Some(fail(i + 1, "@source without text".into()));
                    break;
                }
                continue;
            }
            let cols: Vec<&str> = line.split_whitespace().collect();
            let [name, app, category] = cols[..] else {
                bad = Some(fail(
                    i + 1,
                    format!("expected NAME APP CATEGORY, found {} fields", cols.len()),
                ));
                break;
            };
            let Some(category) = CATEGORIES.iter().find(|c| **c == category) else {
                bad = Some(fail(
                    i + 1,
                    format!(
                        "unknown category {category:?} (known: {})",
                        CATEGORIES.join(", ")
                    ),
                ));
                break;
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
                bad = Some(fail(i + 1, format!("not a host name: {name:?}")));
                break;
            }
            parsed.push((
                i + 1,
                name,
                suffix,
                bare,
                app.to_string(),
                *category,
                source.clone(),
            ));
        }
        // Suffixes that are public suffixes themselves, looked up in the
        // list's rules for their top-level labels.
        let mut tops: Vec<&str> = (parsed.iter())
            .filter(|p| p.2)
            .map(|p| top_label(&p.3))
            .collect();
        tops.sort_unstable();
        tops.dedup();
        let rules = if check { self.rules_under(&tops) } else { None };
        if let Some(rules) = rules {
            for (line, name, suffix, bare, ..) in &parsed {
                if *suffix && is_icann_suffix(&rules, bare) {
                    return Err(fail(
                        *line,
                        format!("{name:?} is a public suffix: it would claim every name under it"),
                    ));
                }
            }
        }
        if let Some(e) = bad {
            return Err(e);
        }
        for (_, _, suffix, bare, app, category, source) in parsed {
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

    /// The registered domain of `name` (one label above its public
    /// suffix), when a list is loaded and the name has one.
    pub fn registered_domain(&self, name: &str) -> Option<String> {
        let n = normalize(name);
        let psl = self.list()?;
        let whole = psl.whole.get_or_init(|| psl.text.parse().ok()).as_ref()?;
        let d = whole.domain(n.as_bytes())?;
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

/// `name` is itself a public suffix of the ICANN section of `rules`.
fn is_icann_suffix(rules: &List, name: &str) -> bool {
    rules
        .suffix(name.as_bytes())
        .is_some_and(|s| s.typ() == Some(Type::Icann) && s.as_bytes() == name.as_bytes())
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
    fn wildcard_and_exception_rules_make_public_suffixes() {
        let mut s = Services::new();
        let list =
            "// ===BEGIN ICANN DOMAINS===\nck\n*.ck\n!www.ck\ncom\n// ===END ICANN DOMAINS===\n";
        s.set_public_suffixes(list, "test").unwrap();
        // *.ck: every name one label under ck is a public suffix, but
        // www.ck (the exception).
        let e = s
            .add("*.example.com E Web\n*.foo.ck F Web\n", "m")
            .unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        s.add("*.www.ck W Web\n*.a.foo.ck A Web\n", "m").unwrap();
        assert_eq!(s.lookup("x.www.ck"), Some(("W", "Web")));
        // A suffix error on a line before a malformed one is the one told.
        let e = s.add("*.ck C Web\nx.com X Nonsense\n", "m").unwrap_err();
        assert_eq!(e.line, 1, "{e}");
        let e = s
            .add("a.com A Web\nx.com X Nonsense\n*.ck C Web\n", "m")
            .unwrap_err();
        assert_eq!(e.line, 2, "{e}");
    }

    #[test]
    fn lists_that_do_not_read_are_refused() {
        let mut s = Services::new();
        for bad in [
            "",
            "com\n",
            "// ===BEGIN ICANN DOMAINS===\n!ck\n",
            "// ===BEGIN ICANN DOMAINS===\na..b\n",
        ] {
            let e = s.set_public_suffixes(bad, "l").unwrap_err();
            assert!(e.what.contains("not a public suffix list"), "{e}");
            // The crate refuses them too.
            assert!(bad.parse::<List>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_rules_of_a_top_label_decide_as_the_whole_list() {
        // Debian's list when installed: every rule's name, its parent and
        // a name under it, decided with the rules of their top-level
        // label alone and with the whole list.
        let Ok(text) = std::fs::read_to_string(PSL_PATH) else {
            return;
        };
        let whole: List = text.parse().unwrap();
        let mut s = Services::new();
        s.set_public_suffixes(&text, PSL_PATH).unwrap();
        let mut names = Vec::new();
        for line in text.lines() {
            let Some(rule) = rule_of(line) else { continue };
            let bare = rule.trim_start_matches('!').trim_start_matches("*.");
            names.push(bare.to_string());
            names.push(format!("x.{bare}"));
            if let Some((_, parent)) = bare.split_once('.') {
                names.push(parent.to_string());
            }
        }
        let (mut checked, mut public) = (0, 0);
        for chunk in names.chunks(400) {
            let mut tops: Vec<&str> = chunk.iter().map(|n| top_label(n)).collect();
            tops.sort_unstable();
            tops.dedup();
            let rules = s.rules_under(&tops).unwrap();
            for n in chunk {
                let want = is_icann_suffix(&whole, n);
                assert_eq!(is_icann_suffix(&rules, n), want, "{n}");
                checked += 1;
                public += usize::from(want);
            }
        }
        assert!(checked > 10_000 && public > 5_000, "{checked} {public}");
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
        // The shipped map's suffixes are checked here, against the
        // installed list, rather than at every run (`Services::builtin`).
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
    fn the_installed_list_is_read_only_when_needed() {
        let mut s = Services::builtin().unwrap();
        // The shipped map alone: the list is not read.
        assert!(s.psl.is_none() && s.installed == Some(PSL_PATH));
        let installed = std::fs::read_to_string(PSL_PATH).is_ok();
        // A registered domain reads it (without keeping it as set).
        assert_eq!(
            s.registered_domain("www.bbc.co.uk").is_some(),
            installed,
            "{s:?}"
        );
        // A map of one's own reads it and is checked against it.
        s.add("*.example.com Example Web\n", "m").unwrap();
        assert!(s.installed.is_none());
        assert_eq!(s.psl.is_some(), installed);
        if installed {
            let e = s.add("*.co.uk Everything Web\n", "m").unwrap_err();
            assert!(e.what.contains("public suffix"), "{e}");
        }
        assert_eq!(s.lookup("www.example.com"), Some(("Example", "Web")));
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
