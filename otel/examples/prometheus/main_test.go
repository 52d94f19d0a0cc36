package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestScrape runs the example, scrapes /metrics and parses it with the
// Prometheus text parser: the duration histograms count the calls by
// procedure and code on both sides, and the counters and gauges are there
// by procedure and node.
func TestScrape(t *testing.T) {
	const calls = 5
	ctx, cancel := context.WithCancel(t.Context())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, "127.0.0.1:0", calls, 0, func(url string) { urls <- url }) }()
	var url string
	select {
	case url = <-urls:
	case err := <-done:
		t.Fatalf("run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the example did not start in 30s")
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s (%s)", url, resp.Status, ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}

	const (
		sum    = mathv1.MathServiceSumProcedure
		divide = mathv1.MathServiceDivideProcedure
		greet  = "lang:*,role:greet"
	)
	for _, side := range []string{"rpc_client_call_duration_seconds", "rpc_server_call_duration_seconds"} {
		for _, w := range []struct {
			method, code string
			count        uint64
		}{
			{sum, "ok", calls},
			{divide, "ok", calls - 1},
			{divide, "invalid_argument", 1},
			{greet, "ok", calls},
		} {
			m := metricWith(t, families, side, dto.MetricType_HISTOGRAM, map[string]string{"rpc_method": w.method, "rpc_response_status_code": w.code, "rpc_system_name": "wizard"})
			if m == nil {
				continue
			}
			h := m.GetHistogram()
			if h.GetSampleCount() != w.count || h.GetSampleSum() <= 0 || len(h.GetBucket()) == 0 {
				t.Errorf("%s{%s,%s}: %d samples (sum %v, %d buckets), want %d", side, w.method, w.code, h.GetSampleCount(), h.GetSampleSum(), len(h.GetBucket()), w.count)
			}
		}
	}
	for _, w := range []struct {
		family string
		typ    dto.MetricType
		labels map[string]string
		value  float64
	}{
		{"wizard_client_calls_active", dto.MetricType_GAUGE, map[string]string{"rpc_method": sum}, 0},
		{"wizard_server_calls_active", dto.MetricType_GAUGE, map[string]string{"rpc_method": divide}, 0},
		{"wizard_peers", dto.MetricType_GAUGE, map[string]string{"wizard_node_id": "caller", "wizard_peer_state": "connected"}, 1},
		{"wizard_node_shed_total", dto.MetricType_COUNTER, map[string]string{"wizard_node_id": "math"}, 0},
		{"wizard_node_retries_total", dto.MetricType_COUNTER, map[string]string{"wizard_node_id": "caller"}, 0},
		{"wizard_node_refeeds_total", dto.MetricType_COUNTER, map[string]string{"wizard_node_id": "caller"}, 0},
		{"wizard_node_duplicates_total", dto.MetricType_COUNTER, map[string]string{"wizard_node_id": "math"}, 0},
	} {
		m := metricWith(t, families, w.family, w.typ, w.labels)
		if m == nil {
			continue
		}
		got := m.GetGauge().GetValue()
		if w.typ == dto.MetricType_COUNTER {
			got = m.GetCounter().GetValue()
		}
		if got != w.value {
			t.Errorf("%s%v = %v, want %v", w.family, w.labels, got, w.value)
		}
	}
}

// metricWith returns the metric of family (of type typ) whose labels
// include labels, failing t (and returning nil) when there is none.
func metricWith(t *testing.T, families map[string]*dto.MetricFamily, family string, typ dto.MetricType, labels map[string]string) *dto.Metric {
	t.Helper()
	f := families[family]
	if f == nil {
		t.Errorf("no %s in /metrics", family)
		return nil
	}
	if f.GetType() != typ {
		t.Errorf("%s is a %v, want a %v", family, f.GetType(), typ)
		return nil
	}
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range labels {
			if have[k] != v {
				match = false
			}
		}
		if match {
			return m
		}
	}
	t.Errorf("no %s with labels %v in /metrics", family, labels)
	return nil
}
