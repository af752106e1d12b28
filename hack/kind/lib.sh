# shellcheck shell=bash
# Shared helpers of hack/kind/*.sh (sourced, not executed). They set DOCKER, KIND,
# KUBECTL and HELM for the calling script.
# shellcheck disable=SC2034

log() { printf '[kind] %s\n' "$*"; }
die() {
  printf '[kind] error: %s\n' "$*" >&2
  exit 1
}

# Exit 0 with "Docker not found: skipping" when there is no usable Docker (no CLI, or
# a CLI whose daemon does not answer), unless PODIUM_KIND_REQUIRE_DOCKER=1.
skip_without_docker() {
  echo "Docker not found: skipping ($1). kind runs Kubernetes nodes as Docker containers."
  if [[ "${PODIUM_KIND_REQUIRE_DOCKER:-0}" == 1 ]]; then
    exit 1
  fi
  exit 0
}

require_docker() {
  DOCKER=${DOCKER:-docker}
  if ! command -v "${DOCKER}" >/dev/null 2>&1; then
    skip_without_docker "no '${DOCKER}' command"
  fi
  local probe=("${DOCKER}" info)
  if command -v timeout >/dev/null 2>&1; then
    probe=(timeout 30 "${DOCKER}" info)
  fi
  if ! "${probe[@]}" >/dev/null 2>&1; then
    skip_without_docker "the '${DOCKER}' CLI is installed but no Docker daemon answers"
  fi
}

# find_tool VAR name: the value of $VAR, else `name` on PATH.
find_tool() {
  local override=${!1:-} name=$2
  if [[ -n "${override}" ]]; then
    command -v "${override}" && return 0
    return 1
  fi
  command -v "${name}"
}

require_tools() {
  KIND=$(find_tool KIND kind) || die "kind not found (install: go install sigs.k8s.io/kind@latest)"
  KUBECTL=$(find_tool KUBECTL kubectl) || die "kubectl not found"
  if ! HELM=$(find_tool HELM helm); then
    local built
    for built in "${HOME}"/.cache/podium/*/bin/helm; do
      if [[ -x "${built}" ]]; then
        HELM=${built}
        break
      fi
    done
    [[ -n "${HELM:-}" ]] || die "helm not found (install helm 3.x, or build it with the repository's hack/helm)"
  fi
}
