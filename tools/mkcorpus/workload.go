package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"time"
)

// op is one workload request, kept in meta.json.
type op struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Status int    `json:"status"`
	Time   int64  `json:"unix_nano"`
}

// workload creates, updates and deletes configmaps and secrets in ns:
// n operations from a seeded generator, in bursts and pauses like the
// shared corpus's (a few ms apart, then up to 600 ms of quiet). Secret
// values are throwaway strings generated here.
func (e *env) workload(ctx context.Context, hc *http.Client, seed uint64, n int) ([]op, error) {
	r := rand.New(rand.NewPCG(seed, 0x77747261))
	var ops []op
	type obj struct {
		kind, name string
		gen        int
	}
	var live []obj
	next := 0
	do := func(method, path string, body any) error {
		var b []byte
		if body != nil {
			b, _ = json.Marshal(body)
		}
		code, rb, err := e.c.do(ctx, hc, method, path, "application/json", b)
		if err != nil {
			return err
		}
		if code >= 300 {
			return fmt.Errorf("%s %s: %d %s", method, path, code, rb)
		}
		ops = append(ops, op{Method: method, Path: path, Status: code, Time: time.Now().UnixNano()})
		return nil
	}
	value := func() string {
		return fmt.Sprintf("mkcorpus-throwaway-%016x", r.Uint64())
	}
	content := func(o obj) map[string]any {
		m := map[string]any{"apiVersion": "v1", "metadata": map[string]any{"name": o.name, "namespace": e.ns,
			"labels": map[string]string{"app": "mkcorpus", "gen": fmt.Sprint(o.gen)}}}
		if o.kind == "secrets" {
			m["kind"] = "Secret"
			m["data"] = map[string]string{"password": base64.StdEncoding.EncodeToString([]byte(value())), "user": base64.StdEncoding.EncodeToString([]byte("admin"))}
			m["stringData"] = map[string]string{"token": value()}
		} else {
			m["kind"] = "ConfigMap"
			m["data"] = map[string]string{"key": value()}
		}
		return m
	}
	base := "/api/v1/namespaces/" + e.ns + "/"
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return ops, err
		}
		switch k := r.IntN(10); {
		case k < 4 || len(live) < 3:
			kind := "configmaps"
			if r.IntN(3) == 0 {
				kind = "secrets"
			}
			o := obj{kind: kind, name: fmt.Sprintf("%s-%d-%03d", kind[:len(kind)-1], seed, next)}
			next++
			if err := do("POST", base+kind, content(o)); err != nil {
				return ops, err
			}
			live = append(live, o)
		case k < 8:
			j := r.IntN(len(live))
			live[j].gen++
			o := live[j]
			if err := do("PUT", base+o.kind+"/"+o.name, content(o)); err != nil {
				return ops, err
			}
		default:
			j := r.IntN(len(live))
			o := live[j]
			live = append(live[:j], live[j+1:]...)
			if err := do("DELETE", base+o.kind+"/"+o.name, nil); err != nil {
				return ops, err
			}
		}
		if r.IntN(8) == 0 {
			time.Sleep(time.Duration(200+r.IntN(400)) * time.Millisecond)
		} else {
			time.Sleep(time.Duration(r.IntN(15)) * time.Millisecond)
		}
	}
	log.Printf("workload: %d operations in %s", len(ops), e.ns)
	return ops, nil
}

// namespace creates ns (before any capture starts).
func (e *env) namespace(ctx context.Context, hc *http.Client) error {
	b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": e.ns}})
	code, rb, err := e.c.do(ctx, hc, "POST", "/api/v1/namespaces", "application/json", b)
	if err != nil {
		return err
	}
	if code != 201 {
		return fmt.Errorf("create namespace %s: %d %s", e.ns, code, rb)
	}
	return nil
}

// drain reads and closes a body.
func drain(rc io.ReadCloser) { io.Copy(io.Discard, rc); rc.Close() }
