//! Safe wrapper of the libndpi binding (`earlybird-ndpi-sys`, nDPI 4.2):
//! a detection [`Module`] and per-flow states ([`Flow`]).
//!
//! Contract: a `Module` is `Send` but not `Sync` (nDPI's module is used by
//! one thread at a time); modules are created one at a time (nDPI forbids
//! parallel initialisation). A `Flow` is freed exactly once, when dropped;
//! [`LIVE`] counts the flow states alive in the process, so tests can check
//! none leak. Allocation failures return `None` and are counted in
//! [`FAILED`]; nothing here panics.

use earlybird_ndpi_sys as sys;
use std::borrow::Cow;
use std::ffi::CStr;
use std::os::raw::c_char;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// nDPI flow states alive in this process.
pub(crate) static LIVE: AtomicUsize = AtomicUsize::new(0);
/// Modules and flow states nDPI failed to allocate.
pub(crate) static FAILED: AtomicU64 = AtomicU64::new(0);
/// nDPI's module initialisation must not run in parallel.
static INIT: Mutex<()> = Mutex::new(());

/// What nDPI said about a flow: protocol ids, category and confidence kind.
pub(crate) type Verdict = sys::eb_ndpi_result;

/// A detection module with every protocol on.
pub(crate) struct Module(NonNull<sys::ndpi_detection_module_struct>);

// SAFETY: the module is only reached through `&Module` / `&mut Module` of
// one owner; nDPI keeps no thread-bound state in it. It is not `Sync`.
unsafe impl Send for Module {}

/// One flow's nDPI state.
pub(crate) struct Flow(NonNull<sys::ndpi_flow_struct>);

// SAFETY: owned, moved between threads with the flow table that holds it.
unsafe impl Send for Flow {}

impl Drop for Flow {
    fn drop(&mut self) {
        // SAFETY: allocated by `eb_ndpi_flow_new`, freed only here.
        unsafe { sys::eb_ndpi_flow_free(self.0.as_ptr()) };
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: opened by `eb_ndpi_open`, closed only here.
        unsafe { sys::eb_ndpi_close(self.0.as_ptr()) };
    }
}

/// A C string owned by nDPI as text ("" for null), borrowed for as long
/// as its owner (the caller picks the lifetime: the module's or 'static).
fn text<'a>(p: *const c_char) -> Cow<'a, str> {
    if p.is_null() {
        return "".into();
    }
    // SAFETY: nDPI returns NUL-terminated names that live as long as the
    // module (static tables or the module's own); callers bound 'a by it.
    unsafe { CStr::from_ptr(p) }.to_string_lossy()
}

impl Module {
    /// A new module, or `None` (counted) when nDPI cannot allocate one.
    pub(crate) fn open() -> Option<Module> {
        let _one = INIT.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: no other initialisation runs (the lock above).
        let m = NonNull::new(unsafe { sys::eb_ndpi_open() }).map(Module);
        if m.is_none() {
            FAILED.fetch_add(1, Ordering::Relaxed);
        }
        m
    }

    /// A fresh flow state, or `None` (counted).
    pub(crate) fn flow(&self) -> Option<Flow> {
        // SAFETY: plain allocation.
        match NonNull::new(unsafe { sys::eb_ndpi_flow_new() }) {
            Some(f) => {
                LIVE.fetch_add(1, Ordering::Relaxed);
                Some(Flow(f))
            }
            None => {
                FAILED.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Feeds one IP packet (`ip`, from the IP header; at most 65535 bytes
    /// are shown) of `flow`; returns the verdict so far and whether nDPI
    /// could read more of the flow.
    pub(crate) fn process(&self, flow: &mut Flow, ip: &[u8], ts_ms: u64) -> (Verdict, bool) {
        let mut v = Verdict::default();
        let len = ip.len().min(usize::from(u16::MAX)) as u16;
        // SAFETY: `ip` is valid for `len` bytes; the flow and module are
        // live and used by this thread only (`&mut Flow`, `Module: !Sync`).
        let more = unsafe {
            sys::eb_ndpi_process(
                self.0.as_ptr(),
                flow.0.as_ptr(),
                ip.as_ptr(),
                len,
                ts_ms,
                &mut v,
            )
        };
        (v, more != 0)
    }

    /// nDPI's final verdict on `flow` (with its guess by port and address).
    pub(crate) fn giveup(&self, flow: &mut Flow) -> Verdict {
        let mut v = Verdict::default();
        // SAFETY: as in `process`.
        unsafe { sys::eb_ndpi_giveup(self.0.as_ptr(), flow.0.as_ptr(), &mut v) };
        v
    }

    /// `MASTER.APP` as ndpiReader prints it (`Unknown` for none).
    pub(crate) fn label(&self, v: &Verdict) -> String {
        let mut buf = [0 as c_char; 96];
        // SAFETY: `buf` holds `buf.len()` bytes; nDPI NUL-terminates.
        unsafe {
            sys::eb_ndpi_label(
                self.0.as_ptr(),
                v.master,
                v.app,
                buf.as_mut_ptr(),
                buf.len() as u32,
            );
        }
        text(buf.as_ptr()).into_owned()
    }

    /// A protocol's name.
    pub(crate) fn proto_name(&self, id: u16) -> Cow<'_, str> {
        // SAFETY: any id is accepted (unknown ids name "Unknown").
        text(unsafe { sys::eb_ndpi_proto_name(self.0.as_ptr(), id) })
    }

    /// A category's name.
    pub(crate) fn category_name(&self, category: u32) -> Cow<'_, str> {
        // SAFETY: as above.
        text(unsafe { sys::eb_ndpi_category_name(self.0.as_ptr(), category) })
    }

    /// A confidence kind's name (`Unknown`, `Match by port`, `DPI`, …).
    pub(crate) fn confidence_name(confidence: u32) -> Cow<'static, str> {
        // SAFETY: any value is accepted; the names are string literals.
        text(unsafe { sys::eb_ndpi_confidence_name(confidence) })
    }
}
