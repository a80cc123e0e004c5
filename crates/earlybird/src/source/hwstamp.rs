//! Where the packet stamps of a live capture come from: the NIC's
//! timestamping capabilities, hardware stamps on request, and per-frame
//! counts of the stamp source.
//!
//! Contract:
//! - [`ts_info`] asks the driver what it offers (`SIOCETHTOOL`,
//!   `ETHTOOL_GET_TS_INFO`), through a socket of the calling thread's
//!   network namespace. [`TsInfo::hardware`] is true when it can stamp
//!   received packets in hardware (`SOF_TIMESTAMPING_RAW_HARDWARE` and a
//!   receive filter other than none).
//! - [`socket_options`] sets up a packet socket: software receive stamps on
//!   (`SO_TIMESTAMPING` with `SOF_TIMESTAMPING_RX_SOFTWARE`, which makes the
//!   kernel stamp every received packet when it arrives), and, when the NIC
//!   offers hardware stamps, `PACKET_TIMESTAMP` =
//!   `SOF_TIMESTAMPING_RAW_HARDWARE`, so the ring carries the NIC's stamp of
//!   every frame that has one. This never reconfigures the NIC: a NIC whose
//!   hardware stamping is off gives software stamps.
//! - [`HwStamping::enable`] (`--hw-timestamps`, asked by the user) turns the
//!   NIC's receive stamping on for all packets (`SIOCSHWTSTAMP`,
//!   `HWTSTAMP_FILTER_ALL`) when it is off, and puts the NIC's previous
//!   setting back when dropped. An interface that offers no hardware stamps
//!   is an error naming it.
//! - [`Stamped`] counts frames by the stamp the kernel gave them (the
//!   `TP_STATUS_TS_*` bits of the frame's status): hardware, software, or
//!   none (the kernel took the time when it copied the frame to the ring).
//!   Nothing here runs per packet except [`Stamped::count`].

use std::os::fd::{AsRawFd, OwnedFd};

use crate::error::{Error, Result};

/// `ETHTOOL_GET_TS_INFO` (linux/ethtool.h).
const ETHTOOL_GET_TS_INFO: u32 = 0x41;

/// `struct ethtool_ts_info` (linux/ethtool.h).
#[repr(C)]
#[derive(Default)]
struct EthtoolTsInfo {
    cmd: u32,
    so_timestamping: u32,
    phc_index: i32,
    tx_types: u32,
    tx_reserved: [u32; 3],
    rx_filters: u32,
    rx_reserved: [u32; 3],
}

/// What an interface's driver offers for timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TsInfo {
    /// `SOF_TIMESTAMPING_*` capability bits.
    pub so_timestamping: u32,
    /// Bit set of the `HWTSTAMP_FILTER_*` receive filters supported.
    pub rx_filters: u32,
    /// The PTP hardware clock's index, -1 without one.
    pub phc_index: i32,
}

impl TsInfo {
    /// Whether received packets can be stamped by the hardware.
    pub fn hardware(&self) -> bool {
        self.so_timestamping & libc::SOF_TIMESTAMPING_RAW_HARDWARE != 0
            && self.rx_filters & !(1 << libc::HWTSTAMP_FILTER_NONE) != 0
    }
}

/// The driver's timestamping capabilities of `name`, asked through `fd`.
pub fn ts_info(fd: &OwnedFd, name: &str) -> Result<TsInfo> {
    let mut info = EthtoolTsInfo {
        cmd: ETHTOOL_GET_TS_INFO,
        ..EthtoolTsInfo::default()
    };
    ifreq_data(
        fd,
        name,
        libc::SIOCETHTOOL,
        (&mut info as *mut EthtoolTsInfo).cast(),
    )
    .map_err(|e| Error::interface(name, "asking for its timestamping (ETHTOOL_GET_TS_INFO)", e))?;
    Ok(TsInfo {
        so_timestamping: info.so_timestamping,
        rx_filters: info.rx_filters,
        phc_index: info.phc_index,
    })
}

/// An interface ioctl whose `ifreq` points at `data`.
pub(crate) fn ifreq_data(
    fd: &OwnedFd,
    name: &str,
    request: libc::c_ulong,
    data: *mut libc::c_char,
) -> std::io::Result<()> {
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    for (d, s) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = data;
    // SAFETY: a valid ifreq whose data pointer points at the struct the
    // request reads or fills, alive for the call.
    if unsafe { libc::ioctl(fd.as_raw_fd(), request as _, &mut ifr) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Sets the packet socket's stamps (see the module docs): software receive
/// stamps always, the NIC's raw hardware stamps when `hardware`.
pub fn socket_options(fd: &OwnedFd, name: &str, hardware: bool) -> Result<()> {
    use super::netdev::set_opt;
    let mut flags = libc::SOF_TIMESTAMPING_RX_SOFTWARE | libc::SOF_TIMESTAMPING_SOFTWARE;
    if hardware {
        flags |= libc::SOF_TIMESTAMPING_RX_HARDWARE | libc::SOF_TIMESTAMPING_RAW_HARDWARE;
    }
    set_opt(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPING, &flags)
        .map_err(|e| Error::interface(name, "SO_TIMESTAMPING", e))?;
    if hardware {
        let v = libc::SOF_TIMESTAMPING_RAW_HARDWARE as libc::c_int;
        set_opt(fd, libc::SOL_PACKET, libc::PACKET_TIMESTAMP, &v)
            .map_err(|e| Error::interface(name, "PACKET_TIMESTAMP", e))?;
    }
    Ok(())
}

/// The NIC's hardware receive stamping turned on by [`HwStamping::enable`];
/// its previous setting is put back on drop.
pub struct HwStamping {
    fd: OwnedFd,
    name: String,
    /// The setting found, when it was changed.
    restore: Option<libc::hwtstamp_config>,
}

impl HwStamping {
    /// Turns on hardware receive stamps of every packet on `name` (left as
    /// it is when they already are on). An interface that offers none is an
    /// error naming it.
    pub fn enable(name: &str) -> Result<HwStamping> {
        let fd = super::netdev::packet_socket(name)?;
        let info = ts_info(&fd, name)?;
        if !info.hardware() {
            return Err(Error::Interface {
                name: name.into(),
                reason: format!(
                    "--hw-timestamps: {name} offers no hardware receive timestamps \
                     (its driver reports {}); its packets get the kernel's software stamps \
                     without the option",
                    describe(&info)
                ),
            });
        }
        let mut cur = libc::hwtstamp_config {
            flags: 0,
            tx_type: libc::HWTSTAMP_TX_OFF as libc::c_int,
            rx_filter: libc::HWTSTAMP_FILTER_NONE as libc::c_int,
        };
        // Some drivers cannot report their setting; then it is taken as off.
        let _ = ifreq_data(
            &fd,
            name,
            libc::SIOCGHWTSTAMP,
            (&mut cur as *mut libc::hwtstamp_config).cast(),
        );
        if cur.rx_filter != libc::HWTSTAMP_FILTER_NONE as libc::c_int {
            return Ok(HwStamping {
                fd,
                name: name.into(),
                restore: None,
            });
        }
        let mut want = libc::hwtstamp_config {
            flags: 0,
            tx_type: cur.tx_type,
            rx_filter: libc::HWTSTAMP_FILTER_ALL as libc::c_int,
        };
        ifreq_data(
            &fd,
            name,
            libc::SIOCSHWTSTAMP,
            (&mut want as *mut libc::hwtstamp_config).cast(),
        )
        .map_err(|e| {
            Error::interface(
                name,
                "--hw-timestamps: turning on hardware receive stamps (SIOCSHWTSTAMP)",
                e,
            )
        })?;
        Ok(HwStamping {
            fd,
            name: name.into(),
            restore: Some(cur),
        })
    }
}

impl Drop for HwStamping {
    fn drop(&mut self) {
        if let Some(mut old) = self.restore.take() {
            // Best effort: the interface may be gone.
            let _ = ifreq_data(
                &self.fd,
                &self.name,
                libc::SIOCSHWTSTAMP,
                (&mut old as *mut libc::hwtstamp_config).cast(),
            );
        }
    }
}

/// What a driver's capabilities say, in words.
pub fn describe(info: &TsInfo) -> String {
    let mut parts = Vec::new();
    if info.so_timestamping & libc::SOF_TIMESTAMPING_RX_SOFTWARE != 0 {
        parts.push("software receive");
    }
    if info.so_timestamping & libc::SOF_TIMESTAMPING_RAW_HARDWARE != 0 {
        parts.push("hardware");
    }
    if parts.is_empty() {
        "no timestamping".into()
    } else {
        format!("{} stamps", parts.join(" and "))
    }
}

/// Frames counted by the stamp the kernel gave them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stamped {
    /// Stamped by the NIC (`TP_STATUS_TS_RAW_HARDWARE`, or the old
    /// `TP_STATUS_TS_SYS_HARDWARE`).
    pub hardware: u64,
    /// Stamped by the kernel on arrival (`TP_STATUS_TS_SOFTWARE`).
    pub software: u64,
    /// No stamp: the kernel took the time when it filled the ring.
    pub none: u64,
}

impl Stamped {
    /// Counts one frame of ring status `status`.
    #[inline]
    pub fn count(&mut self, status: u32) {
        if status & (libc::TP_STATUS_TS_RAW_HARDWARE | libc::TP_STATUS_TS_SYS_HARDWARE) != 0 {
            self.hardware += 1;
        } else if status & libc::TP_STATUS_TS_SOFTWARE != 0 {
            self.software += 1;
        } else {
            self.none += 1;
        }
    }

    /// Adds `o`.
    pub fn add(&mut self, o: &Stamped) {
        self.hardware += o.hardware;
        self.software += o.software;
        self.none += o.none;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_counted_by_stamp_source() {
        let mut s = Stamped::default();
        s.count(libc::TP_STATUS_USER | libc::TP_STATUS_TS_SOFTWARE);
        s.count(libc::TP_STATUS_TS_RAW_HARDWARE | libc::TP_STATUS_TS_SOFTWARE);
        s.count(libc::TP_STATUS_VLAN_VALID);
        s.count(libc::TP_STATUS_TS_SOFTWARE);
        assert_eq!(
            s,
            Stamped {
                hardware: 1,
                software: 2,
                none: 1
            }
        );
    }

    #[test]
    fn hardware_needs_raw_stamps_and_a_receive_filter() {
        let sw = TsInfo {
            so_timestamping: libc::SOF_TIMESTAMPING_RX_SOFTWARE | libc::SOF_TIMESTAMPING_SOFTWARE,
            rx_filters: 0,
            phc_index: -1,
        };
        assert!(!sw.hardware());
        assert_eq!(describe(&sw), "software receive stamps");
        let hw = TsInfo {
            so_timestamping: sw.so_timestamping | libc::SOF_TIMESTAMPING_RAW_HARDWARE,
            rx_filters: (1 << libc::HWTSTAMP_FILTER_NONE) | (1 << libc::HWTSTAMP_FILTER_ALL),
            phc_index: 0,
        };
        assert!(hw.hardware());
        let tx_only = TsInfo {
            rx_filters: 1 << libc::HWTSTAMP_FILTER_NONE,
            ..hw
        };
        assert!(!tx_only.hardware());
    }
}
