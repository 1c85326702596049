#!/usr/bin/env python3
"""Installs, upgrades or uninstalls a release of the probelint chart with real Helm.

Helm is the Helm v4 library that the PyPI package helm-sdkpy bundles: these are `helm install`,
`helm upgrade` and `helm uninstall`, run against the cluster a kubeconfig names. The webhook's
end-to-end tests (webhook/tests/cluster.rs) drive it against their test control plane.

Usage:
  python release.py install   --kubeconfig K --namespace N --release R < values.json
  python release.py upgrade   --kubeconfig K --namespace N --release R [--reuse-values] < values.json
  python release.py uninstall --kubeconfig K --namespace N --release R

The values are a JSON object on stdin (what `--values` files or `--set` would give Helm). On
success it prints a JSON object with the release's `manifest` and `notes`; on failure, Helm's
error on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

CHART = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["install", "upgrade", "uninstall"])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--release", required=True)
    parser.add_argument("--reuse-values", action="store_true", help="upgrade: helm's --reuse-values")
    args = parser.parse_args()

    import helm_sdkpy

    config = helm_sdkpy.Configuration(namespace=args.namespace, kubeconfig=args.kubeconfig)
    try:
        if args.action == "uninstall":
            result = asyncio.run(helm_sdkpy.Uninstall(config).run(args.release, wait=False, timeout=60))
            print(json.dumps({"info": str(result)}))
            return 0
        values = json.loads(sys.stdin.read() or "{}")
        # No --wait: in the tests the webhook runs outside the cluster and the chart installs
        # only the webhook configurations, which Helm has nothing to wait for.
        if args.action == "install":
            result = asyncio.run(
                helm_sdkpy.Install(config).run(
                    args.release, str(CHART), values=values, wait=False, timeout=60, server_side_apply=True
                )
            )
        else:
            result = asyncio.run(
                helm_sdkpy.Upgrade(config).run(
                    args.release,
                    str(CHART),
                    values=values,
                    wait=False,
                    timeout=60,
                    server_side_apply=True,
                    reuse_values=args.reuse_values,
                )
            )
    except helm_sdkpy.HelmError as error:
        print(f"helm {args.action} {args.release} failed: {error}", file=sys.stderr)
        return 1
    info = result.get("info") or {}
    print(json.dumps({"manifest": result.get("manifest", ""), "notes": info.get("notes") or ""}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
