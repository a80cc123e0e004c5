//! Capture filters in tcpdump's syntax (`--filter "EXPRESSION"`), compiled
//! by the system's libpcap (`pcap_compile` on a `pcap_open_dead` handle).
//!
//! Contract:
//! - [`CaptureFilter::new`] compiles the expression for Ethernet at once,
//!   so a bad expression is an error before anything is read; the error
//!   names the expression and gives libpcap's message. Programs for the
//!   other link types of a run are compiled when a packet of that type
//!   first comes ([`CaptureFilter::program`]).
//! - [`Program::matches`] runs a compiled classic BPF program over one
//!   packet in user space with libpcap's own interpreter (`bpf_filter`),
//!   which never reads outside the bytes it is given (a load past the end
//!   rejects the packet, as the kernel does).
//! - Files, pipes and replays: the input thread runs the filter over each
//!   capture before the shards see it (`source/feed.rs`); live AF_PACKET
//!   captures run it in the kernel (`source/af_packet.rs`). Either way the
//!   packets left out are counted once, in [`CaptureFilter::filtered`].
//! - In the kernel ([`kernel_programs`]): Linux takes a frame's outer
//!   802.1Q/802.1ad tag off before any socket filter runs, so a program
//!   compiled for the frame as it was on the wire cannot judge a tagged
//!   frame. The socket's program lets every tagged frame through, and runs
//!   the compiled program over the others (capped at the snaplen); the
//!   ring walk puts each tag back and runs the same program over the
//!   restored frame in user space. So `vlan` expressions mean what they
//!   mean for files. Packets the kernel leaves out are counted by a second
//!   socket without a ring whose program is the inverse (it keeps exactly
//!   what the capture's socket leaves out, and the kernel counts them as
//!   they overflow its tiny receive buffer).
//! - libpcap is loaded when the first filter is compiled (`dlopen`, not
//!   linked: building needs nothing of it); without it every expression is
//!   an error that says so.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::decode::LinkType;
use crate::error::{Error, Result};

/// A compiled classic BPF program (instructions as the kernel's
/// `sock_filter`, the same layout as libpcap's `bpf_insn`).
#[derive(Debug, Clone)]
pub struct Program {
    insns: Vec<libc::sock_filter>,
    /// libpcap's interpreter.
    run: BpfFilter,
}

impl Program {
    /// The program's instructions.
    pub fn instructions(&self) -> &[libc::sock_filter] {
        &self.insns
    }

    /// Whether the program keeps a packet whose captured bytes are `pkt`
    /// and whose length on the wire was `wire_len`.
    #[inline]
    pub fn matches(&self, pkt: &[u8], wire_len: u32) -> bool {
        // SAFETY: `insns` is a program libpcap compiled (its validator ran
        // in pcap_compile); bpf_filter reads at most `pkt.len()` bytes of
        // `pkt`.
        let r = unsafe {
            (self.run)(
                self.insns.as_ptr(),
                pkt.as_ptr(),
                wire_len.max(pkt.len() as u32),
                pkt.len() as libc::c_uint,
            )
        };
        r != 0
    }
}

/// The DLT_* number libpcap's compiler takes for a link type (the pcap
/// file's LINKTYPE_* number, except where the two differ on Linux).
fn dlt_of(link: LinkType) -> i32 {
    match super::pcap_writer::linktype_number(link) {
        // LINKTYPE_RAW is DLT_RAW (12 on Linux).
        101 => 12,
        // LINKTYPE_ATM_RFC1483 is DLT_ATM_RFC1483 (11).
        100 => 11,
        n => n as i32,
    }
}

type BpfFilter = unsafe extern "C" fn(
    *const libc::sock_filter,
    *const u8,
    libc::c_uint,
    libc::c_uint,
) -> libc::c_uint;

/// `struct bpf_program`.
#[repr(C)]
struct BpfProgram {
    bf_len: libc::c_uint,
    bf_insns: *mut libc::sock_filter,
}

type OpenDead = unsafe extern "C" fn(libc::c_int, libc::c_int) -> *mut libc::c_void;
type Compile = unsafe extern "C" fn(
    *mut libc::c_void,
    *mut BpfProgram,
    *const libc::c_char,
    libc::c_int,
    u32,
) -> libc::c_int;
type GetErr = unsafe extern "C" fn(*mut libc::c_void) -> *const libc::c_char;
type FreeCode = unsafe extern "C" fn(*mut BpfProgram);
type Close = unsafe extern "C" fn(*mut libc::c_void);

/// The functions of the system's libpcap this module calls.
struct Libpcap {
    open_dead: OpenDead,
    compile: Compile,
    geterr: GetErr,
    freecode: FreeCode,
    close: Close,
    filter: BpfFilter,
}

/// Names libpcap's shared library goes by (Debian's package libpcap0.8
/// installs the first).
const LIBPCAP: [&std::ffi::CStr; 3] = [c"libpcap.so.0.8", c"libpcap.so.1", c"libpcap.so"];

/// libpcap, loaded on first use (the library is not linked: a build needs
/// nothing of it, and a run without `--filter` never loads it).
fn libpcap() -> std::result::Result<&'static Libpcap, String> {
    static LIB: std::sync::OnceLock<std::result::Result<Libpcap, String>> =
        std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        let handle = LIBPCAP.iter().find_map(|n| {
            // SAFETY: loads a shared library by name; libpcap's
            // initialisers have no requirements.
            let h = unsafe { libc::dlopen(n.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
            (!h.is_null()).then_some(h)
        });
        let Some(h) = handle else {
            return Err("libpcap is not installed (Debian: libpcap0.8); \
                        capture filters are compiled by it"
                .to_string());
        };
        let sym = |name: &std::ffi::CStr| {
            // SAFETY: a symbol of the library just loaded (never unloaded).
            let p = unsafe { libc::dlsym(h, name.as_ptr()) };
            if p.is_null() {
                Err(format!("libpcap has no {}", name.to_string_lossy()))
            } else {
                Ok(p)
            }
        };
        // SAFETY: each symbol has the C signature of libpcap's pcap.h and
        // bpf.h, which the function pointer types spell.
        unsafe {
            Ok(Libpcap {
                open_dead: std::mem::transmute::<*mut libc::c_void, OpenDead>(sym(
                    c"pcap_open_dead",
                )?),
                compile: std::mem::transmute::<*mut libc::c_void, Compile>(sym(c"pcap_compile")?),
                geterr: std::mem::transmute::<*mut libc::c_void, GetErr>(sym(c"pcap_geterr")?),
                freecode: std::mem::transmute::<*mut libc::c_void, FreeCode>(sym(
                    c"pcap_freecode",
                )?),
                close: std::mem::transmute::<*mut libc::c_void, Close>(sym(c"pcap_close")?),
                filter: std::mem::transmute::<*mut libc::c_void, BpfFilter>(sym(c"bpf_filter")?),
            })
        }
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// The snaplen programs are compiled for: every accepting `ret` returns
/// it (the largest libpcap readers take).
pub const COMPILE_SNAPLEN: u32 = 262_144;

/// Compiles `expression` for link type `dlt` (a DLT_* number).
pub fn compile(expression: &str, dlt: i32) -> Result<Program> {
    use std::ffi::{CStr, CString};
    let bad = |why: String| Error::Config(format!("--filter {expression:?}: {why}"));
    let lib = libpcap().map_err(bad)?;
    let text = CString::new(expression).map_err(|_| bad("contains a NUL byte".into()))?;
    // libpcap's compiler keeps global state in older releases: one
    // compilation at a time.
    static COMPILER: Mutex<()> = Mutex::new(());
    let _one = COMPILER.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: a dead handle only carries the link type and snaplen.
    let handle = unsafe { (lib.open_dead)(dlt, COMPILE_SNAPLEN as i32) };
    if handle.is_null() {
        return Err(bad(format!("libpcap cannot open a handle for DLT {dlt}")));
    }
    let mut prog = BpfProgram {
        bf_len: 0,
        bf_insns: std::ptr::null_mut(),
    };
    // SAFETY: valid handle, program struct and NUL-terminated text;
    // PCAP_NETMASK_UNKNOWN (only `ip broadcast` needs a netmask).
    let r = unsafe { (lib.compile)(handle, &mut prog, text.as_ptr(), 1, 0xffff_ffff) };
    let result = if r != 0 {
        // SAFETY: the handle's error text, NUL-terminated, valid until the
        // handle is closed (copied before).
        let msg = unsafe { CStr::from_ptr((lib.geterr)(handle)) };
        Err(bad(format!("libpcap: {}", msg.to_string_lossy())))
    } else {
        // SAFETY: libpcap filled `bf_len` instructions at `bf_insns`.
        let insns =
            unsafe { std::slice::from_raw_parts(prog.bf_insns, prog.bf_len as usize) }.to_vec();
        // SAFETY: the program pcap_compile allocated, freed once.
        unsafe { (lib.freecode)(&mut prog) };
        Ok(Program {
            insns,
            run: lib.filter,
        })
    };
    // SAFETY: the handle opened above, closed once.
    unsafe { (lib.close)(handle) };
    result
}

/// Classic BPF opcodes the kernel programs add (linux/filter.h).
const LD_B_ABS: u16 = 0x30;
const JMP_JEQ_K: u16 = 0x15;
const RET_K: u16 = 0x06;

/// The two kernel programs of a live socket with a capture filter, built
/// on `prefix` (the socket's own program up to its accepting `ret`: the
/// choice of interfaces, or nothing): the capture socket's, which keeps
/// every VLAN-tagged frame and the untagged frames `user` keeps, `snaplen`
/// bytes of each; and the counting socket's, which keeps exactly the
/// untagged frames the first leaves out (see the module docs).
pub fn kernel_programs(
    prefix: &[libc::sock_filter],
    user: &Program,
    snaplen: u32,
) -> (Vec<libc::sock_filter>, Vec<libc::sock_filter>) {
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let build = |tagged: u32, keep: &dyn Fn(u32) -> u32| {
        let mut p = prefix.to_vec();
        p.push(op(
            LD_B_ABS,
            0,
            0,
            (libc::SKF_AD_OFF + libc::SKF_AD_VLAN_TAG_PRESENT) as u32,
        ));
        // No tag: on to the compiled program; a tag: `ret tagged`.
        p.push(op(JMP_JEQ_K, 1, 0, 0));
        p.push(op(RET_K, 0, 0, tagged));
        p.extend(user.insns.iter().map(|i| match i.code {
            RET_K => op(RET_K, 0, 0, keep(i.k)),
            _ => *i,
        }));
        p
    };
    let capture = build(snaplen, &|k| k.min(snaplen));
    let counting = build(0, &|k| u32::from(k == 0));
    (capture, counting)
}

/// A program compiled for a link type, or why it could not be.
type Compiled = std::result::Result<Arc<Program>, String>;

/// A run's capture filter (see the module docs).
#[derive(Debug)]
pub struct CaptureFilter {
    expression: String,
    /// Programs compiled so far, by link type (a compilation that failed
    /// is kept as its error message).
    programs: Mutex<Vec<(LinkType, Compiled)>>,
    filtered: Arc<AtomicU64>,
    /// Live: the sockets counting what the kernel left out (see the
    /// module docs); their counts are added to `filtered` when read.
    counting: Mutex<Vec<std::os::fd::OwnedFd>>,
}

impl PartialEq for CaptureFilter {
    fn eq(&self, other: &Self) -> bool {
        self.expression == other.expression
    }
}

impl Eq for CaptureFilter {}

impl CaptureFilter {
    /// Compiles `expression` (tcpdump's syntax) for Ethernet; an error
    /// names it and gives libpcap's message.
    pub fn new(expression: &str) -> Result<CaptureFilter> {
        let ether = compile(expression, dlt_of(LinkType::Ethernet))?;
        Ok(CaptureFilter {
            expression: expression.to_string(),
            programs: Mutex::new(vec![(LinkType::Ethernet, Ok(Arc::new(ether)))]),
            filtered: Arc::new(AtomicU64::new(0)),
            counting: Mutex::new(Vec::new()),
        })
    }

    /// The expression as given.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The program for packets of `link`, compiled on first use; an error
    /// when libpcap cannot compile the expression for that link type.
    pub fn program(&self, link: LinkType) -> Result<Arc<Program>> {
        let mut progs = self.programs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, p)) = progs.iter().find(|(l, _)| *l == link) {
            return p.clone().map_err(Error::Config);
        }
        let p = compile(&self.expression, dlt_of(link))
            .map(Arc::new)
            .map_err(|e| format!("{e} (for {link:?} packets)"));
        progs.push((link, p.clone()));
        p.map_err(Error::Config)
    }

    /// Packets left out so far (live: the kernel's counts read now).
    pub fn filtered(&self) -> u64 {
        let socks = self.counting.lock().unwrap_or_else(|p| p.into_inner());
        for s in socks.iter() {
            self.count(counted_by(s));
        }
        self.filtered.load(Ordering::Relaxed)
    }

    /// Live: whether a counting socket is open already (one counts for
    /// every socket of a run).
    pub(crate) fn counts_in_kernel(&self) -> bool {
        !self
            .counting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }

    /// Live: keeps the counting socket `fd` (its count is read by
    /// [`CaptureFilter::filtered`]).
    pub(crate) fn count_in_kernel(&self, fd: std::os::fd::OwnedFd) {
        self.counting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(fd);
    }

    /// Counts `n` more packets left out.
    pub(crate) fn count(&self, n: u64) {
        if n > 0 {
            self.filtered.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// The packets a counting socket took since it was last asked (the kernel
/// resets its counts on each read; dropped ones included).
fn counted_by(fd: &std::os::fd::OwnedFd) -> u64 {
    use std::os::fd::AsRawFd;
    // SAFETY: zeroed plain-data struct.
    let mut s: libc::tpacket_stats = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
    // SAFETY: a tpacket_stats of the size passed.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut s as *mut libc::tpacket_stats).cast(),
            &mut len,
        )
    };
    if r == 0 {
        u64::from(s.tp_packets)
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet + IPv4 + TCP frame from 10.0.0.1:1234 to 10.0.0.2:80
    /// with TCP flags `flags`, optionally 802.1Q-tagged with VLAN `vlan`.
    fn frame(vlan: Option<u16>, flags: u8) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
        if let Some(v) = vlan {
            f.extend_from_slice(&[0x81, 0x00]);
            f.extend_from_slice(&v.to_be_bytes());
        }
        f.extend_from_slice(&[0x08, 0x00]);
        f.extend_from_slice(&[
            0x45, 0, 0, 40, 0, 1, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ]);
        f.extend_from_slice(&[0x04, 0xd2, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, flags]);
        f.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
        f
    }

    fn keeps(expr: &str, pkt: &[u8]) -> bool {
        let f = CaptureFilter::new(expr).expect("compiles");
        f.program(LinkType::Ethernet)
            .expect("ethernet")
            .matches(pkt, pkt.len() as u32)
    }

    #[test]
    fn expressions_select_what_tcpdump_would() {
        let syn = frame(None, 0x02);
        assert!(keeps("host 10.0.0.2", &syn));
        assert!(!keeps("host 10.0.0.3", &syn));
        assert!(keeps("net 10.0.0.0/24 and tcp port 80", &syn));
        assert!(!keeps("udp", &syn));
        assert!(keeps("tcp[tcpflags] & tcp-syn != 0", &syn));
        assert!(!keeps("tcp[tcpflags] & tcp-fin != 0", &syn));
        // A tag on the wire: `vlan` keeps it and reads on behind it.
        let tagged = frame(Some(100), 0x11);
        assert!(keeps("vlan 100 and tcp port 80", &tagged));
        assert!(!keeps("vlan 200", &tagged));
        assert!(!keeps("vlan", &syn));
        assert!(!keeps("tcp port 80", &tagged));
    }

    #[test]
    fn a_cut_packet_is_not_read_past_its_end() {
        let syn = frame(None, 0x02);
        let f = CaptureFilter::new("tcp port 80").unwrap();
        let p = f.program(LinkType::Ethernet).unwrap();
        assert!(!p.matches(&syn[..30], syn.len() as u32));
        assert!(!p.matches(&[], 60));
    }

    #[test]
    fn errors_name_the_expression_and_give_libpcaps_message() {
        let e = CaptureFilter::new("tcp porrt 80").unwrap_err().to_string();
        assert!(e.contains("\"tcp porrt 80\""), "{e}");
        assert!(e.contains("libpcap: "), "{e}");
        let f = CaptureFilter::new("ether host 02:00:00:00:00:01").unwrap();
        let e = f.program(LinkType::Raw).unwrap_err().to_string();
        assert!(e.contains("Raw"), "{e}");
        // Raw IP: the program starts at the IP header.
        let p = CaptureFilter::new("dst port 80")
            .unwrap()
            .program(LinkType::Raw)
            .unwrap();
        let syn = frame(None, 0x02);
        assert!(p.matches(&syn[14..], 40));
    }
}
