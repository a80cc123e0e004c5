//! An estimated MOS for one direction of a call: the E-model of ITU-T
//! G.107, reduced to what one probe on the path observes.
//!
//! Contract: [`estimate`] takes the codec's name, the share of packets
//! lost and the mean RFC 3550 jitter, and returns a MOS in 1.0..=4.5. The
//! reduction, as passive VoIP probes make it:
//! - Every default of G.107 is kept except two impairments, so the
//!   starting rating is R = 93.2.
//! - Delay impairment `Id` from the one-way mouth-to-ear delay `d`, by the
//!   usual fit of G.107's curve (Cole and Rosenbluth, 2001):
//!   `Id = 0.024 d + 0.11 (d − 177.3) H(d − 177.3)`. A probe does not see
//!   the network delay, so `d` is what the receiver adds: a 20 ms frame
//!   plus a jitter buffer of twice the mean jitter.
//! - Equipment impairment with random loss (G.107 §7.5):
//!   `Ie,eff = Ie + (95 − Ie) · Ppl / (Ppl + Bpl)`, `Ppl` the loss in
//!   percent, `Ie` and `Bpl` per codec from G.113 Appendix I (G.711 with
//!   packet-loss concealment: 0 and 25.1; G.729(A): 11 and 19; G.723.1
//!   at 6.3 kbit/s: 15 and 16.1; GSM full rate: 20 and 10 by Ie, with
//!   Bpl 10; other codecs are rated as G.711, and say so by name).
//! - `R = 93.2 − Id − Ie,eff`, and MOS = 1 + 0.035 R + 7·10⁻⁶ R (R − 60)
//!   (100 − R) for 0 < R < 100 (1 below, 4.5 above).

/// `(Ie, Bpl)` of a codec (see the module docs) and whether the codec is
/// in the table.
pub fn codec_impairment(codec: &str) -> ((f64, f64), bool) {
    let c = codec.to_ascii_uppercase();
    match c.as_str() {
        "PCMU" | "PCMA" | "G711" | "G711U" | "G711A" => ((0.0, 25.1), true),
        "G729" | "G729A" | "G729AB" => ((11.0, 19.0), true),
        "G723" | "G7231" => ((15.0, 16.1), true),
        "GSM" => ((20.0, 10.0), true),
        _ => ((0.0, 25.1), false),
    }
}

/// The R factor (see the module docs).
pub fn r_factor(codec: &str, loss_share: f64, mean_jitter_ms: f64) -> f64 {
    let d = 20.0 + 2.0 * mean_jitter_ms.max(0.0);
    let id = 0.024 * d + if d > 177.3 { 0.11 * (d - 177.3) } else { 0.0 };
    let ((ie, bpl), _) = codec_impairment(codec);
    let ppl = (loss_share.clamp(0.0, 1.0)) * 100.0;
    let ie_eff = ie + (95.0 - ie) * ppl / (ppl + bpl);
    93.2 - id - ie_eff
}

/// MOS from an R factor (G.107 Annex B).
pub fn mos_from_r(r: f64) -> f64 {
    if r <= 0.0 {
        1.0
    } else if r >= 100.0 {
        4.5
    } else {
        1.0 + 0.035 * r + 7e-6 * r * (r - 60.0) * (100.0 - r)
    }
}

/// The estimated MOS of a direction (see the module docs).
pub fn estimate(codec: &str, loss_share: f64, mean_jitter_ms: f64) -> f64 {
    mos_from_r(r_factor(codec, loss_share, mean_jitter_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_g711_call_rates_as_g107_says() {
        // d = 20 ms: Id = 0.48, R = 92.72, MOS ≈ 4.40.
        let r = r_factor("PCMU", 0.0, 0.0);
        assert!((r - 92.72).abs() < 1e-9, "{r}");
        let m = estimate("PCMA", 0.0, 0.0);
        assert!((m - 4.40).abs() < 0.01, "{m}");
    }

    #[test]
    fn loss_jitter_and_codec_lower_it() {
        let clean = estimate("PCMU", 0.0, 0.0);
        let lossy = estimate("PCMU", 0.05, 0.0);
        let jittery = estimate("PCMU", 0.0, 100.0);
        let g729 = estimate("G729", 0.0, 0.0);
        assert!(lossy < clean && jittery < clean && g729 < clean);
        // 5 % loss on G.711: Ie,eff = 95·5/30.1 = 15.78, R = 76.94.
        assert!((r_factor("PCMU", 0.05, 0.0) - 76.94).abs() < 0.01);
        assert_eq!(mos_from_r(-3.0), 1.0);
        assert_eq!(mos_from_r(120.0), 4.5);
        assert!(!codec_impairment("opus").1);
    }
}
