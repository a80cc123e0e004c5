//! The type id of a kernel function in the kernel's BTF
//! (`/sys/kernel/btf/vmlinux`): what an eBPF program needs to call a kfunc
//! (the AF_XDP program calls `bpf_xdp_metadata_rx_timestamp`).
//!
//! Contract:
//! - [`func_id`] walks the type section of a BTF blob (any bytes) and
//!   returns the id of the first `BTF_KIND_FUNC` whose name is the one
//!   asked for; `None` when there is none, the header is not BTF's (magic
//!   `0xeb9f`, this machine's byte order), or the walk meets a kind it does
//!   not know or a record that runs past the section. It reads only inside
//!   the given bytes and never panics.

/// `BTF_KIND_FUNC` (linux/btf.h).
const KIND_FUNC: u32 = 12;

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

/// Bytes that follow the 12-byte common record of a type of `kind` with
/// `vlen` members (linux/btf.h); `None` for a kind not known here.
fn extra(kind: u32, vlen: usize) -> Option<usize> {
    Some(match kind {
        // INT, VAR, DECL_TAG: one u32.
        1 | 14 | 17 => 4,
        // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT,
        // TYPE_TAG: nothing.
        2 | 7..=12 | 16 | 18 => 0,
        // ARRAY: struct btf_array.
        3 => 12,
        // STRUCT, UNION: btf_member each; DATASEC: btf_var_secinfo each;
        // ENUM64: btf_enum64 each.
        4 | 5 | 15 | 19 => 12 * vlen,
        // ENUM: btf_enum each; FUNC_PROTO: btf_param each.
        6 | 13 => 8 * vlen,
        _ => return None,
    })
}

/// The type id of function `name` in BTF blob `btf` (see the module docs).
pub fn func_id(btf: &[u8], name: &str) -> Option<u32> {
    if btf.get(0..2)? != 0xeb9fu16.to_ne_bytes() {
        return None;
    }
    let hdr_len = u32_at(btf, 4)? as usize;
    let (type_off, type_len) = (u32_at(btf, 8)? as usize, u32_at(btf, 12)? as usize);
    let (str_off, str_len) = (u32_at(btf, 16)? as usize, u32_at(btf, 20)? as usize);
    let section = |off: usize, len: usize| {
        let start = hdr_len.checked_add(off)?;
        btf.get(start..start.checked_add(len)?)
    };
    let types = section(type_off, type_len)?;
    let strings = section(str_off, str_len)?;
    let named = |off: usize| {
        let s = strings.get(off..)?;
        let end = s.iter().position(|&c| c == 0)?;
        Some(&s[..end] == name.as_bytes())
    };
    let (mut at, mut id) = (0usize, 1u32);
    while at < types.len() {
        let name_off = u32_at(types, at)? as usize;
        let info = u32_at(types, at + 4)?;
        let (kind, vlen) = ((info >> 24) & 0x1f, (info & 0xffff) as usize);
        if kind == KIND_FUNC && named(name_off) == Some(true) {
            return Some(id);
        }
        at = at.checked_add(12 + extra(kind, vlen)?)?;
        id = id.checked_add(1)?;
    }
    None
}

/// The id of `name` in the running kernel's BTF, if it has one.
pub fn kernel_func_id(name: &str) -> Option<u32> {
    let btf = std::fs::read("/sys/kernel/btf/vmlinux").ok()?;
    func_id(&btf, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF blob of `types` (records) and `strings`.
    fn blob(types: &[u8], strings: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&0xeb9fu16.to_ne_bytes());
        b.extend_from_slice(&[1, 0]);
        for v in [24u32, 0, types.len() as u32, types.len() as u32] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        b.extend_from_slice(&(strings.len() as u32).to_ne_bytes());
        b.extend_from_slice(types);
        b.extend_from_slice(strings);
        b
    }

    fn record(name_off: u32, kind: u32, vlen: u32, size: u32) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&name_off.to_ne_bytes());
        r.extend_from_slice(&((kind << 24) | vlen).to_ne_bytes());
        r.extend_from_slice(&size.to_ne_bytes());
        r
    }

    #[test]
    fn finds_a_function_after_types_with_members() {
        let strings = b"\0int\0f\0g\0";
        let mut types = record(1, 1, 0, 4);
        types.extend_from_slice(&[0; 4]);
        // A prototype of two parameters, then functions f (id 3), g (id 4).
        types.extend(record(0, 13, 2, 1));
        types.extend_from_slice(&[0; 16]);
        types.extend(record(5, 12, 0, 2));
        types.extend(record(7, 12, 0, 2));
        let b = blob(&types, strings);
        assert_eq!(func_id(&b, "f"), Some(3));
        assert_eq!(func_id(&b, "g"), Some(4));
        assert_eq!(func_id(&b, "int"), None, "an INT is not a function");
        assert_eq!(func_id(&b, "h"), None);
    }

    #[test]
    fn damaged_blobs_give_none() {
        let strings = b"\0f\0";
        let types = record(1, 12, 0, 0);
        let good = blob(&types, strings);
        assert_eq!(func_id(&good, "f"), Some(1));
        for cut in 0..good.len() {
            assert_eq!(func_id(&good[..cut], "f"), None, "cut at {cut}");
        }
        let mut bad_magic = good.clone();
        bad_magic[0] ^= 1;
        assert_eq!(func_id(&bad_magic, "f"), None);
        // An unknown kind stops the walk.
        let mut t = record(0, 31, 0, 0);
        t.extend(record(1, 12, 0, 0));
        assert_eq!(func_id(&blob(&t, strings), "f"), None);
        // A name that runs past the strings.
        assert_eq!(func_id(&blob(&record(9, 12, 0, 0), strings), "f"), None);
    }

    #[test]
    fn the_running_kernel_names_the_xdp_stamp_function_when_it_has_btf() {
        let Ok(btf) = std::fs::read("/sys/kernel/btf/vmlinux") else {
            eprintln!("SKIPPED: this kernel exposes no BTF");
            return;
        };
        // Kernels from 6.3 have it; older ones have BTF without it.
        if let Some(id) = func_id(&btf, "bpf_xdp_metadata_rx_timestamp") {
            assert!(id > 1);
            assert_ne!(func_id(&btf, "bpf_xdp_metadata_rx_hash"), Some(id));
        }
    }
}
