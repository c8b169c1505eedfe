// Package pcapfile reads packet capture files: classic pcap (microsecond and
// nanosecond, either byte order) and pcapng (several sections and
// interfaces, per-interface link types and timestamp resolutions, Enhanced,
// Simple and obsolete Packet blocks, Decryption Secrets blocks), optionally
// compressed with gzip or zstd (detected from the first bytes).
//
// It exists instead of gopacket's pcapgo readers because wtrace reads
// untrusted files: every length read from the file is checked against a
// named limit before anything is allocated, and a file cut in the middle
// yields every complete packet followed by an error that names the offset.
// (pcapgo's pcapng reader sizes its packet buffer from the file's own
// snap length and capture length.)
//
// Writer writes classic pcap files with nanosecond timestamps (the raw
// packets of `wtrace record --iface --pcap-out`).
//
// A Reader or Writer is not safe for concurrent use.
package pcapfile
