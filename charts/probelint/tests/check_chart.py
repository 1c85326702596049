#!/usr/bin/env python3
"""Checks the probelint Helm chart with real Helm.

Helm runs as the library that the PyPI package helm-sdkpy bundles (Helm v4's Go packages behind a
C ABI): its Lint action, and its Install and Upgrade actions, which render the chart exactly as
`helm install` does. Install and Upgrade talk to a Kubernetes API server; here that is a small
in-process fake on 127.0.0.1 (discovery, a store that accepts every object, Helm's release
Secrets), so the chart is rendered by Helm itself, `lookup` included, without a cluster.

Checks (each selectable with --only):
  lint     Helm's Lint, default values and every certificate mode / webhook mode variant
  render   the rendered objects, per values variant, against the chart's specification (warn
           mode fails open, enforce mode closed, never with one replica unless allowed); the
           rendered Deployment against tests/rendered-deployment.yaml and through `probelint`
  schema   values.schema.json refuses wrong values, with a message naming the value
  upgrade  the Helm-generated certificate: valid for the Service name, kept across
           `helm upgrade`, renewed near expiry with the old CA trusted during the switch
  cel      the matchConditions expressions, compiled and evaluated by CEL: acceleratorsOnly over
           every workload kind, against what the engine itself calls an accelerator container;
           the controller conditions over owned and unowned objects
  admission  admission.mode webhook / policies / both: which webhook configurations and which
           of `probelint export`'s admission policies each renders, with the chart's scope
  sync     the chart's copies of engine facts (workload kinds, accelerator lists, the policy
           schema inside values.schema.json) still match the engine

Usage:
  python check_chart.py --probelint target/debug/probelint [--only NAME]...
  python check_chart.py --probelint ... --update-fixture        rewrite rendered-deployment.yaml
  python check_chart.py --probelint ... --sync-policy-schema    rewrite the policy part of
                                                                values.schema.json
Needs helm-sdkpy, PyYAML and cel-expr-python (lint/tests/helm_chart.rs installs them).
Exit status: 0 when every selected check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import copy
import difflib
import json
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import yaml

CHART = Path(__file__).resolve().parent.parent
REPO = CHART.parent.parent
FIXTURE = CHART / "tests" / "rendered-deployment.yaml"
RELEASE = "probelint"
NAMESPACE = "probelint"
FULLNAME = "probelint"  # the release name contains the chart name

FIXTURE_HEADER = """\
# The Deployment that `helm install probelint charts/probelint -n probelint` renders with the
# default values, kept here so that `probelint` lints it in every test run (no Helm needed) and
# so that reviewers see what the template produces. lint/tests/helm_chart.rs checks it against
# a real Helm render; after changing the template, regenerate it with
#   UPDATE_DOCS=1 cargo test -p probelint --test helm_chart
"""

# Every workload kind the engine reads pod specs from (policies/src/analysis/layout.rs), with the
# group/resource the webhook rules must name.
WORKLOAD_RESOURCES = {
    "Pod": ("", "pods"),
    "Deployment": ("apps", "deployments"),
    "StatefulSet": ("apps", "statefulsets"),
    "DaemonSet": ("apps", "daemonsets"),
    "ReplicaSet": ("apps", "replicasets"),
    "ReplicationController": ("", "replicationcontrollers"),
    "Job": ("batch", "jobs"),
    "CronJob": ("batch", "cronjobs"),
    "LeaderWorkerSet": ("leaderworkerset.x-k8s.io", "leaderworkersets"),
    "InferenceService": ("serving.kserve.io", "inferenceservices"),
    "ServingRuntime": ("serving.kserve.io", "servingruntimes"),
    "ClusterServingRuntime": ("serving.kserve.io", "clusterservingruntimes"),
    "LLMInferenceService": ("serving.kserve.io", "llminferenceservices"),
    "RayService": ("ray.io", "rayservices"),
    "RayCluster": ("ray.io", "rayclusters"),
    "RayJob": ("ray.io", "rayjobs"),
    "Rollout": ("argoproj.io", "rollouts"),
    "Service": ("serving.knative.dev", "services"),
    "JobSet": ("jobset.x-k8s.io", "jobsets"),
    "NIMService": ("apps.nvidia.com", "nimservices"),
}

# A ServingRuntime declares no accelerator (the InferenceService that uses it does); the engine
# judges the known model servers it runs as GPU serving containers, and the webhooks see every one.
RUNTIME_KINDS = {"ServingRuntime", "ClusterServingRuntime"}

# Kinds whose UPDATEs the webhook never evaluates (webhook/src/review.rs `judged_at_create`): the
# rules name them on CREATE only; every other kind on CREATE and UPDATE.
CREATE_ONLY = {"Pod", "Job", "JobSet", "RayJob"}

class CheckFailed(Exception):
    pass


def check(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


# ---------------------------------------------------------------------------------------------
# A fake Kubernetes API server: enough for Helm's install/upgrade to run and for `lookup`.


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def _fields(buf: bytes):
    """(field number, bytes or int) of a protobuf message."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            length, i = _varint(buf, i)
            value, i = buf[i : i + length], i + length
        elif wire == 1:
            value, i = buf[i : i + 8], i + 8
        elif wire == 5:
            value, i = buf[i : i + 4], i + 4
        else:
            raise ValueError(f"protobuf wire type {wire}")
        yield number, value


def _map_entry(buf: bytes) -> tuple[str, bytes]:
    entry = dict(_fields(buf))
    return entry.get(1, b"").decode(), entry.get(2, b"")


def decode_secret_protobuf(body: bytes) -> dict:
    """Helm stores releases as Secrets through client-go, which sends them as protobuf
    (k8s.io/api core/v1 Secret inside a runtime.Unknown envelope)."""
    assert body.startswith(b"k8s\x00"), body[:8]
    raw = dict(_fields(body[4:]))[2]
    meta: dict = {"labels": {}, "annotations": {}}
    data: dict = {}
    kind = "Opaque"
    for number, value in _fields(raw):
        if number == 1:
            for n, v in _fields(value):
                if n == 1:
                    meta["name"] = v.decode()
                elif n == 3:
                    meta["namespace"] = v.decode()
                elif n == 11:
                    k, v2 = _map_entry(v)
                    meta["labels"][k] = v2.decode()
                elif n == 12:
                    k, v2 = _map_entry(v)
                    meta["annotations"][k] = v2.decode()
        elif number == 2:
            k, v = _map_entry(value)
            data[k] = base64.b64encode(v).decode()
        elif number == 3:
            kind = value.decode()
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": kind, "data": data}


DISCOVERY = {
    ("", "v1"): [
        ("namespaces", "Namespace", False),
        ("configmaps", "ConfigMap", True),
        ("secrets", "Secret", True),
        ("services", "Service", True),
        ("serviceaccounts", "ServiceAccount", True),
        ("pods", "Pod", True),
    ],
    ("apps", "v1"): [("deployments", "Deployment", True)],
    ("policy", "v1"): [("poddisruptionbudgets", "PodDisruptionBudget", True)],
    ("admissionregistration.k8s.io", "v1"): [
        ("validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False),
        ("mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False),
        ("validatingadmissionpolicies", "ValidatingAdmissionPolicy", False),
        ("validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", False),
        # GA in 1.36: FakeApiServer(mutating_policies=False) is a cluster before it.
        ("mutatingadmissionpolicies", "MutatingAdmissionPolicy", False),
        ("mutatingadmissionpolicybindings", "MutatingAdmissionPolicyBinding", False),
    ],
    ("cert-manager.io", "v1"): [
        ("issuers", "Issuer", True),
        ("clusterissuers", "ClusterIssuer", False),
        ("certificates", "Certificate", True),
    ],
    ("monitoring.coreos.com", "v1"): [("servicemonitors", "ServiceMonitor", True), ("prometheusrules", "PrometheusRule", True)],
    ("networking.k8s.io", "v1"): [("networkpolicies", "NetworkPolicy", True)],
}

_RESOURCE_PATH = re.compile(
    r"/(?:api/v1|apis/[^/]+/[^/]+)(?:/namespaces/(?P<ns>[^/]+))?/(?P<res>[^/]+)(?:/(?P<name>[^/]+))?"
)


def _merge_patch(target, patch):
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue  # strategic-merge-patch directives
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result


class FakeApiServer:
    """Kubernetes 1.33 as far as Helm can tell; every write succeeds."""

    def __init__(self, mutating_policies: bool = True):
        self.discovery = {
            gv: [r for r in resources if mutating_policies or not r[1].startswith("MutatingAdmissionPolicy")]
            for gv, resources in DISCOVERY.items()
        }
        self.objects: dict[tuple[str, str], dict] = {}
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out as two writes: without this, Nagle's algorithm and delayed
            # ACKs add 40 ms to every one of Helm's requests.
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def reply(self, code, obj):
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def handle_any(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                try:
                    code, obj = server.serve(self.command, self.path, self.headers, body)
                except Exception as e:  # a bug here must show, not hang Helm
                    traceback.print_exc()
                    code, obj = 500, _status(500, "InternalError", repr(e))
                self.reply(code, obj)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def kubeconfig(self) -> str:
        port = self.httpd.server_address[1]
        return (
            "apiVersion: v1\nkind: Config\n"
            f'clusters: [{{name: fake, cluster: {{server: "http://127.0.0.1:{port}"}}}}]\n'
            "users: [{name: fake, user: {token: fake}}]\n"
            "contexts: [{name: fake, context: {cluster: fake, user: fake}}]\n"
            "current-context: fake\n"
        )

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def get(self, collection: str, name: str) -> dict | None:
        with self.lock:
            return copy.deepcopy(self.objects.get((collection, name)))

    def put(self, collection: str, name: str, obj: dict) -> None:
        with self.lock:
            self.objects[(collection, name)] = copy.deepcopy(obj)

    def serve(self, method: str, raw_path: str, headers, body: bytes):
        url = urlsplit(raw_path)
        path, query = url.path.rstrip("/"), parse_qs(url.query)
        if path == "/version":
            return 200, {"major": "1", "minor": "33", "gitVersion": "v1.33.0", "platform": "linux/amd64"}
        if path == "/api":
            return 200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if path == "/apis":
            groups = [
                {
                    "name": g,
                    "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
                    "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v},
                }
                for (g, v) in self.discovery
                if g
            ]
            return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
        m = re.fullmatch(r"/api/v1|/apis/([^/]+)/([^/]+)", path)
        if m:
            gv = (m.group(1) or "", m.group(2) or "v1")
            if gv not in self.discovery:
                return 404, _status(404, "NotFound", path)
            resources = [
                {
                    "name": r,
                    "singularName": k.lower(),
                    "namespaced": namespaced,
                    "kind": k,
                    "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
                }
                for r, k, namespaced in self.discovery[gv]
            ]
            group_version = f"{gv[0]}/{gv[1]}" if gv[0] else gv[1]
            return 200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}
        m = _RESOURCE_PATH.fullmatch(path)
        if not m:
            return 404, _status(404, "NotFound", path)
        name = m.group("name")
        collection = path.rsplit("/", 1)[0] if name else path
        content_type = (headers.get("Content-Type") or "").split(";")[0]

        if method == "GET" and name is None:
            selector = dict(
                term.split("=", 1) for term in query.get("labelSelector", [""])[0].split(",") if "=" in term
            )
            with self.lock:
                items = [
                    copy.deepcopy(o)
                    for (c, _), o in self.objects.items()
                    if c == collection
                    and all(o["metadata"].get("labels", {}).get(k) == v for k, v in selector.items())
                ]
            kind = next((k for gv in self.discovery.values() for r, k, _ in gv if r == m.group("res")), "")
            return 200, {"kind": f"{kind}List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items}
        if method == "GET":
            obj = self.get(collection, name)
            return (200, obj) if obj else (404, _status(404, "NotFound", f"{name} not found"))
        if method == "DELETE":
            with self.lock:
                self.objects.pop((collection, name), None)
            return 200, _status(200, "", "deleted")
        if method in ("POST", "PUT"):
            obj = decode_secret_protobuf(body) if body.startswith(b"k8s\x00") else json.loads(body)
            name = name or obj["metadata"]["name"]
        elif method == "PATCH":
            patch = json.loads(body)
            if content_type == "application/apply-patch+yaml":
                obj = patch
            else:
                obj = _merge_patch(self.get(collection, name) or {}, patch)
        else:
            return 405, _status(405, "MethodNotAllowed", method)
        obj.setdefault("metadata", {})["resourceVersion"] = str(time.monotonic_ns())
        if m.group("ns"):
            obj["metadata"].setdefault("namespace", m.group("ns"))
        self.put(collection, name, obj)
        return (201 if method == "POST" else 200), obj


def _status(code: int, reason: str, message: str) -> dict:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Success" if code < 400 else "Failure",
        "reason": reason,
        "code": code,
        "message": message,
    }


# ---------------------------------------------------------------------------------------------
# Helm


def helm():
    import helm_sdkpy

    return helm_sdkpy


def deep_merge(base: dict, override: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def default_values() -> dict:
    return yaml.safe_load((CHART / "values.yaml").read_text())


class Rendered:
    """One `helm install`/`upgrade` as Helm rendered it."""

    def __init__(self, result: dict, api: FakeApiServer):
        self.result = result
        self.manifest: str = result["manifest"]
        self.notes: str = (result.get("info") or {}).get("notes") or ""
        self.objects = [d for d in yaml.safe_load_all(self.manifest) if d]
        self.api = api

    def all(self, kind: str) -> list[dict]:
        return [o for o in self.objects if o["kind"] == kind]

    def one(self, kind: str, name: str | None = None) -> dict:
        found = [o for o in self.all(kind) if name is None or o["metadata"]["name"] == name]
        check(len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}")
        return found[0]

    def source_of(self, kind: str) -> str:
        """The YAML text Helm printed for the (single) object of `kind`."""
        for chunk in re.split(r"^---\n", self.manifest, flags=re.M):
            doc = yaml.safe_load(chunk)
            if doc and doc.get("kind") == kind:
                return chunk
        raise CheckFailed(f"no {kind} in the manifest")


class Helm:
    def __init__(self, api: FakeApiServer | None = None, namespace: str = NAMESPACE):
        self.api = api or FakeApiServer()
        self.namespace = namespace
        self.config = helm().Configuration(namespace=namespace, kubeconfig=self.api.kubeconfig)

    def install(self, values: dict | None = None, chart: Path = CHART, release: str = RELEASE) -> Rendered:
        result = asyncio.run(
            helm()
            .Install(self.config)
            .run(release, str(chart), values=values or {}, wait=False, timeout=60, server_side_apply=True)
        )
        return Rendered(result, self.api)

    def upgrade(self, values: dict | None = None, release: str = RELEASE) -> Rendered:
        result = asyncio.run(
            helm()
            .Upgrade(self.config)
            .run(release, str(CHART), values=values or {}, wait=False, timeout=60, server_side_apply=True)
        )
        return Rendered(result, self.api)

    def lint(self, chart: Path) -> dict:
        return asyncio.run(helm().Lint(self.config).run(str(chart)))


def render(values: dict | None = None, namespace: str = NAMESPACE) -> Rendered:
    return Helm(namespace=namespace).install(values)


# ---------------------------------------------------------------------------------------------
# probelint


class Probelint:
    def __init__(self, binary: str):
        self.binary = binary

    def run(self, *args: str, stdin: str | None = None, cwd: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [self.binary, *args], input=stdin, capture_output=True, text=True, cwd=cwd, timeout=120
        )

    def lint_clean(self, path: Path, what: str) -> None:
        """No finding at any severity, with the built-in policy (run outside the repository, so
        no .probelint.yaml applies)."""
        with tempfile.TemporaryDirectory() as cwd:
            out = self.run("--format", "json", "--fail-on", "info", str(path), cwd=cwd)
        check(out.returncode == 0, f"probelint finds problems in {what} (exit {out.returncode}):\n{out.stdout}{out.stderr}")
        report = json.loads(out.stdout)
        check(report["findings"] == [] and report["errors"] == [], f"{what}: {out.stdout}")
        check(report["summary"]["objects"] >= 1, f"{what}: probelint linted no object: {out.stdout}")


# ---------------------------------------------------------------------------------------------
# Checks


def variant_values(ca_pem: str) -> dict[str, dict]:
    """Values of every variant the chart must render and lint for."""
    return {
        "default": {},
        "enforce": {"webhook": {"mode": "enforce"}},
        "enforce-singleReplica-allowed": {"replicaCount": 1, "webhook": {"mode": "enforce", "allowSingleReplicaFailClosed": True}},
        "certManager": {"certificates": {"mode": "certManager"}},
        "certManager-clusterIssuer": {
            "certificates": {"mode": "certManager", "certManager": {"issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}}}
        },
        "secret": {"certificates": {"mode": "secret", "secret": {"name": "my-webhook-tls", "caBundle": ca_pem}}},
        "secret-base64": {
            "certificates": {"mode": "secret", "secret": {"name": "my-webhook-tls", "caBundle": base64.b64encode(ca_pem.encode()).decode()}}
        },
        "external": {"webhook": {"mode": "enforce", "external": {"url": "https://127.0.0.1:8443", "caBundle": ca_pem}}},
        "acceleratorsOnly": {"webhook": {"acceleratorsOnly": {"enabled": True}}},
        "podsOnly-noValidate": {"webhook": {"mutating": {"podsOnly": True}, "validating": {"enabled": False}}},
        "clientAuth-serviceMonitor": {
            "clientAuth": {"caConfigMap": "apiserver-client-ca"},
            "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}}},
            "priorityClassName": "system-cluster-critical",
        },
        "networkPolicy": {
            "networkPolicy": {
                "enabled": True,
                "apiserver": [{"ipBlock": {"cidr": "10.0.0.0/24"}}],
                "metrics": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
            }
        },
        "networkPolicy-openReviewPort": {"networkPolicy": {"enabled": True}},
        "singleReplica-policy": {
            "replicaCount": 1,
            "preStopSleepSeconds": 0,
            "policy": {"modelLoadSeconds": 600, "rules": {"gpu-graceful-shutdown-missing": "off"}},
        },
    }


def sample_ca_pem() -> str:
    """A real CA certificate (Helm-generated) for the user-supplied-Secret mode."""
    secret = render().one("Secret", f"{FULLNAME}-tls")
    return base64.b64decode(secret["data"]["ca.crt"]).decode()


def check_lint(probelint: Probelint) -> None:
    h = Helm()
    defaults = default_values()
    problems = []
    for name, override in variant_values(sample_ca_pem()).items():
        with tempfile.TemporaryDirectory() as tmp:
            chart = Path(tmp) / "probelint"
            shutil.copytree(CHART, chart)
            # Helm's Lint reads values.yaml; JSON is YAML.
            (chart / "values.yaml").write_text(json.dumps(deep_merge(defaults, override), indent=1))
            result = h.lint(chart)
        check(result.get("TotalChartsLinted") == 1, f"lint {name}: {result}")
        # Severities: 1 info (e.g. "icon is recommended"), 2 warning, 3 error.
        bad = [m for m in result.get("Messages") or [] if m.get("Severity", 0) >= 2]
        if bad or result.get("Errors"):
            # helm-sdkpy drops the error text of lint messages; rendering names the problem.
            try:
                render(override)
                why = "(the render itself succeeds)"
            except Exception as e:
                why = str(e)
            problems.append(f"{name}: {bad} {why}")
        print(f"  helm lint, {name} values: {len(result.get('Messages') or [])} message(s), none above info")
    check(not problems, "helm lint reports problems:\n" + "\n".join(problems))


def _container(deployment: dict) -> dict:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    check(len(containers) == 1, f"one container expected: {containers}")
    return containers[0]


def _port_number(container: dict, name) -> int:
    if isinstance(name, int):
        return name
    for p in container.get("ports", []):
        if p["name"] == name:
            return p["containerPort"]
    raise CheckFailed(f"probe port {name!r} is not declared")


def _resources_of(webhook: dict) -> dict[tuple[str, str], list[str]]:
    """The operations each (group, resource) of the webhook's rules is sent on."""
    out: dict[tuple[str, str], list[str]] = {}
    for rule in webhook["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                check((group, resource) not in out, f"{group}/{resource} in two rules")
                out[(group, resource)] = sorted(rule["operations"])
    return out


def _verify_tls(secret_data: dict, ca_bundle_b64: str, hostname: str) -> None:
    """A TLS handshake with the Secret's certificate, verified the way the apiserver does:
    against the webhook configuration's caBundle, for the Service's DNS name."""
    with tempfile.TemporaryDirectory() as tmp:
        crt, key, ca = Path(tmp, "tls.crt"), Path(tmp, "tls.key"), Path(tmp, "ca.crt")
        crt.write_bytes(base64.b64decode(secret_data["tls.crt"]))
        key.write_bytes(base64.b64decode(secret_data["tls.key"]))
        ca.write_bytes(base64.b64decode(ca_bundle_b64))
        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ctx.load_cert_chain(crt, key)
        client_ctx = ssl.create_default_context(cafile=str(ca))
        a, b = socket.socketpair()
        errors = []

        def serve():
            try:
                with server_ctx.wrap_socket(a, server_side=True) as s:
                    s.sendall(s.recv(5))
            except Exception as e:
                errors.append(e)

        t = threading.Thread(target=serve)
        t.start()
        try:
            with client_ctx.wrap_socket(b, server_hostname=hostname) as c:
                c.sendall(b"hello")
                check(c.recv(5) == b"hello", "TLS echo")
        except ssl.SSLError as e:
            raise CheckFailed(f"the certificate does not verify for {hostname} against the caBundle: {e}") from e
        finally:
            t.join(10)
        check(not errors, f"TLS server side: {errors}")


def _check_webhook(webhook: dict, *, path: str, failure_policy: str, namespace: str) -> None:
    check(webhook["admissionReviewVersions"] == ["v1"], "admissionReviewVersions")
    check(webhook["sideEffects"] == "None", "sideEffects")
    check(webhook["timeoutSeconds"] == 5, "timeoutSeconds")
    check(webhook["failurePolicy"] == failure_policy, f"failurePolicy {webhook['failurePolicy']} != {failure_policy}")
    service = webhook["clientConfig"]["service"]
    check(service == {"name": FULLNAME, "namespace": namespace, "path": path, "port": 443}, f"clientConfig.service {service}")
    expressions = {e["key"]: e for e in webhook["namespaceSelector"]["matchExpressions"]}
    names = expressions["kubernetes.io/metadata.name"]
    check(names["operator"] == "NotIn", "namespaceSelector operator")
    check({"kube-system", "kube-node-lease", namespace} <= set(names["values"]), f"excluded namespaces {names['values']}")
    opt_out = expressions["probelint.io/ignore"]
    check(opt_out["operator"] == "NotIn" and opt_out["values"] == ["true"], f"namespace opt-out {opt_out}")
    # The object's own opt-out label is the webhook's to decide (allowAnnotationExemptions), not
    # the apiserver's: no selector on it.
    check(webhook["objectSelector"] == {}, f"objectSelector {webhook['objectSelector']}")


def _check_rules_cover_engine(webhook: dict, pods_only: bool = False) -> None:
    resources = _resources_of(webhook)
    expected = {"Pod": WORKLOAD_RESOURCES["Pod"]} if pods_only else WORKLOAD_RESOURCES
    for kind, (group, resource) in expected.items():
        check((group, resource) in resources, f"{webhook['name']}: no rule for {kind} ({group}/{resource})")
        operations = ["CREATE"] if kind in CREATE_ONLY else ["CREATE", "UPDATE"]
        check(resources[(group, resource)] == operations, f"{webhook['name']}: {kind} on {resources[(group, resource)]}, not {operations}")
    if pods_only:
        check(resources == {("", "pods"): ["CREATE"]}, f"podsOnly rules: {resources}")


def _condition_names(webhook: dict) -> list[str]:
    return [c["name"] for c in webhook.get("matchConditions", [])]


def check_render(probelint: Probelint, update_fixture: bool) -> None:
    ca_pem = sample_ca_pem()
    variants = variant_values(ca_pem)

    # --- defaults -------------------------------------------------------------------------
    r = render()
    kinds = sorted(o["kind"] for o in r.objects)
    check(
        kinds
        == sorted(
            [
                "ServiceAccount",
                "ConfigMap",
                "Secret",
                "Service",
                "Service",
                "Deployment",
                "PodDisruptionBudget",
                "ValidatingWebhookConfiguration",
                "MutatingWebhookConfiguration",
            ]
        ),
        f"default objects: {kinds}",
    )
    for o in r.objects:
        check("Role" not in o["kind"] and "Binding" not in o["kind"], f"the chart creates RBAC: {o['kind']}")
        if o["kind"] not in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            check(o["metadata"].get("namespace") == NAMESPACE, f"{o['kind']} not in the release namespace")

    d = r.one("Deployment")
    spec, pod = d["spec"], d["spec"]["template"]["spec"]
    c = _container(d)
    check(spec["replicas"] == 2, "2 replicas by default")
    check(spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0, "rolling update keeps every replica")
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    check(anti["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname", "anti-affinity across nodes")
    check(anti["podAffinityTerm"]["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"], "anti-affinity selects the webhook pods")
    check(pod["automountServiceAccountToken"] is False, "no service account token")
    check(pod["serviceAccountName"] == FULLNAME, "dedicated service account")
    check(r.one("ServiceAccount")["automountServiceAccountToken"] is False, "SA without token")
    check("priorityClassName" not in pod, "no priorityClassName by default")
    psc, csc = pod["securityContext"], c["securityContext"]
    check(psc["runAsNonRoot"] is True and psc["seccompProfile"] == {"type": "RuntimeDefault"}, f"pod securityContext {psc}")
    check(csc["runAsNonRoot"] is True and csc["readOnlyRootFilesystem"] is True, f"container securityContext {csc}")
    check(csc["allowPrivilegeEscalation"] is False and csc["capabilities"] == {"drop": ["ALL"]}, f"container securityContext {csc}")
    check(set(c["resources"]) == {"requests", "limits"}, "requests and limits")
    check({"cpu", "memory"} <= set(c["resources"]["requests"]) and "memory" in c["resources"]["limits"], f"resources {c['resources']}")
    args = c["args"]
    for arg in (
        "--listen=0.0.0.0:8443",
        "--metrics-listen=0.0.0.0:9090",
        "--tls-cert=/etc/probelint/tls/tls.crt",
        "--tls-key=/etc/probelint/tls/tls.key",
        "--policy=/etc/probelint/policy/policy.yaml",
        "--log-format=json",
        "--object-opt-out-label=probelint.io/ignore",
    ):
        check(arg in args, f"{arg} not in {args}")
    check(not any(a.startswith("--client-ca") for a in args), "no --client-ca by default")
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    # Whole directories, never subPath: the kubelet's ..data swap must reach the process.
    check(mounts["tls"] == {"name": "tls", "mountPath": "/etc/probelint/tls", "readOnly": True}, f"tls mount {mounts['tls']}")
    check(mounts["policy"] == {"name": "policy", "mountPath": "/etc/probelint/policy", "readOnly": True}, "policy mount")
    check(volumes["tls"]["secret"]["secretName"] == f"{FULLNAME}-tls", "tls volume")
    check(volumes["policy"]["configMap"]["name"] == f"{FULLNAME}-policy", "policy volume")
    probes = {k: c[k] for k in ("startupProbe", "readinessProbe", "livenessProbe")}
    check(probes["readinessProbe"]["httpGet"]["path"] == "/readyz", "readiness on /readyz")
    check(probes["livenessProbe"]["httpGet"]["path"] == "/livez", "liveness on /livez")
    for kind, probe in probes.items():
        check(probe["httpGet"]["scheme"] == "HTTPS", f"{kind} scheme")
        check(_port_number(c, probe["httpGet"]["port"]) == 8443, f"{kind} on the TLS port")
    check(c["lifecycle"]["preStop"] == {"sleep": {"seconds": 5}}, "preStop sleep")

    svc = r.one("Service", FULLNAME)
    check(svc["spec"]["ports"] == [{"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}], f"Service ports {svc['spec']['ports']}")
    check(svc["spec"]["selector"] == spec["selector"]["matchLabels"], "Service selects the pods")
    metrics = r.one("Service", f"{FULLNAME}-metrics")
    check(metrics["spec"]["ports"][0]["targetPort"] == "metrics" and _port_number(c, "metrics") == 9090, "metrics Service")
    pdb = r.one("PodDisruptionBudget")
    check(pdb["spec"]["minAvailable"] == 1 and pdb["spec"]["selector"]["matchLabels"] == spec["selector"]["matchLabels"], "PDB")

    policy_cm = r.one("ConfigMap")
    check(yaml.safe_load(policy_cm["data"]["policy.yaml"]) == {}, "empty policy by default")

    vwc = r.one("ValidatingWebhookConfiguration")["webhooks"]
    mwc = r.one("MutatingWebhookConfiguration")["webhooks"]
    check(len(vwc) == 1 and len(mwc) == 1, "one webhook each")
    # Warn mode never denies, so a webhook that is down must not refuse anything either.
    _check_webhook(vwc[0], path="/validate/warn", failure_policy="Ignore", namespace=NAMESPACE)
    _check_webhook(mwc[0], path="/mutate", failure_policy="Ignore", namespace=NAMESPACE)
    check(mwc[0]["reinvocationPolicy"] == "IfNeeded", "reinvocationPolicy")
    check("reinvocationPolicy" not in vwc[0], "validating webhooks have no reinvocationPolicy")
    _check_rules_cover_engine(vwc[0])
    _check_rules_cover_engine(mwc[0])
    # What a controller creates never reaches the validating webhook, and only its Pods reach the
    # mutating one (check_cel evaluates the expressions).
    check(_condition_names(vwc[0]) == ["not-created-by-a-controller"], f"validating matchConditions {vwc[0].get('matchConditions')}")
    check(_condition_names(mwc[0]) == ["pod-or-not-created-by-a-controller"], f"mutating matchConditions {mwc[0].get('matchConditions')}")
    check(not any(a.startswith("--controller-service-account") for a in args), f"no operators by default: {args}")
    operator = "system:serviceaccount:kserve:kserve-controller-manager"
    with_operator = render({"webhook": {"controllerServiceAccounts": [operator]}})
    check(f"--controller-service-account={operator}" in _container(with_operator.one("Deployment"))["args"], "--controller-service-account")
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for condition in with_operator.one(kind)["webhooks"][0]["matchConditions"]:
            if "created-by-a-controller" in condition["name"]:
                check(f"'{operator}'" in condition["expression"], f"{kind}: {condition}")
    secret = r.one("Secret")
    check(secret["type"] == "kubernetes.io/tls", "TLS Secret type")
    check(vwc[0]["clientConfig"]["caBundle"] == secret["data"]["ca.crt"] == mwc[0]["clientConfig"]["caBundle"], "caBundle is the generated CA")
    _verify_tls(secret["data"], vwc[0]["clientConfig"]["caBundle"], f"{FULLNAME}.{NAMESPACE}.svc")

    # NOTES.txt tells the admin how to test it.
    check("kubectl run" in r.notes and "nvidia.com/gpu" in r.notes and "--dry-run=server" in r.notes, f"NOTES:\n{r.notes}")
    check("warn mode" in r.notes.lower() and "webhook.mode=enforce" in r.notes, f"NOTES (warn mode):\n{r.notes}")
    check("Warning:" in r.notes, "NOTES shows what the admin sees")
    check("validating (Ignore): matching objects are admitted unchecked" in r.notes, f"NOTES (webhook down, warn mode):\n{r.notes}")
    check("mutating (Ignore): matching objects are admitted without the probe defaults" in r.notes, f"NOTES (webhook down, mutation):\n{r.notes}")
    check("REFUSED" not in r.notes, f"NOTES: warn mode refuses nothing, even with the webhook down:\n{r.notes}")

    # --- the Deployment fixture and probelint ----------------------------------------------
    rendered_deployment = r.source_of("Deployment")
    if update_fixture:
        FIXTURE.write_text(FIXTURE_HEADER + "---\n" + rendered_deployment)
        print(f"  rewrote {FIXTURE.relative_to(REPO)}")
    fixture_text = FIXTURE.read_text()
    fixture_docs = [x for x in yaml.safe_load_all(fixture_text) if x]
    if fixture_docs != [d]:
        diff = "".join(
            difflib.unified_diff(
                fixture_text.split("---\n", 1)[-1].splitlines(True),
                rendered_deployment.splitlines(True),
                "tests/rendered-deployment.yaml",
                "helm install (default values)",
            )
        )
        raise CheckFailed(
            "charts/probelint/tests/rendered-deployment.yaml no longer matches the template; if "
            "the change is intended, regenerate it with UPDATE_DOCS=1 cargo test -p probelint "
            "--test helm_chart, or this script's --update-fixture:\n" + diff
        )
    print("  tests/rendered-deployment.yaml matches the render")
    with tempfile.TemporaryDirectory() as tmp:
        whole = Path(tmp, "rendered.yaml")
        whole.write_text(r.manifest)
        probelint.lint_clean(whole, "the chart rendered with default values")
        config = Path(tmp, "policy.yaml")
        config.write_text(policy_cm["data"]["policy.yaml"])
        out = probelint.run("--config", str(config), "--format", "json", str(FIXTURE), cwd=tmp)
        check(out.returncode == 0, f"the default policy ConfigMap does not load in probelint:\n{out.stderr}")
    probelint.lint_clean(FIXTURE, str(FIXTURE.relative_to(REPO)))
    print("  probelint: the rendered chart and the fixture have no finding")

    # --- variants -----------------------------------------------------------------------------
    r = render(variants["enforce"])
    _check_webhook(r.one("ValidatingWebhookConfiguration")["webhooks"][0], path="/validate", failure_policy="Fail", namespace=NAMESPACE)
    _check_webhook(r.one("MutatingWebhookConfiguration")["webhooks"][0], path="/mutate", failure_policy="Ignore", namespace=NAMESPACE)
    check("denied the request" in r.notes, f"NOTES in enforce mode:\n{r.notes}")
    check("webhook.mode=enforce" not in r.notes, "no rollout step left in enforce mode")
    check("validating (Fail): matching objects are REFUSED" in r.notes and "Keep replicaCount >= 2 (now 2)" in r.notes, f"NOTES (webhook down, enforce mode):\n{r.notes}")

    r = render({"webhook": {"mode": "enforce", "validating": {"failurePolicy": "Ignore"}}}, namespace="admission")
    _check_webhook(r.one("ValidatingWebhookConfiguration")["webhooks"][0], path="/validate", failure_policy="Ignore", namespace="admission")
    check("validating (Ignore): matching objects are admitted unchecked" in r.notes, f"NOTES (enforce, Ignore):\n{r.notes}")

    _check_failure_policies()

    r = render(variants["certManager"])
    check(not r.all("Secret"), "no Helm-made Secret with cert-manager")
    issuers = {o["metadata"]["name"]: o["spec"] for o in r.all("Issuer")}
    check(issuers == {f"{FULLNAME}-selfsigned": {"selfSigned": {}}, f"{FULLNAME}-ca": {"ca": {"secretName": f"{FULLNAME}-ca"}}}, f"issuers {issuers}")
    certs = {o["metadata"]["name"]: o["spec"] for o in r.all("Certificate")}
    check(certs[f"{FULLNAME}-ca"]["isCA"] is True, "CA certificate")
    serving = certs[f"{FULLNAME}-tls"]
    check(serving["issuerRef"] == {"name": f"{FULLNAME}-ca", "kind": "Issuer", "group": "cert-manager.io"}, f"issuerRef {serving['issuerRef']}")
    check(f"{FULLNAME}.{NAMESPACE}.svc" in serving["dnsNames"], f"dnsNames {serving['dnsNames']}")
    check(serving["secretName"] == r.one("Deployment")["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"], "the Deployment mounts cert-manager's Secret")
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        o = r.one(kind)
        check(o["metadata"]["annotations"] == {"cert-manager.io/inject-ca-from": f"{NAMESPACE}/{FULLNAME}-tls"}, f"{kind} inject-ca-from")
        check("caBundle" not in o["webhooks"][0]["clientConfig"], f"{kind}: cainjector owns the caBundle")

    r = render(variants["certManager-clusterIssuer"])
    check(not r.all("Issuer") and len(r.all("Certificate")) == 1, "only the serving Certificate with a given issuer")
    check(r.one("Certificate")["spec"]["issuerRef"] == {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}, "issuerRef passed through")

    for name in ("secret", "secret-base64"):
        r = render(variants[name])
        check(not r.all("Secret") and not r.all("Certificate"), f"{name}: nothing generated")
        check(r.one("Deployment")["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"] == "my-webhook-tls", f"{name}: mounts the given Secret")
        for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            bundle = r.one(kind)["webhooks"][0]["clientConfig"]["caBundle"]
            check(base64.b64decode(bundle).decode() == ca_pem.strip() or base64.b64decode(bundle).decode() == ca_pem, f"{name}: {kind} caBundle")
            check("annotations" not in r.one(kind)["metadata"], f"{name}: no cert-manager annotation")

    r = render(deep_merge(variants["external"], {"networkPolicy": {"enabled": True}}))
    for kind in ("Deployment", "Service", "ServiceAccount", "PodDisruptionBudget", "NetworkPolicy", "Secret", "Certificate", "Issuer"):
        check(not r.all(kind), f"external: no {kind} in the cluster")
    hooks = {kind: r.one(kind)["webhooks"][0]["clientConfig"] for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")}
    check(hooks["ValidatingWebhookConfiguration"].get("url") == "https://127.0.0.1:8443/validate", f"external: validating url {hooks}")
    check(hooks["MutatingWebhookConfiguration"].get("url") == "https://127.0.0.1:8443/mutate", f"external: mutating url {hooks}")
    for kind, config in hooks.items():
        check("service" not in config, f"external: {kind} names no Service")
        check(base64.b64decode(config["caBundle"]).decode().strip() == ca_pem.strip(), f"external: {kind} trusts the given CA")
    check("https://127.0.0.1:8443" in r.notes and "rollout status" not in r.notes, f"external: NOTES say where the webhook must run: {r.notes}")
    warn = render(deep_merge(variants["external"], {"webhook": {"mode": "warn", "external": {"url": "https://hooks.example:9443/"}}}))
    check(
        warn.one("ValidatingWebhookConfiguration")["webhooks"][0]["clientConfig"]["url"] == "https://hooks.example:9443/validate/warn",
        "external: warn mode calls /validate/warn, a trailing slash is dropped",
    )

    r = render(variants["acceleratorsOnly"])
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        names = _condition_names(r.one(kind)["webhooks"][0])
        check(len(names) == 2 and names[1] == "has-accelerator", f"{kind} matchConditions {names}")

    r = render(variants["podsOnly-noValidate"])
    check(not r.all("ValidatingWebhookConfiguration"), "validating webhook disabled")
    _check_rules_cover_engine(r.one("MutatingWebhookConfiguration")["webhooks"][0], pods_only=True)

    r = render(variants["clientAuth-serviceMonitor"])
    d = r.one("Deployment")
    c, pod = _container(d), d["spec"]["template"]["spec"]
    check("--client-ca=/etc/probelint/client-ca/ca.crt" in c["args"], f"--client-ca: {c['args']}")
    check(any(v.get("configMap", {}).get("name") == "apiserver-client-ca" for v in pod["volumes"]), "client CA volume")
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        g = c[kind]["httpGet"]
        check(g["scheme"] == "HTTP" and _port_number(c, g["port"]) == 9090, f"{kind} on the metrics port with client auth")
    check(pod["priorityClassName"] == "system-cluster-critical", "priorityClassName settable")
    sm = r.one("ServiceMonitor")
    check(sm["metadata"]["labels"]["release"] == "kube-prometheus-stack", "ServiceMonitor labels")
    metrics_labels = r.one("Service", f"{FULLNAME}-metrics")["metadata"]["labels"]
    check(all(metrics_labels.get(k) == v for k, v in sm["spec"]["selector"]["matchLabels"].items()), "ServiceMonitor selects the metrics Service")
    check(not all(r.one("Service", FULLNAME)["metadata"]["labels"].get(k) == v for k, v in sm["spec"]["selector"]["matchLabels"].items()), "ServiceMonitor does not select the webhook Service")
    check(sm["spec"]["endpoints"][0]["port"] == "metrics", "ServiceMonitor port")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "deployment.yaml")
        path.write_text(yaml.safe_dump(d))
        probelint.lint_clean(path, "the Deployment with client auth (probes on the metrics port)")

    r = render(variants["networkPolicy"])
    np = r.one("NetworkPolicy")
    pod_labels = r.one("Deployment")["spec"]["template"]["metadata"]["labels"]
    check(all(pod_labels.get(k) == v for k, v in np["spec"]["podSelector"]["matchLabels"].items()), "NetworkPolicy selects the webhook pods")
    check(np["spec"]["policyTypes"] == ["Ingress"], f"NetworkPolicy types: {np['spec']}")
    ingress = np["spec"]["ingress"]
    check([rule["ports"] for rule in ingress] == [[{"port": "https", "protocol": "TCP"}], [{"port": "metrics", "protocol": "TCP"}]], f"NetworkPolicy ports: {ingress}")
    check([rule["from"] for rule in ingress] == [variants["networkPolicy"]["networkPolicy"]["apiserver"], variants["networkPolicy"]["networkPolicy"]["metrics"]], f"NetworkPolicy peers: {ingress}")
    check(not render().all("NetworkPolicy"), "no NetworkPolicy by default")
    ingress = render(variants["networkPolicy-openReviewPort"]).one("NetworkPolicy")["spec"]["ingress"]
    check(ingress == [{"ports": [{"port": "https", "protocol": "TCP"}]}], f"without peers: the review port from anywhere, the metrics port from no one: {ingress}")

    r = render(variants["singleReplica-policy"])
    check(not r.all("PodDisruptionBudget"), "no PDB with one replica")
    check("lifecycle" not in _container(r.one("Deployment")), "preStopSleepSeconds 0 drops the hook")
    policy_text = r.one("ConfigMap")["data"]["policy.yaml"]
    check(yaml.safe_load(policy_text) == variants["singleReplica-policy"]["policy"], f"policy ConfigMap:\n{policy_text}")
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp, "policy.yaml")
        config.write_text(policy_text)
        out = probelint.run("--config", str(config), "--format", "json", str(FIXTURE), cwd=tmp)
        check(out.returncode == 0, f"probelint refuses the policy the chart mounts:\n{out.stderr}")
    print("  variants: enforce, enforce + Ignore, cert-manager (own CA / ClusterIssuer), Secret (PEM / base64), "
          "acceleratorsOnly, podsOnly, client auth + ServiceMonitor, NetworkPolicy, one replica + policy")


def _render_refused(values: dict, expected: list[str]) -> str:
    """The chart's own refusal (a `fail` in a template) of `values`, naming each of `expected`."""
    try:
        render(values)
    except Exception as e:  # helm_sdkpy.InstallError
        message = str(e)
    else:
        raise CheckFailed(f"the chart renders {json.dumps(values)}, which it must refuse")
    missing = [e for e in expected if e not in message]
    check(not missing, f"{json.dumps(values)}: the refusal does not name {missing}:\n{message}")
    return message


def _check_failure_policies() -> None:
    """No values the chart renders can lock a cluster by accident: Fail never in warn mode, and
    never with a single replica unless webhook.allowSingleReplicaFailClosed says so."""
    one = {"replicaCount": 1}
    enforce = {"webhook": {"mode": "enforce"}}
    message = _render_refused(deep_merge(enforce, one), ["webhook.validating.failurePolicy is Fail with replicaCount 1", "webhook.allowSingleReplicaFailClosed=true", "replicaCount to 2 or more"])
    print(f"  refused enforce mode with one replica: {message.splitlines()[-1].strip()}")
    r = render(deep_merge(deep_merge(enforce, one), {"webhook": {"allowSingleReplicaFailClosed": True}}))
    check(r.one("Deployment")["spec"]["replicas"] == 1, "one replica when allowed")
    check(r.one("ValidatingWebhookConfiguration")["webhooks"][0]["failurePolicy"] == "Fail", "Fail with one replica when allowed")
    check("Keep replicaCount >= 2 (now 1)" in r.notes, f"NOTES, one replica failing closed:\n{r.notes}")
    r = render(deep_merge(deep_merge(enforce, one), {"webhook": {"validating": {"failurePolicy": "Ignore"}}}))
    check(r.one("ValidatingWebhookConfiguration")["webhooks"][0]["failurePolicy"] == "Ignore", "enforce, Ignore, one replica")
    r = render(one)
    check(r.one("ValidatingWebhookConfiguration")["webhooks"][0]["failurePolicy"] == "Ignore", "warn mode with one replica renders, failing open")
    _render_refused(deep_merge(enforce, {"replicaCount": 1, "webhook": {"validating": {"failurePolicy": "Ignore"}, "mutating": {"failurePolicy": "Fail"}}}), ["webhook.mutating.failurePolicy is Fail with replicaCount 1"])
    # Out of the cluster there is no Deployment: how many replicas answer the URL is not the chart's.
    r = render(deep_merge(enforce, {"replicaCount": 1, "webhook": {"external": {"url": "https://127.0.0.1:8443", "caBundle": sample_ca_pem()}}}))
    check(r.one("ValidatingWebhookConfiguration")["webhooks"][0]["failurePolicy"] == "Fail", "external enforce: Fail")
    for hook in ("validating", "mutating"):
        message = _render_refused({"webhook": {hook: {"failurePolicy": "Fail"}}}, [f"webhook.{hook}.failurePolicy is Fail in warn mode", "warn mode never denies"])
        print(f"  refused warn mode with {hook} Fail: {message.splitlines()[-1].strip()}")
    # A disabled webhook's failurePolicy is not rendered, so it refuses nothing.
    render({"webhook": {"validating": {"enabled": False, "failurePolicy": "Fail"}}})


def _schema_error(values: dict) -> str:
    try:
        render(values)
    except Exception as e:  # helm_sdkpy.InstallError
        return str(e)
    raise CheckFailed(f"values.schema.json accepted {json.dumps(values)}")


def check_schema(probelint: Probelint) -> None:
    cases = [
        ({"webhook": {"mode": "block"}}, ["/webhook/mode", "warn", "enforce"]),
        ({"webhook": {"validating": {"failurePolicy": "fail"}}}, ["/webhook/validating/failurePolicy", "Fail", "Ignore"]),
        ({"webhook": {"timeoutSeconds": 60}}, ["/webhook/timeoutSeconds", "30"]),
        ({"webhook": {"external": {"url": "https://127.0.0.1:8443"}}}, ["/webhook/external", "caBundle"]),
        ({"webhook": {"external": {"url": "http://127.0.0.1:8443", "caBundle": "x"}}}, ["/webhook/external/url"]),
        ({"webhook": {"external": {"url": "https://127.0.0.1:8443/validate", "caBundle": "x"}}}, ["/webhook/external/url"]),
        ({"replicaCount": "two"}, ["/replicaCount", "integer"]),
        ({"webhook": {"allowSingleReplicaFailClosed": "yes"}}, ["/webhook/allowSingleReplicaFailClosed", "boolean"]),
        ({"replicas": 3}, ["replicas"]),
        ({"certificates": {"mode": "vault"}}, ["/certificates/mode", "helm", "certManager", "secret"]),
        ({"certificates": {"mode": "secret"}}, ["/certificates/secret", "name", "caBundle"]),
        ({"certificates": {"mode": "certManager", "certManager": {"issuerRef": {"kind": "ClusterIssuer"}}}}, ["/certificates/certManager/issuerRef", "name"]),
        ({"webhook": {"objectOptOutLabel": "not a label"}}, ["/webhook/objectOptOutLabel"]),
        ({"policy": {"modelLoadSeconds": "ten minutes"}}, ["/policy/modelLoadSeconds"]),
        ({"policy": {"rules": {"gpu-startup-probe-missing": "fatal"}}}, ["/policy/rules/gpu-startup-probe-missing"]),
        ({"policy": {"exemptions": [{"rules": ["all"]}]}}, ["/policy/exemptions/0", "reason"]),
        ({"policy": {"modelLoadSecond": 600}}, ["modelLoadSecond"]),
        ({"networkPolicy": {"enabled": True, "apiserver": [{"ipBlock": {}}]}}, ["/networkPolicy/apiserver/0/ipBlock", "cidr"]),
    ]
    for values, expected in cases:
        message = _schema_error(values)
        check("schema" in message.lower(), f"{values}: not a schema error: {message}")
        missing = [e for e in expected if e not in message]
        check(not missing, f"{json.dumps(values)}: the error does not name {missing}:\n{message}")
        print(f"  refused {json.dumps(values)}: {message.splitlines()[-1].strip()}")
    # Helm's Lint applies the schema too.
    with tempfile.TemporaryDirectory() as tmp:
        chart = Path(tmp) / "probelint"
        shutil.copytree(CHART, chart)
        (chart / "values.yaml").write_text(json.dumps(deep_merge(default_values(), {"webhook": {"mode": "block"}})))
        result = Helm().lint(chart)
        check(any(m["Severity"] == 3 and m["Path"] == "values.yaml" for m in result["Messages"]), f"helm lint accepts a bad values.yaml: {result}")
    print("  helm lint refuses a values.yaml with webhook.mode: block")


def _ca_certs(bundle_b64: str) -> list[str]:
    return re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", base64.b64decode(bundle_b64).decode(), re.S)


def check_upgrade(probelint: Probelint) -> None:
    h = Helm()
    secrets = f"/api/v1/namespaces/{NAMESPACE}/secrets"
    first = h.install()
    s1 = first.one("Secret")["data"]
    bundle1 = first.one("ValidatingWebhookConfiguration")["webhooks"][0]["clientConfig"]["caBundle"]

    second = h.upgrade()
    s2 = second.one("Secret")["data"]
    check(s2 == s1, "helm upgrade regenerated the certificate although the old one is valid")
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        check(second.one(kind)["webhooks"][0]["clientConfig"]["caBundle"] == bundle1, f"{kind}: caBundle changed on upgrade")
    print("  helm upgrade keeps the generated certificate and caBundle (lookup)")

    # Close to expiry: a new certificate, and the caBundle trusts the old CA for one upgrade.
    stored = h.api.get(secrets, f"{FULLNAME}-tls")
    stored["metadata"]["annotations"]["probelint.io/not-after"] = str(int(time.time()) + 10 * 86400)
    h.api.put(secrets, f"{FULLNAME}-tls", stored)
    third = h.upgrade()
    s3 = third.one("Secret")["data"]
    check(s3["tls.crt"] != s1["tls.crt"] and s3["ca.crt"] != s1["ca.crt"], "an expiring certificate is renewed")
    bundle3 = third.one("ValidatingWebhookConfiguration")["webhooks"][0]["clientConfig"]["caBundle"]
    cas = _ca_certs(bundle3)
    check(cas == _ca_certs(s3["ca.crt"]) + _ca_certs(s1["ca.crt"]), "during renewal the caBundle holds the new and the old CA")
    _verify_tls(s3, bundle3, f"{FULLNAME}.{NAMESPACE}.svc")
    _verify_tls(s1, bundle3, f"{FULLNAME}.{NAMESPACE}.svc")
    print("  an expiring certificate is renewed; the caBundle trusts old and new CA during the switch")

    fourth = h.upgrade()
    check(fourth.one("Secret")["data"] == s3, "the renewed certificate is kept")
    check(_ca_certs(fourth.one("MutatingWebhookConfiguration")["webhooks"][0]["clientConfig"]["caBundle"]) == _ca_certs(s3["ca.crt"]), "the old CA is dropped afterwards")

    # A new Service name needs a new certificate.
    fifth = h.upgrade({"fullnameOverride": "admission-probes"})
    s5 = fifth.one("Secret", "admission-probes-tls")["data"]
    _verify_tls(s5, fifth.one("ValidatingWebhookConfiguration")["webhooks"][0]["clientConfig"]["caBundle"], f"admission-probes.{NAMESPACE}.svc")
    print("  the certificate follows a renamed Service")


# --- CEL ------------------------------------------------------------------------------------


def _pod_spec(gpu: str | None, where: str = "containers") -> dict:
    container = {"name": "server", "image": "vllm/vllm-openai:v0.6.3"}
    if gpu == "resource":
        container["resources"] = {"limits": {"nvidia.com/gpu": 1}}
    elif gpu == "request":
        container["resources"] = {"requests": {"nvidia.com/mig-1g.10gb": "1", "cpu": "2"}}
    elif gpu == "claim":
        container["resources"] = {"claims": [{"name": "gpu"}]}
    elif gpu == "visibleDevices":
        # GPUs from the NVIDIA runtime, no request (the engine's visible_devices).
        container["resources"] = {"limits": {"cpu": "2"}}
        container["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    else:
        container["resources"] = {"limits": {"cpu": "2", "memory": "8Gi"}}
    spec: dict = {"containers": [{"name": "proxy", "image": "envoy"}]}
    if where == "sidecar":
        container["restartPolicy"] = "Always"
        spec["initContainers"] = [container]
    else:
        spec["containers"].append(container)
    if gpu == "claim":
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    if gpu == "runtimeClass":
        spec["runtimeClassName"] = "nvidia"
    return spec


def _template(gpu):
    return {"metadata": {"labels": {"app": "llm"}}, "spec": _pod_spec(gpu)}


def _workloads(gpu: str | None) -> list[dict]:
    """One object of every kind, with `gpu` (None: no accelerator) in one of its pod specs."""
    t = lambda: _template(gpu)  # noqa: E731
    plain = lambda: _template(None)  # noqa: E731
    ray = lambda: {"headGroupSpec": {"template": plain()}, "workerGroupSpecs": [{"template": plain()}, {"template": t()}]}  # noqa: E731
    objects = [
        ("v1", "Pod", {"spec": _pod_spec(gpu)}),
        ("v1", "Pod", {"spec": _pod_spec(gpu, "sidecar")}),
        ("apps/v1", "Deployment", {"spec": {"template": t()}}),
        ("apps/v1", "StatefulSet", {"spec": {"template": t()}}),
        ("apps/v1", "DaemonSet", {"spec": {"template": t()}}),
        ("apps/v1", "ReplicaSet", {"spec": {"template": t()}}),
        ("v1", "ReplicationController", {"spec": {"template": t()}}),
        ("batch/v1", "Job", {"spec": {"template": t()}}),
        ("batch/v1", "CronJob", {"spec": {"jobTemplate": {"spec": {"template": t()}}}}),
        ("argoproj.io/v1alpha1", "Rollout", {"spec": {"template": t()}}),
        ("serving.knative.dev/v1", "Service", {"spec": {"template": t()}}),
        ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", {"spec": {"leaderWorkerTemplate": {"leaderTemplate": plain(), "workerTemplate": t()}}}),
        ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", {"spec": {"leaderWorkerTemplate": {"workerTemplate": t()}}}),
        ("jobset.x-k8s.io/v1alpha2", "JobSet", {"spec": {"replicatedJobs": [{"name": "a", "template": {"spec": {"template": plain()}}}, {"name": "b", "template": {"spec": {"template": t()}}}]}}),
        ("ray.io/v1", "RayCluster", {"spec": ray()}),
        ("ray.io/v1", "RayService", {"spec": {"rayClusterConfig": ray()}}),
        ("ray.io/v1", "RayJob", {"spec": {"rayClusterSpec": ray()}}),
        ("ray.io/v1", "RayJob", {"spec": {"submitterPodTemplate": t()}}),
        ("serving.kserve.io/v1beta1", "InferenceService", {"spec": {"predictor": _pod_spec(gpu)}}),
        ("serving.kserve.io/v1beta1", "InferenceService", {"spec": {"transformer": _pod_spec(gpu)}}),
        ("serving.kserve.io/v1beta1", "InferenceService", {"spec": {"predictor": {"workerSpec": _pod_spec(gpu)}}}),
        ("serving.kserve.io/v1alpha1", "ServingRuntime", {"spec": _pod_spec(gpu)}),
        ("serving.kserve.io/v1alpha1", "ClusterServingRuntime", {"spec": {"workerSpec": _pod_spec(gpu)}}),
        ("serving.kserve.io/v1alpha1", "LLMInferenceService", {"spec": {"template": _pod_spec(gpu)}}),
        ("serving.kserve.io/v1alpha1", "LLMInferenceService", {"spec": {"prefill": {"worker": _pod_spec(gpu)}}}),
    ]
    # A NIMService's spec is its container (and carries the pod's runtimeClassName and claims).
    server = _pod_spec(gpu)
    nim = {key: server[key] for key in ("resourceClaims", "runtimeClassName") if key in server}
    if "env" in server["containers"][1]:
        nim["env"] = server["containers"][1]["env"]
    objects.append(("apps.nvidia.com/v1alpha1", "NIMService", {"spec": {"image": {"repository": "nvcr.io/nim/meta/llama-3.1-8b-instruct", "tag": "1.3.3"}, "resources": server["containers"][1]["resources"], **nim}}))
    if gpu in ("resource", "request", "claim"):
        # KServe's model container sits beside the pod spec fields.
        model = {"modelFormat": {"name": "huggingface"}, "resources": _pod_spec(gpu)["containers"][1]["resources"]}
        objects.append(("serving.kserve.io/v1beta1", "InferenceService", {"spec": {"predictor": {"model": model}}}))
    elif gpu is None:
        objects.append(("serving.kserve.io/v1beta1", "InferenceService", {"spec": {"predictor": {"model": {"modelFormat": {"name": "sklearn"}}}}}))
    out = []
    for i, (api_version, kind, body) in enumerate(objects):
        out.append({"apiVersion": api_version, "kind": kind, "metadata": {"name": f"{kind.lower()}-{i}", "namespace": "ml"}, **body})
    return out


def _engine_accelerated(probelint: Probelint, objects: list[dict]) -> set[str]:
    """Names of the objects in which probelint itself finds an accelerator container."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "objects.yaml")
        path.write_text(yaml.safe_dump_all(objects))
        out = probelint.run("simulate", "--format", "json", "--duration", "1", str(path), cwd=tmp)
    if out.returncode == 2 and "no accelerator container" in out.stderr:
        return set()
    check(out.returncode == 0, f"probelint simulate: {out.stderr}")
    return {c["object"]["name"] for c in json.loads(out.stdout)["containers"]}


def _condition(webhook: dict, name: str) -> str:
    found = [c["expression"] for c in webhook.get("matchConditions", []) if c["name"] == name]
    check(len(found) == 1, f"{webhook['name']}: no matchCondition {name}: {webhook.get('matchConditions')}")
    return found[0]


def _check_controller_conditions(env) -> int:
    """The controller conditions: what a controller creates goes to neither webhook, except its
    Pods, which go to the mutating webhook only (webhook/src/review.rs decides the same). A
    controller's object is one with a controller ownerReference that a controller sent
    (request.userInfo); the same object from anyone else goes to both."""
    operator = "system:serviceaccount:kserve:kserve-controller-manager"
    r = render({"webhook": {"controllerServiceAccounts": [operator]}})
    programs = {}
    for kind, name in (
        ("ValidatingWebhookConfiguration", "not-created-by-a-controller"),
        ("MutatingWebhookConfiguration", "pod-or-not-created-by-a-controller"),
    ):
        expression = _condition(r.one(kind)["webhooks"][0], name)
        try:
            programs[kind] = (expression, env.compile(expression))
        except Exception as e:
            raise CheckFailed(f"the matchCondition {name} does not compile: {e}\n{expression}") from e

    def owned(kind: str, owner: str, **extra) -> dict:
        reference = {"apiVersion": "apps/v1", "kind": owner, "name": "x", "uid": "u", **extra}
        return {"apiVersion": "v1", "kind": kind, "metadata": {"name": "o", "ownerReferences": [reference]}, "spec": {}}

    rs = "system:serviceaccount:kube-system:replicaset-controller"
    deployment = "system:serviceaccount:kube-system:deployment-controller"
    fabricated = {"apiVersion": "v1", "kind": "ConfigMap", "name": "kube-root-ca.crt", "uid": "u", "controller": True}
    cases = [
        # object, sender, sent to the validating webhook, sent to the mutating webhook
        ({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {}}, "alice", True, True),
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}, "alice", True, True),
        (owned("ReplicaSet", "Deployment", controller=True, blockOwnerDeletion=True), deployment, False, False),
        (owned("Job", "CronJob", controller=True), "system:serviceaccount:kube-system:cronjob-controller", False, False),
        (owned("Deployment", "InferenceService", controller=True), operator, False, False),
        (owned("Pod", "ReplicaSet", controller=True), rs, False, True),
        (owned("Pod", "ReplicaSet", controller=True), "system:kube-controller-manager", False, True),
        (owned("Pod", "ReplicaSet", controller=False), rs, True, True),
        (owned("ReplicaSet", "Deployment"), deployment, True, True),
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "ownerReferences": []}, "spec": {}}, rs, True, True),
        # What a person writes about the owner claims nothing.
        (owned("ReplicaSet", "Deployment", controller=True), "alice", True, True),
        (owned("Deployment", "InferenceService", controller=True), "system:serviceaccount:kserve:default", True, True),
        ({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "ownerReferences": [fabricated]}, "spec": {}}, "alice", True, True),
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "ownerReferences": [fabricated]}, "spec": {}}, "alice", True, True),
    ]
    for obj, user, validating, mutating in cases:
        for kind, expected in (("ValidatingWebhookConfiguration", validating), ("MutatingWebhookConfiguration", mutating)):
            expression, program = programs[kind]
            value = program.eval(data={"object": obj, "request": {"userInfo": {"username": user}}}).value()
            check(isinstance(value, bool), f"CEL error {value!r}:\n{expression}")
            check(
                value == expected,
                f"{kind}: {obj['kind']} from {user} with ownerReferences {obj['metadata'].get('ownerReferences')} "
                f"should {'' if expected else 'not '}be sent",
            )
    return len(cases) * 2


def check_cel(probelint: Probelint) -> None:
    from cel_expr_python import cel

    env = cel.NewEnv(variables={"object": cel.Type.DYN, "request": cel.Type.DYN})

    def compiled(values: dict):
        r = render(deep_merge({"webhook": {"acceleratorsOnly": {"enabled": True}}}, values))
        expressions = {
            kind: _condition(r.one(kind)["webhooks"][0], "has-accelerator")
            for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
        }
        check(len(set(expressions.values())) == 1, "both webhooks use the same condition")
        expression = next(iter(expressions.values()))
        try:
            return expression, env.compile(expression)
        except Exception as e:
            raise CheckFailed(f"the matchConditions expression does not compile: {e}\n{expression}") from e

    def evaluate(program, expression: str, obj: dict) -> bool:
        value = program.eval(data={"object": obj})
        result = value.value()
        check(isinstance(result, bool), f"CEL error {result!r} on {obj['kind']} {obj['metadata']['name']}:\n{expression}")
        return result

    expression, program = compiled({})
    total = 0
    for gpu in ("resource", "request", "claim", "runtimeClass", "visibleDevices", None):
        objects = _workloads(gpu)
        engine = _engine_accelerated(probelint, objects)
        for obj in objects:
            name = obj["metadata"]["name"]
            got = evaluate(program, expression, obj)
            if gpu is None and obj["kind"] in RUNTIME_KINDS:
                check(got, f"{obj['kind']} {name} is not sent to the webhook")
                check(name in engine, f"the engine does not judge {name}'s vLLM as a GPU serving container")
            elif gpu is None:
                check(not got, f"{obj['kind']} {name} without an accelerator is sent to the webhook")
                check(name not in engine, f"the engine calls {name} an accelerator workload; the corpus is wrong")
            else:
                check(name in engine, f"{gpu}: the engine finds no accelerator in {obj['kind']} {name}; the corpus is wrong")
                check(got, f"{gpu}: {obj['kind']} {name} has an accelerator but the matchCondition skips it:\n{json.dumps(obj)}")
            total += 1
    # Shapes that must neither error nor be skipped wrongly.
    edge = [
        ({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "empty"}, "spec": {}}, False),
        ({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "empty"}, "spec": {"headGroupSpec": {}}}, False),
        ({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "empty"}, "spec": {"replicatedJobs": [{"name": "x"}]}}, False),
        ({"apiVersion": "example.com/v1", "kind": "ModelServer", "metadata": {"name": "crd"}, "spec": {}}, True),
        ({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "core"}, "spec": {}}, True),
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "zero"}, "spec": {"containers": [{"name": "a", "resources": {"limits": {"example.com/fpga": 1}}}]}}, False),
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "amd"}, "spec": {"containers": [{"name": "a", "resources": {"limits": {"amd.com/gpu": 1}}}]}}, True),
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "neuron"}, "spec": {"containers": [{"name": "a", "resources": {"limits": {"aws.amazon.com/neuroncore": 2}}}]}}, True),
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "dotted"}, "spec": {"containers": [{"name": "a", "resources": {"limits": {"nvidiaXcom/gpu": 1}}}]}}, False),
        # The runtime reads void, none and an empty value as no GPU; a value from a Secret is unknown.
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "void"}, "spec": {"containers": [{"name": "a", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]}]}}, False),
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "from-secret"}, "spec": {"containers": [{"name": "a", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]}}, False),
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "two-gpus"}, "spec": {"containers": [{"name": "a", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "0,1"}]}]}}, True),
    ]
    for obj, expected in edge:
        check(evaluate(program, expression, obj) == expected, f"{obj['kind']} {obj['metadata']['name']}: expected {expected}")
        total += 1

    # The policy's accelerator list replaces the built-in one, in the engine and in the condition.
    custom = {"policy": {"accelerators": {"resources": ["acme.com/npu-*"], "runtimeClassNames": ["acme"]}}}
    expression, program = compiled(custom)
    npu = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "npu"}, "spec": {"containers": [{"name": "a", "resources": {"limits": {"acme.com/npu-v2": 1}}}]}}
    gpu = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu"}, "spec": {"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    check(evaluate(program, expression, npu) and not evaluate(program, expression, gpu), "policy.accelerators drives the condition")
    expression, program = compiled({"webhook": {"acceleratorsOnly": {"resources": ["nvidia.com/gpu"], "resourceClaims": False}}})
    claim = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "dra"}, "spec": _pod_spec("claim")}
    check(not evaluate(program, expression, claim), "resourceClaims: false ignores DRA claims")
    print(f"  the accelerator matchCondition compiles and agrees with the engine on {total} objects (every "
          "kind, resources / requests / DRA claims / runtime class / sidecars / KServe model containers)")
    owned = _check_controller_conditions(env)
    print(f"  the controller matchConditions compile and keep owned objects away ({owned} evaluations)")


# --- sync -----------------------------------------------------------------------------------


def check_sync(probelint: Probelint, write_policy_schema: bool) -> None:
    # Workload kinds: the engine's built-in layouts vs. the webhook rules.
    analysis = REPO / "policies" / "src" / "analysis"
    # The layouts are in layout.rs, the KServe model keys in object.rs.
    source = (analysis / "layout.rs").read_text() + (analysis / "object.rs").read_text()
    body = source[source.index("fn builtin_layout") :]
    body = body[: body.index("\n}\n")]
    kinds = set()
    for line in body.splitlines():
        m = re.match(r'\s*((?:"[A-Za-z]+"\s*\|\s*)*"[A-Za-z]+")\s*(?:if .*)?=>', line)
        if m:
            kinds.update(re.findall(r'"([A-Za-z]+)"', m.group(1)))
    check(kinds == set(WORKLOAD_RESOURCES), f"workload kinds: engine {sorted(kinds)} vs chart {sorted(WORKLOAD_RESOURCES)}")
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    for kind, (group, resource) in WORKLOAD_RESOURCES.items():
        check(f"'{kind}'" in helpers, f"the matchCondition does not know {kind}")
    keys = re.search(r"KSERVE_MODEL_KEYS: &\[&str\] = &\[(.*?)\];", source, re.S).group(1)
    engine_keys = re.findall(r'"([a-z]+)"', keys)
    chart_keys = re.search(r'\$kserveModelKeys := list ((?:"[a-z]+" ?)+)', helpers).group(1)
    check(engine_keys == re.findall(r'"([a-z]+)"', chart_keys), f"KServe model keys: engine {engine_keys}, chart {chart_keys}")

    # Accelerator lists.
    default_policy = yaml.safe_load((REPO / "policies" / "default.yaml").read_text())["accelerators"]
    builtin = yaml.safe_load((CHART / "files" / "builtin-accelerators.yaml").read_text())
    check(builtin == default_policy, f"files/builtin-accelerators.yaml {builtin} != policies/default.yaml {default_policy}")

    # The policy schema inside values.schema.json.
    out = probelint.run("schema")
    check(out.returncode == 0, out.stderr)
    policy_schema = json.loads(out.stdout)
    wanted_defs = policy_schema.pop("$defs", {})
    for key in ("$schema", "$id", "title"):
        policy_schema.pop(key, None)
    path = CHART / "values.schema.json"
    values_schema = json.loads(path.read_text())
    if write_policy_schema:
        values_schema["properties"]["policy"] = policy_schema
        values_schema["$defs"] = {**values_schema.get("$defs", {}), **wanted_defs}
        path.write_text(json.dumps(values_schema, indent=2, ensure_ascii=False) + "\n")
        print(f"  rewrote the policy part of {path.relative_to(REPO)}")
    stale = values_schema["properties"]["policy"] != policy_schema or any(
        values_schema.get("$defs", {}).get(k) != v for k, v in wanted_defs.items()
    )
    check(
        not stale,
        "values.schema.json's `policy` is not `probelint schema` (the policy format changed); "
        "regenerate it with UPDATE_DOCS=1 cargo test -p probelint --test helm_chart, or this "
        "script's --sync-policy-schema",
    )
    print("  workload kinds, KServe model keys, accelerator lists and the policy schema match the engine")

    # The README's values table names every value (or the object holding it).
    documented = set(re.findall(r"^\| `([A-Za-z0-9_.]+)` \|", (CHART / "README.md").read_text(), re.M))
    undocumented = []

    def walk(node: dict, prefix: str = "") -> None:
        for key, value in node.items():
            path = f"{prefix}{key}"
            if path in documented:
                continue
            if isinstance(value, dict) and value:
                walk(value, path + ".")
            else:
                undocumented.append(path)

    walk(default_values())
    check(not undocumented, f"values missing from the README's values table: {undocumented}")
    stale = sorted(p for p in documented if not _has_path(default_values(), p))
    check(not stale, f"the README's values table names values that do not exist: {stale}")
    print("  the README's values table covers values.yaml")


def _has_path(values: dict, path: str) -> bool:
    node = values
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


# ---------------------------------------------------------------------------------------------


ADMISSION_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")
WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
# What the chart runs for the webhook (certificates in the default `helm` mode).
WEBHOOK_RUNTIME_KINDS = ("Deployment", "Service", "Secret", "ConfigMap", "ServiceAccount")


def _exported(probelint: Probelint, mode: str) -> list[dict]:
    """`probelint export --mode MODE` under the built-in policy."""
    with tempfile.TemporaryDirectory() as cwd:
        empty = Path(cwd) / "empty.yaml"
        empty.write_text("")
        out = probelint.run("export", "--mode", mode, "--config", str(empty), cwd=cwd)
    check(out.returncode == 0, f"probelint export: {out.stderr}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def check_admission(probelint: Probelint) -> None:
    def kinds(r: Rendered) -> dict[str, list[str]]:
        return {k: sorted(o["metadata"]["name"] for o in r.all(k)) for k in ADMISSION_KINDS + WEBHOOK_KINDS}

    default = render()
    got = kinds(default)
    check(all(got[k] == [] for k in ADMISSION_KINDS), f"mode webhook renders admission policies: {got}")
    check(all(len(got[k]) == 1 for k in WEBHOOK_KINDS), f"mode webhook: {got}")

    accounts = ["system:serviceaccount:kserve:kserve-controller-manager"]
    for hook_mode in ("warn", "enforce"):
        exported = _exported(probelint, hook_mode)
        names = {k: sorted(d["metadata"]["name"] for d in exported if d["kind"] == k) for k in ADMISSION_KINDS}
        check(len(names["ValidatingAdmissionPolicy"]) >= 8 and len(names["MutatingAdmissionPolicy"]) >= 1, f"export: {names}")
        for mode in ("policies", "both"):
            values = {"admission": {"mode": mode}, "webhook": {"mode": hook_mode, "controllerServiceAccounts": accounts}}
            if hook_mode == "enforce":
                values["replicaCount"] = 2
            r = render(values)
            got = kinds(r)
            for k in ADMISSION_KINDS:
                check(got[k] == names[k], f"{mode}/{hook_mode}: {k}: the chart renders {got[k]}, probelint export writes {names[k]}")
            webhooks = 0 if mode == "policies" else 1
            check(all(len(got[k]) == webhooks for k in WEBHOOK_KINDS), f"{mode}/{hook_mode}: webhook configurations {got}")
            # Nothing of the webhook runs where none is called: no Deployment to keep up, no
            # certificate to rotate, no Service, no policy ConfigMap for it.
            running = {k: len(r.all(k)) for k in WEBHOOK_RUNTIME_KINDS}
            if mode == "policies":
                check(all(n == 0 for n in running.values()), f"policies/{hook_mode}: the webhook is still deployed: {running}")
            else:
                check(all(n >= 1 for n in running.values()), f"both/{hook_mode}: the webhook is not deployed: {running}")
            # The policies are the exporter's, in the chart's scope: the release namespace is
            # never judged and the operators the values trust are trusted.
            by_name = {(d["kind"], d["metadata"]["name"]): d for d in exported}
            for o in r.objects:
                if o["kind"] not in ADMISSION_KINDS:
                    continue
                want = by_name[(o["kind"], o["metadata"]["name"])]
                spec, wanted = copy.deepcopy(o["spec"]), copy.deepcopy(want["spec"])
                if o["kind"].endswith("AdmissionPolicy"):
                    excluded = spec["matchConstraints"]["namespaceSelector"]["matchExpressions"][0]["values"]
                    check(NAMESPACE in excluded and "kube-system" in excluded, f"{o['metadata']['name']}: namespaces {excluded}")
                    condition = spec["matchConditions"][0]["expression"]
                    check(all(f"'{a}'" in condition for a in accounts), f"{o['metadata']['name']}: {condition}")
                    for key in ("matchConditions",):
                        spec.pop(key), wanted.pop(key)
                    spec["matchConstraints"].pop("namespaceSelector"), wanted["matchConstraints"].pop("namespaceSelector")
                check(spec == wanted, f"{mode}/{hook_mode}: {o['metadata']['name']} differs from probelint export's")
        # A cluster before 1.36 gets the validating policies only.
        r = Helm(api=FakeApiServer(mutating_policies=False)).install({"admission": {"mode": "policies"}, "webhook": {"mode": hook_mode}})
        got = kinds(r)
        check(got["MutatingAdmissionPolicy"] == [] and got["ValidatingAdmissionPolicy"] == names["ValidatingAdmissionPolicy"], f"before 1.36: {got}")
    print("  webhook: the webhooks only; policies: probelint export's policies only, in the chart's scope, and no webhook deployed; both: both; no MutatingAdmissionPolicy before 1.36")
    refusal = _render_refused({"admission": {"mode": "policies"}, "policy": {"modelLoadSeconds": 600}}, ["admission.mode policies", "probelint export --config"])
    print(f"  a custom policy in mode policies is refused: {refusal.splitlines()[0][:120]}")


CHECKS = ["sync", "lint", "render", "schema", "upgrade", "cel", "admission"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--probelint", required=True, help="the probelint binary")
    parser.add_argument("--only", action="append", choices=CHECKS, help="run only these checks")
    parser.add_argument("--update-fixture", action="store_true")
    parser.add_argument("--sync-policy-schema", action="store_true")
    args = parser.parse_args()
    probelint = Probelint(str(Path(args.probelint).resolve()))
    import helm_sdkpy

    print(f"Helm {helm_sdkpy.get_version()} (helm-sdkpy {helm_sdkpy.__version__}), chart {CHART}")
    failed = []
    selected = args.only or CHECKS
    for name in CHECKS:
        if name not in selected:
            continue
        started = time.monotonic()
        print(f"{name}:")
        try:
            if name == "sync":
                check_sync(probelint, args.sync_policy_schema)
            elif name == "render":
                check_render(probelint, args.update_fixture)
            else:
                globals()[f"check_{name}"](probelint)
            print(f"ok {name} ({time.monotonic() - started:.1f} s)")
        except CheckFailed as e:
            failed.append(name)
            print(f"FAILED {name}: {e}")
        except helm_sdkpy.HelmError as e:
            # Helm's own message (a template or schema error) says it all.
            failed.append(name)
            print(f"FAILED {name}: Helm: {e}")
        except Exception:
            failed.append(name)
            print(f"FAILED {name}:\n{traceback.format_exc()}")
    print(f"chart checks: {len(selected) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
