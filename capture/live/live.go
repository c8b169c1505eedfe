package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/capture/pcapfile"
	"github.com/wtrace/wtrace/formats"
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
	Next() (capture.Packet, error)
}

// RunOptions configure Run. The zero value flushes nothing and reports
// nothing.
type RunOptions struct {
	// Flush is called at least every FlushInterval (between packets, or
	// after a poll interval without any), from Run's goroutine: the
	// FileSink's Flush, and the flush of a pcap file of the packets.
	Flush func() error
	// FlushInterval is how often Flush and OnTick are called; 0 means
	// capture.DefaultFlushInterval.
	FlushInterval time.Duration
	// Packet, if set, sees every packet before the Recorder (to keep the
	// raw packets in a pcap file).
	Packet func(capture.Packet) error
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
	// Capture time goes on between packets: TLS connections waiting for
	// their secrets are retried (capture.Options.KeyLogSource).
	if err := rec.Tick(time.Now().UnixNano()); err != nil {
		return fmt.Errorf("live: recording: %w", err)
	}
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

// RecordOptions configure Record. The zero value needs Output's Path (or
// Out); it records every TCP connection that carries HTTP, redacting
// Secret values, with no limits.
type RecordOptions struct {
	// Output is where the session goes: Path or Out, the Writer's options,
	// MaxSize, MaxDuration, Rotate, OnRotate. Record sets its Meta, Totals
	// and OnLimit: a limit reached without Rotate ends the recording.
	Output formats.FileSinkOptions
	// Recorder configures the Recorder: Port, buffering limits,
	// KeepSecrets.
	Recorder capture.Options
	// Tool names the recorder in Meta ("wtrace v0.3.0").
	Tool string
	// PcapOut, if set, also receives every captured packet as a pcap file
	// (pcapfile.Writer: nanosecond timestamps, the Handle's link type and
	// snap length), flushed with the session if it has a Flush method
	// (a *bufio.Writer).
	// PcapOutName names it for Meta.CaptureFile ("" for a stream).
	PcapOut     io.Writer
	PcapOutName string
	// FlushInterval is how often the session (and PcapOut) are flushed and
	// OnTick is called; 0 means capture.DefaultFlushInterval.
	FlushInterval time.Duration
	// OnTick, if set, is called after each flush with the Recorder's
	// statistics, from Record's goroutine (for progress displays).
	OnTick func(capture.Stats)
}

// Record records a live capture from h into session files, end to end: it
// creates the first file with its Meta (formats.NewMeta, source iface,
// the interface and its filter), feeds every packet to a Recorder (Run),
// flushes every FlushInterval, and when ctx is done, a limit is reached
// (without Rotate) or capturing fails, closes the Recorder (what is still
// open ends as cut by the capture) and the files, the last Summary noting
// why: context.Cause(ctx), "max-size reached", "capture failed: …".
// Errors of the session files are *formats.OutputError; a capture that
// fails is an error too, after the session was closed.
func Record(ctx context.Context, h *Handle, opts RecordOptions) (capture.Result, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	out := opts.Output
	filter := h.Filter().String()
	desc := "iface " + h.Interface()
	if filter != "tcp" {
		desc += " (" + filter + ")"
	}
	out.Meta = formats.NewMeta(opts.Tool, formats.SourceIface, desc, opts.Recorder.KeepSecrets)
	out.Meta.Labels = map[string]string{"filter": filter}
	if opts.PcapOut != nil && opts.PcapOutName != "" {
		out.Meta.CaptureFile = filepath.Base(opts.PcapOutName)
	}
	// Owned by this goroutine, which alone feeds the Recorder and writes
	// to the FileSink (and so calls Totals and OnLimit).
	var packets, bytes int64
	var rec *capture.Recorder
	out.Totals = func() formats.Totals {
		t := formats.Totals{Packets: packets, Bytes: bytes}
		if rec != nil {
			t.Last = rec.Stats().Last
		}
		return t
	}
	out.OnLimit = func(l formats.Limit) { cancel(fmt.Errorf("%v reached", l)) }
	var pw *pcapfile.Writer
	if opts.PcapOut != nil {
		var err error
		if pw, err = pcapfile.NewWriter(opts.PcapOut, h.LinkType(), h.SnapLen()); err != nil {
			return capture.Result{}, fmt.Errorf("live: writing the packets: %w", err)
		}
	}
	fs, err := formats.NewFileSink(out)
	if err != nil {
		return capture.Result{}, err
	}
	rec = capture.NewRecorder(fs, opts.Recorder)
	flushPcap := func() error {
		if f, ok := opts.PcapOut.(interface{ Flush() error }); ok {
			if err := f.Flush(); err != nil {
				return fmt.Errorf("live: writing the packets: %w", err)
			}
		}
		return nil
	}
	runErr := Run(ctx, h, rec, RunOptions{
		FlushInterval: opts.FlushInterval,
		Flush: func() error {
			if err := flushPcap(); err != nil {
				return err
			}
			return fs.Flush()
		},
		Packet: func(p capture.Packet) error {
			packets++
			bytes += int64(len(p.Data))
			if pw == nil {
				return nil
			}
			if err := pw.WritePacket(pcapfile.Packet{Time: p.Time, Data: p.Data, Length: p.Length}); err != nil {
				return fmt.Errorf("live: writing the packets: %w", err)
			}
			return nil
		},
		OnTick: opts.OnTick,
	})
	var outErr *formats.OutputError
	switch {
	case errors.As(runErr, &outErr):
		cancel(fmt.Errorf("writing failed: %w", runErr))
	case runErr != nil:
		cancel(fmt.Errorf("capture failed: %w", runErr))
	}
	recErr := rec.Close()
	res := capture.Result{Stats: rec.Stats(), Note: context.Cause(ctx).Error()}
	if kst, err := h.Stats(); err == nil {
		res.Dropped = kst.Dropped
	}
	closeErr := fs.Close(formats.Ending{Note: res.Note})
	res.Files, res.Size = fs.Names(), fs.Size()
	if err := flushPcap(); err != nil && runErr == nil {
		runErr = err
	}
	switch {
	case outErr != nil:
		return res, outErr
	case runErr != nil:
		return res, fmt.Errorf("capturing on %s: %w", h.Interface(), runErr)
	case recErr != nil:
		return res, recErr
	}
	return res, closeErr
}
