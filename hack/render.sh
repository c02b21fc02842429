#!/usr/bin/env bash
# Renders the example claim, then the example namespaced XR, through every
# step of the sequence with the real crossplane CLI against the function
# running locally, as a platform engineer would on a laptop.
# Usage: hack/render.sh CROSSPLANE_BIN OUTPUT_DIR
set -euo pipefail
crossplane=$1
out=$2
target=127.0.0.1:9443 # as in examples/functions.yaml

mkdir -p "$out"
go build -o "$out/function" ./fn
if (exec 3<>"/dev/tcp/${target%:*}/${target#*:}") 2>/dev/null; then
  echo "something already listens on $target: stop it, render dials the function there" >&2
  exit 1
fi
"$out/function" --insecure --address "$target" >"$out/function.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  (exec 3<>"/dev/tcp/${target%:*}/${target#*:}") 2>/dev/null && break
  sleep 0.1
done

# render XR COMPOSITION OUTPUT_DIR NAME [render flags]
render() {
  local xr=$1 composition=$2 dir=$3 name=$4; shift 4
  mkdir -p "$dir"
  "$crossplane" render --include-function-results "$xr" "$composition" examples/functions.yaml "$@" >"$dir/$name.yaml"
  echo "== $name -> $dir/$name.yaml"
  awk '
    /^---/ { if (kind != "") print "   " kind " " rn; kind=""; rn="" }
    /^kind: / { kind=$2 }
    /crossplane.io\/composition-resource-name:/ { rn="(" $2 ")" }
    END { if (kind != "") print "   " kind " " rn }
  ' "$dir/$name.yaml" | grep -v "^   Result" | grep -v "^   XKarpenter" | grep -v "^   Karpenter" || true
  # The XR comes first: print its conditions, type and status.
  awk '/^---/ && seen { exit } /^---/ { seen=1 }
    /^    status: / { s=$2 } /^    type: / { print "   condition " $2 "=" s }' "$dir/$name.yaml"
}

# walk EXAMPLE_DIR XR COMPOSITION OUTPUT_DIR: nothing observed, then each
# fixture of EXAMPLE_DIR/observed/.
walk() {
  local examples=$1 xr=$2 composition=$3 dir=$4
  render "$xr" "$composition" "$dir" 1-nothing
  for f in "$examples"/observed/*.yaml; do
    render "$xr" "$composition" "$dir" "$(basename "$f" .yaml)" --observed-resources "$f"
  done
}

echo "# The claim (examples/claim.yaml), as the XR Crossplane creates for it"
walk examples examples/xr.yaml apis/composition.yaml "$out"
echo "# The namespaced XR (examples/namespaced/xr.yaml)"
walk examples/namespaced examples/namespaced/xr.yaml apis/composition-namespaced.yaml "$out/namespaced"
