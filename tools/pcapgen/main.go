// Command pcapgen writes the synthetic captures of the recorder's memory
// and time measurements (docs/BENCHMARKS.md): the workloads of
// testkit/pcaptest, streamed to a pcap file, so that captures far larger
// than memory need not be committed.
//
//	go run ./tools/pcapgen -w exchanges -n 300000 -o /tmp/exchanges.pcap
//	go run ./tools/pcapgen -w connections -n 20000 -gap 1s -o /tmp/conns.pcap
//
// Workloads: exchanges (n GET exchanges over -conns keep-alive
// connections), connections (n one-exchange connections, -gap apart,
// ended as -end says),
// pipelined (n requests on one connection before their answers),
// unanswered (n pipelined requests never answered), watches (n one-event
// watches, one connection each), openwatches (n watches with one event
// each, all still open when the capture ends), secretlist (one gzip'd LIST
// of Secrets of about n bytes of JSON), synflood (n half-open flows, then
// one watch), steady (an informer's LIST and a watch of n events of -size
// bytes, -gap apart: the scale-out measurement's timeline).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/wtrace/wtrace/testkit/pcaptest"
)

func main() {
	kind := flag.String("w", "", "workload: exchanges, connections, pipelined, unanswered, watches, openwatches, secretlist, synflood, steady")
	n := flag.Int("n", 1000, "size of the workload (`count`, or bytes for secretlist)")
	conns := flag.Int("conns", 100, "keep-alive connections of the exchanges workload")
	gap := flag.Duration("gap", 0, "capture time between connections (connections workload) or events (steady)")
	size := flag.Int("size", 1024, "bytes of each event (steady workload)")
	end := flag.String("end", "fin", "how connections of the connections workload end: fin, rst, half")
	out := flag.String("o", "", "output pcap `file`")
	flag.Parse()
	if *out == "" || *kind == "" {
		fmt.Fprintln(os.Stderr, "usage: pcapgen -w WORKLOAD -n N -o OUT.pcap")
		os.Exit(2)
	}
	if err := run(*kind, *n, *conns, *gap, *size, *end, *out); err != nil {
		fmt.Fprintln(os.Stderr, "pcapgen:", err)
		os.Exit(1)
	}
}

func run(kind string, n, conns int, gap time.Duration, size int, end, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	w := pcapgo.NewWriterNanos(bw)
	if err := w.WriteFileHeader(262144, layers.LinkTypeEthernet); err != nil {
		return err
	}
	var werr error
	b := pcaptest.New()
	b.Emit = func(p pcaptest.Packet) {
		frame := pcaptest.Encode(p)
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: p.Time, CaptureLength: len(frame), Length: len(frame)}, frame); err != nil && werr == nil {
			werr = err
		}
	}
	switch kind {
	case "exchanges":
		pcaptest.Exchanges(b, conns, n)
	case "connections":
		pcaptest.Connections(b, n, gap, end)
	case "pipelined":
		pcaptest.Pipelined(b, n)
	case "watches":
		pcaptest.Watches(b, n)
	case "steady":
		if gap <= 0 {
			gap = 100 * time.Millisecond
		}
		pcaptest.SteadyWatch(b, n, gap, size)
	case "openwatches":
		pcaptest.OpenWatches(b, n)
	case "unanswered":
		pcaptest.Unanswered(b, n)
	case "secretlist":
		pcaptest.GzipSecretList(b, n)
	case "synflood":
		for i := range n {
			src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 16), byte(i >> 8)}), uint16(1024+i%60000))
			b.Emit(pcaptest.Packet{Time: b.Now(), Src: src, Dst: netip.MustParseAddrPort("10.0.0.1:8001"), Seq: uint32(i), SYN: true})
			b.Advance(time.Microsecond)
		}
		pcaptest.Watches(b, 1)
	default:
		return fmt.Errorf("unknown workload %q", kind)
	}
	if werr != nil {
		return werr
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Close()
}
