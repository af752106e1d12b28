#!/usr/bin/env bash
# Delete the kind cluster created by hack/kind/up.sh. Without Docker it prints
# "Docker not found: skipping" and exits 0.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=hack/kind/lib.sh
source "${ROOT}/hack/kind/lib.sh"

require_docker
KIND=$(find_tool KIND kind) || die "kind not found (install: go install sigs.k8s.io/kind@latest)"
CLUSTER=${KIND_CLUSTER_NAME:-podium}
"${KIND}" delete cluster --name "${CLUSTER}"
