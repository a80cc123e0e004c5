//! Linux network interfaces as packet sockets see them: the small system
//! calls and the ring mapping that the live capture ([`super::af_packet`]) and the replay
//! ([`super::replay`]) share.
//!
//! Contract: every lookup goes through a socket or a call that belongs to
//! the calling thread's network namespace (not sysfs, which shows the
//! namespace it was mounted in), so a thread that entered another
//! namespace sees that namespace's interfaces. Errors are
//! [`Error::Interface`] naming the interface; a missing privilege says
//! which one. Nothing here runs per packet.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use libc::c_int;

use crate::error::{Error, Result};

/// The interface's index; errors say whether the name is invalid or
/// unknown.
pub fn ifindex(name: &str) -> Result<c_int> {
    let bad = |reason: String| Error::Interface {
        name: name.into(),
        reason,
    };
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(bad(format!(
            "not a valid interface name (1 to {} bytes)",
            libc::IFNAMSIZ - 1
        )));
    }
    let c = CString::new(name).map_err(|_| bad("an interface name cannot contain NUL".into()))?;
    // SAFETY: a valid NUL-terminated string.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENODEV) | Some(libc::ENXIO) => bad("no such interface".into()),
            _ => Error::interface(name, "looking up the interface", e),
        });
    }
    c_int::try_from(index).map_err(|_| bad(format!("interface index {index} out of range")))
}

/// The interface's index and whether its link is up and running (`None`
/// when there is no such interface, or it cannot be asked).
pub fn link_up(name: &str) -> Option<(c_int, bool)> {
    let index = ifindex(name).ok()?;
    // SAFETY: plain syscall; the descriptor is owned at once.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let ifr = ioctl_ifreq(&fd, name, libc::SIOCGIFFLAGS).ok()?;
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    let flags = c_int::from(unsafe { ifr.ifr_ifru.ifru_flags });
    let running = libc::IFF_UP | libc::IFF_RUNNING;
    Some((index, flags & running == running))
}

/// An AF_PACKET raw socket that receives nothing (protocol 0) until
/// [`bind`] names a protocol: no packet reaches it before its ring is
/// set up, and a socket that only sends costs no receive work.
pub fn packet_socket(name: &str) -> Result<OwnedFd> {
    // SAFETY: plain syscall.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(Error::interface(
            name,
            "opening an AF_PACKET socket",
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Runs an interface ioctl that fills an `ifreq` for `name`.
pub fn ioctl_ifreq(fd: &OwnedFd, name: &str, request: libc::Ioctl) -> io::Result<libc::ifreq> {
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    // `ifindex` checked the name fits with its NUL.
    for (d, s) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: a valid ifreq for a request that reads the name and fills
    // the union.
    if unsafe { libc::ioctl(fd.as_raw_fd(), request, &mut ifr) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ifr)
}

/// The interface's ARP hardware type (`ARPHRD_*`), read through `fd`.
pub fn hw_type(fd: &OwnedFd, name: &str) -> Result<u16> {
    let hw = ioctl_ifreq(fd, name, libc::SIOCGIFHWADDR as _)
        .map_err(|e| Error::interface(name, "reading the hardware type", e))?;
    // SAFETY: SIOCGIFHWADDR filled the hwaddr member of the union.
    Ok(unsafe { hw.ifr_ifru.ifru_hwaddr.sa_family })
}

/// `setsockopt` of a plain value, as an `io::Result`.
pub fn set_opt<T>(fd: &OwnedFd, level: i32, name: i32, value: &T) -> std::io::Result<()> {
    // SAFETY: `value` is a live `T` of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Binds the socket to the interface, receiving `protocol` (an EtherType
/// in host order; 0: nothing, a socket that only sends).
pub fn bind(fd: &OwnedFd, name: &str, ifindex: c_int, protocol: u16) -> Result<()> {
    // SAFETY: sockaddr_ll is plain data; all-zero is valid.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex;
    // SAFETY: a valid sockaddr_ll of the size given.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(Error::interface(
            name,
            "binding to the interface",
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// A packet socket's ring mapped into the process (receive or transmit);
/// unmapped on drop. Whoever reads or writes through [`RingMap::ptr`] keeps
/// no reference past the map's life.
pub struct RingMap {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

impl RingMap {
    /// Maps the `len` bytes of ring that `fd` has set up, shared with the
    /// kernel; `populate` faults every page in now. `what` names the ring
    /// in an error.
    pub fn new(
        fd: &OwnedFd,
        name: &str,
        len: usize,
        populate: bool,
        what: &str,
    ) -> Result<RingMap> {
        let flags = libc::MAP_SHARED | if populate { libc::MAP_POPULATE } else { 0 };
        Self::map(Some(fd), name, len, flags, 0, what)
    }

    /// Maps the `len` bytes of the socket's ring at page offset `pgoff`
    /// (an XDP socket's rings), populated.
    pub fn at(
        fd: &OwnedFd,
        name: &str,
        len: usize,
        pgoff: libc::off_t,
        what: &str,
    ) -> Result<RingMap> {
        let flags = libc::MAP_SHARED | libc::MAP_POPULATE;
        Self::map(Some(fd), name, len, flags, pgoff, what)
    }

    /// `len` bytes of zeroed memory of this process, populated (an XDP
    /// socket's UMEM).
    pub fn anonymous(name: &str, len: usize) -> Result<RingMap> {
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE;
        Self::map(None, name, len, flags, 0, "UMEM")
    }

    fn map(
        fd: Option<&OwnedFd>,
        name: &str,
        len: usize,
        flags: libc::c_int,
        offset: libc::off_t,
        what: &str,
    ) -> Result<RingMap> {
        // SAFETY: maps a ring the socket has just set up, or fresh memory.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd.map_or(-1, |f| f.as_raw_fd()),
                offset,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(Error::interface(name, what, io::Error::last_os_error()));
        }
        let ptr = std::ptr::NonNull::new(ptr.cast()).ok_or_else(|| Error::Interface {
            name: name.into(),
            reason: format!("{what}: mapped at address 0"),
        })?;
        Ok(RingMap { ptr, len })
    }

    /// The first byte of the ring.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for RingMap {
    fn drop(&mut self) {
        // SAFETY: ptr/len are what mmap returned, unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

// SAFETY: the mapping is owned by this value alone (the kernel writes only
// what the ring's status words hand it), so it may move to another thread.
unsafe impl Send for RingMap {}
