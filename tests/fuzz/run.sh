#!/bin/sh
# Run libFuzzer targets for `make fuzz`:  run.sh BUILD_DIR SECONDS TARGET...
# Each target runs SECONDS (with FUZZ_EXECS=N in the environment, as
# `make fuzz-long`: until N executions, libFuzzer's -runs=N, however long)
# on a copy of tests/fuzz/corpus/<target>/ in BUILD_DIR/corpus/<target>/
# (the committed corpus is never written; the grown copy stays there for
# `make fuzz-merge`), then replays every input of
# tests/fuzz/regress/<target>/.  One line per target with its executions;
# exit 1 when any target crashed (crash inputs: BUILD_DIR/artifacts/<t>/).
#
# run.sh --merge BUILD_DIR TARGET...  (`make fuzz-merge`): replace each
# tests/fuzz/corpus/<target>/ by the smallest set of inputs, out of it and
# BUILD_DIR/corpus/<target>/, that keeps the coverage of both (libFuzzer's
# -merge=1), named by content; one line per target with the counts.
set -u
merge=0
if [ "${1:-}" = --merge ]; then
	merge=1
	shift
	fb=$1
	shift
else
	fb=$1
	secs=$2
	shift 2
fi
src=$(cd "$(dirname "$0")/../.." && pwd)
failed=0

if [ $merge -eq 1 ]; then
	for t in "$@"; do
		bin="$fb/$t"
		committed="$src/tests/fuzz/corpus/$t"
		new="$fb/merge/$t"
		rm -rf "$new"
		mkdir -p "$new" "$committed"
		before=$(find "$committed" -type f | wc -l)
		grown=$(find "$fb/corpus/$t" -type f 2>/dev/null | wc -l)
		if ! "$bin" -merge=1 -timeout=25 "$new" "$committed" "$fb/corpus/$t" \
			>"$fb/$t.merge.log" 2>&1; then
			printf 'fuzz-merge: %-20s merge failed (log %s)\n' "$t" "$fb/$t.merge.log"
			failed=1
			continue
		fi
		after=$(find "$new" -type f | wc -l)
		cov=$(sed -n 's/.*MERGE-OUTER: .* \([0-9]*\) new coverage edges.*/\1/p' \
			"$fb/$t.merge.log" | tail -n 1)
		rm -rf "$committed"
		mv "$new" "$committed"
		printf 'fuzz-merge: %-20s %s committed + %s grown -> %s inputs, coverage %s, %s bytes\n' \
			"$t" "$before" "$grown" "$after" "${cov:-?}" "$(du -sb "$committed" | cut -f1)"
	done
	exit $failed
fi

total=0
total=0
if [ -n "${FUZZ_EXECS:-}" ]; then
	limit="-runs=$FUZZ_EXECS"
else
	limit="-max_total_time=$secs"
fi

for t in "$@"; do
	bin="$fb/$t"
	art="$fb/artifacts/$t"
	log="$fb/$t.log"
	rm -rf "$fb/corpus/$t"
	mkdir -p "$art" "$fb/corpus/$t"
	if [ -d "$src/tests/fuzz/corpus/$t" ]; then
		cp -R "$src/tests/fuzz/corpus/$t/." "$fb/corpus/$t/"
	fi
	t0=$(date +%s)
	"$bin" "$limit" -timeout=25 -print_final_stats=1 \
		-artifact_prefix="$art/" "$fb/corpus/$t" >"$log" 2>&1
	rc=$?
	took=$(($(date +%s) - t0))
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	cov=$(grep -E '^#[0-9]+' "$log" | tail -n 1 | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
	if [ "$rc" -eq 0 ]; then
		crashed=no
	else
		crashed="YES (exit $rc, log $log)"
		failed=1
	fi
	total=$((total + ${execs:-0}))
	rate=$((${execs:-0} / (took > 0 ? took : 1)))
	printf 'fuzz: %-20s %10s executions in %ss (%s/s), coverage %s, crashed: %s\n' \
		"$t" "${execs:-?}" "$took" "$rate" "${cov:-?}" "$crashed"
	if [ "$rc" -ne 0 ]; then
		grep -aE '^(==[0-9]+==ERROR|SUMMARY|fuzz: property|.*runtime error)|^ *#[0-9]+ 0x[0-9a-f]+ in [^ ]+ /.*/(src|tests)/' \
			"$log" | head -n 12 | sed 's/^/    /'
	fi
	for f in "$src/tests/fuzz/regress/$t"/*; do
		[ -f "$f" ] || continue
		if ! "$bin" "$f" >"$log.regress" 2>&1; then
			printf 'fuzz: %-20s regression input %s crashes (log %s)\n' \
				"$t" "${f#"$src"/}" "$log.regress"
			failed=1
		fi
	done
done
echo "fuzz: $total executions in all; $([ $failed -eq 0 ] && echo 'no crash' || echo 'CRASHES FOUND')"
exit $failed
