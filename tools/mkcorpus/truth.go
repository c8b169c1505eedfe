package main

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/wtrace/wtrace/frame"
	"github.com/wtrace/wtrace/internal/apipath"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor/direct"
	serjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// truthEvent is one line of truth.jsonl, the fields of the shared corpus's.
type truthEvent struct {
	Seq             int    `json:"seq"`
	ReqID           int    `json:"req_id"`
	Client          string `json:"client"`
	Conn            string `json:"conn"`
	Server          string `json:"server"`
	Proto           string `json:"proto"`
	Request         string `json:"request"`
	Encoding        string `json:"encoding"` // json | protobuf | cbor
	Index           int    `json:"index"`
	Type            string `json:"type"`
	Kind            string `json:"kind"`
	APIVersion      string `json:"apiVersion"`
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion"`
	// RecvUnixNano is when the client read the event; 0 when the truth
	// comes from the capture (kubectl is not instrumented).
	RecvUnixNano int64  `json:"recv_unix_nano"`
	EventLen     int    `json:"event_len"`
	EventSHA256  string `json:"event_sha256"`
	ObjectLen    int    `json:"object_len"`
	ObjectSHA256 string `json:"object_sha256"`
	// BodyOffset is the response body offset of the event's first byte
	// (JSON: its '{'; protobuf: its length prefix; CBOR: its
	// self-described tag, which client-go's framer does not hand on);
	// BodyEnd is one past its last byte.
	BodyOffset    int64  `json:"body_offset"`
	BodyEnd       int64  `json:"body_end"`
	StatusCode    int32  `json:"status_code,omitempty"`
	StatusReason  string `json:"status_reason,omitempty"`
	StatusMessage string `json:"status_message,omitempty"`
}

// reqLog is one entry of meta.json "requests".
type reqLog struct {
	ID          int               `json:"id"`
	Client      string            `json:"client"`
	Method      string            `json:"method"`
	Request     string            `json:"request"`
	Watch       bool              `json:"watch"`
	Conn        string            `json:"conn"`
	Server      string            `json:"server"`
	Proto       string            `json:"proto"`
	ReqHeaders  map[string]string `json:"req_headers"`
	Status      int               `json:"status"`
	RespHeaders map[string]string `json:"resp_headers"`
	Start       int64             `json:"start_unix_nano"`
	End         int64             `json:"end_unix_nano"`
	BodyBytes   int64             `json:"body_bytes"`
	Events      int               `json:"events"`
	EndReason   string            `json:"end_reason"`
	TLS         map[string]string `json:"tls,omitempty"`
}

// recorder keeps the requests and events of a scenario's clients.
type recorder struct {
	mu    sync.Mutex
	reqs  []*reqLog
	truth []*truthEvent
	taps  sync.WaitGroup
}

func (r *recorder) newReq(client string, req *http.Request) *reqLog {
	r.mu.Lock()
	defer r.mu.Unlock()
	rl := &reqLog{ID: len(r.reqs), Client: client, Method: req.Method, Request: req.URL.RequestURI(),
		Start: time.Now().UnixNano(), ReqHeaders: map[string]string{}}
	rl.Watch = apipath.IsWatch(req.Method, req.URL.RequestURI())
	for k, v := range req.Header {
		if strings.EqualFold(k, "Authorization") {
			v = []string{"Bearer <redacted>"}
		}
		rl.ReqHeaders[k] = strings.Join(v, ", ")
	}
	r.reqs = append(r.reqs, rl)
	return rl
}

func (r *recorder) add(ev *truthEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.truth = append(r.truth, ev)
}

// write writes truth.jsonl, events in the order they were received
// (capture-derived ones, without receive times, in capture order).
func (r *recorder) write(path string) error {
	r.taps.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for i, ev := range r.truth {
		ev.Seq = i
		if err := enc.Encode(ev); err != nil {
			return err
		}
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// wrap returns a RoundTripper that logs every request through rt and
// splits the body of every watch response into events with the framer
// client-go uses for its media type.
func (r *recorder) wrap(client string, rt http.RoundTripper) http.RoundTripper {
	return rtFunc(func(req *http.Request) (*http.Response, error) {
		rl := r.newReq(client, req)
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
			rl.Conn, rl.Server = i.Conn.LocalAddr().String(), i.Conn.RemoteAddr().String()
			if tc, ok := i.Conn.(*tls.Conn); ok {
				st := tc.ConnectionState()
				rl.TLS = map[string]string{"version": tls.VersionName(st.Version), "cipher_suite": tls.CipherSuiteName(st.CipherSuite), "alpn": st.NegotiatedProtocol}
			}
		}}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		resp, err := rt.RoundTrip(req)
		if err != nil {
			rl.EndReason, rl.End = "error: "+err.Error(), time.Now().UnixNano()
			return nil, err
		}
		rl.Status, rl.Proto = resp.StatusCode, resp.Proto
		rl.RespHeaders = map[string]string{}
		for k, v := range resp.Header {
			rl.RespHeaders[k] = strings.Join(v, ", ")
		}
		body := &tapBody{rc: resp.Body, rl: rl}
		if enc := encodingOf(resp.Header.Get("Content-Type")); rl.Watch && resp.StatusCode == 200 && enc != "" {
			pr, pw := io.Pipe()
			body.pw = pw
			r.taps.Add(1)
			go func() {
				defer r.taps.Done()
				splitEvents(enc, pr, func(data []byte, start, end int64) {
					ev := &truthEvent{ReqID: rl.ID, Client: client, Conn: rl.Conn, Server: rl.Server, Proto: rl.Proto,
						Request: rl.Request, Encoding: enc, Index: rl.Events, RecvUnixNano: time.Now().UnixNano(),
						BodyOffset: start, BodyEnd: end}
					rl.Events++
					describe(ev, enc, data)
					r.add(ev)
				})
				io.Copy(io.Discard, pr)
			}()
		}
		resp.Body = body
		return resp, nil
	})
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// tapBody passes a response body to the client and a copy to the tap.
type tapBody struct {
	rc   io.ReadCloser
	rl   *reqLog
	pw   *io.PipeWriter
	done bool
}

func (b *tapBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.rl.BodyBytes += int64(n)
	if n > 0 && b.pw != nil {
		b.pw.Write(p[:n])
	}
	if err != nil {
		b.end(err)
	}
	return n, err
}

func (b *tapBody) end(err error) {
	if b.done {
		return
	}
	b.done = true
	b.rl.End = time.Now().UnixNano()
	switch {
	case err == io.EOF:
		b.rl.EndReason = "eof"
	case err != nil:
		b.rl.EndReason = "error: " + err.Error()
	default:
		b.rl.EndReason = "client-close"
	}
	if b.pw != nil {
		b.pw.Close()
	}
}

func (b *tapBody) Close() error {
	b.end(nil)
	return b.rc.Close()
}

// encodingOf names the watch encoding of a response Content-Type.
func encodingOf(ct string) string {
	mt, params, _ := mime.ParseMediaType(ct)
	switch {
	case mt == "application/json":
		return "json"
	case mt == "application/vnd.kubernetes.protobuf" && params["stream"] == "watch":
		return "protobuf"
	case mt == "application/cbor-seq":
		return "cbor"
	}
	return ""
}

// splitEvents reads a watch body with the framer client-go uses for enc
// (apimachinery's JSON, length-delimited protobuf and CBOR sequence
// framers) and calls fn with each event's exact bytes and its body
// offsets (see truthEvent), until the body ends or is cut. The offsets
// come from where the bytes are found in the body read so far.
func splitEvents(enc string, body io.Reader, fn func(data []byte, start, end int64)) {
	var seen bytes.Buffer
	rc := io.NopCloser(io.TeeReader(body, &seen))
	pos := 0
	var fr io.ReadCloser
	switch enc {
	case "json":
		fr = serjson.Framer.NewFrameReader(rc)
	case "protobuf":
		fr = protobuf.LengthDelimitedFramer.NewFrameReader(rc)
	case "cbor":
		fr = cbor.NewFramer().NewFrameReader(rc)
	default:
		return
	}
	buf := make([]byte, 1<<20)
	var frame []byte
	for {
		n, err := fr.Read(buf)
		frame = append(frame, buf[:n]...)
		if errors.Is(err, io.ErrShortBuffer) {
			continue
		}
		if err != nil {
			return
		}
		if len(frame) > 0 {
			b := seen.Bytes()
			i := bytes.Index(b[pos:], frame)
			if i < 0 {
				panic("mkcorpus: a frame is not in the body it came from")
			}
			start := pos + i
			pos = start + len(frame)
			switch {
			case enc == "protobuf":
				start -= 4
			case enc == "cbor" && start >= 3 && string(b[start-3:start]) == "\xd9\xd9\xf7":
				start -= 3
			}
			fn(frame, int64(start), int64(pos))
		}
		frame = nil
	}
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// describe fills an event's fields from its exact bytes, decoded with
// encoding/json (JSON), the generated protobuf types (protobuf) and
// apimachinery's CBOR decoder (CBOR). A Table (kubectl get -w) keeps kind
// Table; its namespace, name and resourceVersion are its row's object's.
func describe(ev *truthEvent, enc string, data []byte) {
	ev.EventLen, ev.EventSHA256 = len(data), sha(data)
	var obj map[string]any
	switch enc {
	case "json":
		var e struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := json.Unmarshal(data, &e); err != nil {
			ev.Type = "UNPARSEABLE"
			return
		}
		ev.Type = e.Type
		ev.ObjectLen, ev.ObjectSHA256 = len(e.Object), sha(e.Object)
		json.Unmarshal(e.Object, &obj)
	case "cbor":
		var we metav1.WatchEvent
		if err := direct.Unmarshal(data, &we); err != nil {
			ev.Type = "UNPARSEABLE"
			ev.StatusMessage = err.Error()
			return
		}
		ev.Type = we.Type
		ev.ObjectLen, ev.ObjectSHA256 = len(we.Object.Raw), sha(we.Object.Raw)
		if err := direct.Unmarshal(we.Object.Raw, &obj); err != nil {
			ev.StatusMessage = "decode-error: " + err.Error()
		}
	case "protobuf":
		var we metav1.WatchEvent
		if err := we.Unmarshal(data); err != nil {
			ev.Type = "UNPARSEABLE"
			return
		}
		ev.Type = we.Type
		raw := we.Object.Raw
		ev.ObjectLen, ev.ObjectSHA256 = len(raw), sha(raw)
		var u runtime.Unknown
		if !bytes.HasPrefix(raw, []byte(frame.ProtobufMagic)) || u.Unmarshal(raw[len(frame.ProtobufMagic):]) != nil {
			return
		}
		ev.Kind, ev.APIVersion = u.Kind, u.APIVersion
		if u.Kind == "Status" {
			var st metav1.Status
			if st.Unmarshal(u.Raw) == nil {
				ev.StatusCode, ev.StatusReason, ev.StatusMessage = st.Code, string(st.Reason), st.Message
			}
			return
		}
		// Every object message holds its ObjectMeta in field 1, as
		// PartialObjectMetadata does; its other fields are skipped.
		var pom metav1.PartialObjectMetadata
		if err := pom.Unmarshal(u.Raw); err == nil {
			ev.Name, ev.Namespace, ev.ResourceVersion = pom.Name, pom.Namespace, pom.ResourceVersion
		}
		return
	}
	fromMap(ev, obj)
}

func fromMap(ev *truthEvent, o map[string]any) {
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	obj := func(m map[string]any, k string) map[string]any { v, _ := m[k].(map[string]any); return v }
	ev.Kind, ev.APIVersion = str(o, "kind"), str(o, "apiVersion")
	md := obj(o, "metadata")
	ev.Name, ev.Namespace, ev.ResourceVersion = str(md, "name"), str(md, "namespace"), str(md, "resourceVersion")
	if ev.Kind == "Status" && ev.Type == "ERROR" {
		switch c := o["code"].(type) {
		case float64:
			ev.StatusCode = int32(c)
		case int64:
			ev.StatusCode = int32(c)
		}
		ev.StatusReason, ev.StatusMessage = str(o, "reason"), str(o, "message")
	}
	if rows, _ := o["rows"].([]any); ev.Kind == "Table" && len(rows) == 1 {
		row, _ := rows[0].(map[string]any)
		rmd := obj(obj(row, "object"), "metadata")
		ev.Name, ev.Namespace = str(rmd, "name"), str(rmd, "namespace")
		if rv := str(rmd, "resourceVersion"); rv != "" {
			ev.ResourceVersion = rv
		}
	}
}

// writeMeta writes meta.json.
func writeMeta(path string, m map[string]any) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprint("mkcorpus: ", err))
	}
	return v
}
