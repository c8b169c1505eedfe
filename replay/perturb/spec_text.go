package perturb

import (
	"sort"
	"strconv"
	"strings"
	"time"
)

// A spec written back (String: Parse(sp.String()) is sp), and the lists
// its errors name.

// String writes the spec back, its parameters in a fixed order, with
// their defaults left out: Parse(sp.String()) is sp.
func (sp Spec) String() string {
	var kv []string
	add := func(k, v string) { kv = append(kv, k+"="+v) }
	if sp.Resource != "" {
		add("resource", sp.Resource)
	}
	if pt := sp.At.String(); pt != "" && !(sp.Kind == Error && sp.At == Point{Kind: AtWrite, N: 1}) {
		kv = append(kv, pt)
	}
	switch sp.Kind {
	case WatchClose:
		if sp.Mode != "clean" {
			add("mode", sp.Mode)
		}
	case Stale:
		if sp.Age > 0 {
			add("age", sp.Age.String())
		} else if sp.Changes != 1 {
			add("changes", strconv.Itoa(sp.Changes))
		}
	case Restart, Skip:
		if sp.For != 2*time.Second {
			add("for", sp.For.String())
		}
	case Throttle:
		if sp.Share != 0.1 {
			add("share", strconv.FormatFloat(sp.Share, 'g', -1, 64))
		}
		if sp.RetryAfter != 1 {
			add("retry-after", strconv.Itoa(sp.RetryAfter))
		}
		if sp.Seed != 1 {
			add("seed", strconv.FormatInt(sp.Seed, 10))
		}
		if sp.For > 0 {
			add("for", sp.For.String())
		}
		if sp.On != "all" {
			add("on", sp.On)
		}
	case Error:
		if sp.Code != 503 {
			add("code", strconv.Itoa(sp.Code))
		}
		if sp.Mode != "before" {
			add("when", sp.Mode)
		}
	case Delay:
		if sp.For != 200*time.Millisecond {
			add("for", sp.For.String())
		}
		if sp.On != "answers" {
			add("on", sp.On)
		}
	case ClientRestart:
		if sp.Signal != "" {
			add("signal", sp.Signal)
			add("pid", strconv.Itoa(sp.PID))
		}
	}
	if sp.Count > 0 && !((sp.Kind == Stale || sp.Kind == Error) && sp.Count == 1) {
		add("count", strconv.Itoa(sp.Count))
	}
	if sp.Kind == ClientRestart && sp.Exec != "" {
		add("exec", sp.Exec) // last: its value may hold commas
	}
	if len(kv) == 0 {
		return string(sp.Kind)
	}
	return string(sp.Kind) + ":" + strings.Join(kv, ",")
}

// ParseAll parses each of texts (wtrace replay's repeated --perturb).
func ParseAll(texts []string) ([]Spec, error) {
	out := make([]Spec, 0, len(texts))
	for _, t := range texts {
		sp, err := Parse(t)
		if err != nil {
			return nil, err
		}
		out = append(out, sp)
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func kindList() string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

func keyList(ks []string) string { return strings.Join(ks, ", ") }

func signalNames() []string {
	var out []string
	for n := range Signals {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
