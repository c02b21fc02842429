#!/usr/bin/env bash
# hack/e2e-shards.sh: runs the end-to-end suite as one `go test` process per shard, all at once,
# each with a control plane of its own (etcd, kube-apiserver, Crossplane core, the function and the
# fake providers, on loopback ports the kernel picks, in a temporary folder of its own). A test
# spends its time waiting on Crossplane's and the providers' poll intervals, not on a CPU, so
# shards share a small machine well; within a shard, tests run one after the other.
#
#   hack/e2e-shards.sh REGEX... -- GO_TEST_ARGS...
#
# The suite is compiled and linked once (`go test -c`) and its binary runs once per shard, with
# GO_TEST_ARGS' test flags (go help testflag) as the binary takes them (-test.run, ...): `go test`
# per shard would compile the suite's package and link it once per shard, at once, as it caches
# neither a test binary nor its link (go1.26.8 src/cmd/go/internal: only `go run` and `go tool`
# set CacheExecutable). Shard n runs the tests that REGEX n selects (-test.run), the last shard
# every test no REGEX selects (-test.skip): each test runs in exactly one shard. Each line of
# output is prefixed with its shard's number. When GO_TEST_ARGS select tests themselves (-run),
# one `go test` runs them.
# Exits non-zero when any shard fails, after repeating what failed (a failing shard's verdicts and
# panics, and the lines before its first one) last, where the tail of a log shows it.
set -euo pipefail

shards=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
	shards+=("$1")
	shift
done
[ $# -gt 0 ] || { echo "usage: $0 REGEX... -- GO_TEST_ARGS..." >&2; exit 2; }
shift

for a in "$@"; do
	case "$a" in -run | -run=* | -test.run | -test.run=*) exec go test "$@" ;; esac
done

# GO_TEST_ARGS split: the test binary's flags (the test flags this Makefile and its users pass;
# -v, -failfast and -short take no value unless written -flag=value) and go test's own. go test
# always passes -test.paniconexit0 (a test calling os.Exit(0) fails: go1.26.8
# src/cmd/go/internal/test/test.go, panicArg); so does this.
build=()
run=(-test.paniconexit0)
while [ $# -gt 0 ]; do
	a=$1
	shift
	case "${a%%=*}" in
	-v | -failfast | -short | -count | -cpu | -parallel | -timeout | -shuffle | -skip)
		run+=("-test.${a#-}")
		case "$a" in -v | -failfast | -short | *=*) ;; *) run+=("$1") && shift ;; esac
		;;
	*) build+=("$a") ;;
	esac
done

# Each shard's whole output is kept in $out, removed when every shard passed and kept (its path
# printed last) when one failed: the lines printed below are only the end of it.
out=$(mktemp -d -t function-karpenter-e2e-shards-XXXXXX)
go test -c -o "$out/e2e.test" "${build[@]}"

# shard N SELECTION...: one run of the suite's binary, in this folder as go test runs it, its
# output prefixed with [N], and kept in $out/N.
shard() {
	local n=$1
	shift
	"$out/e2e.test" "$@" 2>&1 | sed -u "s/^/[$n] /" | tee "$out/$n"
	return "${PIPESTATUS[0]}"
}

trap 'kill $(jobs -p) 2>/dev/null' INT TERM
pids=()
n=0
for re in "${shards[@]}"; do
	n=$((n + 1))
	shard "$n" -test.run "$re" "${run[@]}" &
	pids+=($!)
done
skip=$(IFS='|'; echo "${shards[*]}")
shard $((n + 1)) -test.skip "$skip" "${run[@]}" &
pids+=($!)

rc=0
for p in "${pids[@]}"; do
	wait "$p" || rc=1
done
rm -f "$out/e2e.test"
if [ "$rc" -ne 0 ]; then
	echo "e2e: what failed, shard by shard:"
	failed='^\[[0-9]+\] +(--- FAIL|FAIL|panic:)' # go test's failure verdicts, a subtest's indented
	for f in "$out"/*; do
		grep -q -E "$failed" "$f" || continue
		# The 40 lines before a shard's first failure (the failing test's last messages), then
		# every failure line of that shard.
		grep -m1 -B 40 -E "$failed" "$f" || true
		grep -E "$failed" "$f" || true
	done
	echo "e2e: each shard's whole output is kept in $out"
else
	rm -rf "$out"
fi
exit "$rc"
