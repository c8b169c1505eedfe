package wtracetest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvBinary names the wtrace binary to run, when Options.Binary does not.
const EnvBinary = "WTRACE_BINARY"

// APIVersion is the version of the control endpoint this package speaks.
const APIVersion = "wtrace/v1"

// Install is how to get the binary, said when none is found.
const Install = "go install github.com/wtrace/wtrace/cmd/wtrace@latest"

// Defaults of Options.
const (
	DefaultStartTimeout = 2 * time.Minute
	DefaultStopTimeout  = time.Minute
)

// Options configure a replay. The zero value replays with wtrace's
// defaults: writes answered (the world of the recording's environment),
// the environment's changes at their recorded pace, plain HTTP.
type Options struct {
	// Binary is the wtrace command; "" means $WTRACE_BINARY, else wtrace
	// on the PATH.
	Binary string
	// Writes is --writes: answer (""), reject or recorded.
	Writes string
	// Pace is --pace: recorded ("") or quiet (each change of the
	// environment once the controller is quiet: every run the same
	// sequence, as fast as the controller reconciles).
	Pace string
	// TLS serves HTTPS (and HTTP/2) with a generated certificate: CAPEM
	// and the kubeconfig trust it.
	TLS bool
	// Args are more arguments of wtrace replay (--client
	// user-agent=my-operator, --quiet-window 1s, --speed 0, …).
	Args []string
	// StartTimeout bounds how long the replay may take to load the
	// session and serve; 0 means DefaultStartTimeout. StopTimeout bounds
	// how long a stop may take; 0 means DefaultStopTimeout.
	StartTimeout, StopTimeout time.Duration
}

// Replay is a running wtrace replay.
type Replay struct {
	// URL is the replay's base URL: the controller's API server.
	URL string
	// CAPEM is the certificate to trust (Options.TLS), nil over HTTP.
	CAPEM []byte
	// Kubeconfig is a kubeconfig file for the replay (server and CA set,
	// no credentials: the replay asks none).
	Kubeconfig string
	// Run is the run's session file: complete once Stop returned.
	Run string
	// Control is the base URL of the replay's control endpoint.
	Control string

	t       testing.TB
	bin     string
	log     string // the replay's stderr
	cmd     *exec.Cmd
	client  *http.Client
	done    chan struct{} // closed when the process exited
	exitErr error
	stopTO  time.Duration

	stopOnce sync.Once
}

// serving is the replay's --serving-file (docs/CONTROL.md).
type serving struct {
	APIVersion string `json:"apiVersion"`
	URL        string `json:"url"`
	CAPEM      string `json:"caPEM"`
	Kubeconfig string `json:"kubeconfig"`
	Control    string `json:"control"`
	Run        string `json:"run"`
}

// Binary returns the wtrace binary that Options.Binary names: itself if
// set, else $WTRACE_BINARY, else wtrace on the PATH.
func Binary(opts Options) (string, error) {
	if opts.Binary != "" {
		return opts.Binary, nil
	}
	if b := os.Getenv(EnvBinary); b != "" {
		return b, nil
	}
	b, err := exec.LookPath("wtrace")
	if err != nil {
		return "", fmt.Errorf("wtracetest: no wtrace binary: set $%s or install it (%s): %w", EnvBinary, Install, err)
	}
	return b, nil
}

// Start replays the session file at path (relative to the test's
// directory) and returns once it serves; the test's end stops it. Any
// error fails the test.
func Start(t testing.TB, session string, opts Options) *Replay {
	t.Helper()
	bin, err := Binary(opts)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := &Replay{t: t, bin: bin, log: filepath.Join(dir, "replay.log"), done: make(chan struct{}), stopTO: opts.StopTimeout}
	if r.stopTO <= 0 {
		r.stopTO = DefaultStopTimeout
	}
	servingFile := filepath.Join(dir, "serving.json")
	args := []string{"replay", session, "--listen", "127.0.0.1:0", "--control", "--serving-file", servingFile,
		"--kubeconfig-out", filepath.Join(dir, "kubeconfig"), "--out", filepath.Join(dir, "run.wt")}
	if opts.Writes != "" {
		args = append(args, "--writes", opts.Writes)
	}
	if opts.Pace != "" {
		args = append(args, "--pace", opts.Pace)
	}
	if opts.TLS {
		args = append(args, "--tls")
	}
	args = append(args, opts.Args...)
	logf, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(bin, args...)
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	if err := r.cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("wtracetest: starting %s: %v (install it: %s)", bin, err, Install)
	}
	go func() {
		r.exitErr = r.cmd.Wait()
		logf.Close()
		close(r.done)
	}()
	t.Cleanup(func() { r.Stop() })

	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	deadline := time.Now().Add(timeout)
	var sv serving
	for {
		b, err := os.ReadFile(servingFile)
		if err == nil {
			if err := json.Unmarshal(b, &sv); err != nil {
				t.Fatalf("wtracetest: the replay's serving file: %v", err)
			}
			break
		}
		select {
		case <-r.done:
			t.Fatalf("wtracetest: wtrace replay %s exited (%v) before serving:\n%s", session, r.exitErr, r.Log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("wtracetest: wtrace replay %s did not serve within %v:\n%s", session, timeout, r.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if sv.APIVersion != APIVersion || sv.Control == "" {
		t.Fatalf("wtracetest: %s speaks control endpoint %q; this package speaks %s (a newer wtrace: %s)", bin, sv.APIVersion, APIVersion, Install)
	}
	r.URL, r.Kubeconfig, r.Run, r.Control = sv.URL, sv.Kubeconfig, sv.Run, sv.Control
	tr := &http.Transport{}
	if sv.CAPEM != "" {
		r.CAPEM = []byte(sv.CAPEM)
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(r.CAPEM)
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	r.client = &http.Client{Transport: tr}
	return r
}

// Log returns what the replay wrote on stderr so far (its request log).
func (r *Replay) Log() string {
	b, _ := os.ReadFile(r.log)
	const keep = 16 << 10
	if len(b) > keep {
		return "…" + string(b[len(b)-keep:])
	}
	return string(b)
}

// errorAnswer is the control endpoint's error.
type errorAnswer struct {
	Kind    string `json:"kind"`
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// call asks the control endpoint and decodes its answer into out.
func (r *Replay) call(method, name string, q url.Values, wait time.Duration, out any) error {
	u := r.Control + name
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		return err
	}
	c := *r.client
	c.Timeout = wait + 30*time.Second
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("wtracetest: %s %s: %w", method, name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("wtracetest: %s %s: %w", method, name, err)
	}
	if resp.StatusCode/100 != 2 {
		var e errorAnswer
		if json.Unmarshal(b, &e) == nil && e.Message != "" {
			return fmt.Errorf("wtracetest: %s %s: %d %s", method, name, resp.StatusCode, e.Message)
		}
		return fmt.Errorf("wtracetest: %s %s: %s", method, name, resp.Status)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("wtracetest: %s %s: %w", method, name, err)
	}
	return nil
}

// Settle waits until the recording's environment was played and the
// controller has then been quiet for quiet — no request in flight but
// watches, none begun or ended: the run is over — and reports whether it
// was within timeout.
func (r *Replay) Settle(quiet, timeout time.Duration) bool {
	r.t.Helper()
	var a struct{ Settled bool }
	if err := r.call("GET", "settle", url.Values{"quiet": {quiet.String()}, "timeout": {timeout.String()}}, timeout, &a); err != nil {
		r.t.Fatal(err)
	}
	return a.Settled
}

// EnvironmentDone waits until the recording's environment was played
// (every change applied or dropped) and reports whether it was within
// timeout (a replay that does not answer writes has none: false).
func (r *Replay) EnvironmentDone(timeout time.Duration) bool {
	r.t.Helper()
	e := r.environment(timeout)
	return e.Done
}

// Environment is what the replay did with the recording's environment.
type Environment struct {
	// Done: every change was applied or dropped.
	Done bool `json:"done"`
	// Clients names the clients under test.
	Clients string `json:"clients"`
	// Changes counts the environment's changes, Applied those applied.
	Changes int `json:"changes"`
	Applied int `json:"applied"`
	// Requests and Writes count the recorded requests and successful
	// writes of the clients under test; Behaviour the versions of objects
	// their writes made (the expected output, never replayed).
	Requests  int `json:"requests"`
	Writes    int `json:"writes"`
	Behaviour int `json:"behaviour"`
	// Dropped are the changes that had nothing to apply to.
	Dropped []Dropped `json:"dropped"`
}

// Dropped is a change of the environment the replay dropped, and why.
type Dropped struct {
	Type            string `json:"type"`
	Group           string `json:"group"`
	Version         string `json:"version"`
	Resource        string `json:"resource"`
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion"`
	Reason          string `json:"reason"`
}

// Environment returns what the replay did with the environment so far.
func (r *Replay) Environment() Environment {
	r.t.Helper()
	return r.environment(0)
}

func (r *Replay) environment(wait time.Duration) Environment {
	r.t.Helper()
	var e Environment
	q := url.Values{}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	if err := r.call("GET", "environment", q, wait, &e); err != nil {
		r.t.Fatal(err)
	}
	return e
}

// Request is a request of the controller, and how the replay answered.
type Request struct {
	Method string `json:"method"`
	Target string `json:"target"`
	// Header is as received, less its credentials.
	Header http.Header `json:"header"`
	// Body is a write's body.
	Body []byte `json:"body"`
	// Arrival is when it arrived, Done when its answer ended.
	Arrival time.Time `json:"arrival"`
	Done    time.Time `json:"done"`
	Status  int       `json:"status"`
	// How is how it was answered (recorded, resumed, synth-create, …),
	// Exchange the recorded exchange served (-1: none), Transcoded why
	// the answer is not the recorded bytes ("" when it is).
	How        string `json:"how"`
	Exchange   int64  `json:"exchange"`
	Transcoded string `json:"transcoded"`
	// ContentType and Response are a write's answer.
	ContentType string `json:"contentType"`
	Response    []byte `json:"response"`
}

// IsWrite reports whether the request was a write.
func (q Request) IsWrite() bool {
	switch q.Method {
	case "POST", "PUT", "PATCH", "DELETE":
		return true
	}
	return false
}

// Requests returns the controller's requests answered so far (a watch
// once it ended), in arrival order.
func (r *Replay) Requests() []Request {
	r.t.Helper()
	return r.requests(false)
}

// Writes returns the writes among Requests.
func (r *Replay) Writes() []Request {
	r.t.Helper()
	return r.requests(true)
}

func (r *Replay) requests(writes bool) []Request {
	r.t.Helper()
	var l struct{ Items []Request }
	q := url.Values{}
	if writes {
		q.Set("writes", "true")
	}
	if err := r.call("GET", "requests", q, 0, &l); err != nil {
		r.t.Fatal(err)
	}
	return l.Items
}

// Stop stops the replay as SIGTERM does — every watch ends cleanly, the
// run's file is closed — waits for it to exit, and returns Run. It fails
// the test if the replay did not exit 0. A second call returns Run.
func (r *Replay) Stop() string {
	r.t.Helper()
	r.stopOnce.Do(func() {
		select {
		case <-r.done: // it ended by itself: an error, said below
		default:
			if r.Control != "" {
				var a struct{ Stopping bool }
				if err := r.call("POST", "stop", nil, 0, &a); err != nil {
					r.t.Errorf("%v; killing it", err)
					r.cmd.Process.Kill()
				}
			} else {
				r.cmd.Process.Kill() // Start failed before it served
			}
		}
		select {
		case <-r.done:
		case <-time.After(r.stopTO):
			r.cmd.Process.Kill()
			<-r.done
			r.t.Errorf("wtracetest: the replay did not stop within %v:\n%s", r.stopTO, r.Log())
			return
		}
		if r.exitErr != nil && r.Control != "" {
			r.t.Errorf("wtracetest: the replay ended with %v:\n%s", r.exitErr, r.Log())
		}
	})
	return r.Run
}

// Same stops the replay (Stop) and judges its run against the recording
// with `wtrace diff RECORDED RUN ARGS…` (--only write, --ignore PATH, …:
// wtrace diff --help): the test fails with the diff's report when they
// differ, or when the diff cannot be made.
func (r *Replay) Same(recorded string, args ...string) {
	r.t.Helper()
	run := r.Stop()
	same, report, err := Diff(r.bin, recorded, run, args...)
	switch {
	case err != nil:
		r.t.Errorf("%v", err)
	case !same:
		r.t.Errorf("the run differs from %s (wtrace diff %s %s %s):\n%s", recorded, recorded, run, strings.Join(args, " "), report)
	}
}

// Diff runs `wtrace diff recorded run args…` with binary (see Binary for
// ""), and returns whether the sessions are the same and the report. An
// error means no verdict (exit status 2, or the binary did not run).
func Diff(binary, recorded, run string, args ...string) (same bool, report string, err error) {
	bin, err := Binary(Options{Binary: binary})
	if err != nil {
		return false, "", err
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, append([]string{"diff", recorded, run}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return true, out.String(), nil
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return false, out.String(), nil
	}
	return false, out.String(), fmt.Errorf("wtracetest: wtrace diff %s %s: %v: %s", recorded, run, err, strings.TrimSpace(errb.String()))
}
