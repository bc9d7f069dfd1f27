#!/usr/bin/env bash
# test/demo/workload.sh -- the demo's small workload, on the cluster of
# $KUBECONFIG: namespaces shop, billing and monitoring and five Deployments
# labelled with a tier.  Run by test/demo/demo.sh (step 4) and by
# test/integration/test_doc_examples.py, which runs the docs' examples
# against what the demo sets up.  Idempotent: what exists is kept.
set -euo pipefail
for ns in shop billing monitoring; do
  kubectl get ns "$ns" >/dev/null 2>&1 || kubectl create namespace "$ns" >/dev/null
done
# mkdep NAMESPACE NAME IMAGE REPLICAS TIER
mkdep() {
  kubectl -n "$1" get deployment "$2" >/dev/null 2>&1 ||
    kubectl -n "$1" create deployment "$2" --image="$3" --replicas="$4" >/dev/null
  kubectl -n "$1" label deployment "$2" tier="$5" --overwrite >/dev/null
}
mkdep shop web nginx:1.25 3 web
mkdep shop api ghcr.io/example/api:2.1 2 backend
mkdep shop cart ghcr.io/example/cart:0.9 2 backend
mkdep billing invoicer ghcr.io/example/invoicer:1.4 2 backend
mkdep monitoring exporter prom/node-exporter:1.7 1 ops
