//go:build tools

// Pins promtool, Prometheus' rule checker and rule unit-test runner, which the chart's alert
// tests run (tests/cluster/tests/alerts.rs) on the PrometheusRule the chart renders, so that
// every machine checks the rules with the same Prometheus version.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
