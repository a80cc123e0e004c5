//! (to be written) Capture files: open, map, detect pcap vs pcapng.
