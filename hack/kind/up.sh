#!/usr/bin/env bash
# Create a kind cluster, build the Podium image, load it into the cluster and
# install the chart with Helm; then schedule one demo pod with Podium.
#
#   hack/kind/up.sh [extra helm args...]      e.g. hack/kind/up.sh --set replicaCount=1
#
# Needs Docker (a running daemon), kind, kubectl and helm. Without Docker it prints
# "Docker not found: skipping" and exits 0 (exit 1 instead when
# PODIUM_KIND_REQUIRE_DOCKER=1), so it is safe to call from machines without Docker.
#
# Environment:
#   DOCKER              docker command (default: docker)
#   KIND, KUBECTL, HELM the other tools (default: from PATH; helm also from
#                       ~/.cache/podium/*/bin/helm, where the repository builds it)
#   KIND_CLUSTER_NAME   cluster name (default: podium)
#   PODIUM_NAMESPACE    release namespace (default: podium-system)
#   PODIUM_RELEASE      release name (default: podium)
#   PODIUM_IMAGE        image built and loaded (default: podium:dev)
#   PODIUM_KIND_KEEP_DEMO=1  keep the demo pod
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=hack/kind/lib.sh
source "${ROOT}/hack/kind/lib.sh"

require_docker
require_tools

CLUSTER=${KIND_CLUSTER_NAME:-podium}
NAMESPACE=${PODIUM_NAMESPACE:-podium-system}
RELEASE=${PODIUM_RELEASE:-podium}
IMAGE=${PODIUM_IMAGE:-podium:dev}
CONTEXT="kind-${CLUSTER}"
kc() { "${KUBECTL}" --context "${CONTEXT}" "$@"; }

if "${KIND}" get clusters 2>/dev/null | grep -qx "${CLUSTER}"; then
  log "kind cluster ${CLUSTER} exists; reusing it"
else
  log "creating kind cluster ${CLUSTER}"
  "${KIND}" create cluster --name "${CLUSTER}" --config "${ROOT}/hack/kind/kind-config.yaml" --wait 120s
fi

log "building ${IMAGE}"
"${DOCKER}" build -t "${IMAGE}" "${ROOT}"
log "loading ${IMAGE} into ${CLUSTER}"
"${KIND}" load docker-image "${IMAGE}" --name "${CLUSTER}"

log "namespace ${NAMESPACE} (Pod Security Standards: restricted)"
kc apply -f - <<YAML
apiVersion: v1
kind: Namespace
metadata:
  name: ${NAMESPACE}
  labels:
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/warn: restricted
    pod-security.kubernetes.io/audit: restricted
YAML

# Helm installs crds/ only on first install and never upgrades them: apply the CRD first.
log "applying the SchedulerPolicy CRD"
kc apply --server-side --force-conflicts -f "${ROOT}/charts/podium/crds/"
kc wait --for condition=Established --timeout 60s crd/schedulerpolicies.podium.dev

log "helm upgrade --install ${RELEASE}"
"${HELM}" upgrade --install "${RELEASE}" "${ROOT}/charts/podium" \
  --kube-context "${CONTEXT}" --namespace "${NAMESPACE}" \
  --set image.repository="${IMAGE%:*}" --set image.tag="${IMAGE##*:}" \
  --set image.pullPolicy=Never \
  --wait --timeout 5m "$@"

log "scheduling a demo pod with schedulerName podium"
kc delete pod podium-demo --namespace default --ignore-not-found --wait
kc apply -f "${ROOT}/hack/kind/demo-pod.yaml"
if kc wait --namespace default --for condition=PodScheduled --timeout 120s pod/podium-demo; then
  log "demo pod bound to node $(kc get pod podium-demo -n default -o jsonpath='{.spec.nodeName}')"
else
  kc describe pod podium-demo --namespace default >&2 || true
  kc logs --namespace "${NAMESPACE}" -l "app.kubernetes.io/instance=${RELEASE}" --tail 50 >&2 || true
  die "the demo pod was not scheduled"
fi
if [[ "${PODIUM_KIND_KEEP_DEMO:-0}" != 1 ]]; then
  kc delete pod podium-demo --namespace default --wait=false
fi

log "done: kubectl --context ${CONTEXT} get schedulerpolicies; hack/kind/down.sh removes the cluster"
