package main

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// families are a replica's metrics, as scraped.
type families map[string]*dto.MetricFamily

func scrape(addr string) (families, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		return nil, fmt.Errorf("%s/metrics: %w", addr, err)
	}
	return fams, nil
}

// value is the sum of a counter's or gauge's samples.
func (f families) value(name string) float64 {
	var v float64
	if mf := f[name]; mf != nil {
		for _, m := range mf.Metric {
			v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return v
}

// requests sums wtrace_replay_requests_total over the samples whose labels
// include label (`verb="watch"`).
func (f families) requests(label string) float64 {
	name, want, _ := strings.Cut(label, "=")
	want = strings.Trim(want, `"`)
	var v float64
	if mf := f["wtrace_replay_requests_total"]; mf != nil {
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == name && l.GetValue() == want {
					v += m.GetCounter().GetValue()
				}
			}
		}
	}
	return v
}

// quantile is histogram_quantile(q) of a histogram: linear interpolation
// within the bucket the rank falls in.
func (f families) quantile(name string, q float64) float64 {
	mf := f[name]
	if mf == nil || len(mf.Metric) == 0 {
		return math.NaN()
	}
	h := mf.Metric[0].GetHistogram()
	bs := h.GetBucket()
	sort.Slice(bs, func(i, j int) bool { return bs[i].GetUpperBound() < bs[j].GetUpperBound() })
	total := float64(h.GetSampleCount())
	if total == 0 {
		return math.NaN()
	}
	rank := q * total
	lower, prev := 0.0, 0.0
	for _, b := range bs {
		c := float64(b.GetCumulativeCount())
		if c >= rank {
			if c == prev {
				return b.GetUpperBound()
			}
			return lower + (b.GetUpperBound()-lower)*(rank-prev)/(c-prev)
		}
		lower, prev = b.GetUpperBound(), c
	}
	return lower // in the +Inf bucket: the largest finite bound, as Prometheus
}
