// Command scaleout measures wtrace replay scaled out: N `wtrace replay`
// processes behind HAProxy in TCP mode (what a Kubernetes Service does
// for the replicas of deploy/), M raw HTTP/1.1 watchers spread over them
// by HAProxy's round robin, each following the same steady recorded
// timeline (an informer's watch: a ~1 KiB event every -gap) at speed 1,
// read-only (--writes reject: each client on its own recorded timeline).
//
//	go run ./tools/scaleout -replicas 1,2,4 -watchers 2000,8000 -duration 15s -rounds 2
//
// For each run it prints, per replica and in all: the events delivered
// (the replica's wtrace_replay_watch_events_sent_total), the CPU it used
// per delivered event (user + system time from /proc over the run), its
// p99 event lateness (from its lateness histogram, interpolated in the
// buckets as Prometheus' histogram_quantile does), and the clients' own
// measure through HAProxy (arrival against the response head's arrival plus the
// event's recorded offset), with HAProxy's CPU and the load average. Runs
// rotate through the replica counts so that a change of the machine's
// load falls on all of them. It needs haproxy in PATH (apt-get install
// haproxy) and builds wtrace unless -wtrace names a binary.
//
// The replicas run as deployed: with the arguments of the replay
// container of the Deployment wtrace-replay that -manifests (deploy/)
// builds (kustomize), the session and --listen apart — so the watchers
// send the Host a client in the cluster sends (the Service's name,
// wtrace-replay) and the replicas accept it as the manifests make them.
// It exits 1 when any watcher failed or missed an event (after printing
// the table): a run that measured nothing is not a measurement.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/wtrace/wtrace/testkit/pcaptest"
)

func main() {
	replicas := flag.String("replicas", "1,2,4", "replica counts to measure (`list`)")
	watchers := flag.String("watchers", "2000", "watcher counts to measure (`list`)")
	duration := flag.Duration("duration", 15*time.Second, "length of the recorded timeline each watcher follows")
	gap := flag.Duration("gap", 200*time.Millisecond, "time between two events of the timeline")
	rounds := flag.Int("rounds", 1, "rounds over the replica counts")
	bin := flag.String("wtrace", "", "the wtrace `binary` (default: built from this repository)")
	manifests := flag.String("manifests", "deploy", "the kustomization `dir` whose Deployment wtrace-replay gives the replicas' arguments")
	flag.Parse()
	args, err := replicaArgs(*manifests)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scaleout:", err)
		os.Exit(1)
	}
	if err := run(os.Stdout, config{replicas: *replicas, watchers: *watchers, duration: *duration, gap: *gap, rounds: *rounds, bin: *bin, args: args}); err != nil {
		fmt.Fprintln(os.Stderr, "scaleout:", err)
		os.Exit(1)
	}
}

// config is one invocation: the flags, and the replicas' arguments.
type config struct {
	replicas, watchers string
	duration, gap      time.Duration
	rounds             int
	bin                string
	// args are the arguments of `wtrace replay` after the session, as
	// deployed (replicaArgs); --listen is the tool's.
	args []string
}

// serviceHost is the Host of a client that names the replicas' Service
// (deploy/replay/service.yaml) on its port.
const serviceHost = "wtrace-replay:8080"

const watchTarget = "/api/v1/namespaces/steady/configmaps?allowWatchBookmarks=true&resourceVersion=1000&timeoutSeconds=3600&watch=true"

func ints(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: not a positive count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// errWatchers: a run in which a watcher failed or missed events.
var errWatchers = errors.New("watchers failed")

func run(w io.Writer, cfg config) error {
	duration, gap, bin := cfg.duration, cfg.gap, cfg.bin
	ns, err := ints(cfg.replicas)
	if err != nil {
		return err
	}
	ms, err := ints(cfg.watchers)
	if err != nil {
		return err
	}
	if _, err := exec.LookPath("haproxy"); err != nil {
		return fmt.Errorf("haproxy not found (apt-get install haproxy): %w", err)
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil {
		rl.Cur = rl.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
	dir, err := os.MkdirTemp("", "scaleout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		bin = filepath.Join(dir, "wtrace")
		cmd := exec.Command("go", "build", "-o", bin, "github.com/wtrace/wtrace/cmd/wtrace")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building wtrace: %w", err)
		}
	}
	session, err := steadySession(dir, bin, int(duration/gap), gap)
	if err != nil {
		return err
	}
	events := int(duration / gap)
	steadyGap = gap
	fmt.Fprintf(w, "steady timeline: %d events of 1 KiB, one every %v; replicas: wtrace replay SESSION %s; open files %d\n", events, gap, strings.Join(cfg.args, " "), rl.Cur)
	var failed []error
	for r := 0; r < cfg.rounds; r++ {
		for _, m := range ms {
			for i := range ns {
				n := ns[(i+r)%len(ns)] // rotate the order between rounds
				res, err := measure(dir, bin, session, cfg.args, n, m, events)
				if err != nil {
					return fmt.Errorf("%d replicas, %d watchers: %w", n, m, err)
				}
				res.print(w)
				if err := res.check(); err != nil {
					failed = append(failed, fmt.Errorf("%d replicas, %d watchers: %w", n, m, err))
				}
			}
		}
	}
	return errors.Join(failed...)
}

// steadySession writes pcaptest.SteadyWatch as a pcap and records it.
func steadySession(dir, bin string, n int, gap time.Duration) (string, error) {
	b := pcaptest.New()
	pcaptest.SteadyWatch(b, n, gap, 1024)
	pcap := filepath.Join(dir, "steady.pcap")
	if err := os.WriteFile(pcap, b.Pcap(), 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "steady.wt")
	if b, err := exec.Command(bin, "record", "--pcap", pcap, "-o", out).CombinedOutput(); err != nil {
		return "", fmt.Errorf("record: %v: %s", err, b)
	}
	return out, nil
}

// replica is one wtrace replay process.
type replica struct {
	cmd  *exec.Cmd
	addr string
	cpu0 float64
}

func startReplica(bin, session string, args []string) (*replica, error) {
	cmd := exec.Command(bin, append([]string{"replay", session, "--listen", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &replica{cmd: cmd}
	br := bufio.NewReader(stderr)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		l, err := br.ReadBytes('\n')
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, fmt.Errorf("replay exited before serving")
		}
		var rec struct{ Msg, URL string }
		if json.Unmarshal(l, &rec) == nil && rec.Msg == "replay: serving" {
			r.addr = strings.TrimPrefix(rec.URL, "http://")
			break
		}
	}
	go io.Copy(io.Discard, br) // one log line per request
	return r, nil
}

func (r *replica) stop() {
	r.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		r.cmd.Process.Kill()
		<-done
	}
}

// cpuSeconds reads a process's user + system time from /proc.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return math.NaN()
	}
	// The fields after the command name (in parentheses, which may hold
	// spaces): state is field 3, utime 14, stime 15.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// haproxyCfg is a TCP-mode load balancer in front of addrs.
func haproxyCfg(listen string, addrs []string, maxconn int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "global\n  maxconn %d\n  log stderr local0 emerg\ndefaults\n  mode tcp\n  timeout connect 5s\n  timeout client 1h\n  timeout server 1h\n", maxconn)
	fmt.Fprintf(&b, "frontend replay\n  bind %s\n  maxconn %d\n  default_backend replicas\n", listen, maxconn)
	b.WriteString("backend replicas\n  balance roundrobin\n")
	for i, a := range addrs {
		fmt.Fprintf(&b, "  server r%d %s maxconn %d\n", i, a, maxconn)
	}
	return b.String()
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// result is one run.
type result struct {
	replicas, watchers, events int
	load                       string
	perReplica                 []replicaResult
	clientEvents               int
	clientP50, clientP99       float64
	haproxyCPU                 float64
	failed                     int
	firstFailure               error
	wall                       time.Duration
}

// check fails a run in which a watcher failed or an event was missed.
func (r *result) check() error {
	switch want := r.watchers * r.events; {
	case r.failed > 0:
		return fmt.Errorf("%w: %d of %d (the first: %v)", errWatchers, r.failed, r.watchers, r.firstFailure)
	case r.clientEvents != want:
		return fmt.Errorf("%w: the watchers received %d events; want %d", errWatchers, r.clientEvents, want)
	}
	return nil
}

type replicaResult struct {
	events   float64
	cpu      float64
	p99      float64
	watchers float64
}

func measure(dir, bin, session string, args []string, n, m, events int) (*result, error) {
	res := &result{replicas: n, watchers: m, events: events}
	var reps []*replica
	defer func() {
		var wg sync.WaitGroup
		for _, r := range reps {
			wg.Add(1)
			go func() { defer wg.Done(); r.stop() }()
		}
		wg.Wait()
	}()
	var addrs []string
	for range n {
		r, err := startReplica(bin, session, args)
		if err != nil {
			return nil, err
		}
		reps = append(reps, r)
		addrs = append(addrs, r.addr)
	}
	front, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(haproxyCfg(front, addrs, m+100)), 0o644); err != nil {
		return nil, err
	}
	hp := exec.Command("haproxy", "-f", cfg, "-db")
	var hpErr bytes.Buffer
	hp.Stderr = &hpErr
	if err := hp.Start(); err != nil {
		return nil, err
	}
	defer func() {
		hp.Process.Kill()
		hp.Wait()
	}()
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", front)
		if err == nil {
			c.Close()
			break
		}
		if i > 100 {
			return nil, fmt.Errorf("haproxy does not listen: %s", hpErr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	recorded := recordedOffsets(events)
	for _, r := range reps {
		r.cpu0 = cpuSeconds(r.cmd.Process.Pid)
	}
	hp0 := cpuSeconds(hp.Process.Pid)
	start := time.Now()
	lat := make([][]float64, m)
	var failed sync.Map
	var wg sync.WaitGroup
	for i := range m {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := watch(front, recorded)
			lat[i] = l
			if err != nil {
				failed.Store(i, err)
			}
		}()
		if i%200 == 199 {
			time.Sleep(20 * time.Millisecond) // a ramp, not a herd of SYNs
		}
	}
	wg.Wait()
	res.wall = time.Since(start)
	res.haproxyCPU = cpuSeconds(hp.Process.Pid) - hp0
	failed.Range(func(_, v any) bool {
		if res.failed++; res.firstFailure == nil {
			res.firstFailure = v.(error)
		}
		return true
	})
	var all []float64
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Float64s(all)
	res.clientEvents = len(all)
	if len(all) > 0 {
		res.clientP50 = all[len(all)/2]
		res.clientP99 = all[int(0.99*float64(len(all)-1))]
	}
	for _, r := range reps {
		rr := replicaResult{cpu: cpuSeconds(r.cmd.Process.Pid) - r.cpu0}
		fams, err := scrape(r.addr)
		if err != nil {
			return nil, err
		}
		rr.events = fams.value("wtrace_replay_watch_events_sent_total")
		rr.watchers = fams.requests(`verb="watch"`)
		rr.p99 = fams.quantile("wtrace_replay_event_lateness_seconds", 0.99)
		res.perReplica = append(res.perReplica, rr)
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		res.load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return res, nil
}

// recordedOffsets are the events' offsets from the response of the steady
// timeline (pcaptest.SteadyWatch: one every gap, from one gap on).
func recordedOffsets(events int) func(i int) time.Duration {
	return func(i int) time.Duration { return time.Duration(i+1) * steadyGap }
}

var steadyGap = 200 * time.Millisecond

// watch follows the watch through addr to its end and returns each
// event's lateness: its arrival against the response head's arrival plus
// its recorded offset.
func watch(addr string, offset func(int) time.Duration) ([]float64, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Minute))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", watchTarget, serviceHost); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 4096), nil)
	if err != nil {
		return nil, err
	}
	// The client's timeline starts when the response head arrives: what
	// follows is the events' delivery, not the connection's setup
	// through the load balancer.
	start := time.Now()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	br := bufio.NewReaderSize(resp.Body, 4096)
	var out []float64
	for i := 0; ; i++ {
		if _, err := br.ReadSlice('\n'); err != nil {
			if err == io.EOF {
				return out, nil
			}
			return out, err
		}
		out = append(out, max(time.Since(start.Add(offset(i))), 0).Seconds())
	}
}

func (r *result) print(w io.Writer) {
	var events, cpu, maxP99 float64
	for _, rr := range r.perReplica {
		events += rr.events
		cpu += rr.cpu
		maxP99 = max(maxP99, rr.p99)
	}
	fmt.Fprintf(w, "\nreplicas %d, watchers %d (%d failed), %v wall, load %s\n", r.replicas, r.watchers, r.failed, r.wall.Round(time.Millisecond), r.load)
	for i, rr := range r.perReplica {
		fmt.Fprintf(w, "  replica %d: %5.0f watchers, %7.0f events, CPU %5.2f s = %5.1f µs/event, p99 lateness %6.1f ms\n",
			i, rr.watchers, rr.events, rr.cpu, rr.cpu/rr.events*1e6, rr.p99*1e3)
	}
	fmt.Fprintf(w, "  all: %.0f events sent (%d received, want %d), replicas' CPU %.2f s = %.1f µs/event, haproxy %.2f s = %.1f µs/event; worst replica p99 %.1f ms; clients through haproxy (from the response head) p50 %.1f ms p99 %.1f ms\n",
		events, r.clientEvents, r.watchers*r.events, cpu, cpu/events*1e6, r.haproxyCPU, r.haproxyCPU/events*1e6, maxP99*1e3, r.clientP50*1e3, r.clientP99*1e3)
	p99s := make([]float64, 0, len(r.perReplica))
	for _, rr := range r.perReplica {
		p99s = append(p99s, rr.p99)
	}
	sort.Float64s(p99s)
	fmt.Fprintf(w, "  | %d | %s | %s | %.1f | %.1f | %.0f / %.0f | %.0f | %s |\n",
		r.replicas, thousands(r.watchers), thousands(int(events)), cpu/events*1e6, r.haproxyCPU/events*1e6,
		p99s[len(p99s)/2]*1e3, maxP99*1e3, r.clientP99*1e3, r.load)
}

// thousands writes n with thousands separators (1,000).
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
