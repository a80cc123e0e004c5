//! A flow's final label: the payload label where the flow has one (a name
//! the service map knows, else its protocol), the statistical verdict
//! where it has none, `unknown` when neither is confident.
//!
//! Contract: [`combine`] is a pure function of the flow's payload names
//! ([`Names`]), its early verdict ([`Verdict`]), the service map and the
//! confidence threshold. The names are tried in the order of their
//! trust: the TLS SNI, the QUIC SNI, the HTTP Host, the SSH banners, the
//! flow's own DNS query, then the cached name of its server address
//! (`dns_name`). The first name present decides: the map's application
//! and category when the map knows it (`label_source` says which field),
//! else the protocol (`TLS`, `QUIC`, `HTTP`, `SSH`, `DNS`) with the
//! protocol's category. SSH banners are not host names: they give `SSH`.
//! A cached `dns_name` no map knows says nothing (it is not the flow's
//! protocol) and the statistical verdict is used. Without a payload label,
//! a verdict whose confidence reaches the threshold gives its application
//! and category (`stat`, or `port` for the port table's); otherwise the
//! label is `unknown` (`none`). The verdict is kept beside the payload
//! label in every case (the record's `stat_app`, `stat_confidence`).

use super::services::Services;

/// Where a label came from (the record's `label_source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The TLS ClientHello's server name.
    Sni,
    /// The QUIC Initial's server name.
    Quic,
    /// The HTTP request's Host.
    Http,
    /// A DNS name: the flow's own query, or the cached name of its server.
    Dns,
    /// The SSH banners.
    Ssh,
    /// The early statistical classifier.
    Stat,
    /// The port table.
    Port,
    /// No confident label.
    None,
}

impl Source {
    /// The name written in records.
    pub fn name(self) -> &'static str {
        match self {
            Source::Sni => "sni",
            Source::Quic => "quic",
            Source::Http => "http",
            Source::Dns => "dns",
            Source::Ssh => "ssh",
            Source::Stat => "stat",
            Source::Port => "port",
            Source::None => "none",
        }
    }
}

/// The payload names of one flow (each `None` when not read).
#[derive(Debug, Clone, Copy, Default)]
pub struct Names<'a> {
    /// TLS SNI.
    pub sni: Option<&'a str>,
    /// QUIC SNI.
    pub quic_sni: Option<&'a str>,
    /// HTTP Host.
    pub http_host: Option<&'a str>,
    /// True when an SSH banner was read.
    pub ssh: bool,
    /// The flow's own first DNS query.
    pub dns_query: Option<&'a str>,
    /// The cached name of the flow's server address.
    pub dns_name: Option<&'a str>,
}

/// The early statistical verdict of a flow.
#[derive(Debug, Clone, Copy)]
pub struct Verdict<'a> {
    /// Its application.
    pub app: &'a str,
    /// Its category (empty when the model gives none).
    pub category: &'a str,
    /// Its confidence, 0 to 1.
    pub confidence: f64,
    /// It came from the port table rather than a trained model.
    pub by_port: bool,
}

/// A flow's final label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// The application (`unknown` when none).
    pub app: String,
    /// Its category (empty when none).
    pub category: String,
    /// Where it came from.
    pub source: Source,
}

/// The category of a protocol's own label.
pub(crate) fn protocol_category(app: &str) -> &'static str {
    match app {
        "SSH" => "RemoteAccess",
        "DNS" => "Network",
        _ => "Web",
    }
}

/// A flow's final label, borrowed from the names, the verdict and the map
/// it came from ([`combine_ref`]; [`combine`] owns it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LabelRef<'a> {
    /// The application (`unknown` when none).
    pub(crate) app: &'a str,
    /// Its category (empty when none).
    pub(crate) category: &'a str,
    /// Where it came from.
    pub(crate) source: Source,
}

/// The label of a flow (see the module docs).
pub fn combine(
    names: &Names<'_>,
    verdict: Option<&Verdict<'_>>,
    services: &Services,
    threshold: f64,
) -> Label {
    let l = combine_ref(names, verdict, services, threshold);
    Label {
        app: l.app.to_string(),
        category: l.category.to_string(),
        source: l.source,
    }
}

/// [`combine`] without a copy of the application and category.
pub(crate) fn combine_ref<'a>(
    names: &Names<'a>,
    verdict: Option<&Verdict<'a>>,
    services: &'a Services,
    threshold: f64,
) -> LabelRef<'a> {
    let named = [
        (names.sni, Source::Sni, "TLS"),
        (names.quic_sni, Source::Quic, "QUIC"),
        (names.http_host, Source::Http, "HTTP"),
    ];
    for (name, source, proto) in named {
        if let Some(n) = name.filter(|n| !n.is_empty()) {
            return by_name(services, n, source, Some(proto));
        }
    }
    if names.ssh {
        return LabelRef {
            app: "SSH",
            category: protocol_category("SSH"),
            source: Source::Ssh,
        };
    }
    if let Some(n) = names.dns_query.filter(|n| !n.is_empty()) {
        return by_name(services, n, Source::Dns, Some("DNS"));
    }
    if let Some(n) = names.dns_name.filter(|n| !n.is_empty()) {
        if services.lookup(n).is_some() {
            return by_name(services, n, Source::Dns, None);
        }
    }
    match verdict {
        Some(v) if v.confidence >= threshold && !v.app.is_empty() => LabelRef {
            app: v.app,
            category: v.category,
            source: if v.by_port {
                Source::Port
            } else {
                Source::Stat
            },
        },
        _ => LabelRef {
            app: "unknown",
            category: "",
            source: Source::None,
        },
    }
}

fn by_name<'a>(
    services: &'a Services,
    name: &str,
    source: Source,
    proto: Option<&'static str>,
) -> LabelRef<'a> {
    match (services.lookup(name), proto) {
        (Some((app, category)), _) => LabelRef {
            app,
            category,
            source,
        },
        (None, Some(p)) => LabelRef {
            app: p,
            category: protocol_category(p),
            source,
        },
        (None, None) => LabelRef {
            app: "unknown",
            category: "",
            source: Source::None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> Services {
        let mut s = Services::new();
        s.add("*.nflxvideo.net Netflix Video\n*.zoom.us Zoom Video\n", "t")
            .unwrap();
        s
    }

    const STAT: Verdict<'static> = Verdict {
        app: "Skype",
        category: "VoIP",
        confidence: 0.9,
        by_port: false,
    };

    fn label(app: &str, category: &str, source: Source) -> Label {
        Label {
            app: app.into(),
            category: category.into(),
            source,
        }
    }

    #[test]
    fn a_known_name_wins_over_the_verdict() {
        let s = map();
        let n = Names {
            sni: Some("ipv4-c001.1.nflxvideo.net"),
            ..Names::default()
        };
        assert_eq!(
            combine(&n, Some(&STAT), &s, 0.5),
            label("Netflix", "Video", Source::Sni)
        );
    }

    #[test]
    fn an_unknown_name_gives_its_protocol() {
        let s = map();
        let n = Names {
            quic_sni: Some("www.example.org"),
            dns_query: Some("zoom.us"),
            ..Names::default()
        };
        assert_eq!(
            combine(&n, Some(&STAT), &s, 0.5),
            label("QUIC", "Web", Source::Quic)
        );
        let n = Names {
            dns_query: Some("www.example.org"),
            ..Names::default()
        };
        assert_eq!(
            combine(&n, None, &s, 0.5),
            label("DNS", "Network", Source::Dns)
        );
        let n = Names {
            ssh: true,
            dns_name: Some("a.zoom.us"),
            ..Names::default()
        };
        assert_eq!(
            combine(&n, None, &s, 0.5),
            label("SSH", "RemoteAccess", Source::Ssh)
        );
    }

    #[test]
    fn the_cached_name_only_when_the_map_knows_it() {
        let s = map();
        let n = Names {
            dns_name: Some("zoomfr.zoom.us"),
            ..Names::default()
        };
        assert_eq!(
            combine(&n, Some(&STAT), &s, 0.5),
            label("Zoom", "Video", Source::Dns)
        );
        let n = Names {
            dns_name: Some("cdn.example.org"),
            ..Names::default()
        };
        assert_eq!(
            combine(&n, Some(&STAT), &s, 0.5),
            label("Skype", "VoIP", Source::Stat)
        );
    }

    #[test]
    fn the_verdict_below_the_threshold_is_unknown() {
        let s = map();
        let n = Names::default();
        assert_eq!(
            combine(&n, Some(&STAT), &s, 0.95),
            label("unknown", "", Source::None)
        );
        assert_eq!(
            combine(&n, None, &s, 0.0),
            label("unknown", "", Source::None)
        );
        let port = Verdict {
            by_port: true,
            ..STAT
        };
        assert_eq!(combine(&n, Some(&port), &s, 0.5).source, Source::Port);
        // An empty name counts as none.
        let n = Names {
            sni: Some(""),
            ..Names::default()
        };
        assert_eq!(combine(&n, Some(&STAT), &s, 0.5).source, Source::Stat);
        assert_eq!(Source::Quic.name(), "quic");
    }
}
