#!/usr/bin/env python3
"""Reads a Parquet file written by `earlybird flows -o X.parquet` with every
reader given (pyarrow, duckdb, polars) and compares it field by field with
the CSV of the same run.

Usage: parquet_check.py CSV PARQUET READER...

For each reader: the same columns in the same order, the same number of
rows, and in every cell: CSV empty <-> null (a text column may hold the
empty string instead: a tunnel of "none" is text, not a missing value);
integers equal; floats within the CSV's rounding (3 decimals); text equal.
Spot checks of column types (unsigned, signed, double, text). Prints one
line per reader: "READER: ROWS rows x COLS columns equal the CSV"; exits 1
with the first difference, 2 when a reader's module is missing.
"""

import csv
import math
import sys


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


# Column -> the kind of type each reader must report.
SPOT = {
    "src": "text",
    "first_ts": "u64",
    "sport": "u16",
    "icmp_type": "u8",
    "fwd_size_mean": "f64",
    "pkt1_dir": "i8",
    "pkt1_iat_us": "u32",
}


def kind_pyarrow(t):
    import pyarrow as pa

    for name, test in [
        ("u8", pa.types.is_uint8),
        ("u16", pa.types.is_uint16),
        ("u32", pa.types.is_uint32),
        ("u64", pa.types.is_uint64),
        ("i8", pa.types.is_int8),
        ("i64", pa.types.is_int64),
        ("f64", pa.types.is_float64),
        ("text", lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)),
    ]:
        if test(t):
            return name
    return str(t)


def kind_duckdb(t):
    return {
        "UTINYINT": "u8",
        "USMALLINT": "u16",
        "UINTEGER": "u32",
        "UBIGINT": "u64",
        "TINYINT": "i8",
        "BIGINT": "i64",
        "DOUBLE": "f64",
        "VARCHAR": "text",
    }.get(str(t), str(t))


def kind_polars(t):
    import polars as pl

    return {
        pl.UInt8: "u8",
        pl.UInt16: "u16",
        pl.UInt32: "u32",
        pl.UInt64: "u64",
        pl.Int8: "i8",
        pl.Int64: "i64",
        pl.Float64: "f64",
        pl.String: "text",
    }.get(t, str(t))


def load(reader, path):
    """(names, kinds, rows as lists of Python values or None)."""
    if reader == "pyarrow":
        import pyarrow.parquet as pq

        t = pq.read_table(path)
        names = t.schema.names
        kinds = [kind_pyarrow(f.type) for f in t.schema]
        cols = [t.column(i).to_pylist() for i in range(t.num_columns)]
        return names, kinds, [list(r) for r in zip(*cols)] if cols else []
    if reader == "duckdb":
        import duckdb

        con = duckdb.connect()
        rel = con.sql("SELECT * FROM read_parquet(?)", params=[path])
        names = rel.columns
        kinds = [kind_duckdb(t) for t in rel.types]
        return names, kinds, [list(r) for r in rel.fetchall()]
    if reader == "polars":
        import polars as pl

        df = pl.read_parquet(path)
        names = df.columns
        kinds = [kind_polars(t) for t in df.dtypes]
        return names, kinds, [list(r) for r in df.rows()]
    fail(f"unknown reader {reader}")


def same(text, value, kind):
    if text == "":
        return value is None or (kind == "text" and value == "")
    if value is None:
        return False
    if kind == "text":
        return value == text
    if kind == "f64":
        want = float(text)
        return math.isfinite(value) and abs(value - want) <= 0.0005 + abs(want) * 1e-15
    return isinstance(value, int) and not isinstance(value, bool) and value == int(text)


def main():
    if len(sys.argv) < 4:
        fail(__doc__)
    csv_path, pq_path, readers = sys.argv[1], sys.argv[2], sys.argv[3:]
    header, rows = read_csv(csv_path)
    for reader in readers:
        try:
            __import__(reader)
        except ImportError:
            print(f"{reader}: not installed", file=sys.stderr)
            sys.exit(2)
        names, kinds, got = load(reader, pq_path)
        if list(names) != header:
            fail(f"{reader}: columns {list(names)} != CSV header {header}")
        for col, want in SPOT.items():
            if col in header and kinds[header.index(col)] != want:
                fail(f"{reader}: {col} is {kinds[header.index(col)]}, want {want}")
        if len(got) != len(rows):
            fail(f"{reader}: {len(got)} rows, CSV has {len(rows)}")
        for i, (g, w) in enumerate(zip(got, rows)):
            for j, name in enumerate(header):
                if not same(w[j], g[j], kinds[j]):
                    fail(f"{reader}: row {i} {name}: {g[j]!r} != CSV {w[j]!r}")
        print(f"{reader}: {len(got)} rows x {len(header)} columns equal the CSV")


main()
