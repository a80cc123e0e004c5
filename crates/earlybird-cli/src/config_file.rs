//! `earlybird flows --config FILE.toml`: the options of a long-running
//! probe in a file.
//!
//! Contract: every key of the file is a long option of `flows`, spelled as
//! on the command line (`idle-timeout`) or with underscores
//! (`idle_timeout`); a table groups options by their first word
//! (`[dump] dir = "…"` is `--dump-dir`, `[ipfix] mtu = 1400` is
//! `--ipfix-mtu`). A string or number is the option's value, `true` turns
//! a flag on (`false` leaves it off), an array repeats the option. Two keys
//! are not options: `inputs` (capture files or directories, as the
//! positional arguments) and `[[alarm]]` tables (read as by `--alarms`).
//! [`expand`] turns the file into arguments placed before the command
//! line's own, so the command line adds to lists and overrides single
//! values. Errors name the file (and the key); an unknown option is
//! refused by the argument parser as on the command line.

use std::ffi::OsString;
use std::path::Path;

/// The arguments of `args` (the process's, program name first) with each
/// `--config FILE` of the `flows` subcommand replaced by the options the
/// file holds (see the module docs).
pub fn expand(args: Vec<OsString>) -> Result<Vec<OsString>, String> {
    if args.get(1).and_then(|a| a.to_str()) != Some("flows") {
        return Ok(args);
    }
    let mut head = args[..2].to_vec();
    let mut tail = Vec::new();
    let mut it = args.into_iter().skip(2);
    while let Some(a) = it.next() {
        let path = match a.to_str() {
            Some("--config") => match it.next() {
                Some(p) => p,
                None => return Err("--config needs a file".into()),
            },
            Some(s) if s.starts_with("--config=") => OsString::from(&s["--config=".len()..]),
            Some("--") => {
                tail.push(a);
                tail.extend(it.by_ref());
                break;
            }
            _ => {
                tail.push(a);
                continue;
            }
        };
        head.extend(read(Path::new(&path))?);
    }
    head.extend(tail);
    Ok(head)
}

/// The options of config file `path`.
fn read(path: &Path) -> Result<Vec<OsString>, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{shown}: {e}"))?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| format!("{shown}: {e}"))?;
    let mut out = Vec::new();
    let mut inputs = Vec::new();
    for (key, value) in &table {
        match (key.as_str(), value) {
            ("inputs", v) => inputs.extend(values(path, key, v)?),
            ("alarm", toml::Value::Array(_)) => {
                out.push("--alarms".into());
                out.push(path.as_os_str().to_owned());
            }
            (group, toml::Value::Table(t)) => {
                for (k, v) in t {
                    option(path, &format!("{group}-{k}"), v, &mut out)?;
                }
            }
            (k, v) => option(path, k, v, &mut out)?,
        }
    }
    if let Some(dash) = inputs.iter().find(|i| i.to_string_lossy().starts_with('-')) {
        return Err(format!(
            "{shown}: inputs: {:?} would read as an option (give it as ./{0:?})",
            dash.to_string_lossy()
        ));
    }
    out.extend(inputs);
    Ok(out)
}

/// Appends option `key` with `value` to `out`.
fn option(
    path: &Path,
    key: &str,
    value: &toml::Value,
    out: &mut Vec<OsString>,
) -> Result<(), String> {
    let flag = format!("--{}", key.replace('_', "-"));
    match value {
        toml::Value::Boolean(true) => out.push(flag.into()),
        toml::Value::Boolean(false) => {}
        v => {
            for s in values(path, key, v)? {
                out.push(flag.clone().into());
                out.push(s);
            }
        }
    }
    Ok(())
}

/// The values of `key`: one, or each of an array.
fn values(path: &Path, key: &str, v: &toml::Value) -> Result<Vec<OsString>, String> {
    let one = |v: &toml::Value| {
        match v {
        toml::Value::String(s) => Ok(OsString::from(s)),
        toml::Value::Integer(i) => Ok(OsString::from(i.to_string())),
        toml::Value::Float(f) => Ok(OsString::from(f.to_string())),
        other => Err(format!(
            "{}: {key}: a {} is not an option value (a string, number, true/false or an array of them)",
            path.display(),
            other.type_str()
        )),
    }
    };
    match v {
        toml::Value::Array(a) => a.iter().map(one).collect(),
        v => Ok(vec![one(v)?]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_file_becomes_the_options_before_the_command_lines() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("probe.toml");
        std::fs::write(
            &f,
            "inputs = [\"a.pcap\"]\nidle_timeout = 30\nquiet = true\nno-progress = false\n\
             analyzer = [\"payload\"]\n[dump]\ndir = \"/tmp/d\"\nseconds = 60\n\
             [[alarm]]\nseries = \"packets\"\n",
        )
        .unwrap();
        let got = expand(args(&[
            "eb",
            "flows",
            "--config",
            f.to_str().unwrap(),
            "-s",
            "2",
        ]))
        .unwrap();
        let got: Vec<String> = got
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let want = [
            "eb",
            "flows",
            "--alarms",
            f.to_str().unwrap(),
            "--analyzer",
            "payload",
            "--dump-dir",
            "/tmp/d",
            "--dump-seconds",
            "60",
            "--idle-timeout",
            "30",
            "--quiet",
            "a.pcap",
            "-s",
            "2",
        ];
        assert_eq!(got, want);
        // Other subcommands are left alone.
        let other = args(&["eb", "gen", "--config", "x"]);
        assert_eq!(expand(other.clone()).unwrap(), other);
    }

    #[test]
    fn errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("bad.toml");
        std::fs::write(&f, "idle_timeout = 2026-01-01\n").unwrap();
        let e = expand(args(&["eb", "flows", "--config", f.to_str().unwrap()])).unwrap_err();
        assert!(e.contains("bad.toml: idle_timeout: a datetime"), "{e}");
        std::fs::write(&f, "dump = [{ a = 1 }]\n").unwrap();
        let e = expand(args(&["eb", "flows", "--config", f.to_str().unwrap()])).unwrap_err();
        assert!(e.contains("bad.toml: dump"), "{e}");
        let e = expand(args(&["eb", "flows", "--config", "/nonexistent.toml"])).unwrap_err();
        assert!(e.contains("/nonexistent.toml"), "{e}");
    }
}
