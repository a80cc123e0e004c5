//! The calling apps whose vendors publish the UDP ports their media uses,
//! for a media flow whose STUN named no app (`media_app`).
//!
//! Contract: [`app`] names the app of a UDP flow from its server's port
//! (the destination of its first packet), only where a vendor's own
//! network-preparation page puts media on it and no other vendor's page
//! lists the port; `None` otherwise. The caller asks only of flows the
//! detector found audio or video in: a port alone is not a call (Google's
//! public STUN servers answer on 19302 for every WebRTC app). Port 3478,
//! STUN and TURN's registered port, which Zoom, Google Meet, Teams and
//! every TURN server use, names nobody, nor 3479 (Zoom's and Teams'), nor
//! a client's source port: Teams' QoS ranges (50000–50059) are a setting,
//! and inside Linux's and Windows' ephemeral ranges.
//!
//! The sources, as the vendors publish them for firewall rules:
//! - Zoom, "Zoom network firewall or proxy server settings"
//!   (support.zoom.com, KB0060561): every Zoom client sends UDP to Zoom's
//!   ranges on 3478, 3479 and 8801–8810.
//! - Google, "Prepare your network for Meet meetings & live streams"
//!   (support.google.com/a/answer/1279090): audio and video on outbound
//!   UDP 3478 and 19302–19309.
//! - Microsoft, "Microsoft 365 URLs and IP address ranges"
//!   (learn.microsoft.com; Teams: UDP 3478–3481 for media) and "Implement
//!   Quality of Service (QoS) in Microsoft Teams" (the clients' source
//!   ports, by default 50000–50059).

/// Zoom's media ports (server side).
const ZOOM: std::ops::RangeInclusive<u16> = 8801..=8810;
/// Google Meet's media ports (server side).
const MEET: std::ops::RangeInclusive<u16> = 19302..=19309;
/// Microsoft Teams' media relay ports no other vendor lists (of its
/// 3478–3481).
const TEAMS: std::ops::RangeInclusive<u16> = 3480..=3481;

/// The app whose published media ports the UDP flow to server port
/// `server` uses, if one vendor's alone (see the module docs).
pub(crate) fn app(server: u16) -> Option<&'static str> {
    if ZOOM.contains(&server) {
        Some("Zoom")
    } else if MEET.contains(&server) {
        Some("GoogleMeet")
    } else if TEAMS.contains(&server) {
        Some("Teams")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::app;

    #[test]
    fn each_vendors_own_ports_name_it_and_shared_ones_nobody() {
        // Zoom's media range.
        assert_eq!(app(8801), Some("Zoom"));
        assert_eq!(app(8810), Some("Zoom"));
        assert_eq!(app(8800), None);
        assert_eq!(app(8811), None);
        // Google Meet's.
        assert_eq!(app(19302), Some("GoogleMeet"));
        assert_eq!(app(19309), Some("GoogleMeet"));
        assert_eq!(app(19301), None);
        assert_eq!(app(19310), None);
        // Teams' own two.
        assert_eq!(app(3480), Some("Teams"));
        assert_eq!(app(3481), Some("Teams"));
        assert_eq!(app(3482), None);
        // STUN's registered port and the one Zoom and Teams share.
        assert_eq!(app(3478), None);
        assert_eq!(app(3479), None);
        // Teams clients' QoS source ports are a server port to nobody.
        assert_eq!(app(50016), None);
    }
}
