//! Tests of the IPFIX exporter's transports (loopback only).
