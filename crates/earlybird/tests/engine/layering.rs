//! The layering rule of `docs/ARCHITECTURE.md` ("Layers"), checked on the
//! code: folders import each other one way only.
//!
//! The test reads the table of that section (layer, folders, may import)
//! from the document itself, so the rule and the check cannot drift apart.
//! It then walks the crate's module tree from `src/lib.rs`, strips comments
//! and string literals, and finds every reference to a top-level module of
//! the crate: `crate::X`, `use crate::{X, …}`, a `super::…::X` that climbs
//! to the crate root, and `crate::Name` where `Name` is re-exported by
//! `lib.rs`. Each reference from a folder to another folder must point to a
//! layer that the folder's row allows, all of them below its own; a failure
//! names the file, the line and the forbidden edge. Unit tests
//! (`#[cfg(test)]` items, modules and files) are left out, as the
//! integration tests are: they may use any folder. `lib.rs` (the root and
//! its re-exports) is outside the table.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One row of the table: a layer, its folders and the layers they may use.
#[derive(Debug)]
struct Layer {
    number: u32,
    folders: Vec<String>,
    may_import: BTreeSet<u32>,
}

/// Parses the "Layers" table of the architecture document.
fn layers(doc: &str) -> Result<Vec<Layer>, String> {
    let section = format!("\n{doc}");
    let section = section
        .split("\n## ")
        .find(|s| s.starts_with("Layers"))
        .ok_or("docs/ARCHITECTURE.md has no \"## Layers\" section")?;
    let rows: Vec<Vec<String>> = section
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect();
    let header = rows.first().ok_or("the Layers section has no table")?;
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h.eq_ignore_ascii_case(name))
            .ok_or(format!("the Layers table has no column {name:?}"))
    };
    let (c_layer, c_folders, c_may) = (col("Layer")?, col("Folders")?, col("May import")?);
    let mut out = Vec::new();
    for row in rows.iter().skip(1) {
        if row
            .iter()
            .all(|c| c.chars().all(|ch| matches!(ch, '-' | ':')))
        {
            continue; // the separator row
        }
        let cell = |i: usize| row.get(i).map(String::as_str).unwrap_or("");
        let number: u32 = cell(c_layer)
            .parse()
            .map_err(|_| format!("layer number {:?} in row {row:?}", cell(c_layer)))?;
        let folders: Vec<String> = cell(c_folders)
            .split(',')
            .map(|f| f.trim().trim_matches('`').trim_end_matches('/').to_string())
            .filter(|f| !f.is_empty())
            .collect();
        let may_import = layer_set(cell(c_may))?;
        if let Some(&bad) = may_import.iter().find(|&&l| l >= number) {
            return Err(format!(
                "layer {number} may import layer {bad}: a layer may only import layers below it"
            ));
        }
        out.push(Layer {
            number,
            folders,
            may_import,
        });
    }
    if out.is_empty() {
        return Err("the Layers table has no rows".into());
    }
    Ok(out)
}

/// `—` (nothing), or layer numbers and ranges: `0`, `0–4`, `0-4, 6`.
fn layer_set(cell: &str) -> Result<BTreeSet<u32>, String> {
    let mut set = BTreeSet::new();
    let cell = cell.trim();
    if matches!(cell, "" | "—" | "-" | "none") {
        return Ok(set);
    }
    for part in cell.split(',') {
        let part = part.trim();
        let num = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| format!("\"may import\" cell {cell:?}: {s:?} is not a layer"))
        };
        match part.split_once(['–', '-']) {
            Some((a, b)) => set.extend(num(a)?..=num(b)?),
            None => {
                set.insert(num(part)?);
            }
        }
    }
    Ok(set)
}

/// The source with comments and the contents of string and character
/// literals blanked out (same length, newlines kept), so that byte offsets
/// and line numbers still match the original.
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let g = |j: usize| c.get(j).copied().unwrap_or('\0');
    let mut i = 0;
    while i < c.len() {
        let ident_before = i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_');
        if g(i) == '/' && g(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if g(i) == '/' && g(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && g(i + 1) == '*' {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && g(i + 1) == '/' {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if !ident_before && (g(i) == 'r' || (g(i) == 'b' && g(i + 1) == 'r')) && {
            let s = if g(i) == 'b' { 2 } else { 1 };
            let mut h = 0;
            while g(i + s + h) == '#' {
                h += 1;
            }
            g(i + s + h) == '"'
        } {
            // Raw string: r"…", r#"…"#, br#"…"#.
            let s = if g(i) == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while g(i + s + hashes) == '#' {
                hashes += 1;
            }
            for _ in 0..s + hashes + 1 {
                out.push(c[i]);
                i += 1;
            }
            while i < c.len() {
                if c[i] == '"' && (1..=hashes).all(|k| g(i + k) == '#') {
                    for _ in 0..hashes + 1 {
                        out.push(c[i]);
                        i += 1;
                    }
                    break;
                }
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if g(i) == '"' {
            out.push('"');
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            if i < c.len() {
                out.push('"');
                i += 1;
            }
        } else if g(i) == '\'' && (g(i + 1) == '\\' || g(i + 2) == '\'') {
            // A character literal (a lifetime or label has no closing quote
            // right after one character).
            out.push('\'');
            i += 1;
            if i < c.len() && c[i] == '\\' {
                // The escape and the character it escapes (`'\''`).
                out.push_str("  ");
                i += 2;
            }
            while i < c.len() && c[i] != '\'' {
                blank(&mut out, c[i]);
                i += 1;
            }
            if i < c.len() {
                out.push('\'');
                i += 1;
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

fn is_ident(ch: char) -> bool {
    ch.is_alphanumeric() || ch == '_'
}

/// A `#[...]` attribute's inner text (spaces removed) says the item exists
/// only in test builds.
fn is_test_cfg(attr: &str) -> bool {
    let a: String = attr.chars().filter(|c| !c.is_whitespace()).collect();
    a == "cfg(test)"
        || (a.starts_with("cfg(all(")
            && a["cfg(all(".len()..]
                .trim_end_matches(')')
                .split(',')
                .any(|p| p == "test"))
}

/// What one file says, once comments, strings and test-only items are set
/// aside.
#[derive(Debug, Default)]
struct Scan {
    /// `(line, first path segment after the crate root)` of each reference
    /// that reaches the crate root.
    refs: Vec<(usize, String)>,
    /// Modules declared as files: name, `#[path]` value, test-only.
    mods: Vec<(String, Option<String>, bool)>,
}

/// Scans one file whose module path (from the crate root) is `module`.
fn scan(raw: &str, module: &[String]) -> Scan {
    let code = strip(raw);
    let b: Vec<char> = code.chars().collect();
    let r: Vec<char> = raw.chars().collect();
    let line_of = |i: usize| 1 + b[..i].iter().filter(|&&c| c == '\n').count();
    let mut scan = Scan::default();
    // Inline modules open at a brace depth: (name, depth inside).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    // Attributes seen since the last item.
    let mut test_attr = false;
    let mut path_attr: Option<String> = None;
    let word_at = |i: usize| -> String { b[i..].iter().take_while(|&&c| is_ident(c)).collect() };
    let skip_ws = |mut i: usize| {
        while i < b.len() && b[i].is_whitespace() {
            i += 1;
        }
        i
    };
    let mut i = 0;
    while i < b.len() {
        let ch = b[i];
        let boundary = i == 0 || !is_ident(b[i - 1]);
        if ch == '#' && matches!(b.get(i + 1), Some('[' | '!')) {
            // An attribute: find its end, look at its text.
            let open = if b[i + 1] == '!' { i + 2 } else { i + 1 };
            let mut d = 0;
            let mut j = open;
            while j < b.len() {
                match b[j] {
                    '[' => d += 1,
                    ']' => {
                        d -= 1;
                        if d == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            let inner: String = b[open + 1..j.min(b.len())].iter().collect();
            if b[i + 1] == '[' {
                if is_test_cfg(&inner) {
                    test_attr = true;
                }
                let compact: String = inner.chars().filter(|c| !c.is_whitespace()).collect();
                if compact.starts_with("path=") {
                    // The literal's text is blanked in `b`; read it from `r`.
                    let q1 = (open..j).find(|&k| b[k] == '"');
                    let q2 = q1.and_then(|q| (q + 1..j).find(|&k| b[k] == '"'));
                    if let (Some(q1), Some(q2)) = (q1, q2) {
                        path_attr = Some(r[q1 + 1..q2].iter().collect());
                    }
                }
            }
            i = j + 1;
            continue;
        }
        if test_attr && !ch.is_whitespace() {
            // Skip the whole test-only item: to its `;` or its closing brace.
            let start = i;
            let mut d = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    '{' => d += 1,
                    // The enclosing block ends first (a test-only entry
                    // inside a macro's braces): the item ends there too.
                    '}' if d == 0 => break,
                    '}' => {
                        d -= 1;
                        if d == 0 {
                            break;
                        }
                    }
                    ';' if d == 0 => break,
                    _ => {}
                }
                j += 1;
            }
            if let Some(name) = mod_decl(&b[start..j.min(b.len())]) {
                scan.mods.push((name, path_attr.take(), true));
            }
            test_attr = false;
            path_attr = None;
            i = j + 1;
            continue;
        }
        match ch {
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                while inline.last().is_some_and(|&(_, d)| d > depth) {
                    inline.pop();
                }
            }
            ';' => path_attr = None,
            'm' if boundary && word_at(i) == "mod" => {
                let j = skip_ws(i + 3);
                let name = word_at(j);
                let k = skip_ws(j + name.len());
                match b.get(k) {
                    Some(';') => scan.mods.push((name, path_attr.take(), false)),
                    Some('{') => inline.push((name, depth + 1)),
                    _ => {}
                }
            }
            'c' | '$' if boundary => {
                let start = if ch == '$' { i + 1 } else { i };
                if word_at(start) == "crate" && b.get(start + 5) == Some(&':') {
                    let after = start + 7;
                    for seg in root_segments(&b, after) {
                        scan.refs.push((line_of(i), seg));
                    }
                    i = after;
                    continue;
                }
            }
            's' if boundary && word_at(i) == "super" => {
                let mut ups = 0;
                let mut j = i;
                while word_at(j) == "super" && b.get(j + 5) == Some(&':') {
                    ups += 1;
                    j += 7;
                }
                let here: Vec<&String> =
                    module.iter().chain(inline.iter().map(|(n, _)| n)).collect();
                if ups == here.len() {
                    for seg in root_segments(&b, j) {
                        scan.refs.push((line_of(i), seg));
                    }
                }
                i = j.max(i + 1);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    scan
}

/// `mod NAME;` (with any visibility) in an item's text.
fn mod_decl(item: &[char]) -> Option<String> {
    let text: String = item.iter().collect();
    let words: Vec<&str> = text
        .split(|c: char| !is_ident(c))
        .filter(|w| !w.is_empty())
        .collect();
    let at = words.iter().position(|&w| w == "mod")?;
    (!text.contains('{')).then(|| words.get(at + 1).map(|w| w.to_string()))?
}

/// The first segments named right after `crate::` (or a `super::` chain that
/// reaches the root): one identifier, or each item of a `{…}` group.
fn root_segments(b: &[char], at: usize) -> Vec<String> {
    let word = |i: usize| -> String { b[i..].iter().take_while(|&&c| is_ident(c)).collect() };
    if b.get(at) != Some(&'{') {
        let w = word(at);
        return if w.is_empty() { vec![] } else { vec![w] };
    }
    let mut out = Vec::new();
    let mut d = 0;
    let mut item_start = true;
    for (k, &c) in b.iter().enumerate().skip(at) {
        match c {
            '{' => {
                d += 1;
                if d == 1 {
                    item_start = true;
                    continue;
                }
            }
            '}' => {
                d -= 1;
                if d == 0 {
                    break;
                }
            }
            ',' if d == 1 => {
                item_start = true;
                continue;
            }
            _ => {}
        }
        if d == 1 && item_start && is_ident(c) {
            out.push(word(k));
            item_start = false;
        } else if d == 1 && !c.is_whitespace() {
            item_start = false;
        }
    }
    out
}

/// Names that `lib.rs` re-exports (`pub use X::…::{A, B as C}`), mapped to
/// the top-level module `X` they come from.
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let code = strip(lib);
    let mut map = BTreeMap::new();
    for stmt in code.split(';') {
        let Some(at) = stmt.find("pub use ") else {
            continue;
        };
        let rest = &stmt[at + "pub use ".len()..];
        let rest = rest
            .trim()
            .trim_start_matches("crate::")
            .trim_start_matches("self::");
        let module: String = rest.chars().take_while(|&c| is_ident(c)).collect();
        for leaf in leaves(rest) {
            map.insert(leaf, module.clone());
        }
    }
    map
}

/// The names a `use` tree brings in (the last segment or the alias).
fn leaves(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let close = tree.rfind('}').unwrap_or(tree.len());
        let inner = &tree[open + 1..close];
        let mut out = Vec::new();
        let (mut d, mut start) = (0, 0);
        for (k, c) in inner.char_indices() {
            match c {
                '{' => d += 1,
                '}' => d -= 1,
                ',' if d == 0 => {
                    out.extend(leaves(&inner[start..k]));
                    start = k + 1;
                }
                _ => {}
            }
        }
        out.extend(leaves(&inner[start..]));
        return out;
    }
    let name = match tree.split_once(" as ") {
        Some((_, alias)) => alias.trim(),
        None => tree.rsplit("::").next().unwrap_or(tree).trim(),
    };
    if name.is_empty() || name == "self" || name == "*" {
        vec![]
    } else {
        vec![name.to_string()]
    }
}

/// A source file of the crate, reached from `lib.rs`.
struct File {
    path: PathBuf,
    module: Vec<String>,
    test_only: bool,
}

/// Every file of the module tree, from `lib.rs` down.
fn module_tree(src: &Path) -> Vec<File> {
    let mut out = Vec::new();
    let mut todo = vec![File {
        path: src.join("lib.rs"),
        module: vec![],
        test_only: false,
    }];
    while let Some(f) = todo.pop() {
        let raw = std::fs::read_to_string(&f.path)
            .unwrap_or_else(|e| panic!("{}: {e}", f.path.display()));
        let dir = f.path.parent().unwrap().to_path_buf();
        let stem = f.path.file_stem().unwrap().to_string_lossy().to_string();
        // Where `mod x;` looks for x: beside lib.rs and mod.rs, else in a
        // folder named after the file.
        let base = if f.module.is_empty() || stem == "mod" {
            dir.clone()
        } else {
            dir.join(&stem)
        };
        for (name, path, test) in scan(&raw, &f.module).mods {
            let child = match path {
                Some(p) => dir.join(p),
                None if base.join(format!("{name}.rs")).exists() => base.join(format!("{name}.rs")),
                None => base.join(&name).join("mod.rs"),
            };
            let mut module = f.module.clone();
            module.push(name);
            todo.push(File {
                path: child,
                module,
                test_only: f.test_only || test,
            });
        }
        out.push(f);
    }
    out
}

/// Checks the code of `src` against the table; returns one line per
/// forbidden edge or inconsistency.
fn violations(src: &Path, table: &[Layer]) -> Vec<String> {
    let mut bad = Vec::new();
    let mut layer_of: BTreeMap<String, &Layer> = BTreeMap::new();
    for l in table {
        for f in &l.folders {
            if layer_of.insert(f.clone(), l).is_some() {
                bad.push(format!(
                    "folder {f} is in more than one row of the Layers table"
                ));
            }
        }
    }
    // Every top-level module is in the table, and every folder named exists.
    let mut tops = BTreeSet::new();
    for e in std::fs::read_dir(src).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_stem().unwrap().to_string_lossy().to_string();
        if p.is_dir() || (p.extension().is_some_and(|x| x == "rs") && name != "lib") {
            tops.insert(name);
        }
    }
    for t in &tops {
        if !layer_of.contains_key(t) {
            bad.push(format!(
                "src/{t} is not in the Layers table of docs/ARCHITECTURE.md: give it a row (or add it to one)"
            ));
        }
    }
    for f in layer_of.keys() {
        if !tops.contains(f) {
            bad.push(format!(
                "the Layers table names {f}, which is not a module in src/"
            ));
        }
    }
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let reexported = reexports(&lib);
    let files = module_tree(src);
    // Every file under src/ is part of the module tree (so none is unchecked).
    let reached: BTreeSet<PathBuf> = files
        .iter()
        .map(|f| f.path.canonicalize().unwrap())
        .collect();
    for p in rs_files(src) {
        if !reached.contains(&p.canonicalize().unwrap()) {
            bad.push(format!("{} is not declared as a module", p.display()));
        }
    }
    for f in &files {
        let Some(top) = f.module.first() else {
            continue; // lib.rs
        };
        if f.test_only {
            continue;
        }
        let Some(me) = layer_of.get(top) else {
            continue; // reported above
        };
        let raw = std::fs::read_to_string(&f.path).unwrap();
        let rel = f
            .path
            .strip_prefix(src)
            .unwrap_or(&f.path)
            .display()
            .to_string();
        for (line, seg) in scan(&raw, &f.module).refs {
            let target = if tops.contains(&seg) {
                seg.clone()
            } else if let Some(m) = reexported.get(&seg) {
                m.clone()
            } else {
                continue; // a root item that is no module: macros, `crate::self`
            };
            if &target == top {
                continue;
            }
            let Some(them) = layer_of.get(&target) else {
                continue;
            };
            if !me.may_import.contains(&them.number) {
                bad.push(format!(
                    "src/{rel}:{line}: {top} (layer {}) imports {target} (layer {}): forbidden edge {top} -> {target}",
                    me.number, them.number
                ));
            }
        }
    }
    bad
}

fn rs_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(rs_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn folders_import_only_lower_layers() {
    let doc = std::fs::read_to_string(crate_dir().join("../../docs/ARCHITECTURE.md")).unwrap();
    let table = layers(&doc).unwrap_or_else(|e| panic!("{e}"));
    let bad = violations(&crate_dir().join("src"), &table);
    let mut msg = String::new();
    for b in &bad {
        writeln!(msg, "  {b}").unwrap();
    }
    assert!(
        bad.is_empty(),
        "the code breaks the layering rule of docs/ARCHITECTURE.md (\"Layers\"):\n{msg}"
    );
}

/// The scanner sees every form of reference and nothing in comments,
/// strings or test-only items (a check that could not see an edge would
/// always pass).
#[test]
fn scanner_sees_each_form_of_reference() {
    let src = r#"
use crate::flow::Key;
use crate::{error::Error, time};
use super::super::pipeline::run;
use crate::Result;
// use crate::in_a_comment;
/* use crate::in_a_block; */
const S: &str = "crate::in_a_string";
const C: char = '{';
fn f<'a>(x: &'a str) -> &'a str { let _ = crate::source::BATCH; x }
mod inner {
    use super::super::super::gen;
}
#[cfg(test)]
mod tests {
    use crate::learn::train;
}
#[cfg(all(test, target_os = "linux"))]
use crate::bench;
#[cfg(test)]
#[path = "x_tests.rs"]
mod x_tests;
mod plain;
"#;
    let s = scan(src, &["classify".to_string(), "tree".to_string()]);
    let refs: Vec<&str> = s.refs.iter().map(|(_, r)| r.as_str()).collect();
    assert_eq!(
        refs,
        ["flow", "error", "time", "pipeline", "Result", "source", "gen"]
    );
    let lines: Vec<usize> = s.refs.iter().map(|&(l, _)| l).collect();
    assert_eq!(lines, [2, 3, 3, 4, 5, 10, 12]);
    assert_eq!(
        s.mods,
        [
            ("x_tests".to_string(), Some("x_tests.rs".to_string()), true),
            ("plain".to_string(), None, false)
        ]
    );
    let lib = "pub mod a;\npub use error::{Error, Result};\npub use pipeline::{run as run_files, live::{run_live}};";
    let m = reexports(lib);
    assert_eq!(m["Result"], "error");
    assert_eq!(m["run_files"], "pipeline");
    assert_eq!(m["run_live"], "pipeline");
    let table = layers(
        "## Layers\n\n| Layer | Folders | May import |\n| --- | --- | --- |\n| 0 | `time`, `error` | — |\n| 1 | `flow` | 0 |\n| 2 | `pipeline/` | 0–1 |\n\n## Next\n",
    )
    .unwrap();
    assert_eq!(table.len(), 3);
    assert_eq!(table[2].folders, ["pipeline"]);
    assert_eq!(table[2].may_import, BTreeSet::from([0, 1]));
    assert!(
        layers("## Layers\n| Layer | Folders | May import |\n|-|-|-|\n| 1 | `a` | 1 |\n").is_err()
    );
}
