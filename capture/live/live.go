package live

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/capture/pcapfile"
)

// Defaults of Options.
const (
	// DefaultSnapLen keeps whole packets: tcpdump's own maximum snap length
	// (pcapfile.MaxPacketSize); segments merged by GRO or loopback GSO
	// reach 64 KiB and more, well above the MTU.
	DefaultSnapLen = pcapfile.MaxPacketSize
	// DefaultBufferSize is the kernel receive buffer asked for.
	DefaultBufferSize = 32 << 20
	// DefaultPollInterval bounds how long Next waits for a packet.
	DefaultPollInterval = 100 * time.Millisecond
)

// Sentinel errors callers branch on.
var (
	// ErrPermission: the process may not open a packet socket (it needs
	// CAP_NET_RAW).
	ErrPermission = errors.New("live: capturing packets needs the CAP_NET_RAW capability")
	// ErrUnsupported: live capture is implemented for Linux only.
	ErrUnsupported = errors.New("live: live capture is only supported on Linux")
	// ErrNoInterface: no network interface has the given name.
	ErrNoInterface = errors.New("live: no such network interface")
	// ErrLinkType: the interface does not carry Ethernet framing.
	ErrLinkType = errors.New("live: only Ethernet and loopback interfaces are supported")
	// ErrTimeout: Next waited a poll interval and no packet came.
	ErrTimeout = errors.New("live: no packet within the poll interval")
	// ErrClosed: the Handle is closed.
	ErrClosed = errors.New("live: capture closed")
)

// Options configure Open. The zero value captures every TCP packet of the
// interface, whole, with a 32 MiB receive buffer.
type Options struct {
	// Filter selects the packets kept (in the kernel).
	Filter Filter
	// SnapLen is the most bytes kept of a packet; 0 means DefaultSnapLen.
	SnapLen int
	// BufferSize is the kernel receive buffer in bytes; 0 means
	// DefaultBufferSize.
	BufferSize int
	// PollInterval is how long Next waits before ErrTimeout; 0 means
	// DefaultPollInterval.
	PollInterval time.Duration
}

func (o *Options) defaults() {
	if o.SnapLen <= 0 || o.SnapLen > pcapfile.MaxPacketSize {
		o.SnapLen = DefaultSnapLen
	}
	if o.BufferSize <= 0 {
		o.BufferSize = DefaultBufferSize
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
}

// Stats counts what a Handle saw.
type Stats struct {
	Packets  int64 // packets returned by Next
	Received int64 // packets the kernel passed to the socket (as of the last Stats call)
	Dropped  int64 // packets the kernel dropped: the receive buffer was full
}

// Source is what Run reads packets from: a *Handle, or a fake in tests.
// Next returns ErrTimeout when no packet came for a while; the packet's
// Data is valid until the next call.
type Source interface {
	Next() (pcapfile.Packet, error)
}

// RunOptions configure Run. The zero value flushes nothing and reports
// nothing.
type RunOptions struct {
	// Flush is called at least every FlushInterval (between packets, or
	// after a poll interval without any), from Run's goroutine: the
	// FileSink's Flush, and the flush of a --pcap-out file.
	Flush func() error
	// FlushInterval is how often Flush and OnTick are called; 0 means
	// capture.DefaultFlushInterval.
	FlushInterval time.Duration
	// Packet, if set, sees every packet before the Recorder (to keep the
	// raw packets in a pcap file).
	Packet func(pcapfile.Packet) error
	// OnTick, if set, is called after each Flush with the Recorder's
	// statistics, from Run's goroutine (for progress displays).
	OnTick func(capture.Stats)
}

// Run reads packets from src and hands them to rec, on the calling
// goroutine, which is the only one touching rec and the Flush function
// until Run returns. It returns nil when ctx is done (the caller then
// closes rec, which ends what is still open), or the first error of src,
// rec, Packet or Flush.
func Run(ctx context.Context, src Source, rec *capture.Recorder, opts RunOptions) error {
	every := opts.FlushInterval
	if every <= 0 {
		every = capture.DefaultFlushInterval
	}
	last := time.Now()
	for {
		if ctx.Err() != nil {
			return tick(rec, opts)
		}
		p, err := src.Next()
		switch {
		case err == nil:
			if opts.Packet != nil {
				if err := opts.Packet(p); err != nil {
					return err
				}
			}
			if err := rec.Packet(p); err != nil {
				return fmt.Errorf("live: recording: %w", err)
			}
		case errors.Is(err, ErrTimeout):
		default:
			return err
		}
		if now := time.Now(); now.Sub(last) >= every {
			last = now
			if err := tick(rec, opts); err != nil {
				return err
			}
		}
	}
}

func tick(rec *capture.Recorder, opts RunOptions) error {
	if opts.Flush != nil {
		if err := opts.Flush(); err != nil {
			return err
		}
	}
	if opts.OnTick != nil {
		opts.OnTick(rec.Stats())
	}
	return nil
}
