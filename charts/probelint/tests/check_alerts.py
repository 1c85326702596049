#!/usr/bin/env python3
"""Checks the chart's alert pack and dashboard with real Helm and the real promtool.

Helm renders the chart as check_chart.py does (helm-sdkpy's Install against its fake API server);
promtool is Prometheus' own rule checker and rule unit-test runner, built from its Go module
(tests/cluster/go/promtool; lint/tests/alerts.rs builds it and passes it here).

Checks (each selectable with --only):
  figures   the chart's copy of the built-in policy's startup figures matches policies/default.yaml,
            and tests/alerts/scenarios/ is what tests/alerts/series.py writes
  render    nothing is rendered unless enabled; enabled, the PrometheusRule has the three alerts,
            the dashboard ConfigMap carries the sidecar's label and valid JSON, both match the same
            accelerator resources; the budget, the resources and the selectors follow the values
            and the policy, with the budget's arithmetic in the alert's text
  promtool  `promtool check rules` on every rendered variant and on the dashboard's queries (as
            recording rules); `promtool test rules` on the series of tests/alerts/scenarios/: the
            alerts fire on the storms and degraded pods and stay silent on the fixed arms

Usage: python check_alerts.py --promtool PATH [--only NAME]...
Exit status: 0 when every selected check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_chart import CHART, REPO, CheckFailed, Helm, _schema_error, check, deep_merge, default_values, render  # noqa: E402

ALERTS_DIR = CHART / "tests" / "alerts"
ALERTS = ["ProbelintGPUContainerKilledByProbe", "ProbelintGPUPodLostReadiness", "ProbelintGPUPodNotReadyWithinStartupBudget"]
DASHBOARD_KEY = "probelint-gpu-probes.json"
BUILTIN_GPU_REGEX = (
    "nvidia_com_gpu|nvidia_com_gpu_shared|nvidia_com_mig_.*|amd_com_gpu|gpu_intel_com_.*|habana_ai_gaudi|aws_amazon_com_neuron.*|google_com_tpu"
)


def enabled(extra: dict | None = None) -> dict:
    values = {"monitoring": {"prometheusRule": {"enabled": True}, "dashboard": {"enabled": True}}}
    for key, value in (extra or {}).items():
        if key == "monitoring":
            for k, v in value.items():
                values["monitoring"][k] = {**values["monitoring"].get(k, {}), **v} if isinstance(v, dict) else v
        else:
            values[key] = value
    return values


class Pack:
    """The PrometheusRule and dashboard of one render."""

    def __init__(self, values: dict):
        rendered = render(values)
        rules = rendered.all("PrometheusRule")
        check(len(rules) == 1, f"{len(rules)} PrometheusRules rendered with {values}")
        self.rule = rules[0]
        self.alerts = {r["alert"]: r for g in self.rule["spec"]["groups"] for r in g["rules"]}
        maps = [o for o in rendered.all("ConfigMap") if DASHBOARD_KEY in o.get("data", {})]
        check(len(maps) == 1, f"{len(maps)} dashboard ConfigMaps rendered with {values}")
        self.dashboard_map = maps[0]
        self.dashboard = json.loads(maps[0]["data"][DASHBOARD_KEY])

    def expr(self, alert: str) -> str:
        return self.alerts[alert]["expr"]

    def rules_file(self, path: Path) -> Path:
        path.write_text(yaml.safe_dump(self.rule["spec"], sort_keys=False))
        return path

    def dashboard_exprs(self) -> list[str]:
        return [t["expr"] for p in self.dashboard["panels"] for t in p.get("targets", [])]


def check_figures() -> None:
    policy = yaml.safe_load((REPO / "policies" / "default.yaml").read_text())
    chart = yaml.safe_load((CHART / "files" / "builtin-startup-budget.yaml").read_text())
    engine = {
        "modelLoadSeconds": policy["modelLoadSeconds"],
        "startupMargin": policy["startupMargin"],
        "startupFloorSeconds": policy["modelLoad"]["startupFloorSeconds"],
    }
    check(chart == engine, f"files/builtin-startup-budget.yaml {chart} != policies/default.yaml {engine}")
    out = subprocess.run([sys.executable, str(ALERTS_DIR / "series.py"), "--check"], capture_output=True, text=True)
    check(out.returncode == 0, f"tests/alerts/scenarios/ is stale: {out.stderr}")
    print("  the startup figures match policies/default.yaml; the scenario series are series.py's")


def check_render() -> None:
    default = render({})
    check(not default.all("PrometheusRule"), "a PrometheusRule is rendered with monitoring disabled")
    check(
        not [o for o in default.all("ConfigMap") if DASHBOARD_KEY in o.get("data", {})],
        "a dashboard ConfigMap is rendered with monitoring disabled",
    )

    pack = Pack(enabled({"monitoring": {"prometheusRule": {"labels": {"release": "kube-prometheus-stack"}}}}))
    check(sorted(pack.alerts) == sorted(ALERTS), f"alerts: {sorted(pack.alerts)}")
    check(pack.rule["metadata"]["labels"].get("release") == "kube-prometheus-stack", "PrometheusRule labels")
    fors = {a: pack.alerts[a]["for"] for a in ALERTS}
    check(fors == dict(zip(ALERTS, ["1m", "5m", "1m"])), f"for: {fors}")
    for alert in ALERTS:
        check(f'resource=~"{BUILTIN_GPU_REGEX}"' in pack.expr(alert), f"{alert} is not joined with the GPU requests: {pack.expr(alert)}")
    budget = pack.alerts[ALERTS[2]]
    check("> 1200\n" in budget["expr"] and "[1200s]" in budget["expr"], budget["expr"])
    check(
        "max(300 s load x (1 + 0.25 margin) = 375 s, 1200 s floor) = 1200 s" in budget["annotations"]["description"],
        budget["annotations"]["description"],
    )
    labels = pack.dashboard_map["metadata"]["labels"]
    check(labels.get("grafana_dashboard") == "1", f"dashboard labels {labels}")
    check(pack.dashboard["uid"] == "probelint-gpu-probes", "dashboard uid")
    exprs = pack.dashboard_exprs()
    for metric in ("kube_pod_status_ready", "kube_pod_container_status_restarts_total", "prober_probe_total", "ALERTS"):
        check(any(metric in e for e in exprs), f"no dashboard panel reads {metric}")
    check(
        all(f'resource=~"{BUILTIN_GPU_REGEX}"' in e for e in exprs if "resource_requests" in e) and "__GPU_RESOURCES__" not in json.dumps(pack.dashboard),
        "the dashboard's GPU pods are not the rules'",
    )

    # The budget from the policy (a slower default load), then from the value itself.
    slow = Pack(enabled({"policy": {"modelLoadSeconds": 1200}}))
    expr = slow.expr(ALERTS[2])
    check("> 1500\n" in expr and "[1500s]" in expr, expr)
    check(
        "max(1200 s load x (1 + 0.25 margin) = 1500 s, 1200 s floor) = 1500 s" in slow.alerts[ALERTS[2]]["annotations"]["description"],
        slow.alerts[ALERTS[2]]["annotations"]["description"],
    )
    set_ = Pack(enabled({"monitoring": {"prometheusRule": {"startupBudget": {"seconds": 900}}}}))
    check("> 900\n" in set_.expr(ALERTS[2]), set_.expr(ALERTS[2]))
    check("monitoring.prometheusRule.startupBudget.seconds" in set_.alerts[ALERTS[2]]["annotations"]["description"], "budget source")

    # The accelerators: the monitoring list, else the policy's, as kube-state-metrics names them.
    for values, regex in (
        ({"monitoring": {"acceleratorResources": ["example.com/npu-*", "nvidia.com/gpu"]}}, "example_com_npu_.*|nvidia_com_gpu"),
        ({"policy": {"accelerators": {"resources": ["amd.com/gpu"]}}}, "amd_com_gpu"),
    ):
        pack = Pack(enabled(values))
        for alert in ALERTS:
            check(f'resource=~"{regex}"' in pack.expr(alert), f"{values}: {pack.expr(alert)}")
        check(all(f'resource=~"{regex}"' in e for e in pack.dashboard_exprs() if "resource_requests" in e), f"{values}: dashboard")

    # Selectors reach every series of their source.
    ksm, kubelet = 'job="kube-state-metrics"', 'job="kubelet", metrics_path="/metrics/probes"'
    pack = Pack(enabled({"monitoring": {"kubeStateMetricsSelector": ksm, "kubeletSelector": kubelet}}))
    for alert in ALERTS:
        for selector in re.findall(r"(kube_pod_\w+|prober_probe_total)\{([^}]*)\}", pack.expr(alert)):
            wanted = kubelet if selector[0] == "prober_probe_total" else ksm
            check(selector[1].startswith(wanted), f"{alert}: {selector[0]}{{{selector[1]}}} lacks {wanted}")
    # values.schema.json refuses what the rules could not use, naming the value.
    for values, where in (
        ({"monitoring": {"prometheusRule": {"probeKills": {"restarts": 1}}}}, "/monitoring/prometheusRule/probeKills/restarts"),
        ({"monitoring": {"prometheusRule": {"probeKills": {"window": "15 minutes"}}}}, "/monitoring/prometheusRule/probeKills/window"),
        ({"monitoring": {"acceleratorResources": ["nvidia.com/gpu\"}"]}}, "/monitoring/acceleratorResources/0"),
    ):
        error = _schema_error(values)
        check(where in error, f"{values}: {error}")

    # Helm's Lint, with both enabled.
    with tempfile.TemporaryDirectory() as tmp:
        chart = Path(tmp) / "probelint"
        shutil.copytree(CHART, chart)
        (chart / "values.yaml").write_text(json.dumps(deep_merge(default_values(), enabled()), indent=1))
        result = Helm().lint(chart)
    bad = [m for m in result.get("Messages") or [] if m.get("Severity", 0) >= 2]
    check(result.get("TotalChartsLinted") == 1 and not bad and not result.get("Errors"), f"helm lint with monitoring on: {result}")
    print("  off by default; three alerts joined with GPU requests; budget, resources and selectors follow the values; helm lint clean")


def promtool(binary: str, *args: str, cwd: Path) -> str:
    out = subprocess.run([binary, *args], capture_output=True, text=True, cwd=cwd, timeout=300)
    check(out.returncode == 0, f"promtool {' '.join(args)} failed ({out.returncode}):\n{out.stdout}{out.stderr}")
    return out.stdout + out.stderr


TEMPLATE_PART = re.compile(r"\{\{\s*(.*?)\s*\}\}")


def go_float(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def humanize_duration(v: float) -> str:
    """Prometheus' humanizeDuration (prometheus/common helpers/templates) for v >= 1."""
    check(v >= 60, f"humanizeDuration of {v}: only minutes and longer are expected")
    d = int(v)
    days, hours, minutes, seconds = d // 86400, d // 3600 % 24, d // 60 % 60, d % 60
    if days:
        return f"{days}d {hours}h {minutes}m {seconds}s"
    if hours:
        return f"{hours}h {minutes}m {seconds}s"
    return f"{minutes}m {seconds}s"


def expand(text: str, labels: dict, value) -> str:
    """The annotation as Prometheus would expand it: only the forms the chart's rules use."""

    def one(m: re.Match) -> str:
        part = m.group(1)
        if part.startswith("$labels."):
            name = part[len("$labels.") :]
            check(name in labels, f"annotation uses $labels.{name}, which the alert does not carry")
            return labels[name]
        if part in ("$value", "$value | humanizeDuration"):
            check(value is not None, f"annotation uses {part}, but the test gives no value")
            return go_float(value) if part == "$value" else humanize_duration(value)
        raise CheckFailed(f"annotation template {{{{ {part} }}}} is not one the test knows how to expand")

    return TEMPLATE_PART.sub(one, text)


def promtool_tests(pack: Pack) -> dict:
    """The promtool test file: every scenario of tests/alerts/scenarios/, each expected alert's
    annotations expanded from the rendered rule with the alert's labels and value."""
    tests = []
    for path in sorted((ALERTS_DIR / "scenarios").glob("*.yaml")):
        group = yaml.safe_load(path.read_text())
        for case in group["alert_rule_test"]:
            rule = pack.alerts[case["alertname"]]
            for alert in case["exp_alerts"]:
                value = alert.pop("value", None)
                labels = {**alert["exp_labels"], **rule.get("labels", {})}
                alert["exp_labels"] = labels
                alert["exp_annotations"] = {k: expand(v, labels, value) for k, v in rule["annotations"].items()}
        tests.append(group)
    check(len(tests) >= 8, f"only {len(tests)} scenarios")
    return {"rule_files": ["rules.yaml"], "evaluation_interval": "30s", "tests": tests}


def check_promtool(binary: str) -> None:
    version = promtool(binary, "--version", cwd=REPO).splitlines()[0]
    print(f"  {version}")
    variants = {
        "default": enabled(),
        "policy-load-1200": enabled({"policy": {"modelLoadSeconds": 1200}}),
        "selectors-resources": enabled(
            {
                "monitoring": {
                    "kubeStateMetricsSelector": 'job="kube-state-metrics"',
                    "kubeletSelector": 'job="kubelet", metrics_path="/metrics/probes"',
                    "acceleratorResources": ["example.com/npu-*"],
                }
            }
        ),
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        packs = {}
        for name, values in variants.items():
            packs[name] = pack = Pack(values)
            rules = pack.rules_file(work / f"rules-{name}.yaml")
            out = promtool(binary, "check", "rules", "--lint=all", "--lint-fatal", rules.name, cwd=work)
            check("SUCCESS: 3 rules found" in out, f"{name}: {out}")
            # The dashboard's queries are PromQL too: parsed as recording rules.
            record = {
                "groups": [
                    {
                        "name": "dashboard",
                        "rules": [
                            {"record": f"probelint:dashboard:{i}", "expr": e.replace("$namespace", ".*").replace("$__rate_interval", "2m")}
                            for i, e in enumerate(pack.dashboard_exprs())
                        ],
                    }
                ]
            }
            (work / f"dashboard-{name}.yaml").write_text(yaml.safe_dump(record))
            out = promtool(binary, "check", "rules", f"dashboard-{name}.yaml", cwd=work)
            check(f"SUCCESS: {len(pack.dashboard_exprs())} rules found" in out, f"{name} dashboard: {out}")
        print(f"  promtool check rules: {', '.join(variants)} and their dashboards parse")

        pack = packs["default"]
        pack.rules_file(work / "rules.yaml")
        tests = promtool_tests(pack)
        (work / "alerts.test.yaml").write_text(yaml.safe_dump(tests, sort_keys=False, width=1000))
        cases = sum(len(t["alert_rule_test"]) for t in tests["tests"])
        firing = sum(1 for t in tests["tests"] for c in t["alert_rule_test"] if c["exp_alerts"])
        promtool(binary, "test", "rules", "alerts.test.yaml", cwd=work)
        print(f"  promtool test rules: {len(tests['tests'])} scenarios, {cases} evaluations ({firing} firing, {cases - firing} silent) as expected")

        # The tests can fail: with the storm's threshold raised past what the control arm does in
        # 15 minutes, promtool must report its expected alert missing.
        raised = Pack(enabled({"monitoring": {"prometheusRule": {"probeKills": {"restarts": 1000}}}}))
        raised.rules_file(work / "rules.yaml")
        out = subprocess.run([binary, "test", "rules", "alerts.test.yaml"], capture_output=True, text=True, cwd=work, timeout=300)
        check(out.returncode != 0 and "ProbelintGPUContainerKilledByProbe" in out.stdout + out.stderr, f"a rule that cannot fire passed:\n{out.stdout}{out.stderr}")
        print("  and with the storm threshold at 1000 restarts, promtool reports the control arm's alert missing")


CHECKS = ["figures", "render", "promtool"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--promtool", help="the promtool binary (needed by the promtool check)")
    parser.add_argument("--only", action="append", choices=CHECKS)
    args = parser.parse_args()
    selected = args.only or CHECKS
    failed = []
    for name in CHECKS:
        if name not in selected:
            continue
        started = time.monotonic()
        print(f"{name}:")
        try:
            if name == "promtool":
                check(bool(args.promtool), "--promtool is needed")
                check_promtool(str(Path(args.promtool).resolve()))
            else:
                globals()[f"check_{name}"]()
            print(f"ok {name} ({time.monotonic() - started:.1f} s)")
        except CheckFailed as e:
            failed.append(name)
            print(f"FAILED {name}: {e}")
        except Exception:
            failed.append(name)
            print(f"FAILED {name}:\n{traceback.format_exc()}")
    print(f"alert checks: {len(selected) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
