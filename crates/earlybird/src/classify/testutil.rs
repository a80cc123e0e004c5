//! Synthetic data sets for the unit tests of the classifiers (test only).

use super::dataset::{Dataset, Sample, SplitMix64};
use super::FlowFeatures;
use crate::features::early::EarlyPkt;
use crate::features::Dir;

/// Three classes with distinct patterns of (size, direction, gap); each size
/// is moved by a uniform offset in `[-noise, noise]` bytes and each gap by up
/// to ±50 %. With noise, one flow in ten also uses a random server port.
pub fn patterns(per_class: usize, noise: u16, seed: u64) -> Dataset {
    let base: [[(u16, Dir, u32); 4]; 3] = [
        [
            (60, Dir::Fwd, 0),
            (60, Dir::Bwd, 900),
            (52, Dir::Fwd, 40),
            (500, Dir::Bwd, 20_000),
        ],
        [
            (80, Dir::Fwd, 0),
            (1400, Dir::Bwd, 100),
            (1400, Dir::Bwd, 5),
            (52, Dir::Fwd, 300),
        ],
        [
            (200, Dir::Fwd, 0),
            (300, Dir::Fwd, 10),
            (100, Dir::Bwd, 70_000),
            (900, Dir::Bwd, 50),
        ],
    ];
    let ports = [(6u8, 443u16), (6, 80), (17, 53)];
    let mut rng = SplitMix64::new(seed);
    let mut d = Dataset {
        classes: vec!["tls".into(), "bulk".into(), "chat".into()],
        samples: Vec::new(),
    };
    for k in 0..per_class {
        for (c, pat) in base.iter().enumerate() {
            let early = pat
                .iter()
                .map(|&(size, dir, iat)| {
                    let off = if noise == 0 {
                        0
                    } else {
                        rng.below(2 * noise as u64 + 1) as i32 - noise as i32
                    };
                    let jitter = 0.5 + rng.unit();
                    EarlyPkt {
                        size: (size as i32 + off).clamp(20, 1500) as u16,
                        dir,
                        flags: 0,
                        iat_us: (iat as f64 * jitter) as u32,
                    }
                })
                .collect();
            let (proto, mut dport) = ports[c];
            if noise > 0 && rng.below(10) == 0 {
                dport = 1024 + rng.below(60000) as u16;
            }
            d.samples.push(Sample {
                early,
                proto,
                sport: 40000 + k as u16,
                dport,
                label: c as u16,
                group: format!("g{}", k % 7),
            });
        }
    }
    d
}

/// The classifier's view of a training sample.
pub fn ff(s: &Sample) -> FlowFeatures<'_> {
    FlowFeatures {
        early: &s.early,
        proto: s.proto,
        sport: s.sport,
        dport: s.dport,
    }
}
