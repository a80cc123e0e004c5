"""Runs ja4plus's own `analyze` command (PyPI's ja4plus, FoxIO's JA4 on
scapy) over many captures in one interpreter.

Usage: ja4plus_many.py PCAP...

For each capture prints a line `# PATH`, then what `ja4plus --format csv
--types ja4 analyze PATH` prints for it (the same function, with the same
options). Starting ja4plus once per capture took about 1.2 s each, most
of a test's time. A capture ja4plus cannot read prints `# error: ...`
after its line and the others go on.
"""

import argparse
import sys

from ja4plus import cli


def main() -> None:
    for path in sys.argv[1:]:
        print(f"# {path}", flush=True)
        args = argparse.Namespace(
            command="analyze",
            pcap_file=path,
            types="ja4",
            format="csv",
            output=None,
            force=False,
            lookup=False,
            lookup_remote=False,
        )
        try:
            cli.cmd_analyze(args)
        except SystemExit as e:
            print(f"# error: ja4plus exited with {e.code}", flush=True)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
