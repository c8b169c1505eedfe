package report

import (
	"github.com/wtrace/wtrace/diff"
)

// diffModel is the verdict as the page shows it: the report's counts,
// end states and pairing, and every listed difference with where it is
// in each session (its lane and time there).
type diffModel struct {
	Same     bool               `json:"same"`
	Verdict  []diff.Category    `json:"verdict"`
	Summary  diff.Summary       `json:"summary"`
	States   []diff.ObjectState `json:"states,omitempty"`
	Pairing  []diff.Pair        `json:"pairing,omitempty"`
	Attempts diff.PerSide       `json:"attempts"`
	Omitted  int                `json:"omitted"`
	Warnings []string           `json:"warnings,omitempty"`
	Groups   []diffGroup        `json:"groups"`
	// Differences are the report's, group after group.
	Differences []diffMark `json:"differences"`
}

type diffGroup struct {
	Subject string `json:"subject"`
	First   int    `json:"first"` // index of its first difference
	N       int    `json:"n"`
}

// diffMark is one difference and where it is.
type diffMark struct {
	Group    int        `json:"group"`
	Category string     `json:"category"`
	Kind     string     `json:"kind"`
	What     string     `json:"what,omitempty"`
	Stream   string     `json:"stream,omitempty"`
	Detail   string     `json:"detail,omitempty"`
	Count    int        `json:"count,omitempty"`
	Delta    int64      `json:"delta,omitempty"`
	A        *diffPlace `json:"a,omitempty"`
	B        *diffPlace `json:"b,omitempty"`
	// Diff is the store item of the unified diff of the normalized
	// documents (-1: none).
	Diff int `json:"diff"`
}

// diffPlace is a diff.Place on a session's timeline.
type diffPlace struct {
	diff.Place
	Lane int   `json:"lane"` // -1: the exchange has no lane
	T    int64 `json:"t"`    // µs since that session's start
}

func newDiffModel(rep *diff.Report, a, b *builder, st *store) *diffModel {
	m := &diffModel{Same: rep.Same, Verdict: rep.Verdict, Summary: rep.Summary, States: rep.States, Pairing: rep.Pairing,
		Attempts: rep.Attempts, Omitted: rep.Omitted, Warnings: rep.Warnings, Groups: []diffGroup{}, Differences: []diffMark{}}
	place := func(p *diff.Place, bl *builder) *diffPlace {
		if p == nil {
			return nil
		}
		dp := &diffPlace{Place: *p, Lane: -1}
		if l, ok := bl.exLane[p.Exchange]; ok {
			dp.Lane = l
		}
		dp.T = bl.us(parseTime(p.Time))
		return dp
	}
	for gi, g := range rep.Groups {
		m.Groups = append(m.Groups, diffGroup{Subject: g.Subject, First: len(m.Differences), N: len(g.Differences)})
		for _, d := range g.Differences {
			dm := diffMark{Group: gi, Category: string(d.Category), Kind: string(d.Kind), What: d.What, Stream: d.Stream,
				Detail: d.Detail, Count: d.Count, Delta: d.Delta, A: place(d.A, a), B: place(d.B, b), Diff: -1}
			if d.Diff != "" {
				dm.Diff = st.add([]byte(d.Diff))
			}
			m.Differences = append(m.Differences, dm)
		}
	}
	return m
}
