#!/usr/bin/env python3
"""Writes the promtool test groups of the chart's alerts (scenarios/*.yaml) from the timelines of
the real-kubelet scenarios (tests/kubelet), as README.md beside this file explains.

Each arm is a timeline of what the kubelet did (container starts, each probe's results at its
ticks, Ready transitions), taken from the run recorded in tests/kubelet/README.md ("Measured
(2026-12-01)"): its starts, restart counts, first-Ready times and Unhealthy counts by probe. This
script turns a timeline into the series Prometheus would have scraped every 30 s: the kubelet's
prober_probe_total (a series appears at its first increment, as a client_golang CounterVec's does)
and kube-state-metrics' pod series (present from the pod's start). The expected alerts of each
arm are written below with why; their values are counted from the timeline, not from PromQL.

  python3 series.py            rewrite scenarios/*.yaml
  python3 series.py --check    exit 1 if they differ from what this script writes
Standard library only.
"""

from __future__ import annotations

import sys
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "scenarios"
SCRAPE = 30  # seconds, kube-prometheus-stack's default scrape interval
GPU = "nvidia_com_gpu"  # nvidia.com/gpu as kube-state-metrics names it (SanitizeLabelName)


class Arm:
    def __init__(self, arm_id: str, horizon: int, doc: str, gpu: bool = True):
        self.id = arm_id
        self.doc = " ".join(doc.split())
        self.scenario = arm_id.split("-")[0] if not arm_id.startswith("slow-load") else "slow-load"
        self.horizon = horizon
        self.gpu = gpu
        self.starts: list[float] = [0.0]  # container starts, s from the first
        self.ready: list[tuple[float, int]] = [(0.0, 0)]  # (time, Ready 0/1) transitions
        self.probes: dict[tuple[str, str], list[float]] = {}  # (probe_type, result) -> tick times
        self.expect: list[dict] = []  # alert_rule_test entries

    def probe(self, probe_type: str, result: str, times) -> None:
        self.probes.setdefault((probe_type, result), []).extend(float(t) for t in times)

    def ready_at(self, t: float, value: int) -> None:
        self.ready.append((float(t), value))

    # What the arm's series hold at a sample time.
    def restarts(self, t: float) -> int:
        return sum(1 for s in self.starts[1:] if s <= t)

    def is_ready(self, t: float) -> int:
        value = 0
        for at, v in self.ready:
            if at <= t:
                value = v
        return value

    def restarts_within(self, t: int, window: int) -> int:
        """max - min of the sampled restartCount over (t - window, t], as the samples show it."""
        samples = [self.restarts(s) for s in range(0, t + 1, SCRAPE) if s > t - window]
        return max(samples) - min(samples)

    @property
    def pod(self) -> str:
        return f"{self.scenario}-5d8f7c9b4-{zlib.crc32(self.id.encode()):08x}"[:-3]

    @property
    def namespace(self) -> str:
        return f"kubelet-{self.id}"

    def series(self) -> list[dict]:
        n = self.horizon // SCRAPE
        times = [i * SCRAPE for i in range(n + 1)]
        ksm = f'job="kube-state-metrics", namespace="{self.namespace}", pod="{self.pod}", uid="{self.id}-uid"'
        out = []

        def add(name: str, labels: str, values: list) -> None:
            out.append({"series": f"{name}{{{labels}}}", "values": " ".join(values)})

        add("kube_pod_start_time", ksm, ["0"] * len(times))
        for phase in ("Pending", "Running", "Succeeded", "Failed", "Unknown"):
            add("kube_pod_status_phase", f'{ksm}, phase="{phase}"', ["1" if phase == "Running" else "0"] * len(times))
        add("kube_pod_status_ready", f'{ksm}, condition="true"', [str(self.is_ready(t)) for t in times])
        add("kube_pod_status_ready", f'{ksm}, condition="false"', [str(1 - self.is_ready(t)) for t in times])
        c = f'{ksm}, container="server"'
        add("kube_pod_container_status_ready", c, [str(self.is_ready(t)) for t in times])
        add("kube_pod_container_status_restarts_total", c, [str(self.restarts(t)) for t in times])
        node = 'node="probelint-node"'
        add("kube_pod_container_resource_requests", f'{c}, {node}, resource="cpu", unit="core"', ["0.25"] * len(times))
        if self.gpu:
            add("kube_pod_container_resource_requests", f'{c}, {node}, resource="{GPU}", unit="integer"', ["1"] * len(times))
        kubelet = (
            f'job="kubelet", metrics_path="/metrics/probes", instance="probelint-node", '
            f'namespace="{self.namespace}", pod="{self.pod}", container="server", pod_uid="{self.id}-uid"'
        )
        for (probe_type, result), ticks in sorted(self.probes.items()):
            ticks = sorted(ticks)
            values = []
            for t in times:
                count = sum(1 for x in ticks if x <= t)
                # client_golang creates a CounterVec child at its first Inc: no series before.
                values.append(str(count) if count else "_")
            add("prober_probe_total", f'{kubelet}, probe_type="{probe_type}", result="{result}"', values)
        return out

    def alert(self, at: int, name: str, firing: dict | None = None, why: str = "") -> None:
        """Expect `name` at `at` seconds: not firing (None), or firing with these labels and value."""
        entry = {"eval_time": f"{at}s", "alertname": name, "why": why, "exp_alerts": []}
        if firing is not None:
            value = firing.pop("value")
            labels = {"namespace": self.namespace, "pod": self.pod, **firing}
            entry["exp_alerts"].append({"exp_labels": labels, "value": value})
        self.expect.append(entry)


KILL = "ProbelintGPUContainerKilledByProbe"
LOST = "ProbelintGPUPodLostReadiness"
BUDGET = "ProbelintGPUPodNotReadyWithinStartupBudget"
BUDGET_SECONDS = 1200  # the chart's default: max(300 s x 1.25, 1200 s floor)
WINDOW = 15 * 60  # monitoring.prometheusRule.probeKills.window


def ticks(first: float, period: float, until: float):
    t = first
    while t < until:
        yield t
        t += period


def slow_load_control(arm_id: str = "slow-load-control", gpu: bool = True) -> Arm:
    """liveness /livez (initialDelaySeconds 10, period 10, failureThreshold 3), readiness /readyz
    (period 10), no startupProbe; load 45 s. Recorded: starts at 0, 39, 70, 109, 140, 180 s (each
    restart within a second of its kill), never Ready, 5 restarts in 240 s. Past 240 s the storm
    goes on (the load never fits in a 30-40 s life): the recorded gaps 39, 31, 39, 31, 40 s repeat."""
    arm = Arm(arm_id, horizon=30 * 60, doc=slow_load_control.__doc__, gpu=gpu)
    gaps = [39, 31, 39, 31, 40]
    t, i = 0.0, 0
    while t < arm.horizon:
        t += gaps[i % len(gaps)]
        arm.starts.append(t)
        i += 1
    for start, end in zip(arm.starts, arm.starts[1:]):
        # The kill follows the third failed liveness tick, 10 s apart; readiness fails every 10 s
        # of each life (the server answers nothing while it loads).
        arm.probe("Liveness", "failed", [end - 20.5, end - 10.5, end - 0.5])
        arm.probe("Readiness", "failed", ticks(start + 5, 10, end))
    return arm


def slow_load_treatment() -> Arm:
    """The same Deployment, mutated by probelint-webhook (a startupProbe sized to the load).
    Recorded: 0 restarts, Ready at 50 s, 4 failed startup probes."""
    arm = Arm("slow-load-treatment", horizon=30 * 60, doc=slow_load_treatment.__doc__)
    arm.probe("Startup", "failed", [9.5, 19.5, 29.5, 39.5])
    arm.probe("Startup", "successful", [49.5])
    arm.probe("Readiness", "successful", ticks(50, 10, arm.horizon))
    arm.probe("Liveness", "successful", ticks(59.5, 10, arm.horizon))
    arm.ready_at(50, 1)
    return arm


def port_open_control() -> Arm:
    """readiness tcpSocket every 5 s, the port open during the 45 s load. Recorded: Ready at 0 s,
    no failed probe (requests failed instead: the linter's finding, not an alert's)."""
    arm = Arm("port-open-control", horizon=10 * 60, doc=port_open_control.__doc__)
    arm.probe("Readiness", "successful", ticks(0.5, 5, arm.horizon))
    arm.ready_at(0.5, 1)
    return arm


def port_open_treatment() -> Arm:
    """readiness httpGet /readyz every 5 s. Recorded: Ready at 47 s, 10 failed readiness probes
    (all during the load, before the first Ready)."""
    arm = Arm("port-open-treatment", horizon=10 * 60, doc=port_open_treatment.__doc__)
    arm.probe("Readiness", "failed", ticks(-2.5 + 5, 5, 47))  # 2.5 ... 42.5
    arm.probe("Readiness", "failed", [44.5])
    arm.probe("Readiness", "successful", ticks(47, 5, arm.horizon))
    arm.ready_at(47, 1)
    return arm


def healthy(arm_id: str, ready: float, failing_from: float, horizon: int) -> Arm:
    """startupProbe /startupz (5 s), readiness /readyz (5 s, failureThreshold 3), liveness /livez
    (10 s); no load. A fault after 30 s that liveness rightly leaves alone: readiness fails from
    `failing_from` at every tick and the pod is NotReady after the third. The server does not
    recover (the fault lasts the process's life and nothing restarts it: 0 restarts recorded)."""
    arm = Arm(arm_id, horizon=horizon, doc=healthy.__doc__)
    arm.probe("Startup", "successful", [ready - 1])
    arm.probe("Readiness", "successful", ticks(ready, 5, failing_from))
    failed = list(ticks(failing_from, 5, horizon))
    arm.probe("Readiness", "failed", failed)
    arm.probe("Liveness", "successful", ticks(ready + 4, 10, horizon))
    arm.ready_at(ready, 1)
    arm.ready_at(failed[2], 0)
    return arm


def hang() -> Arm:
    """Healthy probes; the worker hangs 30 s after each start. Recorded in 150 s: Ready at 5 s,
    1 restart, 17 failed readiness and 4 failed liveness probes, readiness failing before the
    kill. The kill's time is not in the record: 100 s fits those counts (readiness fails from
    39 s, liveness at 80, 90, 100 s; the new instance Ready at 105 s, hung at 130 s, failing
    readiness from 139 s and liveness at 140 s). Only the recorded 150 s are used."""
    arm = Arm("hang-healthy-probes", horizon=150, doc=hang.__doc__)
    arm.starts.append(100.5)
    arm.probe("Startup", "successful", [4, 104.5])
    arm.probe("Readiness", "successful", [*ticks(5, 5, 39), *ticks(105, 5, 139)])
    arm.probe("Readiness", "failed", [*ticks(39, 5, 100), *ticks(139, 5, 150)])
    arm.probe("Liveness", "successful", [*ticks(10, 10, 80), *ticks(110.5, 10, 140)])
    arm.probe("Liveness", "failed", [80, 90, 100, 140])
    arm.ready_at(5, 1)
    arm.ready_at(49, 0)
    arm.ready_at(105, 1)
    arm.ready_at(149, 0)
    return arm


def arms() -> list[Arm]:
    out = []

    control = slow_load_control()
    control.alert(60, KILL, why="one restart so far: a single kill is what liveness is for")
    control.alert(120, KILL, why="two restarts by 90 s: pending (for: 1m)")
    for at in (150, 300, 15 * 60, 30 * 60):
        control.alert(at, KILL, {"container": "server", "probe_type": "Liveness", "severity": "critical",
                                 "value": control.restarts_within(at, WINDOW)},
                      why="two restarts by 90 s, pending for 1m: firing from 150 s")
    control.alert(30 * 60, LOST, why="never Ready: nothing was lost")
    control.alert(20 * 60, BUDGET, why="started 1200 s ago: not yet past the budget")
    control.alert(22 * 60, BUDGET, {"severity": "warning", "value": 22 * 60},
                  why="past 1200 s at 1230 s, pending for 1m")
    out.append(control)

    no_gpu = slow_load_control("slow-load-control-no-gpu", gpu=False)
    for at in (300, 22 * 60):
        for name in (KILL, LOST, BUDGET):
            no_gpu.alert(at, name, why="the same storm in a container with no accelerator: not a GPU workload")
    out.append(no_gpu)

    treatment = slow_load_treatment()
    for at in (60, 300, 22 * 60, 30 * 60):
        for name in (KILL, LOST, BUDGET):
            treatment.alert(at, name, why="loads once and is Ready at 50 s: four startup failures are the load")
    out.append(treatment)

    for arm in (port_open_control(), port_open_treatment()):
        for at in (60, 300, 600):
            for name in (KILL, LOST, BUDGET):
                arm.alert(at, name, why="no restart, Ready within the load: readiness failures before the first Ready are the load")
        out.append(arm)

    for arm_id, ready, failing_from in (("degradation-healthy-probes", 5, 29), ("leak-healthy-probes", 6, 34)):
        arm = healthy(arm_id, ready, failing_from, horizon=30 * 60)
        arm.alert(5 * 60 + 30, LOST, why="not Ready and failing since about 60 s: still pending (for 5m)")
        for at in (7 * 60, 30 * 60):
            arm.alert(at, LOST, {"container": "server", "severity": "warning", "value": None},
                      why="was Ready, not Ready with readiness failing for more than 5m")
        for at in (7 * 60, 30 * 60):
            arm.alert(at, KILL, why="no restart")
            arm.alert(at, BUDGET, why="it was Ready: the budget is for the first Ready")
        out.append(arm)

    h = hang()
    for at in (60, 150):
        for name in (KILL, LOST, BUDGET):
            h.alert(at, name, why="one liveness restart of a hung server, Ready again 5 s later: the probes doing their job")
    out.append(h)
    return out


def quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def render(arm: Arm) -> str:
    lines = [
        f"# {arm.id}: written by series.py from the tests/kubelet timeline (see README.md). Do not edit.",
        "name: " + quote(arm.id),
        f"interval: {SCRAPE}s",
        "input_series:",
    ]
    doc, line = [], "#"
    for word in arm.doc.split():
        if len(line) + len(word) > 98:
            doc.append(line)
            line = "#"
        line += " " + word
    lines[1:1] = [*doc, line]
    for s in arm.series():
        lines.append(f"  - series: {quote(s['series'])}")
        lines.append(f"    values: {quote(s['values'])}")
    lines.append("alert_rule_test:")
    for e in arm.expect:
        lines.append(f"  # {e['why']}")
        lines.append(f"  - eval_time: {e['eval_time']}")
        lines.append(f"    alertname: {e['alertname']}")
        if not e["exp_alerts"]:
            lines.append("    exp_alerts: []")
            continue
        lines.append("    exp_alerts:")
        for a in e["exp_alerts"]:
            lines.append("      - exp_labels:")
            for k, v in a["exp_labels"].items():
                lines.append(f"          {k}: {quote(str(v))}")
            if a["value"] is not None:
                lines.append(f"        value: {a['value']}")
    return "\n".join(lines) + "\n"


def main() -> int:
    check = "--check" in sys.argv[1:]
    OUT.mkdir(exist_ok=True)
    stale = []
    for arm in arms():
        path = OUT / f"{arm.id}.yaml"
        text = render(arm)
        if check:
            if not path.is_file() or path.read_text() != text:
                stale.append(path.name)
        else:
            path.write_text(text)
    if stale:
        print(f"stale (run python3 series.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
