"""Payload labels in Python's records: the label fields, the `services`
keyword (maps over the shipped one) and the `names` keyword (keep, hash,
drop)."""

import hashlib
import hmac

import pytest

import earlybird

from conftest import REPO

PCAP = REPO / "testdata/pcap/ndpi__iphone.pcap"
SOURCES = {"sni", "quic", "http", "dns", "ssh", "stat", "port", "none"}


def rows(**kw):
    return earlybird.flows(PCAP, **kw).to_arrow().to_pylist()


def test_every_record_is_labelled():
    # The labellers, all four: by default, as with `labellers=True`.
    t = rows()
    assert t == rows(labellers=True)
    assert all(r["label_source"] in SOURCES for r in t)
    sni = [r for r in t if r["label_source"] == "sni"]
    # The shipped map knows Apple's names (docs/SERVICES.md): its web,
    # iCloud and software-update (mesu.apple.com) servers.
    assert sni and all(r["app"] in ("Apple", "iCloud", "AppleUpdate") and r["category"] for r in sni)
    assert all(r["stat_confidence"] == r["app_confidence"] for r in t)
    # Without the labellers, the label is the model's verdict.
    plain = rows(labellers=False)
    assert plain and "sni" not in plain[0]
    assert all(r["app"] == r["stat_app"] and r["label_source"] in ("port", "none") for r in plain)


def test_services_keyword_lays_a_map_over_the_shipped_one(tmp_path):
    mine = tmp_path / "mine.txt"
    mine.write_text("*.icloud.com MyCloud Cloud\n")
    t = rows(analyzers=["tls"], services=[str(mine)])
    icloud = [r for r in t if (r["sni"] or "").endswith("icloud.com")]
    assert icloud and all(r["app"] == "MyCloud" and r["category"] == "Cloud" for r in icloud)
    bad = tmp_path / "bad.txt"
    bad.write_text("x.example.org App NoSuchCategory\n")
    with pytest.raises(ValueError, match="bad.txt, line 1"):
        rows(services=[str(bad)])


def test_names_keyword_hashes_or_drops_the_names():
    kept = rows(analyzers=["tls"])
    hashed = rows(analyzers=["tls"], names="hash", names_key="k")
    dropped = rows(analyzers=["tls"], names="drop")
    assert any(r["sni"] for r in kept)
    for a, h, d in zip(kept, hashed, dropped, strict=True):
        if a["sni"]:
            tag = hmac.new(b"k", a["sni"].encode(), hashlib.sha256).hexdigest()[:32]
            assert h["sni"] == tag and d["sni"] is None
        # The label was taken from the names first.
        assert a["app"] == h["app"] == d["app"]
