#!/usr/bin/env bash
# Renders the example claim through every step of the sequence with the real
# crossplane CLI against the function running locally, as a platform engineer
# would on a laptop. Usage: hack/render.sh CROSSPLANE_BIN OUTPUT_DIR
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

render() {
  local name=$1; shift
  "$crossplane" render --include-function-results examples/xr.yaml apis/composition.yaml examples/functions.yaml "$@" >"$out/$name.yaml"
  echo "== $name -> $out/$name.yaml"
  awk '
    /^---/ { if (kind != "") print "   " kind " " rn; kind=""; rn="" }
    /^kind: / { kind=$2 }
    /crossplane.io\/composition-resource-name:/ { rn="(" $2 ")" }
    END { if (kind != "") print "   " kind " " rn }
  ' "$out/$name.yaml" | grep -v "^   Result" | grep -v "^   XKarpenter" || true
  # The XR comes first: print its conditions, type and status.
  awk '/^---/ && seen { exit } /^---/ { seen=1 }
    /^    status: / { s=$2 } /^    type: / { print "   condition " $2 "=" s }' "$out/$name.yaml"
}

render 1-nothing
for f in examples/observed/*.yaml; do
  render "$(basename "$f" .yaml)" --observed-resources "$f"
done
