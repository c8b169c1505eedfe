// Package live captures packets from a network interface as they pass,
// without libpcap and without cgo, for `wtrace record --iface`.
//
// On Linux, Open creates an AF_PACKET socket bound to one interface
// (Ethernet or loopback framing) and attaches a classic BPF program that
// Filter generates ("tcp and port P and host H"), so the kernel drops the
// rest before copying it. Packets carry the kernel's receive timestamps
// (SO_TIMESTAMPNS). On loopback, where every packet passes twice, the
// outgoing copy is dropped, as libpcap does. Opening a packet socket needs
// CAP_NET_RAW: without it Open returns an error wrapping ErrPermission. On
// other systems Open returns ErrUnsupported.
//
// Record records a Handle into session files end to end (`wtrace record
// --iface`): a formats.FileSink with the session's Meta and Summary, a
// capture.Recorder, optionally a pcap file of the raw packets
// (pcapfile.Writer), until its context is done or a limit is reached. Run
// is its loop, for any Source: it reads packets, hands them to the
// Recorder, and at least every flush interval calls a flush function (the
// FileSink's Flush), so a crash loses at most about that much of the
// recording.
//
// Memory: a Handle holds one packet buffer of the snap length (256 KiB by
// default: with GRO, received packets can be far larger than the MTU) and
// a kernel receive buffer (Options.BufferSize).
//
// A Handle is not safe for concurrent use.
package live
