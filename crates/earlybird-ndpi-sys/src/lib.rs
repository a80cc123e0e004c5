//! Raw FFI to the system's libndpi (nDPI 4.2, Debian's `libndpi-dev`)
//! through a small C shim (`src/shim.c`): open and close a detection
//! module, allocate and free per-flow state, feed IP packets, give up, and
//! name protocols, categories and confidence kinds.
//!
//! Contract: declarations only; every function is `unsafe` and follows
//! nDPI's rules (a module is used by one thread at a time; a flow state is
//! fed packets of one flow only and freed once, with
//! [`eb_ndpi_flow_free`]). The safe wrapper is earlybird's
//! `analyze::ndpi` module.

#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_uchar, c_uint, c_ushort};

/// nDPI's detection module (opaque).
#[repr(C)]
pub struct ndpi_detection_module_struct {
    _private: [u8; 0],
}

/// nDPI's per-flow state (opaque).
#[repr(C)]
pub struct ndpi_flow_struct {
    _private: [u8; 0],
}

/// What nDPI said about a flow: protocol ids, category and confidence kind.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct eb_ndpi_result {
    /// Master protocol id (0: unknown).
    pub master: u16,
    /// Application protocol id (0: unknown).
    pub app: u16,
    /// Category id.
    pub category: u32,
    /// `ndpi_confidence_t` (0: unknown).
    pub confidence: u32,
}

extern "C" {
    /// A module with every protocol on, or null.
    pub fn eb_ndpi_open() -> *mut ndpi_detection_module_struct;
    /// Frees a module from [`eb_ndpi_open`].
    pub fn eb_ndpi_close(m: *mut ndpi_detection_module_struct);
    /// A zeroed flow state, or null.
    pub fn eb_ndpi_flow_new() -> *mut ndpi_flow_struct;
    /// Frees a flow state and what nDPI allocated for it.
    pub fn eb_ndpi_flow_free(f: *mut ndpi_flow_struct);
    /// Feeds one IP packet (`ip`, `len` bytes from the IP header); writes
    /// the verdict so far to `out`; returns non-zero when nDPI could read
    /// more of the flow.
    pub fn eb_ndpi_process(
        m: *mut ndpi_detection_module_struct,
        f: *mut ndpi_flow_struct,
        ip: *const c_uchar,
        len: c_ushort,
        ts_ms: u64,
        out: *mut eb_ndpi_result,
    ) -> c_int;
    /// nDPI's final verdict (with its port/address guess) into `out`.
    pub fn eb_ndpi_giveup(
        m: *mut ndpi_detection_module_struct,
        f: *mut ndpi_flow_struct,
        out: *mut eb_ndpi_result,
    );
    /// `MASTER.APP` as ndpiReader prints it, NUL-terminated in `buf`.
    pub fn eb_ndpi_label(
        m: *mut ndpi_detection_module_struct,
        master: u16,
        app: u16,
        buf: *mut c_char,
        len: c_uint,
    );
    /// A protocol's name (static string owned by the module).
    pub fn eb_ndpi_proto_name(m: *mut ndpi_detection_module_struct, id: u16) -> *const c_char;
    /// A category's name (owned by the module).
    pub fn eb_ndpi_category_name(m: *mut ndpi_detection_module_struct, cat: u32) -> *const c_char;
    /// A confidence kind's name (static string).
    pub fn eb_ndpi_confidence_name(c: u32) -> *const c_char;
}
