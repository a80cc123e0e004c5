//! A call's conversation as a WAV file, from the RTP its archive kept
//! (`calls wav`; feature `tools`). The archive's format and the WAV's are
//! in the docs of the parent module (`voip/audio.rs`).

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::error::{Error, Result};

/// G.711 µ-law to a 16-bit sample.
pub fn ulaw_to_linear(u: u8) -> i16 {
    let u = !u;
    let t = ((i32::from(u & 0x0f) << 3) + 0x84) << ((u & 0x70) >> 4);
    (if u & 0x80 != 0 { 0x84 - t } else { t - 0x84 }) as i16
}

/// G.711 A-law to a 16-bit sample.
pub fn alaw_to_linear(a: u8) -> i16 {
    let a = a ^ 0x55;
    let mut t = i32::from(a & 0x0f) << 4;
    let seg = (a & 0x70) >> 4;
    match seg {
        0 => t += 8,
        1 => t += 0x108,
        _ => t = (t + 0x108) << (seg - 1),
    }
    (if a & 0x80 != 0 { t } else { -t }) as i16
}

/// One packet read back from a stream file.
struct Packet {
    arrival_ns: u64,
    rtp_ts: u32,
    pt: u8,
    payload: Vec<u8>,
}

fn read_stream(path: &Path) -> Result<Vec<Packet>> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| Error::Output {
            name: path.display().to_string(),
            reason: e.to_string(),
        })?;
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(h) = bytes.get(at..at + 18) {
        let len = usize::from(u16::from_le_bytes([h[16], h[17]]));
        let Some(p) = bytes.get(at + 18..at + 18 + len) else {
            break;
        };
        out.push(Packet {
            arrival_ns: u64::from_le_bytes(h[..8].try_into().unwrap_or([0; 8])),
            rtp_ts: u32::from_le_bytes(h[8..12].try_into().unwrap_or([0; 4])),
            pt: h[14],
            payload: p.to_vec(),
        });
        at += 18 + len;
    }
    Ok(out)
}

/// The decoded samples of one direction and the arrival of its first.
fn decode(packets: &[Packet], codec_of: &dyn Fn(u8) -> String) -> Result<Option<(u64, Vec<i16>)>> {
    // The payload type with the most packets is the audio.
    let mut counts: HashMap<u8, usize> = HashMap::new();
    for p in packets {
        *counts.entry(p.pt).or_default() += 1;
    }
    let audio = counts
        .iter()
        .filter(|(pt, _)| !codec_of(**pt).eq_ignore_ascii_case("telephone-event"))
        .max_by_key(|(pt, n)| (**n, std::cmp::Reverse(**pt)))
        .map(|(pt, _)| *pt);
    let Some(pt) = audio else { return Ok(None) };
    let codec = codec_of(pt);
    let dec: fn(u8) -> i16 = match codec.to_ascii_uppercase().as_str() {
        "PCMU" => ulaw_to_linear,
        "PCMA" => alaw_to_linear,
        _ => {
            return Err(Error::Config(format!(
                "the audio is {} (payload type {pt}); only G.711 (PCMU, PCMA) is decoded",
                if codec.is_empty() {
                    "an unknown codec"
                } else {
                    &codec
                }
            )))
        }
    };
    let ours: Vec<&Packet> = packets.iter().filter(|p| p.pt == pt).collect();
    let Some(first) = ours.first() else {
        return Ok(None);
    };
    let mut samples: Vec<i16> = Vec::new();
    for p in &ours {
        let off = p.rtp_ts.wrapping_sub(first.rtp_ts) as usize;
        // A timestamp far away is a restart or garbage: an hour at most.
        if off > 8000 * 3600 {
            continue;
        }
        let end = off + p.payload.len();
        if samples.len() < end {
            samples.resize(end, 0);
        }
        for (k, b) in p.payload.iter().enumerate() {
            samples[off + k] = dec(*b);
        }
    }
    Ok(Some((first.arrival_ns, samples)))
}

/// Writes the conversation in `folder` as a WAV file at `out` (see the
/// module docs); `codec_of` names a payload type (from the call's SDP).
/// Returns the number of samples per channel.
pub fn write_wav(
    folder: &Path,
    codec_of: &dyn Fn(u8) -> String,
    stereo: bool,
    out: &Path,
) -> Result<usize> {
    let entries = std::fs::read_dir(folder).map_err(|e| Error::Output {
        name: format!("RTP archive {}", folder.display()),
        reason: e.to_string(),
    })?;
    // The stream with the most packets per sender.
    let mut best: HashMap<String, Vec<Packet>> = HashMap::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(sender) = name.split('-').next().map(str::to_string) else {
            continue;
        };
        let packets = read_stream(&e.path())?;
        if best.get(&sender).is_none_or(|b| b.len() < packets.len()) {
            best.insert(sender, packets);
        }
    }
    let mut chans: Vec<Option<(u64, Vec<i16>)>> = Vec::new();
    for sender in ["caller", "callee"] {
        chans.push(match best.get(sender) {
            Some(p) => decode(p, codec_of)?,
            None => None,
        });
    }
    let start = chans
        .iter()
        .flatten()
        .map(|c| c.0)
        .min()
        .ok_or_else(|| Error::file(folder, None, "no audio kept"))?;
    let placed: Vec<Vec<i16>> = chans
        .into_iter()
        .map(|c| match c {
            Some((t, s)) => {
                let lead = ((t - start) as u128 * 8000 / 1_000_000_000) as usize;
                let mut v = vec![0i16; lead];
                v.extend(s);
                v
            }
            None => Vec::new(),
        })
        .collect();
    let n = placed.iter().map(Vec::len).max().unwrap_or(0);
    let get = |c: usize, k: usize| placed[c].get(k).copied().unwrap_or(0);
    let channels: u16 = if stereo { 2 } else { 1 };
    let data_len = n * 2 * usize::from(channels);
    let mut w = Vec::with_capacity(44 + data_len);
    w.extend_from_slice(b"RIFF");
    w.extend_from_slice(&(36 + data_len as u32).to_le_bytes());
    w.extend_from_slice(b"WAVEfmt ");
    w.extend_from_slice(&16u32.to_le_bytes());
    w.extend_from_slice(&1u16.to_le_bytes());
    w.extend_from_slice(&channels.to_le_bytes());
    w.extend_from_slice(&8000u32.to_le_bytes());
    w.extend_from_slice(&(8000 * 2 * u32::from(channels)).to_le_bytes());
    w.extend_from_slice(&(2 * channels).to_le_bytes());
    w.extend_from_slice(&16u16.to_le_bytes());
    w.extend_from_slice(b"data");
    w.extend_from_slice(&(data_len as u32).to_le_bytes());
    for k in 0..n {
        if stereo {
            w.extend_from_slice(&get(0, k).to_le_bytes());
            w.extend_from_slice(&get(1, k).to_le_bytes());
        } else {
            let m = (i32::from(get(0, k)) + i32::from(get(1, k))).clamp(-32768, 32767) as i16;
            w.extend_from_slice(&m.to_le_bytes());
        }
    }
    std::fs::write(out, w).map_err(|e| Error::Output {
        name: out.display().to_string(),
        reason: e.to_string(),
    })?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g711_decodes_as_the_reference_tables() {
        // ITU-T G.711: µ-law 0xFF and A-law 0xD5 are (near) zero; the
        // extremes are ±32124 (µ-law) and ±32256 (A-law).
        assert_eq!(ulaw_to_linear(0xff), 0);
        assert_eq!(ulaw_to_linear(0x80), 32_124);
        assert_eq!(ulaw_to_linear(0x00), -32_124);
        assert_eq!(alaw_to_linear(0xd5), 8);
        assert_eq!(alaw_to_linear(0xaa), 32_256);
        assert_eq!(alaw_to_linear(0x2a), -32_256);
        // The generator's encoder and this decoder agree within a step.
        for s in [-30_000i16, -1000, -5, 0, 7, 1234, 29_999] {
            let back = ulaw_to_linear(crate::gen::voip::mulaw(s));
            assert!((i32::from(back) - i32::from(s)).abs() <= i32::from(s).abs() / 16 + 8);
        }
    }
}
