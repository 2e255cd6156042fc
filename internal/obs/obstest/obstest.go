// Package obstest reads what an obs.Server serves, for tests: /metrics
// through Prometheus's own text parser, so a test sees what a Prometheus
// server would.
package obstest

import (
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpuaas/gpuaas/internal/obs"
)

// client bounds every request: a server that accepts and never answers
// fails the test instead of hanging it.
var client = &http.Client{Timeout: 10 * time.Second}

// Get fetches url and returns the status code and body.
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// Families is a parsed scrape.
type Families map[string]*dto.MetricFamily

// Scrape fetches baseURL's /metrics and parses it as Prometheus does.
func Scrape(t testing.TB, baseURL string) Families {
	t.Helper()
	resp, err := client.Get(baseURL + obs.MetricsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: got %s; want 200", obs.MetricsPath, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", obs.MetricsPath, err)
	}
	return fams
}

// Series returns the series of family name whose labels include labels
// (name, value pairs), or nil.
func (f Families) Series(name string, labels ...string) *dto.Metric {
	fam := f[name]
	if fam == nil {
		return nil
	}
	for _, m := range fam.Metric {
		if matches(m, labels) {
			return m
		}
	}
	return nil
}

func matches(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
			return l.GetName() == labels[i] && l.GetValue() == labels[i+1]
		}) {
			return false
		}
	}
	return true
}

// Value is a counter's or gauge's value, a histogram's sample count, or
// -1 when the series does not exist.
func (f Families) Value(name string, labels ...string) float64 {
	m := f.Series(name, labels...)
	switch {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return -1
}
