package controld_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// alertRules is the part of a Prometheus rule file the test reads.
type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert string `yaml:"alert"`
			Expr  string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// metricName finds the metric names in a PromQL expression.
var metricName = regexp.MustCompile(`\bgpuaas_[a-z0-9_]+\b`)

// exportedByOthers are families sshgate and hostd export (their own
// tests scrape them), which controld does not.
var exportedByOthers = []string{"gpuaas_ssh_sessions_active", "gpuaas_ssh_sessions_total", "gpuaas_ssh_bytes_total",
	"gpuaas_hostd_tasks_running", "gpuaas_hostd_task_duration_seconds", "gpuaas_hostd_tenant_cgroups"}

// TestAlertRulesNameExportedMetrics parses packaging's example alert
// rules and checks that each expression names metrics the daemons export:
// controld's as listed in controldFamilies, which TestMetricsMove scrapes.
func TestAlertRulesNameExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("../packaging/prometheus/gpuaas-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules alertRules
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatalf("parse gpuaas-alerts.yml: %v", err)
	}
	exported := slices.Concat(controldFamilies, exportedByOthers)
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			names := metricName.FindAllString(r.Expr, -1)
			if r.Alert == "" || len(names) == 0 {
				t.Errorf("rule %q in group %s: want an alert name and an expr naming a gpuaas metric, got expr %q", r.Alert, g.Name, r.Expr)
			}
			for _, n := range names {
				family := n
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if base, ok := strings.CutSuffix(n, suffix); ok && slices.Contains(exported, base) {
						family = base
					}
				}
				if !slices.Contains(exported, family) {
					t.Errorf("alert %s names %s, which no daemon exports", r.Alert, n)
				}
			}
		}
	}
	for _, want := range []string{"GpuaasOutboxDead", "GpuaasAccrualLag", "GpuaasNodesDown"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("alerts %v lack %s", alerts, want)
		}
	}
}
