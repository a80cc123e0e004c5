"""earlybird: flows of packet captures as Arrow, pandas and Polars tables.

``earlybird.flows(source, **options)`` runs the earlybird engine (the same
library ``earlybird flows`` runs) over capture files, directories or glob
patterns (or, with ``interface=``, a live capture) and returns a :class:`Flows`: iterate it for records (dicts), or
take the whole table with ``to_arrow()``, ``to_pandas()``, ``to_polars()``,
or stream it batch by batch with ``batches()``. The engine fills Arrow
record batches of ``batch_size`` rows (the columns of ``earlybird flows -o
FILE.parquet``) and hands them over through the Arrow C data interface; no
Python object is made per record except when iterating records.

See docs/PYTHON.md for the options, the columns and their dtypes, and the
mapping to NFStream's column names.
"""

import glob as _glob
import os as _os

from . import _native
from ._native import CaptureError, EarlybirdError, ModelError

__all__ = [
    "flows",
    "print_config",
    "train",
    "evaluate",
    "Flows",
    "EarlybirdError",
    "CaptureError",
    "ModelError",
    "NFSTREAM_NAMES",
]

#: Rows per Arrow batch by default.
DEFAULT_BATCH_SIZE = 65536

#: earlybird column -> NFStream column, where the two mean the same thing
#: (NFStream's bidirectional "src2dst"/"dst2src" are earlybird's
#: "fwd"/"bwd": client to server and back). Byte counts and packet sizes
#: are IP lengths in earlybird: NFStream's with accounting_mode=1.
NFSTREAM_NAMES = {
    "src": "src_ip",
    "dst": "dst_ip",
    "sport": "src_port",
    "dport": "dst_port",
    "proto": "protocol",
    "ip_version": "ip_version",
    "vlan": "vlan_id",
    "tunnel_id": "tunnel_id",
    "src_mac": "src_mac",
    "dst_mac": "dst_mac",
    "fwd_packets": "src2dst_packets",
    "bwd_packets": "dst2src_packets",
    "fwd_bytes": "src2dst_bytes",
    "bwd_bytes": "dst2src_bytes",
    "fwd_size_min": "src2dst_min_ps",
    "fwd_size_max": "src2dst_max_ps",
    "fwd_size_mean": "src2dst_mean_ps",
    "fwd_size_std": "src2dst_stddev_ps",
    "bwd_size_min": "dst2src_min_ps",
    "bwd_size_max": "dst2src_max_ps",
    "bwd_size_mean": "dst2src_mean_ps",
    "bwd_size_std": "dst2src_stddev_ps",
    "app": "application_name",
}

_GLOB_CHARS = ("*", "?", "[")


def _early_lists(batch, n):
    """The batch with its N x 3 early-packet columns replaced by three list
    columns, ``early_size``, ``early_dir``, ``early_iat_us``, each row's
    list as long as its ``early_len`` (the packets the flow had, up to N),
    in the place of the flat columns. A view of the same values, built
    with pyarrow (no Python object per record)."""
    import numpy as np
    import pyarrow as pa

    rows = batch.num_rows
    length = np.minimum(batch.column("early_len").to_numpy(zero_copy_only=False).astype(np.int64), n)
    offsets = np.zeros(rows + 1, np.int32)
    np.cumsum(length, out=offsets[1:])
    k = np.arange(n)
    # Row-major positions in the concatenation of pkt1_x, pkt2_x, ...
    take = (k[None, :] * rows + np.arange(rows)[:, None])[k[None, :] < length[:, None]]
    flat = {f"pkt{i}_{x}" for i in range(1, n + 1) for x in ("size", "dir", "iat_us")}
    names, arrays = [], []
    for field in batch.schema:
        if field.name == "pkt1_size":
            for x in ("size", "dir", "iat_us"):
                values = pa.concat_arrays([batch.column(f"pkt{i}_{x}") for i in range(1, n + 1)])
                names.append(f"early_{x}")
                arrays.append(pa.ListArray.from_arrays(pa.array(offsets), values.take(pa.array(take))))
        elif field.name not in flat:
            names.append(field.name)
            arrays.append(batch.column(field.name))
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _pandas_types():
    """Arrow integer type -> pandas nullable dtype (``types_mapper``)."""
    import pandas as pd
    import pyarrow as pa

    m = {
        pa.uint8(): pd.UInt8Dtype(),
        pa.uint16(): pd.UInt16Dtype(),
        pa.uint32(): pd.UInt32Dtype(),
        pa.uint64(): pd.UInt64Dtype(),
        pa.int8(): pd.Int8Dtype(),
        pa.int16(): pd.Int16Dtype(),
        pa.int32(): pd.Int32Dtype(),
        pa.int64(): pd.Int64Dtype(),
    }
    return m.get


def _expand(source):
    """Paths from a path, a glob pattern, or a list of them; a pattern
    matching nothing is an error (as a missing file is)."""
    items = [source] if isinstance(source, (str, bytes, _os.PathLike)) else list(source)
    paths = []
    for item in items:
        text = _os.fspath(item)
        if isinstance(text, bytes):
            text = _os.fsdecode(text)
        if any(c in text for c in _GLOB_CHARS) and not _os.path.exists(text):
            matched = sorted(_glob.glob(text, recursive=True))
            if not matched:
                raise CaptureError(f"{text}: no file matches this pattern")
            paths.extend(matched)
        else:
            paths.append(text)
    if not paths:
        raise ValueError("no input given")
    return paths


class Flows:
    """The flow records of one run of the engine, read once, in the order
    the engine ends the flows.

    Iterating gives one dict per record; ``batches()`` gives
    ``pyarrow.RecordBatch``es; ``to_arrow()``/``to_pandas()``/
    ``to_polars()`` read what is left into one table. ``report`` is the
    run's report (counters, warnings) once it has ended.

    A KeyboardInterrupt while the package reads (iterating, ``batches()``,
    ``to_arrow()`` and the others) stops the run as SIGINT stops
    ``earlybird flows``: reading ends, open flows are flushed, and the
    exception propagates (one raised in your own loop body does not pass
    through the package: call ``stop()`` in your handler). ``to_arrow()`` (and the others) keep the batches
    read so far, so calling one again after the interrupt returns
    everything the run produced, flushed flows included, and ``report``
    says ``interrupted``.
    """

    def __init__(self, run, early_lists=False):
        self._run = run
        # Batches to_arrow() has read, as the engine gave them (shaped
        # when the table is built, so that none is lost to an interrupt).
        self._read = []
        self._done = False
        # N, from the schema's pkt{i}_size columns (0: keep them flat).
        self._lists = 0
        if early_lists:
            names = set(run.schema().names)
            while f"pkt{self._lists + 1}_size" in names:
                self._lists += 1

    def _shape(self, batch):
        return _early_lists(batch, self._lists) if self._lists else batch

    @property
    def schema(self):
        """The ``pyarrow.Schema`` of the records."""
        schema = self._run.schema()
        if not self._lists:
            return schema
        import pyarrow as pa

        return self._shape(pa.RecordBatch.from_pylist([], schema=schema)).schema

    @property
    def report(self):
        """The run's report (a dict), ``None`` until the run has ended."""
        return self._run.report()

    @property
    def learning(self):
        """What self-training (``learn=DIR``) has learnt so far, as a dict,
        while the run goes on and after it (``None`` without ``learn``):
        ``offered`` and ``kept`` flows (``kept_bytes``), the training
        thread's ``training_seconds`` and ``resting_seconds``, ``deferred``
        triggers, ``models`` (one dict per model written: ``id``, ``path``,
        ``trained``, ``held_out``, ``accuracy``, ``coverage``,
        ``best_before``, ``best``, ...), ``errors``, ``first_in_use`` (the
        first learnt model the shards took in: ``id``, ``turn``,
        ``packet_time``; ``None`` while the run's own model decides) and
        ``installs``."""
        return self._run.learning()

    def stop(self):
        """Ask the run to stop; open flows are flushed and still arrive."""
        self._run.stop()

    def batches(self):
        """The remaining records as ``pyarrow.RecordBatch``es."""
        while not self._done:
            b = self._run.next_batch()
            if b is None:
                self._done = True
                return
            yield self._shape(b)

    def __iter__(self):
        for b in self.batches():
            yield from b.to_pylist()

    def to_arrow(self):
        """Every remaining record as one ``pyarrow.Table``."""
        import pyarrow as pa

        try:
            while not self._done:
                # The engine appends each batch to the list itself, so an
                # interrupt raised as the call returns loses none.
                if not self._run.next_batch_into(self._read):
                    self._done = True
        except KeyboardInterrupt:
            self._run.stop()
            raise
        shaped = [self._shape(b) for b in self._read]
        table = pa.Table.from_batches(shaped, schema=self.schema)
        self._read = []
        return table

    def to_pandas(self, **kwargs):
        """Every remaining record as a ``pandas.DataFrame``. Integer
        columns are pandas' nullable integer dtypes of the same width and
        sign (``UInt16``, ``Int8``, ...; null is ``<NA>``), so a column's
        dtype does not depend on whether it has nulls; floats are
        ``float64`` (null is NaN); text is pandas' default string dtype.
        ``kwargs`` go to ``pyarrow.Table.to_pandas`` (``types_mapper=``
        replaces the mapping)."""
        kwargs.setdefault("types_mapper", _pandas_types())
        return self.to_arrow().to_pandas(**kwargs)

    def to_polars(self):
        """Every remaining record as a ``polars.DataFrame`` (zero copy)."""
        import polars as pl

        return pl.from_arrow(self.to_arrow())


def _options(options):
    """Keyword arguments as configuration values: paths as strings,
    tuples as lists; ``None`` (not given) is left out."""
    out = {}
    for key, value in options.items():
        if value is None:
            continue
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            out[key] = _os.fspath(value) if isinstance(value, _os.PathLike) else value
        else:
            out[key] = [_os.fspath(v) if isinstance(v, _os.PathLike) else v for v in value]
    return out


def flows(
    source=None,
    *,
    config=None,
    model="default",
    analyzers=(),
    batch_size=DEFAULT_BATCH_SIZE,
    early_lists=False,
    **options,
):
    """Flow records of capture files (pcap, pcapng; gzip, zstd, xz
    compressed), directories of them (searched recursively) or glob
    patterns, as ``earlybird flows INPUT...`` makes them.

    Every option of ``earlybird flows`` is a keyword argument, its long
    name with ``_`` for ``-`` (``idle_timeout=30``, ``dump_dir="/d"``,
    ``stats_out="s.csv"``, ``sample="systematic:10"``); ``None`` takes the
    default. ``config``: a probe TOML file (``earlybird flows --config``),
    read first; the keyword arguments are laid over it as the command
    line's options are (lists grow, single values are replaced), and
    ``source`` or ``interface``, when given, replace its input. The
    records come here; the file's or the arguments' ``output`` files are
    written too. ``model``: ``"default"`` (the built-in model), a model
    file's path, or ``None`` (no classifier, as ``--no-model``).
    ``analyzers``: names as ``--analyzer`` (the payload labellers run
    too, unless ``labellers=False``, as ``--no-labellers``). ``batch_size``: rows per
    Arrow batch (memory held is a few batches). ``early_lists``: the early
    packets as three list columns (``early_size``, ``early_dir``,
    ``early_iat_us``; one entry per packet the flow had, up to N) instead
    of the CLI's flat ``pkt{i}_*`` columns.

    Live capture (``earlybird flows -i``; Linux, root or CAP_NET_RAW):
    ``interface`` instead of ``source`` (a name, ``eth0,eth1`` or
    ``any``); the capture runs until ``duration`` seconds have passed,
    ``stop()`` or a KeyboardInterrupt, then the open flows are flushed (a
    reader too slow for the capture loses batches past ``drop_after``, 64
    by default live, counted in the report, rather than stall it).

    Raises ``CaptureError`` for an input that does not exist or is not a
    capture, ``ModelError`` for a bad model file, ``ValueError`` for a bad
    option or configuration key; an error during the run is raised when
    the records end.
    """
    if isinstance(analyzers, str):
        analyzers = [analyzers]
    interface = options.get("interface")
    if interface is not None and source is not None:
        raise ValueError("give either source (capture files) or interface, not both")
    if interface is None and source is None and config is None:
        raise ValueError("give source (capture files), interface or config")
    options = _options(options)
    if model is None:
        options["no_model"] = True
    elif model != "default":
        options["model"] = _os.fspath(model)
    if analyzers:
        options["analyzer"] = list(analyzers)
    run = _native.start(
        _expand(source) if source is not None else [],
        batch_size=int(batch_size),
        config=None if config is None else _os.fspath(config),
        options=options,
    )
    return Flows(run, early_lists)


def print_config(config=None, **options):
    """The effective configuration as TOML, as ``earlybird flows
    --print-config`` prints it: ``config``'s file (or the defaults) with
    the keyword arguments laid over it."""
    return _native.print_config(
        config=None if config is None else _os.fspath(config), options=_options(options)
    )


def train(
    files,
    labels,
    output,
    *,
    algo="c45",
    level="proto",
    packets=4,
    use_ports=False,
    threshold=0.0,
    target_precision=None,
    trees=20,
    dpi_only=False,
    max_per_capture=None,
    min_support=1,
    split=0.0,
    seed=1,
):
    """``earlybird train``: capture files or directories (``files``) and
    ground-truth CSVs (``labels``) -> a model file at ``output``. Options
    and defaults are the CLI's (``n`` is ``packets``). Returns a dict:
    ``model`` (one line describing it), ``summary`` (the data set),
    ``skipped`` (captures not read), ``held_out`` (with ``split`` > 0: the
    figures on the held-out captures, as ``evaluate`` gives them)."""
    return _native.train(
        _expand(files),
        [_os.fspath(p) for p in ([labels] if isinstance(labels, (str, _os.PathLike)) else labels)],
        _os.fspath(output),
        algo,
        level,
        int(packets),
        bool(use_ports),
        float(threshold),
        target_precision,
        int(trees),
        bool(dpi_only),
        max_per_capture,
        int(min_support),
        float(split),
        int(seed),
    )


def evaluate(
    model,
    files,
    labels,
    *,
    level=None,
    dpi_only=False,
    max_per_capture=None,
    min_support=1,
    split=0.0,
    seed=1,
    allow_overlap=False,
):
    """``earlybird evaluate --model MODEL``: the model's verdicts on
    labelled captures (with ``split`` > 0, on the held-out part only; the
    same split as ``train`` with the same files and seed). Returns a dict:
    ``accuracy``, ``precision``, ``coverage``, ``macro_f1``, ``flows``,
    ``correct``, ``unknown``, ``classes``, ``threshold``, ``text`` (the
    CLI's table), ``summary``, ``skipped``, ``overlap``. Refuses captures
    the model was trained on unless ``allow_overlap``."""
    return _native.evaluate(
        _os.fspath(model),
        _expand(files),
        [_os.fspath(p) for p in ([labels] if isinstance(labels, (str, _os.PathLike)) else labels)],
        level,
        bool(dpi_only),
        max_per_capture,
        int(min_support),
        float(split),
        int(seed),
        bool(allow_overlap),
    )
